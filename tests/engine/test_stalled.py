"""Stalled runs: a run whose process lives but whose metrics stopped (issue 22).

The rule is measured on two figures: the run's median step interval from its points'
own times, and the seconds since its step last moved on the monotonic clock. Pure cases
first (figures by hand), then the file format, then the engine with a stepping fake
clock (a wall-clock step never stalls a run) and with real processes (a script that
stops reporting and sleeps is stalled on every face; one that keeps writing never is).
"""

from __future__ import annotations

import sys
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cockpit.campaign import load_campaign
from cockpit.campaign.model import StopRule
from cockpit.engine import Engine
from cockpit.engine.build import NO_INTERVAL
from cockpit.headless.render_text import status_text
from cockpit.headless.status_line import status_line
from cockpit.headless.status_log import compact_json
from cockpit.runs.rules import Point, check_stalled, rules_hash, step_interval
from cockpit.tui.panels import rules_text, run_rows
from cockpit.tui.panels.runs import RUN_COLUMNS
from tests.engine.test_clock_jumps import SteppingClock
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor, journal, make, report
from tests.helpers.campaigns import FINITE, write_campaign
from tests.helpers.process import run_cockpit, wait_for


# ---------------------------------------------------------------- the pure rule
def test_the_median_interval_and_the_limit_by_hand() -> None:
    # Steps at t = 0, 40, 80, 130, 170: gaps 40, 40, 50, 40 -> sorted 40 40 40 50, the
    # median (upper, index 2) is 40 s. An eval line repeating step 3 is no new step.
    points = [Point(1, {"loss": 1.0}, 1000.0), Point(2, {"loss": 0.9}, 1040.0),
              Point(3, {"loss": 0.8}, 1080.0), Point(3, {"val": 0.5}, 1100.0),
              Point(4, {"loss": 0.7}, 1130.0), Point(5, {"loss": 0.6}, 1170.0)]
    assert step_interval(points) == 40.0
    # Two stepped points are not enough: no interval yet, never stalled.
    assert step_interval(points[:2]) is None
    # Points before the attempt's start are another attempt's.
    # From 1075 on: 1080, 1130, 1170 -> gaps 50, 40 -> sorted 40 50, the upper median 50.
    assert step_interval(points, since=1075.0) == 50.0
    # A wall-clock step back makes a negative gap: no interval, the median stays honest.
    stepped = [Point(1, {}, 100.0), Point(2, {}, 110.0), Point(3, {}, 50.0),
               Point(4, {}, 60.0), Point(5, {}, 70.0)]
    assert step_interval(stepped) == 10.0  # gaps 10, -60 (dropped), 10, 10

    rule = StopRule("stalled", "stalled", action="warn")  # defaults: factor 10, floor 5m
    # 10 x 40 s = 400 s = 6m 40s, above the 300 s floor: the limit is 400 s.
    assert check_stalled(rule, interval_s=40.0, silent_s=400.0, step=5) is None
    firing = check_stalled(rule, interval_s=40.0, silent_s=401.0, step=5)
    assert firing is not None
    assert firing.reason == ("stalled: no new step for 6m 41s (10× its median 40s interval, "
                             "floor 5m)")
    assert (firing.value, firing.threshold, firing.step, firing.action) == (401.0, 400.0, 5,
                                                                            "warn")
    # A fast run (median 2 s): 10 x 2 = 20 s, but the floor says 300 s.
    assert check_stalled(rule, interval_s=2.0, silent_s=299.0, step=9) is None
    assert check_stalled(rule, interval_s=2.0, silent_s=301.0, step=9) is not None
    # No interval yet: never stalled, however long the silence.
    assert check_stalled(rule, interval_s=None, silent_s=1e6, step=1) is None


