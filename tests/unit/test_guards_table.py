"""The pure guards as tables (issue 40): a folded state and what the observer saw → the
intents (:mod:`cockpit.engine.guards`). No process, no clock, no file read: each row is
one situation and the intents it must give — rules, blind, stop escalation, auto-start,
the deadline guard, the landing's warning and ``until_done``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import cockpit.engine.guards as guards
from cockpit.campaign import load_campaign
from cockpit.campaign.model import Campaign
from cockpit.engine.guards import ExportFacts, RunSeen
from cockpit.engine.intents import EscalateStop, FireRule, RecordOnce, StartStage, StopRun
from cockpit.journal.fold import fold
from cockpit.journal.log import format_time
from cockpit.runs.metrics.stream import MetricStream
from cockpit.runs.metrics.values import MetricPoint
from tests.helpers.campaigns import FINITE, FIXED_START, write_campaign

T0 = datetime(2026, 12, 2, 8, tzinfo=timezone.utc)  # FIXED_START
FLOOR = {"id": "floor", "kind": "threshold", "metric": "loss", "max": 5.0}
STAGES = [
    {"id": "prep", "hours": 1, "resource": "cpu", "command": ["prep"]},
    {"id": "train", "hours": 10, "resource": "gpu", "after": ["prep"], "run": "r1",
     "command": ["train"]},
    {"id": "extra", "hours": 5, "resource": "gpu", "after": ["train"], "run": "r2",
     "category": "exploratory", "command": ["extra"]},
    {"id": "export", "hours": 1, "resource": "cpu", "after": ["train"], "role": "export",
     "command": ["export"]},
]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    folder = tmp_path_factory.mktemp("guards")
    return load_campaign(write_campaign(folder, STAGES, rules=[FINITE, FLOOR],
                                        start=FIXED_START,
                                        extra={"on_deadline": "stop-optional"}))


def ev(seq: int, hours: float, kind: str, **fields: Any) -> dict[str, Any]:
    return {"seq": seq, "t": format_time(T0 + timedelta(hours=hours)), "kind": kind, **fields}


def running_r1(extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    extra = extra or []
    return [ev(1, 0, "stage_started", stage="prep"),
            ev(2, 1, "stage_finished", stage="prep", outcome="done", code=0),
            ev(3, 1, "stage_started", stage="train", run="r1"),
            ev(4, 1, "run_started", run="r1", stage="train", attempt=1), *extra]


def seen(*losses: float, age_s: float = 10.0) -> RunSeen:
    points = tuple(MetricPoint(i + 1, {"loss": v}, None) for i, v in enumerate(losses))
    stream = MetricStream([])
    for p in points:
        stream.latest.update(p.values)
    return RunSeen(points=points, stream=stream, age_s=age_s, since_restart_s=None,
                   silent_s=0.0, interval_s=None, verifying=False)


@pytest.mark.parametrize(("losses", "extra", "fired"), [
    ((0.5, 0.4), [], []),  # finite and under the floor: nothing
    ((0.5, float("nan")), [], ["finite-loss", "floor"]),  # a NaN is no loss under a floor
    ((7.0,), [], ["floor"]),  # over the floor
    ((float("inf"), 9.0), [], ["finite-loss", "floor"]),  # both, one intent each
    ((float("nan"),), [ev(5, 2, "rule_fired", run="r1", rule="finite-loss", attempt=1,
                          action="stop")], ["floor"]),  # finite-loss fired already: not again
])
def test_stop_rules_fire_once_per_rule_and_attempt(campaign: Campaign, losses: tuple[float, ...],
                                                    extra: list[dict[str, Any]],
                                                    fired: list[str]) -> None:
    state = fold(campaign, running_r1(extra), T0 + timedelta(hours=2))
    for holding in (False, True):  # a value rule never holds for a clock jump
        out = guards.rule_firings(campaign, state, {"r1": seen(*losses)}, holding=holding)
        assert all(isinstance(i, FireRule) and i.run == "r1" for i in out)
        assert [i.firing.rule for i in out if isinstance(i, FireRule)] == fired


def test_a_run_nobody_observed_is_not_judged(campaign: Campaign) -> None:
    state = fold(campaign, running_r1(), T0 + timedelta(hours=2))
    assert guards.rule_firings(campaign, state, {}, holding=False) == []


@pytest.mark.parametrize(("age_s", "known", "blind"), [
    (guards.BLIND_GRACE_S - 1, set(), []),  # its first reports may still come
    (guards.BLIND_GRACE_S, set(), ["finite-loss", "floor"]),  # never saw loss: blind
    (guards.BLIND_GRACE_S, {"blind:r1:1:floor"}, ["finite-loss"]),  # journaled once
])
def test_blind_after_the_grace_once_per_rule(campaign: Campaign, age_s: float,
                                             known: set[str], blind: list[str]) -> None:
    state = fold(campaign, running_r1(), T0 + timedelta(hours=2))
    out = guards.blind_rules(campaign, state, {"r1": seen(age_s=age_s)}, known)
    assert [i.fields["rule"] for i in out if isinstance(i, RecordOnce)] == blind
    assert all(i.kind == "rule_blind" for i in out if isinstance(i, RecordOnce))


def test_a_rule_whose_metric_was_seen_is_not_blind(campaign: Campaign) -> None:
    state = fold(campaign, running_r1(), T0 + timedelta(hours=2))
    look = seen(0.5, age_s=guards.BLIND_GRACE_S * 10)
    assert guards.blind_rules(campaign, state, {"r1": look}, set()) == []


@pytest.mark.parametrize(("age", "escalate"), [(None, False), (9.9, False), (10.0, True)])
def test_a_stop_escalates_when_its_grace_has_passed(campaign: Campaign, age: float | None,
                                                    escalate: bool) -> None:
    state = fold(campaign, running_r1([
        ev(5, 2, "stop_requested", run="r1", rule="manual", reason="x", attempt=1)]),
        T0 + timedelta(hours=2))
    ages = {} if age is None else {"r1": age}
    assert guards.stops_to_escalate(state, ages, 10.0) == ([EscalateStop("r1")] if escalate
                                                          else [])


@pytest.mark.parametrize(("events", "starts"), [
    ([], ["prep"]),  # the first stage in plan order
    (running_r1()[:2], ["train"]),  # prep done: train is ready (export waits for train)
    (running_r1(), []),  # train runs: nothing else is ready
    ([ev(1, 0, "decision", stage="prep", outcome="revise", note="x")], []),  # revised
])
def test_auto_starts_ready_stages_in_plan_order(campaign: Campaign,
                                                events: list[dict[str, Any]],
                                                starts: list[str]) -> None:
    state = fold(campaign, events, T0 + timedelta(hours=2))
    assert guards.auto_starts(campaign, state, 1) == [StartStage(s, auto=True) for s in starts]
    assert guards.auto_starts(campaign, state, 2) == []  # another machine's stages


def test_the_deadline_guard_warns_near_the_end_and_stops_optional_runs(
        campaign: Campaign) -> None:
    facts = ExportFacts(exported=False, expected_bytes=None, written_bytes=None)
    events = running_r1([ev(5, 2, "stage_finished", stage="train", outcome="done", code=0),
                         ev(6, 2, "stage_started", stage="extra", run="r2"),
                         ev(7, 2, "run_started", run="r2", stage="extra", attempt=1)])
    early = T0 + timedelta(hours=3)
    state = fold(campaign, events, early)
    assert guards.deadline_guard(campaign, state, early, progress={}, export=facts,
                                 machine=1) == []
    late = campaign.package.end - timedelta(minutes=90)  # no time left for export
    state = fold(campaign, events, late)
    out = guards.deadline_guard(campaign, state, late, progress={}, export=facts, machine=1)
    keys = [i.key for i in out if isinstance(i, RecordOnce)]
    assert "deadline_near" in keys and any(k.startswith("deadline:") for k in keys)
    assert [i.run for i in out if isinstance(i, StopRun)] == ["r2"]  # optional only
    assert StartStage("export", force=True) in out
    done = ExportFacts(exported=True, expected_bytes=None, written_bytes=None)
    quiet = guards.deadline_guard(campaign, state, late, progress={}, export=done, machine=1)
    assert not [i for i in quiet if isinstance(i, RecordOnce) and i.key == "deadline_near"]


def test_the_landing_warning_only_with_land_and_only_before_the_point(tmp_path: Path) -> None:
    land = load_campaign(write_campaign(tmp_path, STAGES[:1], start=FIXED_START,
                                        extra={"on_deadline": "land"}))
    point = land.package.end - timedelta(hours=3)
    lead = land.deadline.landing_lead_s
    assert guards.landing_near(land, point - timedelta(seconds=lead + 1), point) == []
    near = guards.landing_near(land, point - timedelta(seconds=lead / 2), point)
    assert [i.key for i in near if isinstance(i, RecordOnce)] == ["landing_near"]
    assert guards.landing_near(land, point + timedelta(seconds=1), point) == []  # past it


@pytest.mark.parametrize(("events", "auto", "code"), [
    (running_r1(), False, None),  # running
    ([], True, None),  # auto: prep is about to start
    ([], False, 3),  # nothing running, nobody starts it: waits for a person
    (running_r1([ev(5, 2, "run_exited", run="r1", code=1, attempt=1),
                 ev(6, 2, "stage_finished", stage="train", outcome="failed", code=1)]),
     False, 1),  # an essential stage failed
])
def test_until_done_says_what_headless_does(campaign: Campaign, events: list[dict[str, Any]],
                                            auto: bool, code: int | None) -> None:
    state = fold(campaign, events, T0 + timedelta(hours=2))
    assert guards.until_done(campaign, state, auto=auto, judging=False).code == code
