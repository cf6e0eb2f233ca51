"""Claim before launch, launch markers, orphaned groups and proven signals (issue 14).

Real processes where the promise is about processes: a launch whose record failed,
a wrapper killed with kill -9, an unrelated process named by a hand-written journal,
a cockpit killed at random points of ``cockpit start``. The timing of a claim that
never got its process uses the fake clock and supervisor of test_engine_guards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil
import pytest

from cockpit.campaign import load_campaign
from cockpit.campaign.model import Campaign, Stage
from cockpit.engine import ActionRefused, Engine
from cockpit.journal.log import Journal, JournalError
from cockpit.runs import supervisor as sup_mod
from cockpit.runs.supervisor import Launched, find_marked, launch_marker, stage_marker_prefix
from tests.engine import held_start
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor, kinds, make
from tests.helpers.campaigns import FINITE, FIXED_START, step_command, write_campaign
from tests.helpers.process import run_cockpit, wait_for


def journal(path: Path) -> list[dict[str, Any]]:
    file = path.parent / ".cockpit" / "journal.jsonl"
    out = []
    for line in file.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn line (the cockpit was killed mid-write)
    return out


def groups(campaign: Campaign, stage: str) -> set[int]:
    """The process groups holding a live process marked as a launch of ``stage``."""
    return {m.pgid for m in find_marked(stage_marker_prefix(campaign, stage))}


def launch_output(campaign: Campaign) -> str:
    """Every launch's stderr and exit record: why a launched process is not there."""
    logs = [*sorted(campaign.state_dir.rglob("*.err")), *sorted(campaign.state_dir.rglob("*.exit"))]
    return " | ".join(f"{p.name}: {p.read_text(errors='replace')[-500:]}" for p in logs)


def kill_groups(pgids: set[int]) -> None:
    for pgid in pgids:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass



class _FailingTxn:
    def __init__(self, txn: Any, fail: set[str]) -> None:
        self._txn = txn
        self._fail = fail

    def __getattr__(self, name: str) -> Any:  # the reads: the real view's
        return getattr(self._txn, name)

    def append(self, kind: str, now: datetime | None = None, **fields: Any) -> dict[str, Any]:
        if kind in self._fail:
            self._fail.discard(kind)  # once: the disk has room again afterwards
            raise JournalError("cannot append to journal: short write (12 of 380 bytes)")
        return dict(self._txn.append(kind, now=now, **fields))


class FailingJournal:
    """The real journal, with a fault-injection hook: the next append of each kind in
    ``fail`` raises as a full disk would."""

    def __init__(self, path: Path, fail: set[str]) -> None:
        self.real = Journal(path)
        self.fail = set(fail)

    def __getattr__(self, name: str) -> Any:  # every read: the real journal's
        return getattr(self.real, name)

    def append(self, kind: str, now: datetime | None = None, **fields: Any) -> dict[str, Any]:
        return self.real.append(kind, now=now, **fields)

    def transaction(self) -> AbstractContextManager[Any]:
        @contextmanager
        def wrapped() -> Iterator[_FailingTxn]:
            with self.real.transaction() as txn:
                yield _FailingTxn(txn, self.fail)
        return wrapped()


LONG = step_command(steps=600, sleep=0.1)


