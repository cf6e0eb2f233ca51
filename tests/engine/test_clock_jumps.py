"""A wall clock that steps (NTP, a VM resumed) with a fake clock, in milliseconds.

The clock here keeps the two readings apart the way a real machine does: ``now()`` is
real time plus a step the test sets, ``monotonic()`` is real time only. The engine must
see each step once (``clock_jump``), keep ages and the stop grace on the monotonic
clock, and hold the rules on ages, the deadline guard and auto-start until the clock has
been steady for the settle period. The real-process versions (a ``sitecustomize``
shifting ``time.time`` under ``cockpit headless``) are in test_clock_jumps_slow.py.
"""

from __future__ import annotations

import math
import signal
from datetime import datetime, timedelta

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from cockpit.engine.clockwatch import JUMP_THRESHOLD_S, SETTLE_S, ClockWatch
from cockpit.journal.log import parse_time
from tests.engine.test_engine_guards import START, FakeClock, FakeSupervisor, journal, make, report
from tests.helpers.campaigns import FINITE, FIXED_START, write_campaign

RESTART = {"id": "restart-usable", "kind": "restart", "max_age": "1h"}


class SteppingClock(FakeClock):
    """Real time moves with ``advance``; the wall clock is real time plus ``step``."""

    def __init__(self, now: datetime = START) -> None:
        super().__init__(now)
        self.step = timedelta(0)

    def now(self) -> datetime:
        return self.t + self.step

    def monotonic(self) -> float:
        return self.t.timestamp()


def ticks(engine, clock: SteppingClock, seconds: int) -> None:
    for _ in range(seconds):
        clock.advance(1)
        engine.tick()


def test_the_watch_tells_a_step_from_time_passing() -> None:
    watch = ClockWatch()
    assert watch.observe(START, 0.0) is None
    # A slow tick: both clocks moved 40 s. A slew: 1 s apart is not a step.
    assert watch.observe(START + timedelta(seconds=40), 40.0) is None
    assert watch.observe(START + timedelta(seconds=42), 41.0) is None
    assert not watch.holding(41.0)
    jump = watch.observe(START + timedelta(days=2, seconds=43), 42.0)
    assert jump is not None and round(jump.seconds) == 2 * 86400
    assert watch.holding(42.0)
    # The time to act on stays steady while holding, and the step is reported once.
    assert watch.now(START + timedelta(days=2, seconds=44), 43.0) == START + timedelta(seconds=44)
    assert watch.observe(START + timedelta(days=2, seconds=44), 43.0) is None
    assert watch.holding(42.0 + SETTLE_S - 0.1) and not watch.holding(42.0 + SETTLE_S)
    assert JUMP_THRESHOLD_S < 10 < SETTLE_S


def test_a_two_day_step_forward_and_back_stops_nothing_and_starts_nothing(tmp_path) -> None:
    clock, sup = SteppingClock(), FakeSupervisor(term_exits=False)
    engine, path = make(tmp_path, [
        {"id": "core", "hours": 2, "resource": "gpu:0", "run": "core", "command": ["core"]},
        {"id": "explore", "hours": 4, "resource": "cpu", "run": "explore",
         "category": "exploratory", "command": ["explore"]},
        {"id": "export", "hours": 1, "resource": "cpu", "command": ["export"],
         "after": ["core", "explore"]},
    ], clock, sup, rules=[RESTART], auto=True,
        extra={"on_deadline": "stop-optional",
               "deadline": {"export_hours": 24, "retrieve_hours": 12}})
    engine.tick()
    assert sup.launched == ["core", "explore"]
    ticks(engine, clock, 3)
    before = journal(path)[-1]["seq"]

    clock.step = timedelta(days=2)  # 2 days ahead: the window "ends" in ~22 h
    ticks(engine, clock, 15)
    assert not [e["kind"] for e in journal(path)[before:]
                if e["kind"] in ("rule_fired", "stop_requested", "stage_claimed")]
    assert sup.signals == [] and sup.launched == ["core", "explore"]
    clock.step = timedelta(0)
    ticks(engine, clock, 5)
    assert engine.tick().warnings  # the hold is shown while it lasts
    ticks(engine, clock, int(SETTLE_S) + 5)  # settled: real time, nothing is due

    events = [e for e in journal(path) if e["seq"] > before]
    jumps = [e for e in events if e["kind"] == "clock_jump"]
    assert [round(e["seconds"] / 86400) for e in jumps] == [2, -2]  # each step once
    assert parse_time(jumps[0]["to"]) - parse_time(jumps[0]["from"]) > timedelta(days=1.9)
    assert not [e for e in events if e["kind"] in ("rule_fired", "stop_requested", "warning")]
    assert sup.signals == [] and sup.launched == ["core", "explore"]
    # The journal never ran 2 days ahead: every stamp is real time.
    assert all(parse_time(e["t"]) <= clock.t for e in events)
    snap = engine.tick()
    assert snap.stage("core").elapsed_s < 120 and not snap.warnings


def test_without_the_hold_the_same_step_would_stop_the_run(tmp_path) -> None:
    """The control: a wall clock that really moved 2 days (the monotonic one too) fires
    the restart rule — so the test above proves the hold, not a rule that never fires."""
    clock, sup = SteppingClock(), FakeSupervisor(term_exits=False)
    engine, path = make(tmp_path, [
        {"id": "core", "hours": 2, "resource": "gpu:0", "run": "core", "command": ["core"]},
    ], clock, sup, rules=[RESTART], auto=True)
    engine.tick()
    clock.advance(2 * 86400)
    engine.tick()
    assert [e["rule"] for e in journal(path) if e["kind"] == "rule_fired"] == ["restart-usable"]


