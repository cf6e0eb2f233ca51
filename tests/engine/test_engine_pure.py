"""Pure tests of fold, rules and forecast with an injected clock: days in milliseconds."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cockpit.campaign import load_campaign
from cockpit.campaign.model import StopRule
from cockpit.journal.fold import DONE, DROPPED, FAILED, RUNNING, STOPPED, SUCCEEDED, fold
from cockpit.journal.log import format_time
from cockpit.planning.forecast import forecast
from cockpit.runs.rules import Point, check_points, check_restart, rules_hash
from tests.helpers.campaigns import FIXED_START, write_campaign

T0 = datetime(2026, 12, 2, 8, tzinfo=timezone.utc)  # FIXED_START, the window start


def ev(seq: int, hours: float, kind: str, **fields):
    return {"seq": seq, "t": format_time(T0 + timedelta(hours=hours)), "kind": kind, **fields}


@pytest.fixture
def campaign(tmp_path: Path):
    stages = [
        {"id": "pilot", "hours": 2, "resource": "gpu", "decision_point": True, "run": "pilot",
         "command": ["true"]},
        {"id": "control", "hours": 10, "resource": "gpu", "after": ["pilot"], "run": "control",
         "command": ["true"]},
        {"id": "variant", "hours": 10, "resource": "gpu", "after": ["control"],
         "category": "exploratory", "run": "variant", "command": ["true"]},
        {"id": "write-up", "hours": 4, "resource": "human", "after": ["variant"]},
    ]
    return load_campaign(write_campaign(tmp_path, stages, start=FIXED_START))


def test_fold_over_three_days_of_events(campaign):
    events = [
        ev(1, 0, "plan_recorded", sha256=campaign.sha256),
        ev(2, 0, "stage_started", stage="pilot", pid=10, run="pilot"),
        ev(3, 0, "run_started", run="pilot", stage="pilot", attempt=2, params_hash="a"),
        ev(4, 4, "run_exited", run="pilot", stage="pilot", code=0, attempt=2),
        ev(5, 4, "stage_finished", stage="pilot", outcome=DONE, code=0),
        ev(6, 5, "decision", stage="pilot", outcome="limit", drops=["variant"], note="slow"),
        ev(7, 5, "stage_started", stage="control", pid=11, run="control"),
        ev(8, 5, "run_started", run="control", stage="control", attempt=7, params_hash="b"),
        ev(9, 40, "rule_fired", run="control", rule="finite-loss", reason="nan", attempt=7,
           action="stop"),
        ev(10, 40, "stop_requested", run="control", rule="finite-loss", reason="nan", attempt=7),
        ev(11, 40.01, "run_exited", run="control", code=-15, attempt=7),
        ev(12, 40.01, "stop_done", run="control", attempt=7),
        ev(13, 41, "cost", label="egress", amount="3.10", currency="USD"),
        ev(14, 41, "note", stage="control", text="diverged at 40 h"),
    ]
    state = fold(campaign, events, T0 + timedelta(days=3))
    assert state.stages["pilot"].state == DONE
    assert state.stages["pilot"].elapsed_s(T0) == 4 * 3600
    assert state.stages["variant"].state == DROPPED
    assert state.runs["pilot"].state == SUCCEEDED
    control = state.runs["control"]
    assert control.state == STOPPED and control.stop and control.stop.done
    assert control.stop.rule == "finite-loss" and control.exit_code == -15
    assert state.fired_for("control", 7) == {"finite-loss"}
    assert state.pending_decisions == ()
    assert str(state.costs[0].money) == "3.10 USD"
    assert state.stages["control"].notes == ("diverged at 40 h",)
    assert not state.plan_changed


def test_pending_decision_and_changed_plan(campaign):
    events = [ev(1, 0, "plan_recorded", sha256="something-else"),
              ev(2, 0, "stage_started", stage="pilot"),
              ev(3, 2, "stage_finished", stage="pilot", outcome=DONE)]
    state = fold(campaign, events, T0)
    assert state.pending_decisions == ("pilot",)
    assert state.plan_changed


def test_failed_exit_and_old_attempt_events_ignored(campaign):
    events = [ev(1, 0, "stage_started", stage="pilot"),
              ev(2, 0, "run_started", run="pilot", attempt=1),
              ev(3, 1, "run_exited", run="pilot", code=3, attempt=99),  # another attempt
              ev(4, 1, "run_exited", run="pilot", code=3, attempt=1)]
    state = fold(campaign, events, T0)
    assert state.runs["pilot"].state == FAILED and state.runs["pilot"].exit_code == 3


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_rule_fires_on_each_spelling(value):
    rule = StopRule("finite-loss", "non_finite", "loss")
    points = [Point(1, {"loss": 0.5}), Point(2, {"loss": value}), Point(3, {"loss": 0.1})]
    firing = check_points(rule, points)
    assert firing is not None and firing.step == 2 and "non-finite" in firing.reason
    assert check_points(rule, points[:1]) is None


def test_threshold_rule_respects_after_step_and_min_max():
    rule = StopRule("floor", "threshold", "val/accuracy", min=0.8, after_step=500)
    early = [Point(100, {"val/accuracy": 0.1})]
    assert check_points(rule, early) is None
    late = check_points(rule, [Point(600, {"val/accuracy": 0.79})])
    assert late is not None and late.step == 600 and "below the floor 0.8" in late.reason
    assert check_points(rule, [Point(600, {"val/accuracy": 0.81})]) is None
    ceiling = StopRule("ceil", "threshold", "loss", max=10)
    assert check_points(ceiling, [Point(1, {"loss": float("nan")})]) is not None


def test_truncation_and_restart_rules():
    trunc = StopRule("no-truncation", "truncation", "data/truncated", max=0)
    assert check_points(trunc, [Point(None, {"data/truncated": 0})]) is None
    hit = check_points(trunc, [Point(None, {"data/truncated": 3})])
    assert hit is not None and hit.value == 3
    restart = StopRule("restart-usable", "restart", max_age_s=45 * 60)
    assert check_restart(restart, seconds_without_restart=44 * 60, step=1) is None
    fired = check_restart(restart, seconds_without_restart=46 * 60, step=1)
    assert fired is not None and "46m" in fired.reason and "45m" in fired.reason


def test_rules_hash_changes_with_a_threshold():
    a = (StopRule("floor", "threshold", "acc", min=0.8),)
    b = (StopRule("floor", "threshold", "acc", min=0.7),)
    assert rules_hash(a) != rules_hash(b) and rules_hash(a) == rules_hash(a)


def test_forecast_scales_by_the_pilot_and_offers_d11_options(campaign):
    events = [ev(1, 0, "stage_started", stage="pilot"),
              ev(2, 6, "stage_finished", stage="pilot", outcome=DONE)]  # planned 2 h: ratio 3
    now = T0 + timedelta(hours=6)
    fc = forecast(campaign, fold(campaign, events, now), now)
    assert fc.pilot_ratio == pytest.approx(3.0)
    # 6 h realized + control 30 h + variant 30 h + write-up 4 h (human, not scaled)
    assert (fc.end - T0).total_seconds() / 3600 == pytest.approx(70)
    assert fc.verdict == "tight"
    events.append(ev(3, 6, "stage_started", stage="control"))
    later = T0 + timedelta(hours=30)  # control running for 24 h, 20 % done -> 120 h total
    fc = forecast(campaign, fold(campaign, events, later), later, {"control": 0.2})
    assert not fc.fits and fc.verdict == "exceeds"
    # Dropping the only variant would leave the question unanswerable (D11): no shorten.
    assert {o.kind for o in fc.options} == {"offer"}
    assert all("variant" not in o.drops for o in fc.options)


def test_forecast_never_touches_the_plan(campaign):
    before = campaign.path.read_bytes()
    forecast(campaign, fold(campaign, [], T0), T0 + timedelta(days=10))
    assert campaign.path.read_bytes() == before


def test_fold_keeps_running_state(campaign):
    state = fold(campaign, [ev(1, 0, "stage_started", stage="pilot")], T0)
    assert state.stages["pilot"].state == RUNNING


def test_idle_gpu_under_a_running_gpu_stage_warns_after_grace(tmp_path):
    from cockpit.engine import Engine
    from cockpit.telemetry import GpuSampler
    from cockpit.telemetry.simulated.nvml import FakeGpu, FakeNvml

    path = write_campaign(tmp_path, [{"id": "train", "hours": 1, "resource": "gpu"}],
                          extra={"settings": {"idle_util_pct": 5, "idle_grace": "2m"}},
                          start=FIXED_START)
    fake = FakeNvml([FakeGpu()])
    fake.gpus[0].util = 0
    clock = {"now": T0}
    engine = Engine(load_campaign(path), gpu_sampler=GpuSampler(nvml=fake.module()),
                    clock=lambda: clock["now"])
    engine.mark("train", "started")
    for minutes in (0, 1, 3):
        clock["now"] = T0 + timedelta(minutes=minutes)
        snap = engine.tick()
    assert any("GPU 0: GPU idle" in w for w in snap.warnings)
    fake.gpus[0].util = 90
    clock["now"] += timedelta(seconds=5)
    assert not any("idle" in w for w in engine.tick().warnings)
