"""Process tests: real child processes started, stopped, re-attached; real journals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from cockpit.campaign import load_campaign
from cockpit.engine import ActionRefused, Engine
from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import run_cockpit, wait_for

# Real processes (the supervisor, detached runs, the CLI): end to end by kind; the
# engine logic they exercise has fake-clock tests of its own.
pytestmark = pytest.mark.slow


def journal(path: Path) -> list[dict]:
    lines = (path.parent / ".cockpit" / "journal.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def tick_until(engine: Engine, predicate, timeout: float = 20.0, what: str = "condition"):
    def once():
        snap = engine.tick()
        return snap if predicate(snap) else None
    return wait_for(once, timeout, what)


def nan_on_disk(tmp_path: Path) -> bool:
    report = tmp_path / ".cockpit" / "runs" / "r1" / "report.jsonl"
    return "NaN" in (report.read_text() if report.exists() else "")


def test_nan_metric_stopped_by_finite_loss_within_two_ticks(tmp_path: Path):
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=400, sleep=0.05, nan_at=8)},
    ], rules=[FINITE])
    engine = Engine(load_campaign(path), actor="test")
    engine.start("train")
    # Wait (without ticking) until the NaN is on disk, then count ticks to the stop.
    wait_for(lambda: nan_on_disk(tmp_path), 20, "the NaN in the run's report")
    pid = engine.state().runs["r1"].pid
    engine.tick()
    engine.tick()
    events = journal(path)
    fired = [e for e in events if e["kind"] == "rule_fired"]
    assert len(fired) == 1 and fired[0]["run"] == "r1" and fired[0]["rule"] == "finite-loss"
    assert "non-finite" in fired[0]["reason"] and fired[0]["step"] >= 8
    stop = [e for e in events if e["kind"] == "stop_requested"]
    assert stop and stop[0]["rule"] == "finite-loss" and stop[0]["reason"] == fired[0]["reason"]
    snap = tick_until(engine, lambda s: s.run("r1").state == "stopped", timeout=30,
                      what="the run stopped")
    assert snap.stage("train").state == "stopped"
    with pytest.raises(psutil.NoSuchProcess):
        psutil.Process(pid).status()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole process group is gone
    result = run_cockpit("accept", str(path), "r1")
    assert result.returncode == 1 and "never an accepted result" in result.stderr


def test_killed_cockpit_reattaches_and_sees_the_later_exit_code(tmp_path: Path):
    path = write_campaign(tmp_path, [
        {"id": "long", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=30, sleep=0.1, code=7)},
    ])
    cockpit = subprocess.Popen([sys.executable, "-m", "cockpit", "headless", str(path),
                                "--auto", "--interval", "0.1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: any(e["kind"] == "run_started" for e in _safe_journal(path)), 20,
             "the run started by the first cockpit")
    cockpit.send_signal(signal.SIGKILL)
    cockpit.wait()
    started = next(e for e in journal(path) if e["kind"] == "run_started")
    assert psutil.pid_exists(started["pid"])  # the run survived its cockpit
    engine = Engine(load_campaign(path), actor="second")
    snap = tick_until(engine, lambda s: s.stage("long").state == "failed", timeout=20,
                      what="the later exit code recorded")
    assert snap.run("r1").exit_code == 7
    exited = [e for e in journal(path) if e["kind"] == "run_exited"]
    assert len(exited) == 1 and exited[0]["code"] == 7


def _safe_journal(path: Path) -> list[dict]:
    try:
        return journal(path)
    except (FileNotFoundError, json.JSONDecodeError):
        return []


def test_two_headless_instances_start_each_stage_once_and_fire_once(tmp_path: Path):
    path = write_campaign(tmp_path, [
        {"id": "a", "hours": 1, "resource": "gpu:0", "run": "ra",
         "command": step_command(steps=10, sleep=0.05)},
        {"id": "b", "hours": 1, "resource": "gpu:1", "run": "rb", "category": "exploratory",
         "command": step_command(steps=300, sleep=0.05, nan_at=5)},
        {"id": "c", "hours": 1, "resource": "cpu", "after": ["a"], "run": "rc",
         "command": step_command(steps=5, sleep=0.05)},
    ], rules=[FINITE], offer="b200-3d")
    procs = [subprocess.Popen([sys.executable, "-m", "cockpit", "headless", str(path), "--auto",
                               "--until-done", "--interval", "0.05"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    events = journal(path)
    started = [e["stage"] for e in events if e["kind"] == "stage_started"]
    assert sorted(started) == ["a", "b", "c"]
    assert [e["run"] for e in events if e["kind"] == "rule_fired"] == ["rb"]
    assert len([e for e in events if e["kind"] == "stop_requested"]) == 1
    assert len([e for e in events if e["kind"] == "run_exited"]) == 3
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def test_cli_actions_round_trip(tmp_path: Path):
    path = write_campaign(tmp_path, [
        {"id": "prep", "hours": 1, "resource": "human"},
        {"id": "pilot", "hours": 1, "resource": "gpu", "after": ["prep"], "run": "pilot",
         "decision_point": True, "command": step_command(steps=3, sleep=0.01)},
        {"id": "control", "hours": 1, "resource": "gpu", "after": ["pilot"], "run": "control",
         "command": step_command(steps=3, sleep=0.01)},
        {"id": "extra", "hours": 1, "resource": "gpu", "after": ["pilot"], "run": "extra",
         "category": "exploratory", "command": step_command(steps=3, sleep=0.01)},
    ], runs={"control": {"params": {"lr": 0.1}}})
    file = str(path)
    assert run_cockpit("start", file, "prep").returncode == 1  # no command: mark it
    r = run_cockpit("mark", file, "prep", "done", "--note", "data staged")
    assert r.returncode == 0 and "stage prep done" in r.stdout
    headless = run_cockpit("headless", file, "--auto", "--until-done", "--interval", "0.05")
    assert headless.returncode == 3 and "waiting for a decision at pilot" in headless.stdout
    r = run_cockpit("decide", file, "limit", "--drop", "control", "--note", "x")
    assert r.returncode == 1 and "essential" in r.stderr
    r = run_cockpit("decide", file, "limit", "--drop", "extra", "--note", "pilot was slow")
    assert r.returncode == 0 and "dropping extra" in r.stdout
    r = run_cockpit("headless", file, "--auto", "--until-done", "--interval", "0.05")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stage control started" in r.stdout and "stage extra" not in r.stdout
    r = run_cockpit("accept", file, "control", "--note", "meets the bar")
    assert r.returncode == 0 and "accepted" in r.stdout
    assert run_cockpit("note", file, "control", "took longer: cold cache").returncode == 0
    r = run_cockpit("cost", file, "egress", "3.10", "--currency", "eur")
    assert r.returncode == 0 and "3.10 EUR" in r.stdout
    assert run_cockpit("cost", file, "egress", "lots").returncode == 2
    assert run_cockpit("mark", file, "nosuch", "done").returncode == 2
    status = json.loads(run_cockpit("status", file, "--json").stdout)
    states = {s["id"]: s["state"] for s in status["stages"]}
    assert states == {"prep": "done", "pilot": "done", "control": "done", "extra": "dropped"}
    assert {r["id"]: r["verdict"] for r in status["runs"]}["control"] == "accepted"
    kinds = [e["kind"] for e in journal(path)]
    assert kinds.count("plan_recorded") == 1 and "decision" in kinds and "cost" in kinds


def test_cli_stop_with_reason_and_new_params_need_a_new_run_id(tmp_path: Path):
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=600, sleep=0.05)},
    ], runs={"r1": {"params": {"lr": 0.1}}})
    assert run_cockpit("start", str(path), "train").returncode == 0
    again = run_cockpit("start", str(path), "train")
    assert again.returncode == 1 and "already running" in again.stderr
    stop = run_cockpit("stop", str(path), "r1", "--reason", "operator: wrong data")
    assert stop.returncode == 0, stop.stderr
    assert "run r1 stopped" in stop.stdout
    events = journal(path)
    req = next(e for e in events if e["kind"] == "stop_requested")
    assert req["rule"] == "manual" and req["reason"] == "operator: wrong data"
    # A changed configuration under the same run id is refused (D15).
    text = path.read_text().replace('"lr": 0.1', '"lr": 0.2')
    path.write_text(text)
    refused = run_cockpit("start", str(path), "train")
    assert refused.returncode == 1 and "new run id" in refused.stderr


def test_gpu_held_by_another_stage_is_refused_unless_forced(tmp_path: Path):
    path = write_campaign(tmp_path, [
        {"id": "a", "hours": 1, "resource": "gpu", "run": "ra",
         "command": step_command(steps=200, sleep=0.05)},
        {"id": "b", "hours": 1, "resource": "gpu", "run": "rb",
         "command": step_command(steps=200, sleep=0.05)},
    ])
    engine = Engine(load_campaign(path))
    engine.start("a")
    with pytest.raises(ActionRefused, match="holds"):
        engine.start("b")
    written = engine.start("b", force=True)
    assert written[0]["forced"] is True
    for run in ("ra", "rb"):
        engine.stop(run, "test over")
    for run in ("ra", "rb"):
        assert engine.wait_stopped(run, timeout=10)


def test_status_never_signals_or_writes_and_survives_a_torn_journal(tmp_path: Path):
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=400, sleep=0.05, nan_at=2)},
    ], rules=[FINITE])
    Engine(load_campaign(path)).start("train")
    journal_file = tmp_path / ".cockpit" / "journal.jsonl"
    # The NaN on disk: a status that acted on rules would fire here (it must not).
    wait_for(lambda: nan_on_disk(tmp_path), 20, "the NaN in the run's report")
    with open(journal_file, "ab") as handle:
        handle.write(b'{"seq": 99, "kind": "no')  # torn: no newline
    before = journal_file.read_bytes()
    result = run_cockpit("status", str(path), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert any("journal line" in w for w in data["warnings"])
    assert journal_file.read_bytes() == before  # status wrote nothing, fired nothing
    assert data["runs"][0]["state"] == "running"
    engine = Engine(load_campaign(path))
    tick_until(engine, lambda s: s.run("r1").state == "stopped", what="the run stopped")
    # The last event of the run (a deadline warning may land in the same tick: the test
    # campaigns' window is fixed in time).
    kinds = [json.loads(x)["kind"] for x in journal_file.read_text().splitlines()
             if '"kind": "no' not in x]  # the torn line
    assert [k for k in kinds if k != "warning"][-1] == "stage_finished"


def test_until_done_exit_1_when_an_essential_stage_fails(tmp_path: Path):
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=2, sleep=0.01, code=4)},
    ])
    r = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.05")
    assert r.returncode == 1 and "essential stage train failed" in r.stdout
