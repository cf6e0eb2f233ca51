"""`cockpit demo`: the digits campaign to its close, exactly as the README runs it.

The README's first command, word for word after the install (no terminal, so it runs
headless), from an empty working folder: PyTorch training on CPU, the pilot decision,
the resume check right after the pilot (the race a fast machine hits), the stop rule,
reload checks, error analysis, export and budget. It runs once, shared by the checks
below (a second full run repeated the same checks: ~40 s of training for nothing new).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from cockpit.runs.checkpoints.reload_check import verify_checkpoint
from tests.helpers.campaigns import recent_start
from tests.helpers.process import SAMPLES, run_cockpit

pytestmark = pytest.mark.slow

pytest.importorskip("torch", reason="the demo trains a real PyTorch model")


README_DEMO = ("demo", "--simulate-gpus", "2")  # the README's first command, after the install


def readme_command_args() -> tuple[str, ...]:
    """The arguments of ``python3 -m cockpit`` in the README's first command."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    first = next(line for line in readme.splitlines() if "-m cockpit demo" in line)
    return tuple(first.split("-m cockpit ", 1)[1].split())


def run_readme_demo(workdir: Path) -> tuple[Path, str]:
    workdir.mkdir(parents=True, exist_ok=True)
    result = run_cockpit(*README_DEMO, cwd=workdir, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (folder,) = workdir.glob("cockpit-demo-*")
    return folder, result.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, str]:
    return run_readme_demo(tmp_path_factory.mktemp("demo"))


def test_the_test_runs_the_readme_command_word_for_word():
    assert readme_command_args() == README_DEMO


def test_the_demo_runs_print_no_warnings(demo):
    """Every stage's stderr is free of warnings (torch without numpy warned on each run)."""
    folder, _ = demo
    logs = sorted((folder / ".cockpit" / "logs").glob("*.err"))
    assert len(logs) >= 8
    for log in logs:
        text = log.read_text()
        assert "Warning" not in text and "warning" not in text, (log.name, text[-500:])


