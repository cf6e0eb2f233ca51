"""An export another person rebuilds next month (issue 17): the code and its git state,
the environment, the plan as decided, a reload.py that needs only torch, a fetch
command that names the SSH port, and verify-export of the fetched tar alone."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cockpit.campaign import load_campaign
from cockpit.campaign.model import Settings
from cockpit.common.errors import InputError
from cockpit.export import export_campaign
from cockpit.export.bagit_files import fetch_target
from cockpit.export.rebuild_check import run_rebuild
from cockpit.export.reload_script import reload_script
from cockpit.journal.log import Journal
from cockpit.planning.advice import plan_warnings
from tests.helpers.process import SAMPLES

NOW = datetime(2026, 12, 3, 12, tzinfo=timezone.utc)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_git_campaign_exports_its_commit_a_patch_that_applies_and_the_fetch_port(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLES / "digits", repo / "digits")
    git("init", "-q", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-qm", "campaign", cwd=repo)
    commit = git("rev-parse", "HEAD", cwd=repo).strip()
    train = repo / "digits" / "train.py"
    changed = train.read_text().replace('default=0.1', 'default=0.2', 1)
    train.write_text(changed)
    campaign = load_campaign(repo / "digits" / "campaign.yaml")
    # The environment journaled at the first run start differs from the export's.
    Journal(campaign.state_dir / "journal.jsonl").append(
        "environment_recorded", now=NOW, python="3.11.7", implementation="CPython",
        os="Linux", machine="x86_64", distributions={"torch": "0.0.1"},
        distributions_sha256="0" * 64, count=1)
    monkeypatch.setenv("SSH_CONNECTION", "203.0.113.9 51234 10.0.0.5 40022")
    result = export_campaign(campaign, now=NOW, tar=True)
    assert result.verified, result.verify.render() if result.verify else ""
    data = result.bag_dir / "data"

    assert (data / "code" / "train.py").read_text() == changed
    assert (data / "code" / "common.py").is_file()
    listed = json.loads((data / "code" / "MANIFEST.json").read_text())
    assert {f["path"] for f in listed["files"]} >= {"train.py", "common.py"}
    info = json.loads((data / "code" / "git.json").read_text())
    assert info["commit"] == commit and info["dirty"] is True
    assert info["campaign_folder_in_repo"] == "digits"
    clone = tmp_path / "clone"
    git("clone", "-q", str(repo), str(clone), cwd=tmp_path)
    git("checkout", "-q", commit, cwd=clone)
    git("apply", str(data / "code" / "uncommitted.patch"), cwd=clone)
    assert (clone / "digits" / "train.py").read_text() == changed

    assert (data / "plan" / "campaign.as-decided.yaml").is_file()
    assert (data / "plan" / "campaign.at-end.yaml").read_bytes() == \
        campaign.path.read_bytes()
    assert "torch==" in (data / "environment" / "requirements.txt").read_text()
    env = json.loads((data / "environment" / "environment.json").read_text())
    assert env["python"] and env["distributions"]

    report = (data / "REPORT.md").read_text()
    assert "the environment changed since the first run start" in report
    assert "torch 0.0.1 ->" in report
    assert any("torch 0.0.1 ->" in w for w in result.verify.check("environment").warnings)

    fetch = (result.root / "FETCH.txt").read_text()
    assert "rsync -av --partial --progress -e 'ssh -p 40022' " in fetch
    assert "scp -P 40022 " in fetch and "@10.0.0.5:" in fetch
    assert "from SSH_CONNECTION" in fetch and "set settings.transfer_rate_mb_s" in fetch
    assert any("ssh -p 40022" in c for c in result.fetch_commands)
    assert "SSH port 40022" in result.summary()


def test_settings_fetch_comes_before_ssh_connection() -> None:
    settings = Settings(fetch_host="gpu.example.org", fetch_port=2222, fetch_user="me")
    target = fetch_target(settings, {"SSH_CONNECTION": "1.2.3.4 5 10.0.0.5 40022"})
    assert (target.user, target.host, target.port, target.source) == \
        ("me", "gpu.example.org", 2222, "settings.fetch")
    plain = fetch_target(None, {"SSH_CONNECTION": "1.2.3.4 5 10.0.0.5 40022"})
    assert (plain.host, plain.port) == ("10.0.0.5", 40022)
    assert fetch_target(None, {}).source == "this machine's name"


def _campaign_with(tmp_path: Path, run_extra: str, settings: str = "") -> Path:
    folder = tmp_path / "c"
    shutil.copytree(SAMPLES / "digits", folder)
    path = folder / "campaign.yaml"
    text = path.read_text().replace('    model: "common:make_model"   # the export',
                                    f"    {run_extra}   # the export", 1)
    path.write_text(text + settings)
    return path


def test_check_reads_model_and_fetch_and_says_when_the_module_is_not_the_campaigns(
        tmp_path: Path) -> None:
    path = _campaign_with(tmp_path, 'model: "common:make_model"',
                          "  fetch: {host: gpu.example.org, port: 2222, user: me}\n")
    campaign = load_campaign(path)
    assert campaign.runs["control"].model == "common:make_model"
    assert campaign.settings.fetch_port == 2222 and campaign.settings.fetch_user == "me"
    assert plan_warnings(campaign) == []

    other = _campaign_with(tmp_path / "2", 'model: "torchvision.models:resnet18"')
    warnings = plan_warnings(load_campaign(other))
    assert any("run control" in w and "not one of the campaign's files" in w
               for w in warnings)

    bad = _campaign_with(tmp_path / "3", 'model: "common.make_model"')
    with pytest.raises(InputError) as exc:
        load_campaign(bad)
    assert 'model must be "module:function"' in str(exc.value)
    assert "campaign.yaml:" in str(exc.value)


def _script(tmp_path: Path, checkpoint_of, params: dict) -> Path:
    """A bag-like folder: code/m.py, a checkpoint, reload.py (no cockpit in it)."""
    torch = pytest.importorskip("torch")
    folder = tmp_path / "data"
    (folder / "code").mkdir(parents=True)
    (folder / "code" / "m.py").write_text(
        "import torch\n\n"
        "def build(hidden=3):\n"
        "    return torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.ReLU())\n")
    torch.save(checkpoint_of(torch), folder / "ckpt.pt")
    table = {"r": {"model": "m:build", "params": params, "checkpoint": "ckpt.pt",
                   "sha256": None}}
    (folder / "reload.py").write_text(reload_script("t", table))
    return folder / "reload.py"


def _run(script: Path) -> tuple[int, dict]:
    """The script as --rebuild runs it: contained (base Python -I -S, the cockpit on no
    path, minimal environment), judged from the result file; 0 when rebuilt."""
    outcome = run_rebuild(script, "r", 300)
    assert outcome.problem is None, (outcome.problem, outcome.stderr)
    return (0 if outcome.answer.get("ok") else 1), outcome.answer


def test_reload_script_rebuilds_a_resume_checkpoint_without_the_cockpit(tmp_path: Path) -> None:
    def resume_like(torch):
        model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU())
        return {"format": "cockpit-resume/1", "model": model.state_dict(), "optimizer": None}
    code, out = _run(_script(tmp_path, resume_like, {"hidden": 5, "lr": 0.1}))
    assert code == 0 and out["ok"], out
    assert out["params"] == {"hidden": 5} and out["params_not_taken"] == ["lr"]
    assert out["missing_keys"] == [] and out["unexpected_keys"] == []
    assert out["parameters"] == 4 * 5 + 5 and out["state_dict"] == "model"


def test_reload_script_fails_naming_the_keys_that_do_not_fit(tmp_path: Path) -> None:
    def extra_key(torch):
        state = torch.nn.Sequential(torch.nn.Linear(4, 3)).state_dict()
        state["2.weight"] = torch.zeros(1)
        return state
    code, out = _run(_script(tmp_path, extra_key, {"hidden": 3}))
    assert code == 1 and not out["ok"]
    assert out["unexpected_keys"] == ["2.weight"] and out["missing_keys"] == []
