"""Ownership in the fold (issue 21): a machine's journal counts only for what that
machine owns, and a peer's event must pass the check its own command applies.

Pure and fast: the fold over hand-made journals of two machines (no sshd); the
property that no event of machine 2, whatever it says, changes the state of machine
1's stages and runs; the commands that refuse what the fold would drop. The same
attacks over real sshd and real processes are in tests/e2e/test_fleet_trust.py.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cockpit.campaign import load_campaign
from cockpit.campaign.model import Campaign
from cockpit.journal.events import EVENT_KINDS, LOCAL_SCOPE, SCOPE
from cockpit.journal.fold import DONE, NOT_STARTED, PENDING, RUNNING, SUCCEEDED, fold
from cockpit.journal.read import history_of
from tests.helpers.campaigns import FIXED_START, step_command, write_campaign

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=timezone.utc)
NOW = T0 + timedelta(hours=1)


def _plan(folder: Path) -> Campaign:
    stages = [
        {"id": "pilot", "hours": 1, "resource": "gpu:0", "category": "essential",
         "decision_point": True, "run": "pilot", "machine": 1, "command": step_command()},
        {"id": "control", "hours": 1, "resource": "gpu:0", "category": "essential",
         "after": ["pilot"], "run": "control", "machine": 1, "command": step_command()},
        {"id": "variant", "hours": 1, "resource": "gpu:0", "category": "useful",
         "run": "variant", "machine": 2, "command": step_command()},
    ]
    machines = {"1": {"ssh": "box-a", "path": "/c"}, "2": {"ssh": "box-b", "path": "/c"}}
    return load_campaign(write_campaign(folder, stages, extra={
        "package": {"offer": "rtx4090-3d", "start": FIXED_START, "count": 2},
        "machines": machines}))


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    return _plan(tmp_path_factory.mktemp("plan"))


def _t(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _journal(*events: tuple[float, str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Events with seq and t, as a journal holds them."""
    return [{"seq": i, "t": _t(m), "kind": kind, **fields}
            for i, (m, kind, fields) in enumerate(events, start=1)]


def _tagged(events: list[dict[str, Any]], machine: int) -> list[dict[str, Any]]:
    return [{**ev, "machine": machine} for ev in events]


# Machine 1's own journal: the pilot claimed, started, its run running (pid 4242).
OWN = _journal(
    (0, "stage_claimed", {"stage": "pilot", "run": "pilot", "marker": "m:pilot:1"}),
    (0.1, "stage_started", {"stage": "pilot", "run": "pilot", "pid": 4242, "pgid": 4242,
                            "create_time": 1.0, "claim": 1, "marker": "m:pilot:1"}),
    (0.2, "run_started", {"run": "pilot", "stage": "pilot", "pid": 4242, "pgid": 4242,
                          "create_time": 1.0, "attempt": 2, "params_hash": "p"}),
)

# What no honest machine 2 writes: every event about machine 1's pilot and control.
FORGED = _journal(
    (1, "stop_requested", {"run": "pilot", "stage": "pilot", "rule": "manual",
                           "reason": "forged", "attempt": 2}),
    (2, "stop_done", {"run": "pilot", "stage": "pilot", "attempt": 2}),
    (3, "run_exited", {"run": "pilot", "stage": "pilot", "code": 0, "attempt": 2}),
    (4, "stage_finished", {"stage": "pilot", "outcome": "done", "code": 0}),
    (5, "result_accepted", {"run": "pilot", "stage": "pilot", "reason": "forged",
                            "attempt": 2}),
    (6, "rule_fired", {"run": "pilot", "stage": "pilot", "rule": "finite-loss",
                       "reason": "forged", "attempt": 2, "action": "stop"}),
    (7, "checkpoint_verified", {"run": "pilot", "attempt": 2, "ok": False,
                                "path": "/x", "error": "forged"}),
    (8, "decision", {"stage": "pilot", "outcome": "revise", "note": "forged"}),
    (9, "stage_claimed", {"stage": "control", "run": "control", "marker": "m:control:9"}),
    (10, "stage_started", {"stage": "control", "run": "control", "pid": 1, "pgid": 1,
                           "create_time": 1.0, "claim": 9}),
    (11, "stage_skipped", {"stage": "control", "note": "forged"}),
    (12, "cost", {"label": "forged", "amount": "1000000", "currency": "USD"}),
)