# ---------------------------------------------------------------- claim before launch
def test_a_failed_append_after_launch_leaves_one_process_and_the_next_tick_records_it(
        tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": LONG},
    ])
    campaign = load_campaign(path)
    broken = Engine(campaign, journal=FailingJournal(campaign.state_dir / "journal.jsonl",
                                                     {"stage_started"}), actor="broken")
    try:
        with pytest.raises(ActionRefused, match="was launched .* next tick records it"):
            broken.start("train")
        assert kinds(path)[-1] == "stage_claimed"  # the intent is on disk, the start is not
        wait_for(lambda: len(groups(campaign, "train")) == 1, timeout=10,
                 what=f"one launched group (its output: {launch_output(campaign)!r})")
        # Another cockpit (or the next `cockpit start`) never launches a second copy.
        other = Engine(load_campaign(path), actor="other")
        with pytest.raises(ActionRefused, match="being launched"):
            other.start("train")
        snap = other.tick()
        (pgid,) = groups(campaign, "train")
        assert snap.stage("train").state == "running"
        assert snap.run("r1").state == "running" and snap.run("r1").pid == pgid
        started = [e for e in journal(path) if e["kind"] == "stage_started"]
        assert len(started) == 1 and started[0]["reconciled"] is True
        assert started[0]["exit_file"].endswith(".exit")
        with pytest.raises(ActionRefused, match="already running"):
            other.start("train")
        assert len(groups(campaign, "train")) == 1
        # The recorded run is a normal one: it stops and its end is recorded.
        other.stop("r1", "test over")
        assert other.wait_stopped("r1", timeout=20)
        assert other.state().stages["train"].state == "stopped"
        assert groups(campaign, "train") == set()
    finally:
        kill_groups(groups(campaign, "train"))


def test_a_live_marked_process_without_any_record_refuses_a_second_launch(
        tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": LONG},
    ])
    campaign = load_campaign(path)
    stray = sup_mod.launch(campaign, campaign.stage("train"), datetime.now(timezone.utc),
                           marker=launch_marker(campaign, "train", 77))
    try:
        wait_for(lambda: groups(campaign, "train"), what="the marked process")
        engine = Engine(campaign, actor="test")
        with pytest.raises(ActionRefused, match="never a second copy"):
            engine.start("train")
        assert groups(campaign, "train") == {stray.pgid}
        journal_file = tmp_path / ".cockpit" / "journal.jsonl"
        assert not journal_file.exists() or "stage_claimed" not in kinds(path)
    finally:
        kill_groups({stray.pgid})


class DyingSupervisor(FakeSupervisor):
    """The cockpit is killed between the claim and the launch."""

    def launch(self, campaign: Campaign, stage: Stage, now: datetime,
               marker: str | None = None) -> Launched:
        raise KeyboardInterrupt("kill -9")


def test_a_claim_without_a_process_becomes_a_failed_launch_after_the_grace(
        tmp_path: Path) -> None:
    clock = FakeClock()
    engine, path = make(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["train"]},
    ], clock, DyingSupervisor())
    with pytest.raises(KeyboardInterrupt):
        engine.start("train")
    assert kinds(path)[-1] == "stage_claimed"
    clock.advance(2)
    assert engine.tick().stage("train").state == "running"  # the launch may be on its way
    clock.advance(engine.claim_grace_s)
    snap = engine.tick()
    assert snap.stage("train").state == "failed"
    last = journal(path)[-1]
    assert last["kind"] == "stage_finished" and "failed to launch" in last["reason"]
    # A failed launch may be started again; exactly one launch then.
    sup = FakeSupervisor()
    again = Engine(load_campaign(path), clock=clock, supervisor=sup)
    again.start("train")
    assert sup.launched == ["train"]
    assert again.tick().stage("train").state == "running"


def test_a_claim_whose_process_lives_is_recorded_running_with_the_fake_supervisor(
        tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["train"]},
    ], start=FIXED_START)
    campaign = load_campaign(path)
    failing = FailingJournal(campaign.state_dir / "journal.jsonl", {"stage_started"})
    engine = Engine(campaign, clock=clock, supervisor=sup, journal=failing)
    with pytest.raises(ActionRefused):
        engine.start("train")
    (pid,) = sup.running
    clock.advance(60)  # long past the grace: the process is there, so it is running
    snap = engine.tick()
    assert snap.stage("train").state == "running" and snap.run("r1").pid == pid
    assert sup.launched == ["train"]


# ---------------------------------------------------------------- kill -9 during start
# What the next cockpit makes of a start killed at each moment (its claim's owner gone).
AFTER_KILL = {
    "claimed": "ready",  # the launch never began: the claim expires, startable again
    "began": "failed",  # its output opened, no process: a failed launch
    "launched": "running, recorded from its marker",
    "recorded": "running",
}


