"""Checkpoints in a live campaign: age and save cost, verification by itself in a fresh
process, resume equivalence (pass for the honest run, fail naming the step for a run
that forgets its RNG state), and the `restart` rule stopping a run with no usable restart.
Real tiny PyTorch runs on CPU (the digits sample's own training script)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from tests.helpers.campaigns import recent_start
from tests.helpers.process import SAMPLES, run_cockpit, wait_for

pytest.importorskip("torch", reason="checkpoint tests train a real tiny PyTorch model")


def train(run: str, steps: int, *extra: str) -> list[str]:
    return [sys.executable, "train.py", "--run", run, "--lr", "0.05", "--steps", str(steps),
            "--eval-every", "25", "--checkpoint-dir", f"ckpt/{run}", "--checkpoint-every", "40",
            *extra]


def resume(run: str, steps: int, *extra: str) -> list[str]:
    return [sys.executable, "train.py", "--run", run, "--lr", "0.05", "--steps", str(steps),
            "--resume", "{checkpoint}", "--stop-after", "{steps}", *extra]


def campaign(folder: Path, stages: list[dict], runs: dict, rules: list | None = None) -> Path:
    shutil.copytree(SAMPLES / "digits", folder, ignore=shutil.ignore_patterns("campaign.yaml"))
    doc = {"campaign": "ckpt-test", "package": {"offer": "rtx4090-3d",
                                                "start": recent_start()},
           "stages": stages, "runs": runs, "stop_rules": rules or [],
           "settings": {"stop_grace": "2s", "verify_every": "1s"}}
    path = folder / "campaign.yaml"
    path.write_text(json.dumps(doc))
    return path


def journal(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / ".cockpit" / "journal.jsonl").read_text().splitlines()]


def run_to_end(engine: Engine, run: str, timeout: float = 90):
    def ended():
        snap = engine.tick()
        return snap if snap.run(run).state not in ("running", "not_started") else None
    return wait_for(ended, timeout, what=f"run {run} to end")


@pytest.mark.slow  # real training and a reload check
def test_age_save_cost_and_first_checkpoint_verified_by_itself(tmp_path: Path):
    path = campaign(tmp_path / "c", [
        {"id": "pilot", "duration": "5m", "resource": "gpu", "run": "pilot",
         "command": train("pilot", 240)},
    ], {"pilot": {"checkpoints": "ckpt/pilot"}})
    engine = Engine(load_campaign(path), auto=True)
    seen_running_view = None

    def ended_and_verified() -> bool:
        nonlocal seen_running_view
        snap = engine.tick()
        view = snap.run("pilot").checkpoint
        if snap.run("pilot").state == "running" and view and view.age_s is not None:
            seen_running_view = view
        return snap.run("pilot").state not in ("running", "not_started") \
            and any(e["kind"] == "checkpoint_verified" for e in journal(path.parent))

    wait_for(ended_and_verified, 120, what="the run's end and its checkpoint verified")
    assert seen_running_view is not None, "no checkpoint age shown while running"
    assert seen_running_view.save_cost_s is not None and seen_running_view.save_cost_s >= 0
    assert seen_running_view.path.endswith(".pt") and seen_running_view.size > 0
    verified = [e for e in journal(path.parent) if e["kind"] == "checkpoint_verified"]
    assert verified and verified[0]["auto"] is True and verified[0]["ok"] is True
    assert verified[0]["layout"] == "cockpit.resume" and verified[0]["load_seconds"] is not None
    started = [e for e in journal(path.parent) if e["kind"] == "verify_started"]
    assert started and started[0]["path"] == verified[0]["path"]


@pytest.mark.slow  # trains and resumes twice
def test_resume_equivalence_passes_honest_run_and_names_the_step_for_forgotten_rng(
        tmp_path: Path):
    path = campaign(tmp_path / "c", [
        {"id": "honest", "duration": "5m", "resource": "gpu:0", "run": "honest",
         "command": train("honest", 120)},
        {"id": "careless", "duration": "5m", "resource": "cpu", "run": "careless",
         "command": train("careless", 120, "--forget-rng")},
    ], {
        "honest": {"checkpoints": "ckpt/honest",
                   "resume_check": {"command": resume("honest", 120), "steps": 15}},
        "careless": {"checkpoints": "ckpt/careless",
                     "resume_check": {"command": resume("careless", 120, "--forget-rng"),
                                      "steps": 15}},
    })
    engine = Engine(load_campaign(path), auto=True)
    run_to_end(engine, "honest")
    run_to_end(engine, "careless")
    # No wait for the checkpoints to settle: train.py reports each one written, and a
    # reported checkpoint is complete at once (the settle itself: test_engine_guards.py).
    ok = run_cockpit("verify", str(path), "honest", "--resume", timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASS" in ok.stdout and "15 steps of loss match" in ok.stdout
    bad = run_cockpit("verify", str(path), "careless", "--resume", timeout=120)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL" in bad.stdout and "diverged at step 41" in bad.stdout
    events = [e for e in journal(path.parent) if e["kind"] == "resume_verified"]
    assert [(e["run"], e["ok"], e["diverged_step"]) for e in events] == [
        ("honest", True, None), ("careless", False, 41)]
    # A plain reload of the careless checkpoint passes but names what is missing (D16).
    plain = run_cockpit("verify", str(path), "careless", timeout=120)
    assert plain.returncode == 0 and "torch CPU RNG state not saved" in plain.stdout


def test_restart_rule_stops_a_run_without_a_usable_restart(tmp_path: Path):
    path = campaign(tmp_path / "c", [
        {"id": "nocheck", "duration": "5m", "resource": "gpu", "run": "nocheck",
         "command": [sys.executable, "train.py", "--run", "nocheck", "--steps", "100000"]},
    ], {"nocheck": {"checkpoints": "ckpt/nocheck"}},
        rules=[{"id": "restart-usable", "kind": "restart", "max_age": "3s"}])
    engine = Engine(load_campaign(path), auto=True)
    snap = run_to_end(engine, "nocheck", timeout=60)
    assert snap.run("nocheck").state == "stopped"
    assert snap.run("nocheck").stop_rule == "restart-usable"
    assert "no usable restart" in snap.run("nocheck").stop_reason


def test_verify_bad_input_exit_2(tmp_path: Path):
    path = campaign(tmp_path / "c", [
        {"id": "a", "duration": "5m", "resource": "gpu", "run": "a", "command": ["true"]},
    ], {"a": {"checkpoints": "ckpt/a"}})
    assert run_cockpit("verify", str(path), "nosuch").returncode == 2
    missing = run_cockpit("verify", str(path), "a", "--checkpoint", "/nope.pt")
    assert missing.returncode == 2 and "no checkpoint at" in missing.stderr
    empty = run_cockpit("verify", str(path), "a")
    assert empty.returncode == 2 and "no complete checkpoint" in empty.stderr