def test_auto_start_waits_for_the_settle_and_a_duration_is_monotonic(tmp_path) -> None:
    clock, sup = SteppingClock(), FakeSupervisor()
    engine, path = make(tmp_path, [
        {"id": "a", "hours": 1, "resource": "cpu", "command": ["a"]},
        {"id": "b", "hours": 1, "resource": "cpu", "command": ["b"], "after": ["a"]},
    ], clock, sup, auto=True)
    engine.tick()
    ticks(engine, clock, 5)
    clock.step = timedelta(minutes=10)  # the step lands while "a" ends
    sup.finish("a")
    clock.advance(1)
    engine.tick()
    finished = [e for e in journal(path) if e["kind"] == "stage_finished"]
    assert finished and finished[0]["elapsed_s"] < 10  # 6 s lived, not 10 min
    assert sup.launched == ["a"]  # b is ready, but the clock just jumped
    ticks(engine, clock, int(SETTLE_S) - 3)
    assert sup.launched == ["a"]
    ticks(engine, clock, 4)
    assert sup.launched == ["a", "b"]
    snap = engine.tick()
    assert snap.stage("a").elapsed_s < 10  # status (and `next`) read the measured time


def test_a_step_back_after_a_stop_request_does_not_delay_the_sigkill(tmp_path) -> None:
    clock, sup = SteppingClock(), FakeSupervisor(term_exits=False)
    engine, path = make(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["train"]},
    ], clock, sup, rules=[FINITE], extra={"settings": {"stop_grace": "10s"}})
    engine.start("train")
    (pid,) = sup.running
    engine.tick()
    report(path, "r1", clock, 1, math.nan)
    clock.advance(1)
    engine.tick()
    assert sup.signals == [(pid, signal.SIGTERM)]
    clock.step = -timedelta(hours=1)  # right after the request
    ticks(engine, clock, 9)
    assert sup.signals == [(pid, signal.SIGTERM)]  # inside the grace
    ticks(engine, clock, 2)
    assert sup.signals == [(pid, signal.SIGTERM), (pid, signal.SIGKILL)]
    engine.tick()
    events = journal(path)
    assert [e["kind"] for e in events if e["kind"] == "clock_jump"] == ["clock_jump"]
    # The step back is recorded, and no stamp goes back within this writer.
    stamps = [parse_time(e["t"]) for e in events]
    assert stamps == sorted(stamps)


def test_a_step_that_stays_is_believed_after_the_settle_but_ages_stay_monotonic(
        tmp_path) -> None:
    clock, sup = SteppingClock(), FakeSupervisor()
    engine, path = make(tmp_path, [
        {"id": "core", "hours": 2, "resource": "gpu:0", "run": "core", "command": ["core"]},
    ], clock, sup, rules=[RESTART], auto=True)
    engine.tick()
    clock.step = timedelta(hours=3)  # a box whose clock was 3 h slow, corrected for good
    ticks(engine, clock, int(SETTLE_S) + 2)
    snap = engine.tick()
    assert snap.taken_at == clock.now()  # the wall clock is believed again
    assert not [e for e in journal(path) if e["kind"] == "rule_fired"]  # the run is ~30 s old


def test_a_clock_that_only_gives_wall_time_is_not_watched(tmp_path) -> None:
    """A bare ``() -> datetime`` (tests, older callers) has no monotonic partner: moving it
    by hours is time passing, not a jump."""
    now = {"t": START}
    sup = FakeSupervisor()
    path = write_campaign(tmp_path, [
        {"id": "core", "hours": 2, "resource": "gpu:0", "run": "core", "command": ["core"]},
    ], rules=[RESTART], start=FIXED_START)
    engine = Engine(load_campaign(path), clock=lambda: now["t"], supervisor=sup)
    engine.start("core")
    engine.tick()
    now["t"] = START + timedelta(hours=2)
    engine.tick()
    assert [e["kind"] for e in journal(path) if e["kind"] in ("clock_jump", "rule_fired")] \
        == ["rule_fired"]


def test_a_verification_claim_holds_while_its_owner_lives_and_its_limit_has_not_passed(
        tmp_path) -> None:
    """The rule the next cockpit applies to a ``verify_started`` it finds (the kill -9
    version with real processes is in test_clock_jumps_slow.py)."""
    import subprocess
    import sys

    import psutil

    clock, sup = SteppingClock(), FakeSupervisor()
    engine, path = make(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["train"]},
    ], clock, sup, extra={"settings": {"verify_timeout": "60s"}})
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = psutil.Process(owner.pid).create_time()
        claim = engine.journal.append("verify_started", now=clock.now(), run="r1", path="x",
                                      attempt=1, owner_pid=owner.pid, owner_start=started,
                                      limit_s=120.0)
        engine.tick()
        assert engine.verification.claim_holds(claim, clock.now())  # alive, inside its limit
        # The same pid with another start time: a reused pid, not the owner.
        reused = dict(claim, owner_start=started - 1000)
        assert not engine.verification.claim_holds(reused, clock.now())
        clock.step = timedelta(days=1)  # a wall-clock step does not age a claim
        assert engine.verification.claim_holds(claim, clock.now())
        clock.step = timedelta(0)
        clock.advance(121)
        assert not engine.verification.claim_holds(claim, clock.now())  # its limit passed
    finally:
        owner.kill()
        owner.wait()
    dead = engine.journal.append("verify_started", now=clock.now(), run="r1", path="y",
                                 attempt=1, owner_pid=owner.pid, owner_start=started,
                                 limit_s=120.0)
    engine.tick()
    assert not engine.verification.claim_holds(dead, clock.now())  # its owner is gone