@pytest.mark.slow  # a real start per phase, each killed
@pytest.mark.parametrize("phase", held_start.PHASES)
def test_kill_9_at_each_point_of_start_never_two_processes_never_a_lost_one(
        tmp_path: Path, phase: str) -> None:
    """A start is held at each moment between claim, launch and record (a child process
    with an injected supervisor says where it is, then waits), and killed there with
    kill -9: the next cockpit reconciles the claim in one look, and a start then leaves
    exactly one process."""
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": LONG},
    ])
    campaign = load_campaign(path)
    held = tmp_path / "held"
    try:
        cli = subprocess.Popen(held_start.command(path, "train", phase, held),
                               cwd=held_start.ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
        try:
            wait_for(lambda: held.exists() or cli.poll() is not None, 60,
                     f"the start held at {phase!r}")
            assert cli.poll() is None, cli.communicate()[1].decode(errors="replace")
        finally:
            cli.kill()  # kill -9, at the moment it said
            cli.communicate()
        assert held.read_text() == phase
        engine = Engine(load_campaign(path), actor="second")

        def reconciled() -> Any:
            snap = engine.tick()
            return snap if engine.state().stages["train"].claim is None else None
        snap = wait_for(reconciled, 30, "the claim reconciled")
        live = groups(campaign, "train")
        assert len(live) <= 1, f"{phase}: two copies {live}"
        state = snap.stage("train").state
        if live:
            (pgid,) = live
            assert state == "running" and snap.run("r1").pid == pgid, \
                f"{phase}: a lost process {pgid} ({state})"
            outcome = "running"
            if any(e.get("reconciled") for e in journal(path)):
                outcome = "running, recorded from its marker"
        else:
            assert state in ("ready", "failed"), f"{phase}: {state}"
            outcome = state
        assert outcome == AFTER_KILL[phase], (phase, outcome, kinds(path))
        # A start now: refused while one lives; exactly one process either way.
        try:
            engine.start("train")
        except ActionRefused:
            assert live
        assert len(groups(campaign, "train")) == 1
    finally:
        kill_groups(groups(campaign, "train"))


# ---------------------------------------------------------------- the wrapper killed
def _wrapper_and_trainer(engine: Engine, run: str) -> tuple[int, int]:
    pid = engine.state().runs[run].pid
    assert pid is not None
    children = wait_for(lambda: psutil.Process(pid).children(), what="the trainer")
    return pid, children[0].pid


def _report(path: Path, run: str) -> Path:
    return path.parent / ".cockpit" / "runs" / run / "report.jsonl"


def test_a_killed_wrapper_leaves_a_run_whose_nan_still_fires_the_rule_and_stops_it(
        tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=600, sleep=0.1, nan_at=30)},
    ], rules=[FINITE])
    engine = Engine(load_campaign(path), actor="test")
    engine.start("train")
    wrapper, trainer = _wrapper_and_trainer(engine, "r1")
    pgid = os.getpgid(trainer)
    try:
        wait_for(lambda: _report(path, "r1").exists(), what="the first metric")
        os.kill(wrapper, signal.SIGKILL)
        wait_for(lambda: not sup_mod.alive(wrapper, None), what="the wrapper's end")
        # The tick that sees the wrapper gone says so, and the orphan counts as running.
        wait_for(lambda: engine.tick() and any(
            e["kind"] == "warning" and "wrapper" in e["message"] for e in journal(path)),
            what="the warning that the wrapper is gone")
        snap = engine.tick()
        assert snap.stage("train").state == "running", "the orphaned run counts as running"
        assert psutil.pid_exists(trainer)

        def stopped() -> Any:
            snap = engine.tick()
            return snap if snap.run("r1").state != "running" else None
        snap = wait_for(stopped, 30, "the orphan stopped by the rule")
        fired = [e for e in journal(path) if e["kind"] == "rule_fired"]
        assert [e["rule"] for e in fired] == ["finite-loss"] and fired[0]["step"] >= 30
        assert snap.run("r1").state == "stopped" and snap.stage("train").state == "stopped"
        assert sup_mod.group_members(pgid) == []  # (a zombie may wait for its reaper)
    finally:
        kill_groups({pgid})


