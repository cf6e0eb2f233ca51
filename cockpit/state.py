"""fold(plan, events, now) -> CampaignState: what happened, as a pure function.

The journal is the one source of truth; this module turns its events into the
state of every stage and run, the fired rules, the decisions and the costs. No
files, no clock of its own: ``now`` is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.journal import parse_time
from cockpit.units import Money

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
    verified: tuple[dict[str, Any], ...] = ()  # checkpoint_verified events, oldest first
    measured_s: float | None = None  # as StageState.measured_s


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


def fold(campaign: Campaign, events: Iterable[Mapping[str, Any]], now: datetime) -> CampaignState:
    """Replay the journal over the plan. Unknown events and stale references are ignored."""
    del now  # the fold is timeless; ``now`` is part of the signature for derived views
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
    verdict_from: dict[str, tuple[Any, str]] = {}  # run -> (machine, verdict) of the last

    for ev in events:
        kind = ev.get("kind")
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
                # The run starts with its stage: a cockpit killed between the two appends
                # (stage_started, then run_started) must not leave a live run unseen.
                run.update(stage=stage_id, state=RUNNING, attempt=ev.get("seq"),
                           started_at=_when(ev), ended_at=None, pid=ev.get("pid"),
                           pgid=ev.get("pgid"), create_time=ev.get("create_time"),
                           marker=ev.get("marker"), gpus=tuple(ev.get("gpus") or ()),
                           exit_code=None, exit_file=ev.get("exit_file"), stop=None,
                           measured_s=None, verdict=None, verdict_reason=None)
        elif kind == "stage_finished" and stage is not None:
            stage.update(state=ev.get("outcome", DONE), ended_at=_when(ev),
                         exit_code=ev.get("code"), reason=ev.get("reason"), claim=None,
                         measured_s=_seconds(ev.get("elapsed_s")))
            stage.setdefault("started_at", _when(ev))
        elif kind in ("stage_skipped", "stage_dropped") and stage is not None:
            stage.update(state=SKIPPED if kind == "stage_skipped" else DROPPED,
                         ended_at=_when(ev), reason=ev.get("note") or ev.get("reason"))
        elif kind == "run_started" and run is not None:
            run.update(stage=stage_id, state=RUNNING, attempt=ev.get("attempt"),
                       started_at=_when(ev), ended_at=None, pid=ev.get("pid"),
                       pgid=ev.get("pgid"), create_time=ev.get("create_time"),
                       marker=ev.get("marker"), params_hash=ev.get("params_hash"),
                       gpus=tuple(ev.get("gpus") or ()),
                       exit_code=None, exit_file=ev.get("exit_file"), stop=None,
                       measured_s=None, verdict=None, verdict_reason=None)
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
                money = Money.parse(str(ev.get("amount")), str(ev.get("currency", "USD")))
            except (ValueError, InvalidOperation):
                warnings.append(f"journal event {ev.get('seq')}: unreadable cost amount")
                continue
            costs.append(CostEntry(str(ev.get("label", "")), money, _when(ev)))
        elif kind in ("result_accepted", "result_rejected") and run is not None:
            # A later verdict replaces an earlier one: the last one stands. Verdicts on one
            # run recorded on two machines are a conflict: shown, and the later one stands.
            verdict = "accepted" if kind == "result_accepted" else "rejected"
            where = ev.get("machine")
            prior = verdict_from.get(run_id)  # type: ignore[arg-type]
            if prior is not None and prior[0] != where:
                def name(m: Any) -> str:
                    return "this machine" if m is None else f"machine {m}"
                warnings.append(
                    f"run {run_id}: verdicts on two machines ({prior[1]} on {name(prior[0])}, "
                    f"then {verdict} on {name(where)} at {ev.get('t')}): the later one stands")
            verdict_from[str(run_id)] = (where, verdict)
            run.update(verdict="accepted" if kind == "result_accepted" else "rejected",
                       verdict_reason=ev.get("reason"),
                       verdict_override=ev.get("override") is True)
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
            verified=tuple(verified.get(rid, ())), measured_s=d.get("measured_s"),
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
        journal_warnings=tuple(warnings),
        last_seq=last_seq,
    )


def total_costs(costs: Iterable[CostEntry]) -> dict[str, Money]:
    """Other costs summed per currency (never converted, never mixed)."""
    totals: dict[str, Money] = {}
    for cost in costs:
        prior = totals.get(cost.money.currency, Money(Decimal(0), cost.money.currency))
        totals[cost.money.currency] = prior + cost.money
    return totals