def events(folder: Path) -> list[dict]:
    text = (folder / ".cockpit" / "journal.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_the_demo_closes_as_expected(demo):
    folder, out = demo
    assert f"demo campaign: {folder.resolve() / 'campaign.yaml'}" in out
    assert "(verified: True)" in out
    journal = events(folder)
    verdicts = {e["run"]: e["kind"] for e in journal
                if e["kind"] in ("result_accepted", "result_rejected")}
    assert verdicts["control"] == "result_accepted"
    assert verdicts["variant-a"] == "result_accepted"
    fired = [e for e in journal if e["kind"] == "rule_fired"]
    assert [(e["run"], e["rule"]) for e in fired] == [("variant-b", "finite-loss")]
    assert "non-finite" in fired[0]["reason"]
    stop = next(e for e in journal if e["kind"] == "stop_requested")
    assert stop["run"] == "variant-b" and stop["reason"] == fired[0]["reason"]
    decision = next(e for e in journal if e["kind"] == "decision")
    assert decision["stage"] == "pilot" and decision["outcome"] == "continue"
    assert "scripted" in decision["note"]
    resume = next(e for e in journal if e["kind"] == "resume_verified")
    assert resume["run"] == "pilot" and resume["ok"] is True
    # The stages ran with the interpreter that runs the cockpit ("{python}" in the file).
    started = [e for e in journal if e["kind"] == "stage_started" and e.get("command")]
    assert started and all(e["command"][0] == sys.executable for e in started)


def test_the_budget_of_the_demo(demo):
    folder, out = demo
    data = json.loads(run_cockpit("budget", str(folder / "campaign.yaml"), "--json").stdout)
    assert data["committed"] == {"amount": "47.14", "currency": "USD"}
    assert data["accepted"] == 2
    assert data["share_per_accepted"] == {"amount": "23.57", "currency": "USD"}
    assert "23.57 USD per accepted result" in out


def test_predictions_error_analysis_and_export(demo):
    folder, out = demo
    for run in ("control", "variant-a"):
        for name in ("predictions.csv", "confusion.csv", "confused_pairs.md",
                     "misclassified.md"):
            path = folder / "out" / run / name
            assert path.stat().st_size > 0, path
    done = [e for e in events(folder) if e["kind"] == "export_done"]
    assert done and done[-1]["verified"] is True
    bag = Path(done[-1]["path"])
    assert f"cockpit verify-export {bag}" in out
    check = run_cockpit("verify-export", str(bag), "--no-reload")
    assert check.returncode == 0, check.stdout + check.stderr
    import bagit

    assert bagit.Bag(str(bag)).is_valid()
    report = (bag / "data" / "REPORT.md").read_text()
    assert "23.57 USD" in report and "variant-a" in report


def test_the_demo_bag_rebuilds_the_model_from_the_tar_alone(demo, tmp_path: Path):
    """Issue 17: code, a requirements file naming torch's exact version and reload.py in
    the bag; --rebuild rebuilds the control's model in a fresh process; the fetched tar
    alone verifies, and one flipped byte fails it."""
    import torch

    folder, _ = demo
    done = [e for e in events(folder) if e["kind"] == "export_done"]
    bag = Path(done[-1]["path"])
    data = bag / "data"
    for name in ("code/train.py", "code/common.py", "code/MANIFEST.json", "reload.py",
                 "environment/environment.json", "plan/campaign.as-decided.yaml"):
        assert (data / name).is_file(), name
    requirements = (data / "environment" / "requirements.txt").read_text()
    # What the code imports, installable from a plain index (a local label as a comment).
    assert f"\ntorch=={torch.__version__.split('+')[0]}  # imported by " in requirements
    assert "pytest" not in requirements and "playwright" not in requirements
    assert f"torch=={torch.__version__}\n" in (data / "environment" / "pip-freeze.txt"
                                                ).read_text()
    assert "python reload.py control" in (data / "RELOAD.md").read_text()
    assert "import cockpit" not in (data / "reload.py").read_text()
    check = run_cockpit("verify-export", str(bag), "--rebuild", "--no-reload", timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    rebuilt = next(line for line in check.stdout.splitlines() if "model rebuilt" in line)
    assert "[ok  ]" in rebuilt and "control (common:make_model, 4,810 parameters)" in rebuilt
    # On the laptop: the tar and its sha256, no campaign file.
    tar = Path(done[-1]["tar"])
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    shutil.copy(tar, laptop / tar.name)
    shutil.copy(tar.with_name(tar.name + ".sha256"), laptop)
    alone = run_cockpit("verify-export", tar.name, "--no-reload", cwd=laptop, timeout=300)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "[ok  ] tar matches its sha256" in alone.stdout
    raw = bytearray((laptop / tar.name).read_bytes())
    raw[len(raw) // 2] ^= 0x01
    (laptop / tar.name).write_bytes(bytes(raw))
    flipped = run_cockpit("verify-export", tar.name, cwd=laptop, timeout=300)
    assert flipped.returncode == 1
    assert "does not match" in flipped.stdout and "NOT verified" in flipped.stdout


def test_a_control_checkpoint_reloads_in_a_fresh_process(demo):
    folder, _ = demo
    newest = sorted((folder / "ckpt" / "control").glob("*.pt"))[-1]
    report = verify_checkpoint(newest, "train", timeout=120)
    assert report.ok and report.layout == "cockpit.resume"
    assert report.present["optimizer"] and report.present["rng_torch"]


def test_a_truncated_corpus_fires_no_truncation(tmp_path: Path):
    folder = tmp_path / "c"
    shutil.copytree(SAMPLES / "digits", folder)
    rows = gzip.open(folder / "data" / "digits.csv.gz", "rt").read().splitlines()
    rows[5] = ",".join(rows[5].split(",")[:40])  # a row cut short
    with gzip.open(folder / "truncated.csv.gz", "wt") as handle:
        handle.write("\n".join(rows) + "\n")
    doc = {"campaign": "trunc", "package": {"offer": "rtx4090-3d", "start": recent_start()},
           "stages": [{"id": "data-check", "duration": "2m", "resource": "cpu",
                       "run": "data-check",
                       "command": [sys.executable, "data_check.py", "truncated.csv.gz"]}],
           "stop_rules": [{"id": "no-truncation", "kind": "truncation",
                           "metric": "data/truncated"}]}
    (folder / "campaign.yaml").write_text(json.dumps(doc))
    result = run_cockpit("headless", str(folder / "campaign.yaml"), "--auto", "--until-done",
                         "--interval", "0.1", timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    fired = [e for e in events(folder) if e["kind"] == "rule_fired"]
    assert [(e["rule"], e["value"]) for e in fired] == [("no-truncation", 1)]
    assert "inputs truncated" in fired[0]["reason"]


def test_next_writes_a_calibrated_plan_that_checks(demo):
    """The guide's last word: the next campaign starts with a better estimate."""
    from cockpit.campaign import load_campaign

    folder, _ = demo
    out = folder / "next.yaml"
    made = run_cockpit("next", str(folder / "campaign.yaml"), "--out", str(out))
    assert made.returncode == 0, made.stderr
    checked = run_cockpit("check", str(out))
    assert checked.returncode == 0 and checked.stdout.strip() == "ok", checked.stderr
    assert run_cockpit("plan", str(out)).returncode == 0
    # variant-b was stopped by its rule: its time counts only scaled by the share of its
    # steps it reached, or the plan stands (D24); never "measured" as if it had finished.
    line = next(x for x in out.read_text().splitlines() if x.startswith("#   variant-b:"))
    assert "(measured)" not in line and ("of its steps after" in line or "as planned" in line
                                         or "steps at the measured" in line)
    # Issue 27: where the GPU-hours went, from the flight recorder the demo's cockpit kept.
    text = out.read_text()
    assert "# where the GPU-hours went (the flight recorder):" in text
    assert re.search(r"#   - busy \d+\.\d of \d+\.\d GPU-hours held", text), text[:3000]
    journal = events(folder)
    realized = {}
    for ev in journal:
        if ev["kind"] == "stage_started":
            realized[ev["stage"]] = ev["t"]
        elif ev["kind"] == "stage_finished" and ev["stage"] in realized:
            from cockpit.journal.log import parse_time

            realized[ev["stage"]] = (parse_time(ev["t"]) - parse_time(realized[ev["stage"]])
                                     ).total_seconds()
    calibrated = {s.id: s.seconds for s in load_campaign(out).stages}
    for stage in ("pilot", "control", "variant-a"):
        assert abs(calibrated[stage] - max(1, round(realized[stage]))) <= 1, stage
    text = out.read_text()
    assert "run variant-b was stopped by finite-loss" in text  # an open uncertainty
    assert "# checkpoint costs measured" in text
    again = run_cockpit("next", str(folder / "campaign.yaml"), "--out", str(out))
    assert again.returncode == 2 and "exists" in again.stderr
    report = next((folder / ".cockpit" / "export").glob("*/*/data/REPORT.md")).read_text()
    assert "## The next campaign" in report
