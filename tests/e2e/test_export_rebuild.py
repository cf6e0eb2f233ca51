"""An export another person rebuilds next month (issue 17): the code and its git state,
the environment, the plan as decided, a reload.py that needs only torch, a fetch
command that names the SSH port, and verify-export of the fetched tar alone. And what
people save (issue 42): an HF Trainer checkpoint folder and a Lightning .ckpt, both
trained for real, rebuilt by ``verify-export --rebuild --fresh-venv`` in one new venv
from the bag's requirements.txt."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
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
from tests.helpers.campaigns import recent_start
from tests.helpers.process import SAMPLES, run_cockpit

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


# ------------------------------------------------- the frameworks' saves (issue 42)

# The campaign's own code: a tiny GPT-2 through the real HF Trainer (its checkpoint-N
# folder) and a LightningModule holding ``self.model`` through a real Lightning fit (its
# .ckpt, every key prefixed "model."), the model factory in lit_model.py.
TRAIN = textwrap.dedent("""
    import sys
    import pytorch_lightning as pl
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from lit_model import make_model

    def train_hf(out):
        torch.manual_seed(0)
        config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=32,
                            bos_token_id=0, eos_token_id=0)
        ids = [torch.randint(0, 64, (16,)) for _ in range(4)]
        data = [{"input_ids": i, "labels": i.clone()} for i in ids]
        args = TrainingArguments(output_dir=out, max_steps=2, save_steps=2, report_to=[],
                                 use_cpu=True, disable_tqdm=True,
                                 per_device_train_batch_size=2)
        Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=data).train()

    class Regressor(pl.LightningModule):
        def __init__(self, hidden=8):
            super().__init__()
            self.model = make_model(hidden)

        def training_step(self, batch, index):
            x, y = batch
            return torch.nn.functional.mse_loss(self.model(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_lightning(out, hidden=8):
        torch.manual_seed(0)
        data = torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1))
        trainer = pl.Trainer(max_steps=2, default_root_dir=out, logger=False,
                             enable_progress_bar=False, enable_model_summary=False,
                             accelerator="cpu")
        trainer.fit(Regressor(hidden), torch.utils.data.DataLoader(data, batch_size=4))

    if __name__ == "__main__":
        (train_hf if sys.argv[1] == "hf" else train_lightning)(sys.argv[2])
""")
LIT_MODEL = textwrap.dedent("""
    import torch

    def make_model(hidden=8):
        return torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.ReLU(),
                                   torch.nn.Linear(hidden, 1))
""")


def _frameworks_campaign(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "train.py").write_text(TRAIN)
    (folder / "lit_model.py").write_text(LIT_MODEL)
    for run in ("hf", "lit"):
        (folder / "out" / run).mkdir(parents=True)
        (folder / "out" / run / "metrics.jsonl").write_text(
            "".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in (1, 2)))
    doc = {"campaign": "frameworks", "question": "do both frameworks' models come back?",
           "package": {"offer": "rtx4090-3d", "start": recent_start()},
           "stages": [{"id": run, "hours": 1, "resource": "gpu", "run": run,
                       "command": ["python", "train.py", run, f"ckpt/{run}"]}
                      for run in ("hf", "lit")],
           "runs": {"hf": {"metrics": ["out/hf/metrics.jsonl"], "checkpoints": "ckpt/hf"},
                    "lit": {"metrics": ["out/lit/metrics.jsonl"],
                            "checkpoints": "ckpt/lit/checkpoints",
                            "model": "lit_model:make_model", "params": {"hidden": 8}}}}
    path = folder / "campaign.yaml"
    path.write_text(json.dumps(doc, indent=2))
    return path


@pytest.fixture(scope="module")
def frameworks_bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both runs trained for real (in process), journaled as accepted, exported."""
    pytest.importorskip("transformers")
    pytest.importorskip("pytorch_lightning")
    folder = tmp_path_factory.mktemp("frameworks") / "campaign"
    path = _frameworks_campaign(folder)
    started = datetime.now(timezone.utc) - timedelta(seconds=5)
    sys.path.insert(0, str(folder))
    try:
        import train  # the campaign's own script, imported (its frameworks once)

        train.train_hf(str(folder / "ckpt" / "hf"))
        train.train_lightning(str(folder / "ckpt" / "lit"))
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("train", None)
        sys.modules.pop("lit_model", None)
    campaign = load_campaign(path)
    j = Journal(campaign.state_dir / "journal.jsonl")
    j.append("plan_recorded", now=started, sha256=campaign.sha256, path=str(campaign.path))
    ended = datetime.now(timezone.utc)
    for run in ("hf", "lit"):
        ev = j.append("stage_started", now=started, stage=run, run=run, pid=1, gpus=[0])
        j.append("run_started", now=started, run=run, stage=run, attempt=ev["seq"], gpus=[0])
        j.append("run_exited", now=ended, run=run, stage=run, code=0, attempt=ev["seq"])
        j.append("stage_finished", now=ended, stage=run, outcome="done")
        j.append("result_accepted", now=ended, run=run, reason="checks passed", result=run)
    result = export_campaign(load_campaign(path), tar=False)
    assert result.verified, result.verify.render()
    return result.bag_dir


