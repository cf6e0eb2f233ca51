"""fold(plan, events, now) -> CampaignState: what happened, as a pure function.

The journal is the one source of truth; this module turns its events into the
state of every stage and run, the fired rules, the decisions and the costs. No
files, no clock of its own: ``now`` is given.

Several machines (D12): the events of every machine's journal are folded together
(each peer's tagged ``machine: N``), but only for what their writer owns (the
ownership table, :data:`cockpit.journal.events.SCOPE`), and a peer's event must also
pass the checks its own command applies before writing it (no verdict on a running
or stopped run, no finish of a stage that is not running, no cost above the bound,
...). Anything else is dropped, with one warning naming the machine and the event:
a peer's journal line never makes this machine act. ``fold_history`` also returns
the events it folded (the history ``budget``, ``export`` and ``next`` read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.common.printable import printable
from cockpit.common.units import Money, other_cost
from cockpit.journal.format import parse_time

# Stage states. "pending" has not started; the engine refines it into ready/blocked.
PENDING, RUNNING, DONE, FAILED, STOPPED, SKIPPED, DROPPED = (
    "pending", "running", "done", "failed", "stopped", "skipped", "dropped")
ENDED = (DONE, SKIPPED, DROPPED)  # a stage after these may go on
# Run states.
NOT_STARTED, SUCCEEDED = "not_started", "succeeded"


@dataclass(frozen=True)
class StageState:
    id: str
    state: str = PENDING
    attempt: int | None = None  # seq of its latest stage_started event
    started_at: datetime | None = None
    ended_at: datetime | None = None
    run: str | None = None
    manual: bool = False
    exit_code: int | None = None
    reason: str | None = None
    notes: tuple[str, ...] = ()
    pid: int | None = None
    pgid: int | None = None
    create_time: float | None = None
    exit_file: str | None = None
    marker: str | None = None  # the launch marker in its processes' environment
    # A launch claimed in the journal (the seq of its stage_claimed) whose start is not
    # recorded yet: the stage counts as running until the next tick reconciles it.
    claim: int | None = None
    # Seconds it ran, on the monotonic clock of the cockpit that watched it from start to
    # end (None: not measured so; the wall-clock difference stands in).
    measured_s: float | None = None

    def elapsed_s(self, now: datetime) -> float:
        if self.started_at is None:
            return 0.0
        if self.ended_at is not None and self.measured_s is not None:
            return self.measured_s  # a wall-clock step while it ran does not count
        end = self.ended_at or now
        return max((end - self.started_at).total_seconds(), 0.0)


@dataclass(frozen=True)
class StopInfo:
    rule: str  # a rule id or "manual"
    reason: str
    value: Any = None
    step: int | None = None
    at: datetime | None = None
    done: bool = False
    seq: int | None = None  # the stop_requested event (its grace is measured from it)


@dataclass(frozen=True)
class Attempt:
    """An earlier attempt of a run, restarted since (``start --force``, D15): its time
    stays a cost and its stop a reason, whatever the later attempts did."""

    attempt: int | None
    state: str  # what it ended as: succeeded, failed, stopped (running: no end recorded)
    started_at: datetime | None
    ended_at: datetime | None
    measured_s: float | None
    gpus: tuple[int, ...]
    exit_code: int | None
    stop: StopInfo | None
    stage: str | None = None

    def elapsed_s(self, until: datetime | None) -> float:
        """Seconds it ran: measured, else wall time to its end (or ``until``: an attempt
        superseded without a recorded end held its GPUs at most until the next start)."""
        if self.measured_s is not None and self.ended_at is not None:
            return self.measured_s
        end = self.ended_at or until
        if self.started_at is None or end is None:
            return 0.0
        return max((end - self.started_at).total_seconds(), 0.0)


@dataclass(frozen=True)
class RunState:
    id: str
    stage: str | None = None
    state: str = NOT_STARTED
    attempt: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    pid: int | None = None
    pgid: int | None = None
    create_time: float | None = None
    marker: str | None = None
    params_hash: str | None = None
    gpus: tuple[int, ...] = ()
    exit_code: int | None = None
    exit_file: str | None = None
    stop: StopInfo | None = None
    verdict: str | None = None  # "accepted" | "rejected" | None
    verdict_reason: str | None = None
    verdict_override: bool = False  # accepted although its acceptance checks failed
    # The keys of the acceptance checks a rejection failed ("metric:val/accuracy", ...;
    # :class:`cockpit.close.acceptance.Judgement`); None: unknown (a person's rejection, or a
    # journal from before the keys were kept). The conclusion reads them (D2).
    verdict_failed: tuple[str, ...] | None = None
    verified: tuple[dict[str, Any], ...] = ()  # checkpoint_verified events, oldest first
    measured_s: float | None = None  # as StageState.measured_s
    earlier: tuple[Attempt, ...] = ()  # the attempts before this one, oldest first (D15)

    def attempts(self) -> tuple[Attempt, ...]:
        """Every attempt, oldest first, this one last (none when it never started)."""
        if self.started_at is None:
            return self.earlier
        return self.earlier + (Attempt(self.attempt, self.state, self.started_at,
                                       self.ended_at, self.measured_s, self.gpus,
                                       self.exit_code, self.stop, self.stage),)


@dataclass(frozen=True)
class FiredRule:
    run: str
    rule: str
    reason: str
    value: Any
    threshold: Any
    step: int | None
    action: str
    at: datetime
    attempt: int | None


@dataclass(frozen=True)
class Decision:
    stage: str
    outcome: str
    drops: tuple[str, ...]
    note: str
    at: datetime


@dataclass(frozen=True)
class CostEntry:
    label: str
    money: Money
    at: datetime


@dataclass(frozen=True)
class Dropped:
    """A journal event not folded: who wrote it, which one, why."""

    machine: int | None  # the peer that wrote it; None: this machine's own journal
    seq: Any
    kind: str
    reason: str
    event: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def message(self) -> str:
        where = "this machine's journal" if self.machine is None \
            else f"machine {self.machine}'s journal"
        return printable(f"{where}, event #{self.seq} ({self.kind}): not folded: "
                         f"{self.reason}")


DROPPED_SHOWN = 10  # dropped events named one by one in the warnings; the rest counted


@dataclass(frozen=True)
class CampaignState:
    stages: Mapping[str, StageState]
    runs: Mapping[str, RunState]
    fired: tuple[FiredRule, ...] = ()
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    pending_decisions: tuple[str, ...] = ()
    revised: bool = False
    costs: tuple[CostEntry, ...] = ()
    plan_hash: str | None = None  # the plan as decided (the first one recorded)
    plan_changed: bool = False  # the file now differs from the plan as decided
    latest_plan_hash: str | None = None  # the newest version the journal holds
    rules_hash: str | None = None
    journal_warnings: tuple[str, ...] = ()
    last_seq: int = 0
    not_folded: tuple[Dropped, ...] = ()  # journal events dropped (see fold_history)

    def fired_for(self, run: str, attempt: int | None) -> set[str]:
        return {f.rule for f in self.fired if f.run == run and f.attempt == attempt}

    @property
    def dropped(self) -> set[str]:
        return {s.id for s in self.stages.values() if s.state == DROPPED}


def _when(event: Mapping[str, Any]) -> datetime:
    return parse_time(str(event["t"]))


def _seconds(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None



def _tag(event: Mapping[str, Any]) -> int | None:
    """The peer that wrote an event (its copy tags it); None: the reader's own journal."""
    value = event.get("machine")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def fold(campaign: Campaign, events: Iterable[Mapping[str, Any]], now: datetime,
         machine: int | None = None) -> CampaignState:
    """Replay the journals over the plan (see :func:`fold_history`)."""
    return fold_history(campaign, events, now, machine)[0]


