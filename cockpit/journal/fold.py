"""fold(plan, events, now) -> CampaignState: what happened, as a pure function.

The journal is the one source of truth; this module turns its events into the
state of every stage and run, the fired rules, the decisions and the costs. No
files, no clock of its own: ``now`` is given.

The dispatch is keyed by the table of event kinds (:data:`cockpit.journal.events.EVENT_KINDS`):
one handler per kind (stages: :mod:`cockpit.journal.fold_stages`; runs:
:mod:`cockpit.journal.fold_runs`; the plan, decisions, notes and costs:
:mod:`cockpit.journal.fold_records`), or the kind is named in ``FOLDED_AS_NOTHING``
(a record the state does not hold); a kind not in the table is ignored.

Several machines (D12): the events of every machine's journal are folded together
(each peer's tagged ``machine: N``), but only for what their writer owns (the
ownership table, :data:`cockpit.journal.events.SCOPE`), and a peer's event must also
pass the checks its own command applies before writing it
(:mod:`cockpit.journal.peer_checks`). Anything else is dropped, with one warning naming
the machine and the event: a peer's journal line never makes this machine act.
``fold_history`` also returns the events it folded (the history ``budget``, ``export``
and ``next`` read). The state's types live in :mod:`cockpit.journal.state` (re-exported
here: most readers import them from this module).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.common.event_kinds import (
    ALERT_CLAIMED,
    ALERT_FAILED,
    ALERT_SENT,
    ALERT_TARGETS,
    CLOCK_JUMP,
    COST,
    ENVIRONMENT_RECORDED,
    HOOK_STARTED,
    RESUME_VERIFIED,
    RULE_BLIND,
    STAGE_DROPPED,
    VERIFY_STARTED,
    WARNING,
)
from cockpit.common.units import other_cost
from cockpit.journal.events import ANY_SCOPE, EVENT_KINDS, LOCAL_SCOPE, SCOPE, refusal
from cockpit.journal.fields import Event
from cockpit.journal.fold_draft import Folding, Handler
from cockpit.journal.fold_records import RECORD_HANDLERS
from cockpit.journal.fold_runs import RUN_HANDLERS
from cockpit.journal.fold_stages import STAGE_HANDLERS
from cockpit.journal.peer_checks import peer_refusal
from cockpit.journal.state import (
    DONE,
    DROPPED,
    DROPPED_SHOWN,
    ENDED,
    FAILED,
    NOT_STARTED,
    PENDING,
    RUNNING,
    SKIPPED,
    STOPPED,
    SUCCEEDED,
    Attempt,
    CampaignState,
    CostEntry,
    Decision,
    Dropped,
    FiredRule,
    RunState,
    StageState,
    StopInfo,
)

__all__ = [
    "DONE", "DROPPED", "DROPPED_SHOWN", "ENDED", "FAILED", "FOLDED_AS_NOTHING", "HANDLERS",
    "NOT_STARTED", "PENDING", "RUNNING", "SKIPPED", "STOPPED", "SUCCEEDED", "Attempt",
    "CampaignState", "CostEntry", "Decision", "Dropped", "FiredRule", "RunState",
    "IncrementalFold", "StageState", "StopInfo", "fold", "fold_history",
]

REFUSED_KEPT = 1000  # events not folded that the state keeps (the newest; the rest counted)

# The fold's dispatch: one handler per kind of the table.
HANDLERS: Mapping[str, Handler] = {**STAGE_HANDLERS, **RUN_HANDLERS, **RECORD_HANDLERS}
# Kinds the state does not hold (the records a reader finds in the events themselves:
# the environment, warnings, exports, hooks, clock jumps, blind rules, verifications,
# alerts).
FOLDED_AS_NOTHING = frozenset({
    ENVIRONMENT_RECORDED, WARNING, HOOK_STARTED, CLOCK_JUMP,
    RULE_BLIND, RESUME_VERIFIED, VERIFY_STARTED, ALERT_SENT, ALERT_FAILED,
    ALERT_CLAIMED, ALERT_TARGETS, "landing"})
assert set(HANDLERS) | FOLDED_AS_NOTHING == set(EVENT_KINDS), "every kind is folded"
assert not set(HANDLERS) & FOLDED_AS_NOTHING
# Kinds whose own events the ownership table never refuses (campaign-wide or local
# records: ``refusal`` finds no owner to check), worked out here instead of per event.
_NEVER_OWNED = frozenset(k for k, scope in SCOPE.items() if scope in (ANY_SCOPE, LOCAL_SCOPE)) - {
    "cost", STAGE_DROPPED}
# Of those, the ones the state does not hold: an own one naming no run changes only
# the newest seq (a million warnings fold at the cost of reading them).
_RECORDS_ONLY = _NEVER_OWNED & FOLDED_AS_NOTHING


def fold(campaign: Campaign, events: Iterable[Event], now: datetime,
         machine: int | None = None) -> CampaignState:
    """Replay the journals over the plan (see :func:`fold_history`)."""
    del now  # the fold is timeless; ``now`` is part of the signature for derived views
    folding = IncrementalFold(campaign, machine)
    for ev in events:
        folding.apply(ev)
    return folding.state()


def fold_history(campaign: Campaign, events: Iterable[Event], now: datetime,
                 machine: int | None = None) -> tuple[CampaignState, list[Event]]:
    """Replay the journals over the plan; return the state and the events folded.

    ``machine`` is the reader: its own events are untagged, a peer's carry ``machine``.
    Every event counts only when its writer may write it (``refusal``); a peer's must
    also pass the checks its command applies (``peer_refusal``); a peer's local records
    (its plan record, its warnings) are skipped. With no ``machine`` (a caller with one
    journal and no campaign machines) untagged events are not checked. Unknown events
    and stale references of the own journal are ignored, as before."""
    del now
    folding = IncrementalFold(campaign, machine)
    kept = [ev for ev in events if folding.apply(ev)]
    return folding.state(), kept


class IncrementalFold:
    """The fold as a running total: :meth:`apply` takes one event (O(1) in the history
    before it), :meth:`state` freezes the drafts (only when an event changed them).
    Folding events one at a time equals folding them all at once (a property test)."""

    def __init__(self, campaign: Campaign, machine: int | None = None) -> None:
        self.campaign = campaign
        self.machine = machine
        self.folding = Folding.start(campaign)
        self.last_seq = 0
        self.applied = 0  # events offered, folded or not
        self.refused = RefusedEvents()
        self.dropped_by: dict[int, set[str]] = {}  # machine -> stages its decisions dropped
        self._frozen: CampaignState | None = None
        self._needs_check: dict[tuple[str, Any, Any, int], bool] = {}

    def apply(self, ev: Event) -> bool:
        """Fold one event; False when it is not folded (a peer's local record, or refused)."""
        self.applied += 1
        kind = ev.get("kind")
        if kind in _RECORDS_ONLY and "machine" not in ev and "run" not in ev:
            # An own record the state does not hold (a warning, a claim): only its seq.
            seq = ev.get("seq")
            if seq and (number := int(seq)) > self.last_seq:
                self.last_seq = number
                self._frozen = None
            return True
        if not isinstance(kind, str):
            kind = str(kind)
        tag = ev.get("machine")
        if tag is not None and (not isinstance(tag, int) or isinstance(tag, bool)):
            tag = None  # a peer's copy tags its events with the machine's number
        writer = tag if tag is not None else self.machine
        peer = tag is not None and tag != self.machine
        if peer and self.machine is not None and SCOPE.get(kind, LOCAL_SCOPE) == LOCAL_SCOPE:
            return False  # the peer's own record (its plan, warnings, exports): not ours
        f = self.folding
        if writer is not None and (peer or (kind not in _NEVER_OWNED
                                            and self._owned(kind, ev, writer))):
            why = _refusal(f, ev, writer, peer, self.dropped_by.get(writer, set()))
            if why is not None:
                self.refused.add(Dropped(tag, ev.get("seq"), kind, why, ev))
                self._frozen = None
                return False
        if kind == "decision" and writer is not None:
            self.dropped_by.setdefault(writer, set()).update(
                d for d in ev.get("drops") or () if isinstance(d, str))
        seq = ev.get("seq")
        if seq and (number := int(seq)) > self.last_seq:
            self.last_seq = number
        if kind in EVENT_KINDS and "run" in ev:
            f.run(ev)  # any run an event names has a state (a stale one too)
        handler = HANDLERS.get(kind)
        if handler is not None:
            handler(f, ev)
        self._frozen = None
        return True

    def _owned(self, kind: str, ev: Event, writer: int) -> bool:
        """Whether an own event needs the ownership checks: the answer depends only on
        its kind, run and stage (a plan is frozen), so it is worked out once for each
        (a million warnings cost one check). A drop and a cost are always checked."""
        if kind in (STAGE_DROPPED, "cost"):
            return True
        fields: Mapping[str, Any] = ev  # as read: a peer's or a test's may hold anything
        run, stage = fields.get("run"), fields.get("stage")
        if not (isinstance(run, (str, type(None))) and isinstance(stage, (str, type(None)))):
            return True
        key = (kind, run, stage, writer)
        known = self._needs_check.get(key)
        if known is None:
            if len(self._needs_check) > 10_000:
                self._needs_check.clear()  # a journal of made-up ids: stay bounded
            known = self._needs_check[key] = refusal(self.campaign, ev, writer) is not None
        return known

    def state(self) -> CampaignState:
        """The frozen state of everything applied so far (cached until the next event)."""
        if self._frozen is None:
            self._frozen = _frozen(self.folding, self.last_seq, self.refused)
        return self._frozen


class RefusedEvents:
    """The events not folded, bounded: the first few named in the warnings, the newest
    :data:`REFUSED_KEPT` kept for the faces, the rest counted by machine."""

    def __init__(self) -> None:
        self.first: list[Dropped] = []
        self.newest: deque[Dropped] = deque(maxlen=REFUSED_KEPT)
        self.more = 0
        self.more_machines: set[str] = set()

    def add(self, dropped: Dropped) -> None:
        self.newest.append(dropped)
        if len(self.first) < DROPPED_SHOWN:
            self.first.append(dropped)
            return
        self.more += 1
        self.more_machines.add("this machine" if dropped.machine is None
                               else f"machine {dropped.machine}")


def _refusal(f: Folding, ev: Event, writer: int, peer: bool,
             dropped_by: set[str]) -> str | None:
    """Why ``writer``'s event is not folded (None: it is)."""
    why = refusal(f.campaign, ev, writer, dropped_by)
    if why is None and peer:
        why = peer_refusal(f.campaign, ev, f.stages, f.runs, f.decisions)
    if why is None and ev.get("kind") == COST:
        try:
            other_cost(ev.get("label"), ev.get("amount"), ev.get("currency", "USD"))
        except ValueError as exc:
            why = f"cost: {exc}"
    return why


def _stage_state(f: Folding, sid: str) -> StageState:
    d = f.stages[sid]
    return StageState(
        id=sid, state=d.get("state", PENDING), attempt=d.get("attempt"),
        started_at=d.get("started_at"), ended_at=d.get("ended_at"), run=d.get("run"),
        manual=d.get("manual", False), exit_code=d.get("exit_code"), reason=d.get("reason"),
        notes=tuple(f.notes.get(sid, ())), notes_count=f.notes_count.get(sid, 0),
        pid=d.get("pid"), pgid=d.get("pgid"),
        create_time=d.get("create_time"), exit_file=d.get("exit_file"),
        marker=d.get("marker"), claim=d.get("claim"), measured_s=d.get("measured_s"))


def _run_state(f: Folding, rid: str) -> RunState:
    d = f.runs[rid]
    return RunState(
        id=rid, stage=d.get("stage"), state=d.get("state", NOT_STARTED),
        attempt=d.get("attempt"), started_at=d.get("started_at"), ended_at=d.get("ended_at"),
        pid=d.get("pid"), pgid=d.get("pgid"), create_time=d.get("create_time"),
        marker=d.get("marker"), params_hash=d.get("params_hash"), gpus=d.get("gpus", ()),
        exit_code=d.get("exit_code"), exit_file=d.get("exit_file"), stop=d.get("stop"),
        verdict=d.get("verdict"), verdict_reason=d.get("verdict_reason"),
        verdict_override=d.get("verdict_override", False),
        verdict_failed=d.get("verdict_failed"),
        verified=tuple(f.verified.get(rid, ())), measured_s=d.get("measured_s"),
        earlier=tuple(d.get("earlier", ())))


def _frozen(f: Folding, last_seq: int, refused: RefusedEvents) -> CampaignState:
    """The fold's drafts as the frozen state."""
    stages = {sid: _stage_state(f, sid) for sid in f.stages}
    pending = tuple(s.id for s in f.campaign.stages
                    if s.decision_point and stages[s.id].state == DONE
                    and s.id not in f.decisions)
    return CampaignState(
        stages=stages,
        runs={rid: _run_state(f, rid) for rid in f.runs},
        fired=tuple(f.fired),
        decisions=f.decisions,
        pending_decisions=pending,
        revised=any(d.outcome == "revise" for d in f.decisions.values()),
        costs=tuple(f.costs), cost_totals=tuple(f.cost_totals.values()),
        costs_count=f.costs_count,
        plan_hash=f.plan_hash,
        plan_changed=f.plan_hash is not None and f.plan_hash != f.campaign.sha256,
        latest_plan_hash=f.latest_plan,
        rules_hash=f.rules_hash,
        journal_warnings=tuple(f.warnings) + _dropped_warnings(refused),
        last_seq=last_seq,
        not_folded=tuple(refused.newest),
        export=f.export,
    )


def _dropped_warnings(refused: RefusedEvents) -> tuple[str, ...]:
    """One warning per dropped event (the first few), then how many more."""
    shown = tuple(d.message() for d in refused.first)
    if refused.more > 0:
        shown += (f"and {refused.more} more journal events not folded "
                  f"({', '.join(sorted(refused.more_machines))})",)
    return shown
