"""The budget at the close (D20, D21): package committed, other costs, accepted results.

This module owns the pure computation ``budget_of(campaign, state, now) -> Budget`` (a
frozen value the faces read field by field), its JSON (``budget`` / ``Budget.as_json``) and
its text rendering. Money stays exact (Decimal with its currency). The package is
paid whole (D8): nothing here divides a price by hours, and no price per hour is ever
shown. The rental share per accepted result is ``committed / accepted results``, rounded
to the cent (D21); with zero accepted results it is *undefined*, never 0: the cost
incurred and every rejection or stop reason are shown instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.common.printable import printable
from cockpit.common.units import Money, format_hours, plain_amount
from cockpit.journal.fold import (
    FAILED,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    Attempt,
    CampaignState,
    RunState,
)
from cockpit.runs.supervisor import stage_gpus

# The undefined share's pointer to what the budget shows instead (D21); a face that shows
# the incurred cost and the reasons beside it shows ``Budget.share_undefined`` alone.
SEE_BELOW = "; see the cost incurred and the reasons below"


@dataclass(frozen=True)
class PackageTerms:
    """What was bought (D8: paid whole)."""

    offer: str
    gpu: str
    gpus: int
    days: float
    count: int
    price: Money | None
    order_ref: str | None

    def as_json(self) -> dict[str, Any]:
        return {"offer": self.offer, "gpu": self.gpu, "gpus": self.gpus, "days": self.days,
                "count": self.count,
                "price": self.price.as_json() if self.price else None,
                "order_ref": self.order_ref}


@dataclass(frozen=True)
class OtherCost:
    """One other cost (D20), kept apart from the rental."""

    label: str
    money: Money
    at: datetime

    def as_json(self) -> dict[str, Any]:
        return {"label": self.label, "amount": plain_amount(self.money.amount),
                "currency": self.money.currency, "at": self.at.isoformat()}


@dataclass(frozen=True)
class Rejection:
    """Why a run is not an accepted result: ``kind`` stopped / rejected / failed / unjudged."""

    run: str
    kind: str
    reason: str
    rule: str | None = None  # stopped: the rule that stopped it
    step: int | None = None  # stopped: at which step, when recorded

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run": self.run, "kind": self.kind, "reason": self.reason}
        if self.kind == "stopped":
            out["rule"] = self.rule
            if self.step is not None:
                out["step"] = self.step
        return out


@dataclass(frozen=True)
class EarlierAttempt:
    """An attempt a later one replaced (D15: it keeps its reason and stays a cost)."""

    run: str
    attempt: int
    of: int
    started: datetime | None
    ended: datetime | None
    outcome: str
    reason: str
    rule: str | None
    step: int | None
    gpu_hours: float

    def as_json(self) -> dict[str, Any]:
        return {"run": self.run, "attempt": self.attempt, "of": self.of,
                "started": self.started.isoformat() if self.started else None,
                "ended": self.ended.isoformat() if self.ended else None,
                "outcome": self.outcome, "reason": self.reason, "rule": self.rule,
                "step": self.step, "gpu_hours": self.gpu_hours}


@dataclass(frozen=True)
class Budget:
    """The close's money view (D20, D21). Amounts are exact :class:`Money`; where a
    figure is unknown it is None and a sentence says why (never 0)."""

    campaign: str
    package: PackageTerms
    committed: Money | None  # None: the offer's price is unknown
    committed_note: str | None  # why it is unknown
    other_costs: tuple[OtherCost, ...]  # the newest (all of them in the total)
    other_costs_count: int
    other_costs_total: tuple[Money, ...]  # one per currency, never mixed
    cost_incurred: tuple[Money, ...] | None  # None: the package price is unknown
    accepted_runs: Mapping[str, tuple[str, ...]]  # accepted result id -> its runs (D21)
    overrides: Mapping[str, str]  # run accepted although its checks failed -> the note
    share_per_accepted: Money | None
    # Why the share is undefined, in one sentence (None: it is defined); the JSON's
    # ``undefined_reason`` adds SEE_BELOW when no result is accepted.
    share_undefined: str | None
    rejections: tuple[Rejection, ...]
    gpu_hours: Mapping[str, float]
    earlier_attempts: tuple[EarlierAttempt, ...]

    @property
    def accepted(self) -> int:
        return len(self.accepted_runs)

    @property
    def accepted_results(self) -> tuple[str, ...]:
        return tuple(self.accepted_runs)

    @property
    def undefined_reason(self) -> str | None:
        if self.share_undefined is None:
            return None
        return self.share_undefined + (SEE_BELOW if self.accepted == 0 else "")

    @property
    def committed_label(self) -> str:
        """The committed amount in words, or that the price is unknown (never 0)."""
        return str(self.committed) if self.committed is not None else \
            "price unknown (state it)"

    def as_json(self) -> dict[str, Any]:
        """The JSON shape of ``cockpit budget --json`` and the Snapshot's ``budget``."""
        return {
            "campaign": self.campaign, "package": self.package.as_json(),
            "committed": self.committed.as_json() if self.committed is not None else None,
            "committed_note": self.committed_note,
            "other_costs": [c.as_json() for c in self.other_costs],
            "other_costs_count": self.other_costs_count,
            "other_costs_total": [m.as_json() for m in self.other_costs_total],
            "cost_incurred": None if self.cost_incurred is None
            else [m.as_json() for m in self.cost_incurred],
            "accepted": self.accepted, "accepted_results": list(self.accepted_results),
            "accepted_runs": {rid: list(runs) for rid, runs in self.accepted_runs.items()},
            "overrides": dict(self.overrides),
            "share_per_accepted": self.share_per_accepted.as_json()
            if self.share_per_accepted is not None else None,
            "undefined_reason": self.undefined_reason,
            "rejections": [r.as_json() for r in self.rejections],
            "gpu_hours": dict(self.gpu_hours),
            "earlier_attempts": [e.as_json() for e in self.earlier_attempts],
        }