def fold_history(campaign: Campaign, events: Iterable[Mapping[str, Any]], now: datetime,
                 machine: int | None = None
                 ) -> tuple[CampaignState, list[Mapping[str, Any]]]:
    """Replay the journals over the plan; return the state and the events folded.

    ``machine`` is the reader: its own events are untagged, a peer's carry ``machine``.
    Every event counts only when its writer may write it (``refusal``); a peer's must
    also pass the checks its command applies (``_invalid``); a peer's local records
    (its plan record, its warnings) are skipped. With no ``machine`` (a caller with one
    journal and no campaign machines) untagged events are not checked. Unknown events
    and stale references of the own journal are ignored, as before."""
    del now  # the fold is timeless; ``now`` is part of the signature for derived views
    # The ownership table lives beside the event kinds; imported here because the engine
    # package imports this module.
    from cockpit.journal.events import LOCAL, SCOPE, refusal

    stages: dict[str, dict[str, Any]] = {s.id: {"id": s.id, "run": s.run} for s in campaign.stages}
    runs: dict[str, dict[str, Any]] = {r: {"id": r} for r in campaign.runs}
    notes: dict[str, list[str]] = {}
    verified: dict[str, list[dict[str, Any]]] = {}
    fired: list[FiredRule] = []
    decisions: dict[str, Decision] = {}
    costs: list[CostEntry] = []
    warnings: list[str] = []
    plan_hash = rules_hash = latest_plan = None
    last_seq = 0
    kept: list[Mapping[str, Any]] = []
    refused: list[Dropped] = []
    dropped_by: dict[int, set[str]] = {}  # machine -> stages its decisions dropped

    for ev in events:
        kind = ev.get("kind")
        tag = _tag(ev)
        writer = tag if tag is not None else machine
        peer = tag is not None and tag != machine
        if peer and machine is not None and SCOPE.get(str(kind), LOCAL) == LOCAL:
            continue  # the peer's own record (its plan, warnings, exports): not ours
        if writer is not None:
            why = refusal(campaign, ev, writer, dropped_by.get(writer, ()))
            if why is None and peer:
                why = _invalid(campaign, ev, stages, runs, decisions)
            if why is None and kind == "cost":
                try:
                    other_cost(ev.get("label"), ev.get("amount"), ev.get("currency", "USD"))
                except ValueError as exc:
                    why = f"cost: {exc}"
            if why is not None:
                refused.append(Dropped(tag, ev.get("seq"), str(kind), why, ev))
                continue
            if kind == "decision":
                dropped_by.setdefault(writer, set()).update(
                    d for d in ev.get("drops") or () if isinstance(d, str))
        kept.append(ev)
        last_seq = max(last_seq, int(ev.get("seq", 0) or 0))
        stage_id = ev.get("stage")
        run_id = ev.get("run")
        stage = stages.get(stage_id) if isinstance(stage_id, str) else None
        run = runs.setdefault(run_id, {"id": run_id}) if isinstance(run_id, str) else None
        if kind == "plan_recorded":
            plan_hash = latest_plan = ev.get("sha256")
        elif kind == "plan_changed":
            latest_plan = ev.get("sha256")
        elif kind == "rules_recorded":
            rules_hash = ev.get("sha256")
        elif kind == "stage_claimed" and stage is not None:
            # The intent to launch, journaled before the launch (claim before you act).
            # What the stage was before is kept: a claim that expired without a launch
            # gives it back (claim_expired).
            stage["before_claim"] = {k: v for k, v in stage.items() if k != "before_claim"}
            stage.update(state=RUNNING, claim=ev.get("seq"), attempt=None,
                         started_at=_when(ev), ended_at=None, manual=False, exit_code=None,
                         reason=None, pid=None, pgid=None, create_time=None, exit_file=None,
                         marker=ev.get("marker"), measured_s=None)
        elif kind == "claim_expired" and stage is not None and ev.get("claim") is not None \
                and stage.get("claim") == ev.get("claim") and "before_claim" in stage:
            before = stage.pop("before_claim")
            stage.clear()
            stage.update(before)
        elif kind == "stage_started" and stage is not None:
            stage.update(state=RUNNING, attempt=ev.get("seq"), started_at=_when(ev), ended_at=None,
                         measured_s=None,
                         manual=bool(ev.get("manual")), exit_code=None, reason=None,
                         pid=ev.get("pid"), pgid=ev.get("pgid"),
                         create_time=ev.get("create_time"), exit_file=ev.get("exit_file"),
                         marker=ev.get("marker"), claim=None)
            if run is not None and ev.get("pid") is not None:
                _keep_attempt(run, ev.get("seq"))
                # The run starts with its stage: a cockpit killed between the two appends
                # (stage_started, then run_started) must not leave a live run unseen.
                run.update(stage=stage_id, state=RUNNING, attempt=ev.get("seq"),
                           started_at=_when(ev), ended_at=None, pid=ev.get("pid"),
                           pgid=ev.get("pgid"), create_time=ev.get("create_time"),
                           marker=ev.get("marker"), gpus=tuple(ev.get("gpus") or ()),
                           exit_code=None, exit_file=ev.get("exit_file"), stop=None,
                           measured_s=None, verdict=None, verdict_reason=None,
                       verdict_failed=None)
        elif kind == "stage_finished" and stage is not None:
            stage.update(state=ev.get("outcome", DONE), ended_at=_when(ev),
                         exit_code=ev.get("code"), reason=ev.get("reason"), claim=None,
                         measured_s=_seconds(ev.get("elapsed_s")))
            stage.setdefault("started_at", _when(ev))
        elif kind in ("stage_skipped", "stage_dropped") and stage is not None:
            stage.update(state=SKIPPED if kind == "stage_skipped" else DROPPED,
                         ended_at=_when(ev), reason=ev.get("note") or ev.get("reason"))
        elif kind == "run_started" and run is not None:
            _keep_attempt(run, ev.get("attempt"))
            run.update(stage=stage_id, state=RUNNING, attempt=ev.get("attempt"),
                       started_at=_when(ev), ended_at=None, pid=ev.get("pid"),
                       pgid=ev.get("pgid"), create_time=ev.get("create_time"),
                       marker=ev.get("marker"), params_hash=ev.get("params_hash"),
                       gpus=tuple(ev.get("gpus") or ()),
                       exit_code=None, exit_file=ev.get("exit_file"), stop=None,
                       measured_s=None, verdict=None, verdict_reason=None,
                       verdict_failed=None)
        elif kind == "run_exited" and run is not None and ev.get("attempt") == run.get("attempt"):
            code = ev.get("code")
            stop = run.get("stop")
            state = STOPPED if stop else (SUCCEEDED if code == 0 else FAILED)
            run.update(state=state, exit_code=code, ended_at=_when(ev),
                       measured_s=_seconds(ev.get("elapsed_s")))
        elif kind == "stop_requested" and run is not None \
                and ev.get("attempt") == run.get("attempt"):
            run["stop"] = StopInfo(str(ev.get("rule", "manual")), str(ev.get("reason", "")),
                                   ev.get("value"), ev.get("step"), _when(ev),
                                   seq=ev.get("seq"))
            if run.get("state") in (SUCCEEDED, FAILED):
                run["state"] = STOPPED
        elif kind == "stop_done" and run is not None and run.get("stop") is not None \
                and ev.get("attempt") == run.get("attempt"):
            old: StopInfo = run["stop"]
            run["stop"] = StopInfo(old.rule, old.reason, old.value, old.step, old.at, True,
                                   old.seq)
            run["state"] = STOPPED
            if run.get("ended_at") is None:
                run["ended_at"] = _when(ev)
        elif kind == "rule_fired" and isinstance(run_id, str):
            fired.append(FiredRule(run_id, str(ev.get("rule")), str(ev.get("reason", "")),
                                   ev.get("value"), ev.get("threshold"), ev.get("step"),
                                   str(ev.get("action", "stop")), _when(ev), ev.get("attempt")))
        elif kind == "decision" and isinstance(stage_id, str):
            drops = tuple(ev.get("drops") or ())
            decisions[stage_id] = Decision(stage_id, str(ev.get("outcome")), drops,
                                           str(ev.get("note", "")), _when(ev))
            for dropped in drops:
                if dropped in stages and stages[dropped].get("state", PENDING) == PENDING:
                    stages[dropped].update(state=DROPPED, ended_at=_when(ev),
                                           reason=f"dropped by the {ev.get('outcome')} decision")
        elif kind == "note" and isinstance(stage_id, str):
            notes.setdefault(stage_id, []).append(str(ev.get("text", "")))
        elif kind == "cost":
            try:
                money = other_cost(ev.get("label", ""), ev.get("amount"),
                                   ev.get("currency", "USD"))
            except ValueError as exc:  # a reader without a machine checks it here
                warnings.append(f"journal event {ev.get('seq')}: cost not counted: {exc}")
                continue
            costs.append(CostEntry(str(ev.get("label", "")), money, _when(ev)))
        elif kind in ("result_accepted", "result_rejected") and run is not None:
            # A later verdict replaces an earlier one: the last one stands (verdicts come
            # only from the run's own machine: the ownership table).
            failed = ev.get("failed")
            run.update(verdict="accepted" if kind == "result_accepted" else "rejected",
                       verdict_reason=ev.get("reason"),
                       verdict_override=ev.get("override") is True,
                       verdict_failed=tuple(str(f) for f in failed)
                       if kind == "result_rejected" and isinstance(failed, list) else None)
        elif kind == "checkpoint_verified" and isinstance(run_id, str):
            verified.setdefault(run_id, []).append(dict(ev))

    stage_states = {
        sid: StageState(
            id=sid, state=d.get("state", PENDING), attempt=d.get("attempt"),
            started_at=d.get("started_at"), ended_at=d.get("ended_at"), run=d.get("run"),
            manual=d.get("manual", False), exit_code=d.get("exit_code"), reason=d.get("reason"),
            notes=tuple(notes.get(sid, ())), pid=d.get("pid"), pgid=d.get("pgid"),
            create_time=d.get("create_time"), exit_file=d.get("exit_file"),
            marker=d.get("marker"), claim=d.get("claim"), measured_s=d.get("measured_s"),
        )
        for sid, d in stages.items()
    }
    run_states = {
        rid: RunState(
            id=rid, stage=d.get("stage"), state=d.get("state", NOT_STARTED),
            attempt=d.get("attempt"), started_at=d.get("started_at"), ended_at=d.get("ended_at"),
            pid=d.get("pid"), pgid=d.get("pgid"), create_time=d.get("create_time"),
            marker=d.get("marker"), params_hash=d.get("params_hash"), gpus=d.get("gpus", ()),
            exit_code=d.get("exit_code"), exit_file=d.get("exit_file"), stop=d.get("stop"),
            verdict=d.get("verdict"), verdict_reason=d.get("verdict_reason"),
            verdict_override=d.get("verdict_override", False),
            verdict_failed=d.get("verdict_failed"),
            verified=tuple(verified.get(rid, ())), measured_s=d.get("measured_s"),
            earlier=tuple(d.get("earlier", ())),
        )
        for rid, d in runs.items()
    }
    pending = tuple(s.id for s in campaign.stages
                    if s.decision_point and stage_states[s.id].state == DONE
                    and s.id not in decisions)
    return CampaignState(
        stages=stage_states,
        runs=run_states,
        fired=tuple(fired),
        decisions=decisions,
        pending_decisions=pending,
        revised=any(d.outcome == "revise" for d in decisions.values()),
        costs=tuple(costs),
        plan_hash=plan_hash,
        plan_changed=plan_hash is not None and plan_hash != campaign.sha256,
        latest_plan_hash=latest_plan,
        rules_hash=rules_hash,
        journal_warnings=tuple(warnings) + _dropped_warnings(refused),
        last_seq=last_seq,
        not_folded=tuple(refused),
    ), kept