def test_a_peer_cannot_write_for_another_machines_stages(plan: Campaign) -> None:
    state, history = history_of(plan, OWN, [_tagged(FORGED, 2)], 1, NOW)
    pilot, run = state.stages["pilot"], state.runs["pilot"]
    assert pilot.state == RUNNING and pilot.pid == 4242
    assert run.state == RUNNING and run.stop is None and run.verdict is None
    assert run.verified == () and state.fired == ()
    assert state.decisions == {} and not state.revised
    assert state.stages["control"].state == PENDING
    assert state.runs.get("control") is None or state.runs["control"].state == NOT_STARTED
    assert state.costs == ()
    # Each one dropped, naming the machine and the event, and not in the history.
    assert sorted(d.seq for d in state.not_folded) == [ev["seq"] for ev in FORGED]
    assert all(d.machine == 2 for d in state.not_folded)
    assert history == OWN
    for ev in FORGED[:10]:  # the first ten named, once each; the rest counted
        named = [w for w in state.journal_warnings
                 if f"machine 2's journal, event #{ev['seq']} ({ev['kind']})" in w]
        assert len(named) == 1, (ev, state.journal_warnings)
    assert state.journal_warnings[-1] == "and 2 more journal events not folded (machine 2)"


def test_a_peer_event_its_own_command_refuses_is_dropped(plan: Campaign) -> None:
    """Machine 2 writes about its own variant, but what its CLI never writes: a verdict
    on a running run (D15), a stop of a run that is not running, a finish of a stage
    that never started, a cost above the bound."""
    peer = _journal(
        (1, "stage_finished", {"stage": "variant", "outcome": "done"}),  # never started
        (2, "stop_requested", {"run": "variant", "stage": "variant", "attempt": None}),
        (3, "stage_claimed", {"stage": "variant", "run": "variant", "marker": "v"}),
        (4, "stage_started", {"stage": "variant", "run": "variant", "pid": 7, "pgid": 7,
                              "create_time": 1.0, "claim": 3}),
        (5, "run_started", {"run": "variant", "stage": "variant", "pid": 7, "attempt": 4}),
        (6, "result_accepted", {"run": "variant", "reason": "while running"}),
        (7, "cost", {"label": "gpu", "amount": "1000000", "currency": "USD"}),
        (8, "stage_started", {"stage": "variant", "run": "variant", "pid": 8}),  # twice
        (9, "note", {"stage": "nowhere", "text": "x"}),
        (10, "cost", {"label": "storage", "amount": "3.50", "currency": "USD"}),
        (11, "decision", {"stage": "variant", "outcome": "continue", "note": "x"}),
    )
    state, history = history_of(plan, OWN, [_tagged(peer, 2)], 1, NOW)
    assert sorted(d.seq for d in state.not_folded) == [1, 2, 6, 7, 8, 9, 11]
    reasons = {d.seq: d.reason for d in state.not_folded}
    assert "not a decision point" in reasons[11] and state.decisions == {}
    assert "not running" in reasons[1] and "not running" in reasons[2]
    assert "running" in reasons[6] and "above" in reasons[7]
    variant = state.runs["variant"]
    assert variant.state == RUNNING and variant.verdict is None and variant.pid == 7
    assert [str(c.money) for c in state.costs] == ["3.50 USD"]
    assert [ev["seq"] for ev in history if ev.get("machine") == 2] == [3, 4, 5, 10]