def _hours(seconds: float) -> float:
    return round(seconds / 3600.0, 4)


def accepted_results(campaign: Campaign, state: CampaignState) -> dict[str, list[str]]:
    """Accepted result id -> the runs that produced it (D21: one corpus run five times is one).

    A stopped run is never an accepted result (D15), whatever the journal says.
    """
    results: dict[str, list[str]] = {}
    for run_id, run in state.runs.items():
        if run.verdict != "accepted" or run.state == STOPPED or run.stop is not None:
            continue
        spec = campaign.runs.get(run_id)
        if spec is not None and not spec.produces_result:
            continue  # a data check, pilot or resume check is no result (D21)
        result_id = spec.result_id if spec is not None else run_id
        results.setdefault(result_id, []).append(run_id)
    return dict(sorted(results.items()))


def rejections(campaign: Campaign, state: CampaignState) -> tuple[Rejection, ...]:
    """Every reason a run is not an accepted result: rejected, stopped, failed, unjudged."""
    out: list[Rejection] = []
    for run_id, run in state.runs.items():
        spec = campaign.runs.get(run_id)
        if spec is not None and not spec.produces_result:
            continue  # measures, checks or decides: no verdict to give
        if run.stop is not None or run.state == STOPPED:
            stop = run.stop
            reason = stop.reason if stop and stop.reason else "stopped (no reason recorded)"
            out.append(Rejection(run_id, "stopped", reason, stop.rule if stop else None,
                                 stop.step if stop else None))
        elif run.verdict == "rejected":
            out.append(Rejection(run_id, "rejected",
                                 run.verdict_reason or "rejected (no reason recorded)"))
        elif run.state == FAILED:
            code = run.exit_code
            out.append(Rejection(run_id, "failed", f"exit code {code}" if code is not None
                                 else "ended without an exit code"))
        elif run.state == SUCCEEDED and run.verdict is None:
            out.append(Rejection(run_id, "unjudged",
                                 "finished, but not yet accepted or rejected"))
    return tuple(out)


def _attempt_gpus(campaign: Campaign, run_id: str, attempt: Attempt) -> int:
    if attempt.gpus:
        return len(attempt.gpus)
    stage = next((s for s in campaign.stages if s.id == attempt.stage), None) \
        or campaign.stage_of_run(run_id)
    return len(stage_gpus(stage, campaign.package.offer.gpus)) if stage else 0


