"""The engine's guards with a fake clock and a fake supervisor, in milliseconds.

No process is started and nothing sleeps: the clock moves when a test says so and
the supervisor records the signals it is asked to send. The journal is the real
one (on tmp_path). The end-to-end versions with real processes stay in
test_supervision.py and test_headless.py.
"""

from __future__ import annotations

import json
import math
import os
import signal
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from cockpit.campaign import load_campaign
from cockpit.campaign.model import Campaign, Stage
from cockpit.engine import Engine
from cockpit.runs.supervisor import Launched, Marked
from tests.helpers.campaigns import FINITE, FIXED_START, write_campaign

START = datetime(2026, 12, 2, 10, 0, tzinfo=timezone.utc)


class FakeClock:
    def __init__(self, now: datetime = START) -> None:
        self.t = now
        self.slept = 0.0

    def now(self) -> datetime:
        return self.t

    def monotonic(self) -> float:
        return self.t.timestamp()

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)


class FakeSupervisor:
    """Processes that live until told to exit; SIGKILL always ends them, SIGTERM only
    when ``term_exits`` (a training script that ignores SIGTERM is the case to test)."""

    def __init__(self, term_exits: bool = False) -> None:
        self.term_exits = term_exits
        self.next_pid = 1000
        self.running: dict[int, str] = {}  # pid -> stage
        self.exits: dict[str, dict[str, Any]] = {}  # exit_file -> {"code", "signal"}
        self.signals: list[tuple[int | None, signal.Signals]] = []
        self.launched: list[str] = []
        self.markers: dict[int, str] = {}  # pid -> its launch marker
        self.exit_files: dict[int, str] = {}  # pid -> the exit file it was launched with

    def launch(self, campaign: Campaign, stage: Stage, now: datetime,
               marker: str | None = None) -> Launched:
        self.next_pid += 1
        pid = self.next_pid
        self.running[pid] = stage.id
        self.launched.append(stage.id)
        if marker is not None:
            self.markers[pid] = marker
        # Named like the real supervisor's files, in the campaign's log folder (nothing
        # is written there: a test that wants output writes it where the journal says).
        base = campaign.state_dir / "logs" / f"{stage.id}.fake{pid}"
        self.exit_files[pid] = f"{base}.exit"
        return Launched(pid, pid, 1.0, list(stage.command or []), f"{base}.out",
                        f"{base}.err", f"{base}.exit", None, marker)

    def finish(self, stage_id: str, code: int | None = 0, sig: int | None = None) -> None:
        pid = next(p for p, s in self.running.items() if s == stage_id)
        del self.running[pid]
        self.exits[self.exit_files[pid]] = {"code": code, "signal": sig}

    def alive(self, pid: int | None, create_time: float | None) -> bool:
        return pid in self.running

    def read_exit(self, exit_file: str | None) -> dict[str, Any] | None:
        return self.exits.get(exit_file or "")

    def unproven(self, pid: int | None, pgid: int | None, create_time: float | None,
                 marker: str | None = None) -> str | None:
        return None if pid in self.running else "not running"

    def find_marked(self, prefix: str) -> list[Marked]:
        def matches(marker: str) -> bool:
            if not prefix.endswith(":"):
                return marker == prefix
            return marker.startswith(prefix) and marker[len(prefix):].isdigit()
        return [Marked(pid, pid, 1.0, m, ("python", "-m", "cockpit.runs.wrapper",
                                           self.exit_files[pid], "--"))
                for pid, m in self.markers.items() if pid in self.running and matches(m)]

    def signal_group(self, pid: int | None, pgid: int | None, create_time: float | None,
                     sig: signal.Signals, marker: str | None = None) -> bool:
        if pid not in self.running:
            return False
        self.signals.append((pgid, sig))
        if sig == signal.SIGKILL or self.term_exits:
            self.finish(self.running[pid], None if sig == signal.SIGKILL else 143, int(sig))
        return True

    def group_alive(self, pgid: int | None, marker: str | None = None) -> bool:
        return pgid in self.running

    def kill_leftovers(self, pgid: int, pid: int | None, create_time: float | None,
                       marker: str | None = None) -> None:
        pass

    def ancestors(self, pid: int) -> list[int]:
        return []


def make(tmp_path: Path, stages: list[dict], clock: FakeClock, sup: FakeSupervisor,
         **kwargs: Any) -> tuple[Engine, Path]:
    extra = kwargs.pop("extra", None)
    path = write_campaign(tmp_path, stages, runs=kwargs.pop("runs", None),
                          rules=kwargs.pop("rules", None), extra=extra, start=FIXED_START)
    return Engine(load_campaign(path), clock=clock, supervisor=sup, **kwargs), path