def test_cli_stop_ends_an_orphaned_run_and_start_refuses_while_it_lives(
        tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": LONG},
    ])
    assert run_cockpit("start", str(path), "train").returncode == 0
    engine = Engine(load_campaign(path), actor="test")
    wrapper, trainer = _wrapper_and_trainer(engine, "r1")
    pgid = os.getpgid(trainer)
    try:
        os.kill(wrapper, signal.SIGKILL)
        wait_for(lambda: not sup_mod.alive(wrapper, None), what="the wrapper's end")
        engine.tick()
        assert engine.state().stages["train"].state == "running"
        again = run_cockpit("start", str(path), "train")
        assert again.returncode == 1 and "already running" in again.stderr
        assert len(groups(load_campaign(path), "train")) == 1
        stopped = run_cockpit("stop", str(path), "r1", "--reason", "orphan", timeout=60)
        assert stopped.returncode == 0, stopped.stderr
        assert not psutil.pid_exists(trainer) or \
            psutil.Process(trainer).status() == psutil.STATUS_ZOMBIE
        ends = [e for e in journal(path) if e["kind"] in ("stop_done", "stage_finished")]
        assert [e["kind"] for e in ends] == ["stop_done", "stage_finished"]
        assert ends[-1]["outcome"] == "stopped"
    finally:
        kill_groups({pgid})


# ---------------------------------------------------------------- proven signals
# An unrelated process that notes every signal it gets, in the order its handlers run
# (Python runs pending handlers lowest signal number first), and lives on.
NOTING = textwrap.dedent("""
    import pathlib, signal, sys
    log = pathlib.Path(sys.argv[1])
    def note(signum, _frame):
        with log.open("a") as handle:
            handle.write(signal.Signals(signum).name + "\\n")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGWINCH):
        signal.signal(sig, note)
    pathlib.Path(sys.argv[2]).touch()
    while True:
        signal.pause()
""")


def test_stop_refuses_to_signal_a_process_the_journal_cannot_prove_is_ours(
        tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": LONG},
    ])
    log, ready = tmp_path / "signals", tmp_path / "noting"
    sleeper = subprocess.Popen([sys.executable, "-c", NOTING, str(log), str(ready)],
                               start_new_session=True)
    try:
        wait_for(ready.exists, what="the unrelated process's handlers")
        journal_file = tmp_path / ".cockpit" / "journal.jsonl"
        journal_file.parent.mkdir(parents=True, exist_ok=True)
        t = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # in the window
        lines = [  # hand-written: a pid and a group, no create_time, no marker
            {"seq": 1, "t": t, "kind": "stage_started", "stage": "train", "run": "r1",
             "pid": sleeper.pid, "pgid": sleeper.pid},
            {"seq": 2, "t": t, "kind": "run_started", "run": "r1", "stage": "train",
             "pid": sleeper.pid, "pgid": sleeper.pid, "attempt": 1},
        ]
        journal_file.write_text("".join(json.dumps(line) + "\n" for line in lines))
        result = run_cockpit("stop", str(path), "r1", "--reason", "test")
        assert result.returncode == 1, result.stdout + result.stderr
        assert "not signalling" in result.stderr and "create time" in result.stderr
        # A signal the stop had sent is pending or handled before ours (SIGWINCH, a higher
        # number) is handled: once ours is noted, anything the stop sent would be too.
        os.kill(sleeper.pid, signal.SIGWINCH)
        wait_for(lambda: sleeper.poll() is not None
                 or "SIGWINCH" in (log.read_text() if log.exists() else ""),
                 what="the unrelated process to note our probe signal")
        assert sleeper.poll() is None, "the unrelated process was killed"
        assert log.read_text().split() == ["SIGWINCH"], "the unrelated process was signalled"
        assert "stop_requested" not in kinds(path)
    finally:
        sleeper.kill()
        sleeper.wait()