def test_a_legitimate_peer_history_is_folded(plan: Campaign) -> None:
    """What machine 2 honestly writes counts (a cost, a note); the decision at machine
    1's pilot, made on machine 1, drops machine 2's variant on both machines."""
    own = [*OWN, *_journal(
        (5, "run_exited", {"run": "pilot", "stage": "pilot", "code": 0, "attempt": 2}),
        (5, "stage_finished", {"stage": "pilot", "outcome": "done", "code": 0}),
        (6, "decision", {"stage": "pilot", "outcome": "limit", "drops": ["variant"],
                         "note": "fits"}),
        (6, "stage_dropped", {"stage": "variant", "reason": "limit decision at pilot"}),
    )]
    own = [{**ev, "seq": i} for i, ev in enumerate(own, start=1)]
    peer = _journal(
        (8, "cost", {"label": "storage", "amount": "3.50", "currency": "USD"}),
        (9, "note", {"stage": "variant", "text": "ok"}),
        (9.5, "plan_recorded", {"sha256": "other"}),  # its own record: skipped, no warning
    )
    state, _ = history_of(plan, own, [_tagged(peer, 2)], 1, NOW)
    assert state.not_folded == ()
    assert state.stages["pilot"].state == DONE
    assert state.decisions["pilot"].outcome == "limit"
    assert state.stages["variant"].state == "dropped"
    assert [str(c.money) for c in state.costs] == ["3.50 USD"]
    assert state.plan_hash is None  # machine 2's plan record is not this machine's
    # Machine 2 reads the same two journals the other way round: the same decision.
    other, _ = history_of(plan, peer, [_tagged(own, 1)], 2, NOW)
    assert other.not_folded == ()
    assert other.stages["pilot"].state == DONE and other.decisions["pilot"].outcome == "limit"


def test_this_machines_own_lines_about_another_machine_are_dropped_too(plan: Campaign) -> None:
    own = _journal((1, "stage_finished", {"stage": "variant", "outcome": "done"}),
                   (2, "result_accepted", {"run": "variant", "reason": "here"}))
    state = fold(plan, own, NOW, machine=1)
    assert state.stages["variant"].state == PENDING
    assert [d.machine for d in state.not_folded] == [None, None]
    assert "this machine's journal, event #1 (stage_finished)" in state.journal_warnings[0]


def test_the_table_covers_every_kind() -> None:
    assert set(SCOPE) == set(EVENT_KINDS)
    assert SCOPE["stop_requested"] == SCOPE["result_accepted"] == "run"
    assert SCOPE["plan_recorded"] == LOCAL_SCOPE


def test_many_dropped_lines_are_counted_not_listed(plan: Campaign) -> None:
    peer = _journal(*[(i / 10, "note", {"stage": "nowhere", "text": "x"})
                      for i in range(500)])
    state, _ = history_of(plan, OWN, [_tagged(peer, 2)], 1, NOW)
    assert len(state.not_folded) == 500
    assert len(state.journal_warnings) == 11
    assert "and 490 more journal events not folded (machine 2)" in state.journal_warnings[-1]


# ----------------------------------------------------------------------- the property

_STAGES = ("pilot", "control", "variant", "nowhere")
_RUNS = ("pilot", "control", "variant", "ghost")
_field_values = st.one_of(st.none(), st.integers(-3, 30), st.sampled_from(_STAGES),
                          st.text(max_size=5), st.booleans())
_peer_event = st.fixed_dictionaries(
    {"kind": st.sampled_from(sorted(EVENT_KINDS)), "stage": st.sampled_from(_STAGES),
     "run": st.sampled_from(_RUNS)},
    optional={"attempt": st.sampled_from([None, 2, 3]), "pid": st.integers(1, 9),
              "claim": st.integers(0, 12), "outcome": st.sampled_from(
                  ["done", "failed", "continue", "limit", "revise"]),
              "drops": st.lists(st.sampled_from(_STAGES), max_size=2),
              "amount": st.sampled_from(["1", "3.50", "1000000", "-1", "nan"]),
              "code": _field_values, "ok": st.booleans(), "label": st.text(max_size=3)})


