"""The ``underfed`` rule (issue 27): a run's GPUs under a utilization for a duration
(input-bound or stuck), warn by default.

Pure cases first (the streak and the decision, figures by hand), then the file format,
then the engine on the scripted fake NVML (the hardware edge) with a fake clock: a GPU
held at 5 % for ``for`` fires, one at 90 % never does, an unknown utilization leaves the
rule blind (never ok), a busy second breaks the streak, the streak survives a restart
through the flight recorder; then real processes: warn keeps the run running, stop
stops it.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from cockpit.campaign import load_campaign
from cockpit.campaign.model import StopRule
from cockpit.engine import Engine
from cockpit.engine.build_runs import NO_GPU_SAMPLE, underfed_view
from cockpit.engine.underfed import recorded_streak
from cockpit.headless.render_text import status_text
from cockpit.headless.status_line import status_line
from cockpit.headless.status_log import compact_json
from cockpit.runs.blind import BLIND, gpus_blind
from cockpit.runs.rules import STREAK_GAP_S, Streak, check_underfed, extend_streak, rules_hash
from cockpit.telemetry import GpuReading, GpuSampler
from cockpit.telemetry.simulated.nvml import FakeGpu, FakeNvml
from cockpit.tui.panels import rules_text
from tests.engine.test_engine_guards import START, FakeClock, FakeSupervisor, journal
from tests.helpers.campaigns import FINITE, FIXED_START, write_campaign
from tests.helpers.process import run_cockpit, wait_for

RULE = StopRule("starved", "underfed", action="warn", util_below=10.0, for_s=180.0)


# ---------------------------------------------------------------- the pure rule
def test_the_streak_by_hand() -> None:
    # Samples at 0, 1, 2 s with both GPUs under 10 %: a streak of 2 s, peak 7 %.
    streak = None
    for at, utils in ((0.0, (5.0, 3.0)), (1.0, (7.0, 2.0)), (2.0, (4.0, 0.0))):
        streak = extend_streak(streak, utils, 10.0, at)
    assert streak == Streak(0.0, 2.0, 7.0) and streak.below_s == 2.0
    # One GPU at the limit breaks it (under, not at); so does an unknown reading.
    assert extend_streak(streak, (5.0, 10.0), 10.0, 3.0) is None
    assert extend_streak(streak, (5.0, None), 10.0, 3.0) is None
    assert extend_streak(streak, (), 10.0, 3.0) is None  # no GPU read: nothing known
    # A sample after more than STREAK_GAP_S of nothing seen starts it again.
    assert extend_streak(streak, (1.0, 1.0), 10.0, 2.0 + STREAK_GAP_S + 1) == Streak(
        63.0, 63.0, 1.0)
    assert extend_streak(streak, (1.0, 1.0), 10.0, 2.0 + STREAK_GAP_S) == Streak(
        0.0, 62.0, 7.0)
    assert extend_streak(streak, (1.0, 1.0), 10.0, 1.0) == Streak(1.0, 1.0, 1.0)  # backwards


def test_check_underfed_fires_at_for_and_says_why() -> None:
    assert check_underfed(RULE, Streak(0.0, 179.0, 6.0), gpus=(0,), step=5) is None
    assert check_underfed(RULE, None, gpus=(0,), step=5) is None  # no streak: never
    firing = check_underfed(RULE, Streak(0.0, 180.0, 6.0), gpus=(0, 1), step=5)
    assert firing is not None
    assert firing.reason == ("underfed: GPU 0, 1 under 10% utilization for 3m (at most 6%; "
                             "limit 3m): input-bound or stuck")
    assert (firing.rule, firing.value, firing.step, firing.action) == ("starved", 180.0, 5,
                                                                       "warn")
    assert firing.threshold == {"util_below": 10.0, "for_s": 180.0}
    # Another kind never fires here, whatever the streak.
    other = StopRule("hung", "stalled", action="warn")
    assert check_underfed(other, Streak(0.0, 1e6, 0.0), gpus=(0,), step=1) is None


def test_blind_reasons_name_the_gpu_and_the_cause() -> None:
    fake = FakeNvml([FakeGpu(util=5), FakeGpu(util=5), FakeGpu(util=5)])
    fake.gpus[1].unsupported = {"nvmlDeviceGetUtilizationRates"}
    sampler = GpuSampler(nvml=fake.module())
    sampler.start()
    fake.lose(2)
    reading = sampler.sample()
    sampler.close()
    assert gpus_blind((0,), reading) is None
    assert gpus_blind((0, 1), reading) == "GPU 1 utilization not read: utilization unknown"
    assert gpus_blind((2, 7), reading) == "GPU 2 lost; GPU 7 not seen: utilization unknown"
    nothing = GpuReading("unavailable", "NVML not found", (), (), (), None)
    assert gpus_blind((0,), nothing) == "no GPU telemetry (NVML not found): utilization unknown"
    assert gpus_blind((), reading) is not None  # nothing to watch is not ok either


def test_a_recorded_streak_ends_at_the_recording_and_has_no_long_gap() -> None:
    # Two GPUs recorded each second from 100 to 110; GPU 1 busy at 103.
    gpu0 = {float(t): 3.0 for t in range(100, 111)}
    gpu1 = {float(t): (50.0 if t == 103 else 4.0) for t in range(100, 111)}
    assert recorded_streak([gpu0, gpu1], 10.0, 112.0) == Streak(104.0, 110.0, 4.0)
    # The recording ends more than STREAK_GAP_S before now: nothing known since.
    assert recorded_streak([gpu0, gpu1], 10.0, 110.0 + STREAK_GAP_S + 1) is None
    # A hole longer than STREAK_GAP_S inside it: the streak begins after the hole.
    holed = {**{float(t): 3.0 for t in range(0, 5)}, **gpu0}
    assert recorded_streak([holed], 10.0, 111.0) == Streak(100.0, 110.0, 3.0)
    # A second only one GPU has is no second where every GPU was seen.
    assert recorded_streak([gpu0, {**gpu1, 111.0: 1.0}], 10.0, 112.0) == Streak(
        104.0, 110.0, 4.0)


# ---------------------------------------------------------------- the file format
TRAIN = [{"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["train"]}]


def test_an_underfed_rule_is_read_with_warn_by_default(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, TRAIN, rules=[
        FINITE, {"id": "starved", "kind": "underfed", "util_below": 10, "for": "20m"},
        {"id": "stuck", "kind": "underfed", "util_below": 2.5, "for": "1h",
         "action": "stop"}])
    rules = {r.id: r for r in load_campaign(path).stop_rules}
    assert (rules["starved"].util_below, rules["starved"].for_s, rules["starved"].action) == (
        10.0, 1200.0, "warn")
    assert (rules["stuck"].util_below, rules["stuck"].for_s, rules["stuck"].action) == (
        2.5, 3600.0, "stop")
    assert rules["finite-loss"].action == "stop" and rules["finite-loss"].util_below is None
    # D14's hash of the other kinds is what it was before underfed's fields existed.
    assert rules_hash([rules["finite-loss"]]) == rules_hash([StopRule(
        "finite-loss", "non_finite", "loss")])
    assert rules_hash([rules["starved"]]) != rules_hash([StopRule(
        "starved", "underfed", action="warn", util_below=20.0, for_s=1200.0)])


def test_bad_underfed_values_are_located_errors_exit_2(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, TRAIN, rules=[
        {"id": "a", "kind": "underfed", "util_below": 0, "for": "5m"},
        {"id": "b", "kind": "underfed", "util_below": "low", "for": 0, "action": "pause"},
        {"id": "c", "kind": "underfed", "util_below": 10},
        {"id": "d", "kind": "underfed", "util_below": 10, "for": "5m", "metric": "loss"},
        {"id": "e", "kind": "threshold", "metric": "loss", "max": 9, "util_below": 10}])
    result = run_cockpit("check", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    err = result.stderr
    assert "util_below must be a positive finite number, not 0" in err
    assert "util_below must be a number, not 'low'" in err
    assert "for must be a positive finite number" in err
    assert "action must be stop or warn" in err
    assert "an underfed rule needs for" in err
    assert "watches its run's GPU utilization, not a metric" in err
    assert "util_below belongs to an underfed rule, not a threshold rule" in err
    lines = err.strip().splitlines()
    assert len(lines) == 7 and all(line.startswith(f"{path}:") for line in lines)


# ---------------------------------------------------------------- the engine, fake clock
def _engine(tmp_path: Path, rule: dict[str, Any], util: int, **kwargs: Any
            ) -> tuple[Engine, FakeNvml, FakeClock, FakeSupervisor, Path]:
    path = write_campaign(tmp_path, TRAIN, rules=[rule], start=FIXED_START)
    fake = FakeNvml([FakeGpu(util=util)])
    clock, sup = kwargs.pop("clock", None) or FakeClock(), kwargs.pop("sup", None) \
        or FakeSupervisor()
    engine = Engine(load_campaign(path), clock=clock, supervisor=sup,
                    gpu_sampler=GpuSampler(nvml=fake.module(), clock=clock.monotonic),
                    **kwargs)
    return engine, fake, clock, sup, path


def _fired(path: Path) -> list[dict[str, Any]]:
    return [e for e in journal(path) if e["kind"] == "rule_fired"]


def _view(snap: Any) -> Any:
    (view,) = [r for r in snap.rules if r.rule == "starved"]
    return view


STARVED = {"id": "starved", "kind": "underfed", "util_below": 10, "for": "3s"}


def test_a_gpu_held_at_5_percent_for_the_duration_fires_and_warns(tmp_path: Path) -> None:
    engine, _fake, clock, sup, path = _engine(tmp_path, STARVED, 5)
    engine.start("train")
    snap = engine.tick()  # the first sample (t = 0): no look yet when the guards ran
    assert (_view(snap).state, _view(snap).reason) == ("ok", "under 10% for 0s (fires at 3s)")
    for _ in range(3):  # samples at 1, 2, 3 s; the guards see 0, 1, 2 s of streak
        clock.advance(1)
        snap = engine.tick()
    assert _fired(path) == []
    clock.advance(1)
    snap = engine.tick()  # the guards see the sample at 3 s: 3 s under 10 %
    (fired,) = _fired(path)
    assert (fired["rule"], fired["action"], fired["value"]) == ("starved", "warn", 3.0)
    assert fired["reason"] == ("underfed: GPU 0 under 10% utilization for 3s (at most 5%; "
                               "limit 3s): input-bound or stuck")
    assert sup.signals == [] and snap.run("r1").state == "running"  # warn: it goes on
    assert (_view(snap).state, _view(snap).reason) == ("warn", fired["reason"])
    # Both faces say so: the headless text and the TUI's rules panel, and --line.
    assert f"starved on r1: {fired['reason']}" in status_text(snap)
    assert f"warn r1: {fired['reason']}" in rules_text(snap, None, 120).plain
    assert "rules warn starved@r1" in status_line(compact_json(snap))
    for _ in range(5):  # once per attempt
        clock.advance(1)
        engine.tick()
    assert len(_fired(path)) == 1
    engine.close()


def test_a_gpu_at_90_percent_never_fires(tmp_path: Path) -> None:
    engine, _fake, clock, _sup, path = _engine(tmp_path, STARVED, 90)
    engine.start("train")
    for _ in range(30):
        snap = engine.tick()
        clock.advance(1)
    assert _fired(path) == []
    view = _view(snap)
    assert (view.state, view.reason, view.value) == ("ok", "GPU 0 at 90%", 90.0)
    assert "✓ r1 (GPU 0 at 90%)" in rules_text(snap, None, 120).plain
    engine.close()


def test_one_busy_sample_breaks_the_streak(tmp_path: Path) -> None:
    engine, fake, clock, _sup, path = _engine(tmp_path, STARVED, 5)
    engine.start("train")
    for second in range(8):  # 5 % at 0, 1, 2; 60 % at 3; 5 % from 4: fires at 4 + 3 + 1
        fake.gpus[0].util = 60 if second == 3 else 5
        engine.tick()
        assert _fired(path) == [], second
        clock.advance(1)
    engine.tick()  # t = 8: the guards see the streak 4..7 (3 s)
    assert len(_fired(path)) == 1
    engine.close()


def test_every_gpu_of_the_run_must_be_underfed_and_only_its_own(tmp_path: Path) -> None:
    # A B200 package holds two GPUs (D10); `train` holds both (resource: gpu).
    path = write_campaign(tmp_path, TRAIN, rules=[STARVED], offer="b200-3d",
                          start=FIXED_START)
    fake = FakeNvml([FakeGpu(util=5), FakeGpu(util=90)])
    clock = FakeClock()
    engine = Engine(load_campaign(path), clock=clock, supervisor=FakeSupervisor(),
                    gpu_sampler=GpuSampler(nvml=fake.module(), clock=clock.monotonic))
    engine.start("train")
    for _ in range(10):  # GPU 0 starved, GPU 1 busy: the run is fed
        engine.tick()
        clock.advance(1)
    assert _fired(path) == []
    fake.gpus[1].util = 3  # now both are under 10 %: fires 3 s (and a tick) later
    for _ in range(4):
        engine.tick()
        clock.advance(1)
    assert _fired(path) == []
    engine.tick()
    (fired,) = _fired(path)
    assert fired["run"] == "r1" and fired["reason"].startswith("underfed: GPU 0, 1 under 10%")
    engine.close()


def test_a_run_on_one_gpu_is_judged_on_that_gpu_only(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [{**TRAIN[0], "resource": "gpu:1"}], rules=[STARVED],
                          offer="b200-3d", start=FIXED_START)
    fake = FakeNvml([FakeGpu(util=95), FakeGpu(util=2)])  # GPU 0 busy with someone else
    clock = FakeClock()
    engine = Engine(load_campaign(path), clock=clock, supervisor=FakeSupervisor(),
                    gpu_sampler=GpuSampler(nvml=fake.module(), clock=clock.monotonic))
    engine.start("train")
    for _ in range(5):
        engine.tick()
        clock.advance(1)
    (fired,) = _fired(path)
    assert fired["reason"].startswith("underfed: GPU 1 under 10% utilization for 3s")
    engine.close()


def test_an_unknown_utilization_is_blind_never_ok_and_never_fires(tmp_path: Path) -> None:
    engine, fake, clock, _sup, path = _engine(tmp_path, STARVED, 5)
    fake.gpus[0].unsupported = {"nvmlDeviceGetUtilizationRates"}
    engine.start("train")
    for _ in range(14):  # 140 s: past the blind grace (120 s)
        snap = engine.tick()
        clock.advance(10)
    snap = engine.tick()
    assert _fired(path) == []
    view = _view(snap)
    assert (view.state, view.reason) == (BLIND, "GPU 0 utilization not read: utilization "
                                                "unknown")
    assert "blind" in rules_text(snap, None, 120).plain and "✓" not in rules_text(
        snap, None, 120).plain
    assert "starved on r1: ◌ blind: GPU 0 utilization not read" in status_text(snap)
    blind = [e for e in journal(path) if e["kind"] == "rule_blind"]
    assert [(e["rule"], e["reason"]) for e in blind] == [
        ("starved", "GPU 0 utilization not read: utilization unknown")]
    engine.close()


def test_no_gpu_telemetry_at_all_is_blind(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, TRAIN, rules=[STARVED], start=FIXED_START)
    clock = FakeClock()
    engine = Engine(load_campaign(path), clock=clock, supervisor=FakeSupervisor())
    engine.start("train")
    for _ in range(5):
        snap = engine.tick()
        clock.advance(1)
    view = _view(snap)
    assert (view.state, view.reason) == (BLIND, "no GPU telemetry (not sampled): utilization "
                                                "unknown")
    assert _fired(path) == []
    engine.close()


def test_a_running_run_with_no_gpu_sample_yet_waits_not_ok(tmp_path: Path) -> None:
    engine, _fake, clock, _sup, path = _engine(tmp_path, STARVED, 5)
    engine.start("train")
    state = engine.state()
    view = underfed_view(load_campaign(path).stop_rules[0], state.runs["r1"], None)
    assert (view.state, view.reason) == ("waiting", NO_GPU_SAMPLE)
    engine.close()


def test_the_streak_survives_a_restart_through_the_flight_recorder(tmp_path: Path) -> None:
    rule = {**STARVED, "for": "30s"}
    engine, _fake, clock, sup, path = _engine(tmp_path, rule, 5)
    engine.start("train")
    for _ in range(11):  # samples at 0..10 s, recorded
        engine.tick()
        clock.advance(1)
    engine.close()  # the recorder's last batch written
    clock.advance(1)  # t = 12: a new cockpit, the same run still running
    again, _fake2, _, _, _ = _engine(tmp_path, rule, 5, clock=clock, sup=sup)
    while clock.t < START + timedelta(seconds=31):
        again.tick()
        assert _fired(path) == [], clock.t
        clock.advance(1)
    again.tick()  # t = 31: the guards see the sample at 30 s, a streak from 0 s
    (fired,) = _fired(path)
    assert fired["value"] == 30.0
    again.close()


def test_a_restart_after_a_long_gap_starts_the_streak_again(tmp_path: Path) -> None:
    rule = {**STARVED, "for": "30s"}
    engine, _fake, clock, sup, path = _engine(tmp_path, rule, 5)
    engine.start("train")
    for _ in range(25):
        engine.tick()
        clock.advance(1)
    engine.close()
    clock.advance(STREAK_GAP_S + 10)  # nobody watched for over a minute
    again, _fake2, _, _, _ = _engine(tmp_path, rule, 5, clock=clock, sup=sup)
    for _ in range(31):
        again.tick()
        clock.advance(1)
    assert _fired(path) == []
    again.tick()
    assert len(_fired(path)) == 1
    again.close()


# ---------------------------------------------------------------- real processes
SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def _real(tmp_path: Path, rule: dict[str, Any]) -> tuple[Engine, FakeNvml, Path]:
    path = write_campaign(tmp_path, [{**TRAIN[0], "command": SLEEP}], rules=[rule])
    fake = FakeNvml([FakeGpu(util=5)])
    engine = Engine(load_campaign(path), gpu_sampler=GpuSampler(nvml=fake.module()),
                    actor="test")
    return engine, fake, path


def _tick_until(engine: Engine, what: str, predicate: Any, timeout: float = 30.0) -> Any:
    def once() -> Any:
        snap = engine.tick()
        return snap if predicate(snap) else None
    return wait_for(once, timeout, what)


def test_a_real_run_underfed_is_warned_and_keeps_running(tmp_path: Path) -> None:
    engine, _fake, path = _real(tmp_path, {**STARVED, "for": "2s"})
    engine.start("train")
    states: list[str] = []
    try:
        def warned(snap: Any) -> bool:
            states.append(_view(snap).state)
            return states[-1] == "warn"
        snap = _tick_until(engine, "the underfed warning", warned)
        # Not at once: earlier ticks saw the streak under its 2 s, and the engine
        # measured at least 2 s of it when it fired.
        assert len(states) > 1 and "warn" not in states[:-1], states
        (fired,) = _fired(path)
        assert fired["action"] == "warn" and fired["value"] >= 2.0
        # A warn asks for no stop (a stop is journaled in the tick that fires), so the
        # process lives on and later ticks still see it running.
        assert [e for e in journal(path) if e["kind"] == "stop_requested"] == []
        pid = snap.run("r1").pid
        assert engine.supervisor.alive(pid, None)
        for _ in range(3):
            snap = engine.tick()
        assert snap.run("r1").state == "running" and snap.run("r1").stop_rule is None
        assert engine.supervisor.alive(pid, None) and len(_fired(path)) == 1
    finally:
        engine.stop("r1", "test over")
        engine.wait_stopped("r1", 30)
        engine.close()


def test_a_stop_underfed_rule_stops_the_real_run(tmp_path: Path) -> None:
    engine, _fake, _path = _real(tmp_path, {**STARVED, "for": "2s", "action": "stop"})
    engine.start("train")
    try:
        snap = _tick_until(engine, "the underfed run to be stopped",
                           lambda s: s.run("r1").state == "stopped")
        assert snap.run("r1").stop_rule == "starved"
        assert snap.run("r1").stop_reason.startswith("underfed: GPU 0 under 10% utilization")
    finally:
        engine.close()


def test_a_run_holding_no_gpu_is_skipped_unless_the_rule_names_it(tmp_path: Path) -> None:
    cpu = [{**TRAIN[0], "resource": "cpu"}]
    path = write_campaign(tmp_path, cpu, rules=[
        STARVED, {**STARVED, "id": "named", "runs": ["r1"]}], start=FIXED_START)
    clock = FakeClock()
    engine = Engine(load_campaign(path), clock=clock, supervisor=FakeSupervisor(),
                    gpu_sampler=GpuSampler(nvml=FakeNvml([FakeGpu(util=0)]).module(),
                                           clock=clock.monotonic))
    engine.start("train")
    for _ in range(5):
        snap = engine.tick()
        clock.advance(1)
    assert [r.rule for r in snap.rules if r.kind == "underfed"] == ["named"]
    (named,) = [r for r in snap.rules if r.rule == "named"]
    assert (named.state, named.reason) == (BLIND, "its stage holds no GPU (resource: gpu): "
                                                  "no utilization to watch")
    assert _fired(path) == []
    engine.close()