# ---------------------------------------------------------------- the file format
TRAIN = [{"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["train"]}]


def test_a_stalled_rule_is_read_with_its_factor_floor_and_warn_by_default(tmp_path) -> None:
    path = write_campaign(tmp_path, TRAIN, rules=[
        FINITE, {"id": "hung", "kind": "stalled", "factor": 4, "floor": "90s"}])
    rules = {r.id: r for r in load_campaign(path).stop_rules}
    assert set(rules) == {"finite-loss", "hung"}  # declared: no implicit one beside it
    assert (rules["hung"].factor, rules["hung"].floor_s, rules["hung"].action) == (4.0, 90.0,
                                                                                   "warn")
    assert rules["finite-loss"].action == "stop"  # other kinds keep their default


def test_bad_stalled_values_are_located_errors_exit_2(tmp_path) -> None:
    path = write_campaign(tmp_path, TRAIN, rules=[
        {"id": "hung", "kind": "stalled", "factor": 0.5, "floor": "soon", "action": "pause"},
        {"id": "nan", "kind": "non_finite", "metric": "loss", "floor": "5m"}])
    result = run_cockpit("check", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    err = result.stderr
    assert "factor must be above 1" in err and "floor:" in err
    assert "action must be stop or warn" in err
    assert "floor belongs to a stalled rule, not a non_finite rule" in err
    assert f"{path}:" in err  # located: FILE:LINE:COL


def test_the_default_rule_watches_train_runs_and_check_shows_it(tmp_path) -> None:
    path = write_campaign(tmp_path, [
        *TRAIN, {"id": "infer", "hours": 1, "resource": "gpu", "run": "p1", "after": ["train"],
                 "command": ["infer"]}], runs={"p1": {"kind": "inference"}}, rules=[FINITE])
    campaign = load_campaign(path)
    (implicit,) = [r for r in campaign.stop_rules if r.implicit]
    assert (implicit.id, implicit.kind, implicit.action, implicit.runs) == (
        "stalled", "stalled", "warn", ("r1",))  # the inference run is not watched
    assert (implicit.factor, implicit.floor_s) == (10.0, 300.0)
    # D14's hash is the declared rules' only: the same as a file with just finite-loss.
    assert rules_hash(campaign.stop_rules) == rules_hash([StopRule(
        "finite-loss", "non_finite", "loss")])
    result = run_cockpit("check", str(path))
    assert result.returncode == 0 and result.stdout.strip() == "ok"
    assert ("note: stop rule 'stalled' (the default, not in the file): warn when a train run "
            "(r1) reports no new step for 10× its median step interval, and at least 5m"
            in result.stderr)


# ---------------------------------------------------------------- a stepping wall clock
def test_a_wall_clock_step_never_stalls_a_run_the_monotonic_silence_does(tmp_path) -> None:
    clock, sup = SteppingClock(), FakeSupervisor()
    engine, path = make(tmp_path, TRAIN, clock, sup, rules=[
        {"id": "hung", "kind": "stalled", "factor": 10, "floor": "1m"}])
    engine.start("train")
    for step in range(1, 5):  # steps every 10 s: median 10 s, limit max(10 x 10, 60) = 100 s
        report(path, "r1", clock, step, 1.0 / step)
        clock.advance(10)
        engine.tick()
    clock.step = timedelta(hours=2)  # the wall clock jumps 2 h ahead
    engine.tick()
    report(path, "r1", clock, 5, 0.2)  # stamped 2 h later: one 2 h gap, median still 10 s
    clock.advance(10)
    engine.tick()
    clock.step += timedelta(hours=5)  # and again, with no new step
    clock.advance(90)  # 90 s of real silence since step 5: under the 100 s limit
    engine.tick()
    assert [e for e in journal(path) if e["kind"] == "rule_fired"] == []
    clock.advance(11)  # 101 s since step 5 was seen, on the monotonic clock
    engine.tick()
    (fired,) = [e for e in journal(path) if e["kind"] == "rule_fired"]
    assert (fired["rule"], fired["step"], fired["action"]) == ("hung", 5, "warn")
    assert fired["reason"] == ("stalled: no new step for 1m 41s (10× its median 10s "
                               "interval, floor 1m)")
    assert sup.signals == []  # warn: the run goes on


# ---------------------------------------------------------------- real processes
SLEEPER = textwrap.dedent("""
    import sys, time
    from cockpit import report
    points, every, then = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    for step in range(1, points + 1):
        report.log(step, loss=1.0 / step)
        time.sleep(every)
    time.sleep(then)  # alive, reporting nothing
""")


def _campaign(tmp_path: Path, points: int, every: float, then: float,
              rule: dict[str, Any]) -> Path:
    path = write_campaign(tmp_path, [{
        "id": "train", "hours": 1, "resource": "gpu", "run": "r1",
        "command": [sys.executable, "sleeper.py", str(points), str(every), str(then)]}],
        rules=[rule])
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    return path


def _tick_until(engine: Engine, what: str, predicate: Any, timeout: float = 40.0) -> Any:
    def once() -> Any:
        snap = engine.tick()
        return snap if predicate(snap) else None
    return wait_for(once, timeout, what)


def test_a_run_that_stops_reporting_is_stalled_on_every_face(tmp_path) -> None:
    # 5 points 0.1 s apart, then 60 s asleep. Median ~0.1 s: 3 x 0.1 = 0.3 s is under the
    # 2 s floor, so the limit is the floor: stalled 2 s after step 5 was seen.
    path = _campaign(tmp_path, 5, 0.1, 60, {"id": "hung", "kind": "stalled", "factor": 3,
                                            "floor": "2s"})
    engine = Engine(load_campaign(path), actor="test")
    engine.start("train")
    seen: list[str] = []

    def stalled(snap: Any) -> bool:
        seen.extend(e.text for e in snap.new_events)  # what headless prints, line by line
        return snap.run("r1").stalled is not None
    snap = _tick_until(engine, "the sleeping run to be stalled", stalled)
    try:
        (fired,) = [e for e in journal(path) if e["kind"] == "rule_fired"]
        assert (fired["rule"], fired["step"], fired["action"], fired["threshold"]) == (
            "hung", 5, "warn", 2.0)
        assert fired["value"] >= 2.0  # the silence past the 2 s limit, to 0.1 s
        assert fired["reason"].startswith("stalled: no new step for ")
        assert fired["reason"].endswith("interval, floor 2s)")
        assert snap.run("r1").state == "running"  # warn: the process lives on
        # Every face says stalled: the headless line, status, the rules panel, the run row.
        assert any(line.startswith("rule hung fired on run r1: stalled: no new step")
                   for line in seen)
        assert "STALLED (stalled: no new step for" in status_text(snap)
        panel = rules_text(snap, None, 100).plain
        assert "hung  stalled · warn" in panel and "warn r1: stalled: no new step" in panel
        assert "rules warn hung@r1" in status_line(compact_json(snap))  # status --line
        (row,) = [cells for run_id, cells in run_rows(snap) if run_id == "r1"]
        metrics = [key for key, _title in RUN_COLUMNS].index("metrics")
        assert "stalled" in str(row[metrics])
        assert [r.state for r in snap.rules if r.rule == "hung"] == ["warn"]
        # Fired once per attempt: more ticks add nothing.
        engine.tick()
        assert len([e for e in journal(path) if e["kind"] == "rule_fired"]) == 1
    finally:
        engine.stop("r1", "test over")
        engine.wait_stopped("r1", 30)


def test_a_stop_stalled_rule_stops_the_sleeping_run(tmp_path) -> None:
    path = _campaign(tmp_path, 5, 0.1, 60, {"id": "hung", "kind": "stalled", "factor": 3,
                                            "floor": "2s", "action": "stop"})
    engine = Engine(load_campaign(path), actor="test")
    engine.start("train")
    snap = _tick_until(engine, "the stalled run to be stopped",
                       lambda s: s.run("r1").state == "stopped")
    assert snap.run("r1").stop_rule == "hung"
    assert snap.run("r1").stop_reason.startswith("stalled: no new step for ")


@pytest.mark.slow  # a real run reporting for seconds
def test_a_run_that_keeps_reporting_is_never_stalled(tmp_path) -> None:
    # 50 points 0.1 s apart (5 s of work, then it exits): the silence never nears the
    # 2 s floor, so the rule holds to the end.
    path = _campaign(tmp_path, 50, 0.1, 0, {"id": "hung", "kind": "stalled", "factor": 3,
                                            "floor": "2s", "action": "stop"})
    engine = Engine(load_campaign(path), actor="test")
    engine.start("train")
    snap = _tick_until(engine, "the run to end", lambda s: s.run("r1").state != "running")
    assert snap.run("r1").state == "succeeded" and snap.run("r1").step == 50
    assert [e for e in journal(path) if e["kind"] == "rule_fired"] == []
    (view,) = [r for r in snap.rules if r.rule == "hung"]
    assert view.state == "ok"


def test_no_interval_yet_is_said_and_never_stalled(tmp_path) -> None:
    # Two points, then silence: no median (three stepped points needed), never stalled.
    # The silence is the engine's monotonic clock: a fake one passes it at once.
    clock, sup = FakeClock(), FakeSupervisor()
    engine, path = make(tmp_path, TRAIN, clock, sup, rules=[
        {"id": "hung", "kind": "stalled", "factor": 2, "floor": "1s"}])
    engine.start("train")
    for step in (1, 2):
        report(path, "r1", clock, step, 1.0 / step)
        clock.advance(0.05)
    snap = engine.tick()
    assert snap.run("r1").step == 2
    for _ in range(25):  # 2.5 s past step 2: past the 1 s floor, with ticks
        clock.advance(0.1)
        snap = engine.tick()
    assert snap.run("r1").state == "running"
    assert [e for e in journal(path) if e["kind"] == "rule_fired"] == []
    (view,) = [r for r in snap.rules if r.rule == "hung"]
    # a running run with two steps: the rule cannot tell a stall yet, so it waits
    assert (view.state, view.reason) == ("waiting", NO_INTERVAL)
    assert f"· r1: {NO_INTERVAL}" in rules_text(snap, None, 100).plain
    assert sup.signals == []