def _attempt_seconds(run: RunState, index: int, now: datetime) -> float:
    """Seconds attempt ``index`` of the run held its GPUs: measured (monotonic: a
    wall-clock step while it ran is no GPU time), else wall time to its end; the attempt
    running now counts to ``now``; an earlier one with no recorded end, to the next
    attempt's start."""
    attempts = run.attempts()
    attempt = attempts[index]
    if index + 1 < len(attempts):
        return attempt.elapsed_s(attempts[index + 1].started_at)
    return attempt.elapsed_s(now if run.state == RUNNING else None)


def gpu_hours(campaign: Campaign, state: CampaignState, now: datetime) -> dict[str, float]:
    """GPU-hours each run held: wall time (started -> ended, or now) x GPUs held, summed
    over every attempt (a run restarted with ``start --force`` paid for each one).

    Stopped runs are included: an interrupted run stays an expense (D15).
    """
    out: dict[str, float] = {}
    for run_id, run in state.runs.items():
        attempts = run.attempts()
        if not attempts:
            continue
        out[run_id] = _hours(sum(_attempt_seconds(run, i, now)
                                 * _attempt_gpus(campaign, run_id, a)
                                 for i, a in enumerate(attempts)))
    return out


def earlier_attempts(campaign: Campaign, state: CampaignState,
                     now: datetime) -> tuple[EarlierAttempt, ...]:
    """Every attempt a later one replaced: how it ended, why, and the GPU-hours it held
    (D15: a stopped attempt keeps its reason and stays a cost)."""
    out: list[EarlierAttempt] = []
    for run_id, run in state.runs.items():
        attempts = run.attempts()
        for i, attempt in enumerate(attempts[:-1]):
            stop = attempt.stop
            if stop is not None:
                step = f" at step {stop.step}" if stop.step is not None else ""
                reason = f"stopped by {stop.rule}{step}: {stop.reason or 'no reason recorded'}"
            elif attempt.state == FAILED:
                reason = f"failed (exit code {attempt.exit_code})"
            else:
                reason = attempt.state.replace("_", " ")
            out.append(EarlierAttempt(
                run_id, i + 1, len(attempts), attempt.started_at, attempt.ended_at,
                "stopped" if stop is not None else attempt.state, reason,
                stop.rule if stop else None, stop.step if stop else None,
                _hours(_attempt_seconds(run, i, now)
                       * _attempt_gpus(campaign, run_id, attempt))))
    return tuple(out)


def _money_totals(others: tuple[Money, ...], committed: Money | None
                  ) -> tuple[dict[str, Money], dict[str, Money]]:
    """The other costs per currency (the fold's totals), and the cost incurred: the
    package (when its price is known) plus the other costs, per currency, never mixed."""
    totals = {m.currency: m for m in others}
    incurred = dict(totals)
    if committed is not None:
        prior = incurred.get(committed.currency, Money(Decimal(0), committed.currency))
        incurred[committed.currency] = prior + committed
    return totals, incurred


def budget_of(campaign: Campaign, state: CampaignState, now: datetime) -> Budget:
    """The close's money view, typed (the faces read it field by field)."""
    pkg = campaign.package
    committed = pkg.cost
    committed_note = None
    if committed is None:
        committed_note = (f"the price of offer {pkg.offer.id} is unknown: state it in the "
                          "campaign file (offers: - id: ..., price: ...); it is not 0")
    others = tuple(OtherCost(c.label, c.money, c.at) for c in state.costs)
    other_totals, incurred = _money_totals(state.cost_totals, committed)
    results = accepted_results(campaign, state)
    share = None
    undefined = None
    if not results:
        undefined = ("no accepted result: the rental share per accepted result is undefined "
                     "(D21)")
    elif committed is None:
        undefined = "the package price is unknown, so the share per accepted result is too"
    else:
        share = committed.split(len(results))
    return Budget(
        campaign=campaign.id,
        package=PackageTerms(pkg.offer.id, pkg.offer.gpu, pkg.offer.gpus, pkg.offer.days,
                             pkg.count, pkg.offer.price, pkg.order_ref),
        committed=committed, committed_note=committed_note, other_costs=others,
        other_costs_count=state.costs_count,
        other_costs_total=tuple(other_totals.values()),
        cost_incurred=None if committed is None else tuple(incurred.values()),
        accepted_runs={rid: tuple(runs) for rid, runs in results.items()},
        overrides={run_id: run.verdict_reason or "" for run_id, run in state.runs.items()
                   if run.verdict == "accepted" and run.verdict_override
                   and any(run_id in runs for runs in results.values())},
        share_per_accepted=share, share_undefined=undefined,
        rejections=rejections(campaign, state), gpu_hours=gpu_hours(campaign, state, now),
        earlier_attempts=earlier_attempts(campaign, state, now))