def journal(path: Path) -> list[dict[str, Any]]:
    text = (path.parent / ".cockpit" / "journal.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def kinds(path: Path, since: int = 0) -> list[str]:
    return [e["kind"] for e in journal(path) if e["seq"] > since]


def report(path: Path, run: str, clock: FakeClock, step: int, loss: float) -> None:
    """What the training script's cockpit.report would append, stamped on the fake clock."""
    file = path.parent / ".cockpit" / "runs" / run / "report.jsonl"
    file.parent.mkdir(parents=True, exist_ok=True)
    with file.open("a") as handle:
        handle.write(json.dumps({"t": clock.now().timestamp(), "step": step, "loss": loss})
                     + "\n")


def test_nan_fires_the_rule_then_sigterm_grace_sigkill_and_the_end_is_recorded(tmp_path):
    clock, sup = FakeClock(), FakeSupervisor(term_exits=False)
    engine, path = make(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["train"]},
    ], clock, sup, rules=[FINITE], extra={"settings": {"stop_grace": "30s"}})
    engine.start("train")
    (pid,) = sup.running
    report(path, "r1", clock, 1, 0.5)
    clock.advance(1)
    assert engine.tick().run("r1").state == "running"
    assert sup.signals == []

    report(path, "r1", clock, 2, math.nan)
    clock.advance(1)
    snap = engine.tick()
    fired = [e for e in journal(path) if e["kind"] == "rule_fired"]
    assert [(e["rule"], e["run"], e["step"]) for e in fired] == [("finite-loss", "r1", 2)]
    stop = [e for e in journal(path) if e["kind"] == "stop_requested"]
    assert stop and stop[0]["rule"] == "finite-loss" and stop[0]["attempt"] is not None
    assert sup.signals == [(pid, signal.SIGTERM)]
    assert {e.kind for e in snap.new_events} >= {"rule_fired", "stop_requested"}
    assert all(not e.earlier for e in snap.new_events)

    clock.advance(20)  # inside the grace: the script ignores SIGTERM, nothing more is sent
    engine.tick()
    assert sup.signals == [(pid, signal.SIGTERM)] and pid in sup.running

    clock.advance(15)  # past stop_grace (30 s after the request)
    engine.tick()
    assert sup.signals == [(pid, signal.SIGTERM), (pid, signal.SIGKILL)]
    assert pid not in sup.running

    seq = journal(path)[-1]["seq"]
    snap = engine.tick()  # the wrapper is gone: the exit is recorded, all three together
    assert kinds(path, seq) == ["run_exited", "stop_done", "stage_finished"]
    finished = journal(path)[-1]
    assert finished["outcome"] == "stopped" and finished["stage"] == "train"
    assert snap.run("r1").state == "stopped" and snap.run("r1").stop_rule == "finite-loss"
    assert snap.stage("train").state == "stopped"


def test_a_cli_stop_waits_on_the_injected_clock(tmp_path):
    clock, sup = FakeClock(), FakeSupervisor(term_exits=False)
    engine, path = make(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["train"]},
    ], clock, sup, extra={"settings": {"stop_grace": "5s"}})
    engine.start("train")
    engine.stop("train", "wrong learning rate")
    assert engine.wait_stopped("r1", timeout=15)  # the fake clock's sleep moves time
    assert [s for _, s in sup.signals] == [signal.SIGTERM, signal.SIGKILL]
    assert 5 <= clock.slept < 6
    assert kinds(path)[-3:] == ["run_exited", "stop_done", "stage_finished"]


def test_auto_start_in_plan_order_and_waits_at_the_decision_point(tmp_path):
    clock, sup = FakeClock(), FakeSupervisor()
    engine, path = make(tmp_path, [
        {"id": "prep", "hours": 1, "resource": "cpu", "command": ["prep"]},
        {"id": "side", "hours": 1, "resource": "cpu", "command": ["side"],
         "category": "exploratory"},
        {"id": "pilot", "hours": 1, "resource": "gpu", "run": "pilot", "after": ["prep"],
         "decision_point": True, "command": ["pilot"]},
        {"id": "main", "hours": 2, "resource": "gpu", "run": "main", "after": ["pilot"],
         "command": ["main"]},
    ], clock, sup, auto=True)
    engine.tick()
    # Ready ones in plan order; side waits for the CPU prep holds (the plan places them one
    # after the other: one resource model), pilot waits for prep.
    assert sup.launched == ["prep"]
    assert engine.tick().stage("side").state == "waiting"

    sup.finish("prep")
    clock.advance(60)
    engine.tick()  # prep's exit recorded, then side and pilot start in the same tick
    assert sup.launched == ["prep", "side", "pilot"]

    sup.finish("pilot")
    sup.finish("side")
    clock.advance(60)
    snap = engine.tick()
    engine.tick()
    assert sup.launched == ["prep", "side", "pilot"]  # main is blocked by the decision
    assert snap.pending_decisions == ("pilot",) and snap.stage("main").state == "blocked"
    verdict = engine.until_done(engine.state())
    assert verdict.code == 3 and "decision at pilot" in verdict.reason

    engine.decide("continue", note="pilot reached the floor")
    engine.tick()
    assert sup.launched == ["prep", "side", "pilot", "main"]
    started = [e for e in journal(path) if e["kind"] == "stage_started"]
    assert [(e["stage"], e["auto"]) for e in started] == [
        ("prep", True), ("side", True), ("pilot", True), ("main", True)]