def test_the_bag_says_what_rebuilds_each_framework_and_what_to_install(
        frameworks_bag: Path) -> None:
    data = frameworks_bag / "data"
    entries = {e["run"]: e for e in json.loads((data / "reload.json").read_text())["artifacts"]}
    assert entries["hf"]["rebuild"] == "hf" and entries["hf"]["hf_class"] == "GPT2LMHeadModel"
    assert entries["hf"]["path"] == "data/runs/hf/artifacts/checkpoint-2"
    assert entries["lit"]["rebuild"] == "factory"
    reload_md = (data / "RELOAD.md").read_text()
    assert "| hf | `transformers.GPT2LMHeadModel.from_pretrained(folder, " \
           "local_files_only=True)` | the class the folder's `config.json` names" in reload_md
    assert "| lit | `lit_model:make_model(hidden=8)` | the run's `model:`" in reload_md
    assert "`model.` of a LightningModule holding `self.model`" in reload_md
    assert "AutoModel.from_pretrained" not in reload_md  # it would drop the LM head
    import torch
    import transformers

    requirements = (data / "environment" / "requirements.txt").read_text()
    pins = [line for line in requirements.splitlines() if not line.startswith("#")]
    public = torch.__version__.split("+")[0]
    assert f"torch=={public}  # imported by lit_model.py, reload.py, train.py" in pins
    assert f"transformers=={transformers.__version__}  # imported by reload.py, train.py" in pins
    assert any(p.startswith("pytorch-lightning==") for p in pins)
    assert not any(p.startswith(("pytest", "playwright", "textual")) for p in pins)
    if "+" in torch.__version__:
        assert f"# torch {torch.__version__} was installed" in requirements
    freeze = (data / "environment" / "pip-freeze.txt").read_text()
    assert f"torch=={torch.__version__}\n" in freeze and "pytest==" in freeze


def test_reload_py_says_when_it_stripped_the_lightning_prefix(frameworks_bag: Path) -> None:
    done = subprocess.run([sys.executable, str(frameworks_bag / "data" / "reload.py"), "lit"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "run lit: model lit_model:make_model(hidden=8) rebuilt (Sequential" in done.stdout
    assert "every key of the checkpoint began with 'model.': stripped, then loaded " \
           "strictly" in done.stdout
    assert not list(frameworks_bag.rglob("__pycache__"))  # the bag still matches its manifest


def test_verify_export_rebuilds_both_models_in_a_fresh_venv(frameworks_bag: Path) -> None:
    """One fresh venv for both runs: pip installs the bag's requirements.txt (torch's
    wheel from pip's cache or find-links), then reload.py runs with that interpreter."""
    done = run_cockpit("verify-export", str(frameworks_bag), "--no-reload", "--rebuild",
                       "--fresh-venv", "--json", timeout=540)
    report = json.loads(done.stdout)
    check = next(c for c in report["checks"] if c["name"] == "model rebuilt")
    assert check["ok"] and done.returncode == 0, (check, done.stderr[-2000:])
    detail = check["detail"]
    assert "hf (transformers.GPT2LMHeadModel, " in detail
    assert "lit (lit_model:make_model, " in detail and "'model.' stripped" in detail
    assert "in a fresh virtual environment" in detail and "requirements.txt installed" in detail


REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def adapter_bag(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(reload.py of a bag-like folder holding a real LoRA adapter, a Hugging Face hub
    cache holding its tiny GPT-2 base at REVISION): built from a config, no hub."""
    peft = pytest.importorskip("peft")
    from transformers import GPT2Config, GPT2LMHeadModel

    root = tmp_path_factory.mktemp("adapter")
    cache = root / "hub"
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    base = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64,
                                      n_positions=32, bos_token_id=0, eos_token_id=0))
    base.save_pretrained(cache / "models--org--tiny-base" / "snapshots" / REVISION)
    base.name_or_path = "org/tiny-base"
    lora = peft.LoraConfig(task_type="CAUSAL_LM", r=2, target_modules=["c_attn"],
                           fan_in_fan_out=True)
    data = root / "data"
    peft.get_peft_model(base, lora).save_pretrained(data / "runs" / "a" / "adapter")
    table = {"a": {"rebuild": "adapter", "model": None, "params": {},
                   "checkpoint": "runs/a/adapter", "files": {}, "base_model": "org/tiny-base",
                   "base_revision": REVISION},
             "unpinned": {"rebuild": "adapter", "checkpoint": "runs/a/adapter",
                          "base_model": "org/tiny-base", "base_revision": "main"}}
    (data / "reload.py").write_text(reload_script("t", table))
    return data / "reload.py", cache


def test_an_adapter_is_rebuilt_on_its_base_at_the_pinned_revision(
        adapter_bag: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    script, cache = adapter_bag
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))  # the child gets it, read offline
    outcome = run_rebuild(script, "a", 300)
    answer = outcome.answer
    assert outcome.problem is None and answer.get("ok"), (answer, outcome.stderr[-2000:])
    assert answer["model"] == "peft.PeftModel on transformers.GPT2LMHeadModel"
    assert answer["base_revision"] == REVISION and answer["tensors"] == 2
    assert answer["missing_keys"] == [] and answer["unexpected_keys"] == []


def test_an_adapter_whose_base_is_not_here_or_not_pinned_says_what_is_needed(
        adapter_bag: tuple[Path, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    script, _cache = adapter_bag
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # an empty cache: no base
    missing = run_rebuild(script, "a", 300).answer
    assert not missing["ok"]
    assert (f"needs the base model org/tiny-base at revision {REVISION} in this machine's "
            f"Hugging Face cache (hf download org/tiny-base --revision {REVISION})"
            ) in missing["error"]
    unpinned = run_rebuild(script, "unpinned", 300).answer
    assert not unpinned["ok"] and "is not pinned to an exact revision" in unpinned["error"]