def _keep_attempt(run: dict[str, Any], attempt: Any) -> None:
    """Before a new attempt replaces a run's fields, keep the one it replaces (D15)."""
    if run.get("started_at") is None or run.get("attempt") == attempt:
        return  # never started, or the same attempt (stage_started, then run_started)
    run.setdefault("earlier", []).append(Attempt(
        run.get("attempt"), run.get("state", NOT_STARTED), run.get("started_at"),
        run.get("ended_at"), run.get("measured_s"), tuple(run.get("gpus") or ()),
        run.get("exit_code"), run.get("stop"), run.get("stage")))


def _dropped_warnings(dropped: list[Dropped]) -> tuple[str, ...]:
    """One warning per dropped event (the first few), then how many more."""
    shown = tuple(d.message() for d in dropped[:DROPPED_SHOWN])
    more = len(dropped) - DROPPED_SHOWN
    if more > 0:
        machines = sorted({"this machine" if d.machine is None else f"machine {d.machine}"
                           for d in dropped[DROPPED_SHOWN:]})
        shown += (f"and {more} more journal events not folded ({', '.join(machines)})",)
    return shown


def _invalid(campaign: Campaign, ev: Mapping[str, Any], stages: Mapping[str, Any],
             runs: Mapping[str, Any], decisions: Mapping[str, Decision]) -> str | None:
    """Why a peer's event fails the check its own command applies before writing it
    (None: it passes). The state is the fold's so far: the peer's own events about its
    own stages, in its own order."""
    from cockpit.journal.events import DECISION, RUN, SCOPE, STAGE

    kind = str(ev.get("kind"))
    scope = SCOPE.get(kind)
    stage_id, run_id = ev.get("stage"), ev.get("run")
    if scope == RUN and not (isinstance(run_id, str) and run_id in campaign.runs):
        return f"run {run_id} is not in the plan"
    if (scope in (STAGE, DECISION) or kind == "note") and not (
            isinstance(stage_id, str) and stage_id in stages):
        return f"stage {stage_id} is not in the plan"
    st: Mapping[str, Any] = stages.get(stage_id, {}) if isinstance(stage_id, str) else {}
    state = st.get("state", PENDING)
    run: Mapping[str, Any] = runs.get(run_id, {}) if isinstance(run_id, str) else {}
    run_state = run.get("state", NOT_STARTED)
    if kind == "stage_claimed" and state in (RUNNING, SKIPPED, DROPPED):
        return f"stage {stage_id} is {state}"
    if kind == "stage_started" and (state in (SKIPPED, DROPPED) or (
            state == RUNNING and (st.get("claim") is None or ev.get("claim") != st["claim"]))):
        return f"stage {stage_id} is {'already ' if state == RUNNING else ''}{state}"
    if kind == "stage_finished" and state != RUNNING:
        return f"stage {stage_id} is not running ({state})"
    # A decision drops its stages in the fold already; its stage_dropped lines follow.
    if kind in ("stage_skipped", "stage_dropped") and state not in (
            (PENDING,) if kind == "stage_skipped" else (PENDING, DROPPED)):
        return f"stage {stage_id} is {state}, not pending"
    if kind == "stop_requested":
        if run_state != RUNNING or ev.get("attempt") != run.get("attempt"):
            return f"run {run_id} is not running (this attempt)"
        if run.get("stop") is not None:
            return f"run {run_id} is already being stopped"
    if kind == "result_accepted":
        spec = campaign.runs[str(run_id)]
        if not spec.produces_result:
            return f"run {run_id} produces no result (D21)"
        if run.get("stop") is not None or run_state == STOPPED:
            return f"run {run_id} was stopped: a stopped run is never an accepted result (D15)"
        if run_state != SUCCEEDED:
            return f"run {run_id} is {run_state.replace('_', ' ')}, not ended successfully"
    if kind == "result_rejected" and run_state in (NOT_STARTED, RUNNING):
        return f"run {run_id} is {run_state.replace('_', ' ')}"
    if kind == "decision":
        spec_stage = campaign.stage(str(stage_id))
        if not spec_stage.decision_point:
            return f"stage {stage_id} is not a decision point"
        if ev.get("outcome") not in ("continue", "limit", "revise"):
            return f"{printable(ev.get('outcome'), 40)!s} is not continue, limit or revise"
        if state != DONE or stage_id in decisions:
            return f"no decision is pending at stage {stage_id}"
        for d in ev.get("drops") or ():
            if not isinstance(d, str) or d not in stages:
                return f"it drops {printable(d, 40)}, no stage of the plan"
            if campaign.stage(d).category == "essential":
                return f"it drops the essential stage {d} (D3)"
            # A dropped stage that already started on its own machine (the decider saw
            # it pending a moment before) stays as it is: the fold drops only pending ones.
    return None


def total_costs(costs: Iterable[CostEntry]) -> dict[str, Money]:
    """Other costs summed per currency (never converted, never mixed)."""
    totals: dict[str, Money] = {}
    for cost in costs:
        prior = totals.get(cost.money.currency, Money(Decimal(0), cost.money.currency))
        totals[cost.money.currency] = prior + cost.money
    return totals