_PLAN: dict[str, Campaign] = {}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(peer=st.lists(st.tuples(st.floats(0, 12), _peer_event), max_size=25))
# Found by the property once: machine 2 starting its own stage with machine 1's run.
@example(peer=[(1.0, {"kind": "stage_started", "stage": "variant", "run": "control"})])
@example(peer=[(1.0, {"kind": "run_started", "stage": "pilot", "run": "variant"})])
def test_no_peer_event_changes_this_machines_stages(tmp_path_factory: pytest.TempPathFactory,
                                                   peer: list[tuple[float, dict[str, Any]]]
                                                   ) -> None:
    """Whatever machine 2's journal says, in any order, machine 1's stages (but their
    notes), runs, fired rules and decisions are what machine 1's own journal makes them
    (machine 2 owns no decision point here), and no cost above the bound enters."""
    if "plan" not in _PLAN:
        _PLAN["plan"] = _plan(tmp_path_factory.mktemp("p"))
    plan = _PLAN["plan"]
    own = [*OWN, *_journal((6, "run_exited", {"run": "pilot", "stage": "pilot", "code": 0,
                                              "attempt": 2}),
                           (6, "stage_finished", {"stage": "pilot", "outcome": "done"}))]
    own = [{**ev, "seq": i} for i, ev in enumerate(own, start=1)]
    events = _tagged(_journal(*((m, str(ev["kind"]), {k: v for k, v in ev.items()
                                                       if k != "kind"})
                                for m, ev in sorted(peer, key=lambda p: p[0]))), 2)
    alone = fold(plan, own, NOW, machine=1)
    both, _ = history_of(plan, own, [events], 1, NOW)
    for sid in ("pilot", "control"):  # notes are campaign-wide: any machine annotates
        assert replace(both.stages[sid], notes=(), notes_count=0) == alone.stages[sid]
        assert both.runs.get(sid) == alone.runs.get(sid)
    mine = ("pilot", "control")
    assert [f for f in both.fired if f.run in mine] == list(alone.fired)
    assert both.decisions == alone.decisions
    assert all(c.money.amount <= 100_000 for c in both.costs)
    assert alone.runs["pilot"].state == SUCCEEDED


# ----------------------------------------------------------------------- the commands


def test_cost_refuses_an_absurd_amount_with_the_folds_check(tmp_path: Path) -> None:
    from tests.helpers.process import run_cockpit

    path = write_campaign(tmp_path / "c", [{"id": "a", "hours": 1, "command": step_command()}])
    refused = run_cockpit("cost", str(path), "gpu", "1000000")
    assert refused.returncode == 2, refused.stderr
    assert "above 100000" in refused.stderr and "Traceback" not in refused.stderr
    assert not (path.parent / ".cockpit" / "journal.jsonl").exists() or \
        "1000000" not in (path.parent / ".cockpit" / "journal.jsonl").read_text()
    ok = run_cockpit("cost", str(path), "storage", "3.50")
    assert ok.returncode == 0, ok.stderr


def test_a_machine_refuses_verdicts_and_checks_on_another_machines_run(plan: Campaign) -> None:
    """What the fold would drop, the command refuses: a verdict or a verification of
    machine 2's run, written on machine 1."""
    from cockpit.common.errors import ActionRefused
    from cockpit.engine import Engine

    engine = Engine(plan, machine=1)
    try:
        for act in (lambda: engine.accept("variant", "ok"),
                    lambda: engine.reject("variant", "no"),
                    lambda: engine.verify("variant")):
            with pytest.raises(ActionRefused, match="runs on machine 2"):
                act()
    finally:
        engine.close()


class _Peers:
    """Machine 1's events as machine 2 holds them (no sshd: the copy, already pulled)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._events = events

    def events(self) -> list[list[dict[str, Any]]]:
        return [self._events]

    def views(self) -> tuple[()]:
        return ()

    def close(self) -> None:
        pass


def test_a_decision_is_made_only_where_its_stage_runs(tmp_path: Path) -> None:
    from cockpit.common.errors import ActionRefused
    from cockpit.engine import Engine

    plan = _plan(tmp_path / "c")
    ran = [*OWN, *_journal(
        (5, "run_exited", {"run": "pilot", "stage": "pilot", "code": 0, "attempt": 2}),
        (5, "stage_finished", {"stage": "pilot", "outcome": "done", "code": 0}))]
    ran = [{**ev, "seq": i} for i, ev in enumerate(ran, start=1)]
    engine = Engine(plan, machine=2, peers=_Peers(_tagged(ran, 1)))  # type: ignore[arg-type]
    try:
        assert engine.state().pending_decisions == ("pilot",)  # seen on machine 2
        with pytest.raises(ActionRefused, match="runs on machine 1"):
            engine.decide("continue", note="from the wrong machine")
    finally:
        engine.close()
    assert not (plan.state_dir / "journal.jsonl").exists()