def budget(campaign: Campaign, state: CampaignState, now: datetime) -> dict[str, Any]:
    """The close's money view as plain JSON (amounts as exact strings)."""
    return budget_of(campaign, state, now).as_json()


def render_budget(data: dict[str, Any]) -> str:
    """The budget as short text lines (never a price per hour, D8)."""
    lines = [f"Budget of campaign {data['campaign']}"]
    pkg = data["package"]
    if data["committed"] is not None:
        c = data["committed"]
        price = pkg["price"]
        lines.append(f"  package committed: {c['amount']} {c['currency']} "
                     f"({pkg['count']} x {pkg['offer']} at {price['amount']} {price['currency']})")
    else:
        lines.append(f"  package committed: unknown ({data['committed_note']})")
    if data["other_costs"]:
        listed, count = len(data["other_costs"]), data.get("other_costs_count", 0)
        tail = f"; the newest {listed} of {count}, every one in the total" \
            if count > listed else ""
        lines.append(f"  other costs (kept apart from the rental, D20{tail}):")
        if data["other_costs_total"]:
            lines.append("    total: " + ", ".join(f"{m['amount']} {m['currency']}"
                                                  for m in data["other_costs_total"]))
        for cost in data["other_costs"]:
            lines.append(f"    {cost['label']}: {cost['amount']} {cost['currency']}")
    else:
        lines.append("  other costs: none recorded")
    if data["cost_incurred"]:
        lines.append("  cost incurred: " + ", ".join(f"{m['amount']} {m['currency']}"
                                                     for m in data["cost_incurred"]))
    results = data["accepted_results"]
    lines.append(f"  accepted results: {data['accepted']}"
                 + (f" ({', '.join(results)})" if results else ""))
    for rid, runs in data["accepted_runs"].items():
        if len(runs) > 1:
            lines.append(f"    result {rid} from runs {', '.join(runs)} counts once (D21)")
    for run_id, why in data.get("overrides", {}).items():
        lines.append(f"    run {run_id} accepted by override, its acceptance checks failed: {why}")
    if data["share_per_accepted"] is not None:
        s = data["share_per_accepted"]
        lines.append(f"  rental share per accepted result: {s['amount']} {s['currency']}")
    else:
        lines.append(f"  rental share per accepted result: undefined — {data['undefined_reason']}")
    if data["rejections"]:
        lines.append("  not accepted:")
        for r in data["rejections"]:
            lines.append(f"    {r['run']}: {r['kind']} — {r['reason']}")
    earlier = data.get("earlier_attempts") or []
    if data["gpu_hours"]:
        counts = {e["run"]: e["of"] for e in earlier}
        lines.append("  GPU-hours held: " + ", ".join(
            f"{run} {format_hours(h)}" + (f" ({counts[run]} attempts)" if run in counts else "")
            for run, h in data["gpu_hours"].items()))
    if earlier:
        lines.append("  earlier attempts (restarted; each stays a cost, D15):")
        for e in earlier:
            lines.append(f"    {e['run']} attempt {e['attempt']} of {e['of']}: {e['reason']} "
                         f"({format_hours(e['gpu_hours'])} GPU-hours)")
    # Cost labels, currencies and reasons are journal text (a peer's too).
    return "\n".join(printable(line, 2000) for line in lines)
