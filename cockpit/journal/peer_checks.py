"""The checks a peer's event must pass before it is folded: those its own command
applies before writing it (no verdict on a running or stopped run, no finish of a stage
that is not running, no decision where none is pending, ...). A peer's journal line
never makes this machine act; one that fails is dropped with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.common.event_kinds import (
    RESULT_ACCEPTED,
    RESULT_REJECTED,
    STAGE_CLAIMED,
    STAGE_DROPPED,
    STAGE_FINISHED,
    STAGE_SKIPPED,
    STAGE_STARTED,
    STOP_REQUESTED,
)
from cockpit.common.printable import printable
from cockpit.journal.events import DECISION_SCOPE, RUN_SCOPE, SCOPE, STAGE_SCOPE
from cockpit.journal.fields import Event
from cockpit.journal.state import (
    DONE,
    DROPPED,
    NOT_STARTED,
    PENDING,
    RUNNING,
    SKIPPED,
    STOPPED,
    SUCCEEDED,
    Decision,
)


def peer_refusal(campaign: Campaign, ev: Event, stages: Mapping[str, Any],
                 runs: Mapping[str, Any], decisions: Mapping[str, Decision]) -> str | None:
    """Why a peer's event fails the check its own command applies before writing it
    (None: it passes). The state is the fold's so far: the peer's own events about its
    own stages, in its own order."""
    kind = str(ev.get("kind"))
    scope = SCOPE.get(kind)
    stage_id, run_id = ev.get("stage"), ev.get("run")
    if scope == RUN_SCOPE and not (isinstance(run_id, str) and run_id in campaign.runs):
        return f"run {run_id} is not in the plan"
    if (scope in (STAGE_SCOPE, DECISION_SCOPE) or kind == "note") and not (
            isinstance(stage_id, str) and stage_id in stages):
        return f"stage {stage_id} is not in the plan"
    st: Mapping[str, Any] = stages.get(stage_id, {}) if isinstance(stage_id, str) else {}
    run: Mapping[str, Any] = runs.get(run_id, {}) if isinstance(run_id, str) else {}
    if kind == "decision":
        return _decision_refusal(campaign, ev, st, stages, decisions)
    return _stage_refusal(kind, ev, st) or _run_refusal(campaign, kind, ev, run)


def _stage_refusal(kind: str, ev: Event, st: Mapping[str, Any]) -> str | None:
    stage_id, state = ev.get("stage"), st.get("state", PENDING)
    if kind == STAGE_CLAIMED and state in (RUNNING, SKIPPED, DROPPED):
        return f"stage {stage_id} is {state}"
    if kind == STAGE_STARTED and (state in (SKIPPED, DROPPED) or (
            state == RUNNING and (st.get("claim") is None or ev.get("claim") != st["claim"]))):
        return f"stage {stage_id} is {'already ' if state == RUNNING else ''}{state}"
    if kind == STAGE_FINISHED and state != RUNNING:
        return f"stage {stage_id} is not running ({state})"
    # A decision drops its stages in the fold already; its stage_dropped lines follow.
    if kind in (STAGE_SKIPPED, STAGE_DROPPED) and state not in (
            (PENDING,) if kind == STAGE_SKIPPED else (PENDING, DROPPED)):
        return f"stage {stage_id} is {state}, not pending"
    return None


def _run_refusal(campaign: Campaign, kind: str, ev: Event,
                 run: Mapping[str, Any]) -> str | None:
    run_id, run_state = ev.get("run"), run.get("state", NOT_STARTED)
    if kind == STOP_REQUESTED:
        if run_state != RUNNING or ev.get("attempt") != run.get("attempt"):
            return f"run {run_id} is not running (this attempt)"
        if run.get("stop") is not None:
            return f"run {run_id} is already being stopped"
    if kind == RESULT_ACCEPTED:
        spec = campaign.runs[str(run_id)]
        if not spec.produces_result:
            return f"run {run_id} produces no result (D21)"
        if run.get("stop") is not None or run_state == STOPPED:
            return f"run {run_id} was stopped: a stopped run is never an accepted result (D15)"
        if run_state != SUCCEEDED:
            return f"run {run_id} is {run_state.replace('_', ' ')}, not ended successfully"
    if kind == RESULT_REJECTED and run_state in (NOT_STARTED, RUNNING):
        return f"run {run_id} is {run_state.replace('_', ' ')}"
    return None


def _decision_refusal(campaign: Campaign, ev: Event, st: Mapping[str, Any],
                      stages: Mapping[str, Any],
                      decisions: Mapping[str, Decision]) -> str | None:
    stage_id = ev.get("stage")
    if not campaign.stage(str(stage_id)).decision_point:
        return f"stage {stage_id} is not a decision point"
    if ev.get("outcome") not in ("continue", "limit", "revise"):
        return f"{printable(ev.get('outcome'), 40)!s} is not continue, limit or revise"
    if st.get("state", PENDING) != DONE or stage_id in decisions:
        return f"no decision is pending at stage {stage_id}"
    for d in ev.get("drops") or ():
        if not isinstance(d, str) or d not in stages:
            return f"it drops {printable(d, 40)}, no stage of the plan"
        if campaign.stage(d).category == "essential":
            return f"it drops the essential stage {d} (D3)"
        # A dropped stage that already started on its own machine (the decider saw it
        # pending a moment before) stays as it is: the fold drops only pending ones.
    return None