def test_deadline_guard_stops_optional_runs_and_starts_the_export(tmp_path):
    clock, sup = FakeClock(), FakeSupervisor(term_exits=False)
    engine, path = make(tmp_path, [
        {"id": "core", "hours": 2, "resource": "gpu:0", "run": "core", "command": ["core"]},
        {"id": "explore", "hours": 40, "resource": "cpu", "run": "explore",
         "category": "exploratory", "command": ["explore"]},
        {"id": "export", "hours": 1, "resource": "cpu", "command": ["export"],
         "after": ["core", "explore"]},
    ], clock, sup, extra={"on_deadline": "stop-optional",
                          "deadline": {"export_hours": 2, "retrieve_hours": 1}})
    engine.start("core")
    engine.start("explore")
    sup.finish("core")
    engine.tick()
    assert sup.signals == []  # plenty of window left: nothing happens

    end = engine.campaign.package.end
    # explore still runs; the export stage (1 h) + retrieval (1 h) no longer fit (D19)
    clock.t = end - timedelta(hours=1.5)
    engine.tick()
    events = journal(path)
    loud = [e for e in events if e["kind"] == "warning" and e.get("source") == "deadline"]
    assert loud and "stop-optional" in loud[0]["message"]
    stops = [e for e in events if e["kind"] == "stop_requested"]
    assert [(e["run"], e["rule"]) for e in stops] == [("explore", "deadline")]
    assert [s for _, s in sup.signals] == [signal.SIGTERM]
    assert sup.launched == ["core", "explore", "export"]
    export = [e for e in events if e["kind"] == "stage_started" and e["stage"] == "export"]
    assert export and export[0]["auto"] is False

    engine.tick()  # once: the loud warning repeats at most hourly, the stop is not re-sent
    later = journal(path)
    assert len([e for e in later if e.get("source") == "deadline"]) == 1
    assert len([e for e in later if e["kind"] == "stop_requested"]) == 1


def test_a_warn_only_deadline_stops_nothing(tmp_path):
    clock, sup = FakeClock(), FakeSupervisor()
    engine, path = make(tmp_path, [
        {"id": "explore", "hours": 40, "resource": "cpu", "run": "explore",
         "category": "exploratory", "command": ["explore"]},
    ], clock, sup, extra={"deadline": {"export_hours": 2, "retrieve_hours": 1}})
    engine.start("explore")
    clock.t = engine.campaign.package.end - timedelta(hours=2)
    engine.tick()
    assert any(e.get("source") == "deadline" for e in journal(path))
    assert sup.signals == [] and "stop_requested" not in kinds(path)


def test_a_checkpoint_settles_on_the_engines_clock(tmp_path):
    clock, sup = FakeClock(), FakeSupervisor()
    writer, path = make(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["train"]},
    ], clock, sup, runs={"r1": {"checkpoints": "ckpt/r1"}})
    writer.start("train")
    # A read-only engine polls and scans without verifying (no reload process here).
    viewer = Engine(load_campaign(path), clock=clock, read_only=True)
    folder = tmp_path / "ckpt" / "r1"
    folder.mkdir(parents=True)
    saved = folder / "step_100.pt"
    saved.write_bytes(b"x" * 64)
    stamp = clock.now().timestamp()
    os.utime(saved, (stamp, stamp))  # written "now" on the fake clock

    clock.advance(1)  # unchanged for 1 s: less than the 2 s settle
    view = viewer.tick().run("r1").checkpoint
    assert view is not None and view.count == 0 and view.in_progress == 1 and view.path is None

    clock.advance(1.5)  # unchanged for 2.5 s: complete
    view = viewer.tick().run("r1").checkpoint
    assert view is not None and view.count == 1 and view.in_progress == 0
    assert view.path == str(saved) and view.step == 100
    assert view.age_s is not None and 2.4 < view.age_s < 2.6
