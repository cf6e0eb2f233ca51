"""The budget at the close (D20, D21): package committed, other costs, accepted results.

This module owns the pure computation ``budget(campaign, state, now) -> dict`` (JSON-ready)
and its text rendering. Money stays exact (Decimal with its currency). The package is
paid whole (D8): nothing here divides a price by hours, and no price per hour is ever
shown. The rental share per accepted result is ``committed / accepted results``, rounded
to the cent (D21); with zero accepted results it is *undefined*, never 0: the cost
incurred and every rejection or stop reason are shown instead.
"""

from __future__ import annotations

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


def rejections(campaign: Campaign, state: CampaignState) -> list[dict[str, Any]]:
    """Every reason a run is not an accepted result: rejected, stopped, failed, unjudged."""
    out: list[dict[str, Any]] = []
    for run_id, run in state.runs.items():
        spec = campaign.runs.get(run_id)
        if spec is not None and not spec.produces_result:
            continue  # measures, checks or decides: no verdict to give
        if run.stop is not None or run.state == STOPPED:
            stop = run.stop
            reason = stop.reason if stop and stop.reason else "stopped (no reason recorded)"
            entry: dict[str, Any] = {"run": run_id, "kind": "stopped", "reason": reason,
                                     "rule": stop.rule if stop else None}
            if stop is not None and stop.step is not None:
                entry["step"] = stop.step
            out.append(entry)
        elif run.verdict == "rejected":
            out.append({"run": run_id, "kind": "rejected",
                        "reason": run.verdict_reason or "rejected (no reason recorded)"})
        elif run.state == FAILED:
            code = run.exit_code
            out.append({"run": run_id, "kind": "failed",
                        "reason": f"exit code {code}" if code is not None
                        else "ended without an exit code"})
        elif run.state == SUCCEEDED and run.verdict is None:
            out.append({"run": run_id, "kind": "unjudged",
                        "reason": "finished, but not yet accepted or rejected"})
    return out


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
                     now: datetime) -> list[dict[str, Any]]:
    """Every attempt a later one replaced: how it ended, why, and the GPU-hours it held
    (D15: a stopped attempt keeps its reason and stays a cost)."""
    out: list[dict[str, Any]] = []
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
            out.append({"run": run_id, "attempt": i + 1, "of": len(attempts),
                        "started": attempt.started_at.isoformat() if attempt.started_at
                        else None,
                        "ended": attempt.ended_at.isoformat() if attempt.ended_at else None,
                        "outcome": "stopped" if stop is not None else attempt.state,
                        "reason": reason, "rule": stop.rule if stop else None,
                        "step": stop.step if stop else None,
                        "gpu_hours": _hours(_attempt_seconds(run, i, now)
                                            * _attempt_gpus(campaign, run_id, attempt))})
    return out


def budget(campaign: Campaign, state: CampaignState, now: datetime) -> dict[str, Any]:
    """The close's money view as plain JSON (amounts as exact strings)."""
    pkg = campaign.package
    committed = pkg.cost
    committed_note = None
    if committed is None:
        committed_note = (f"the price of offer {pkg.offer.id} is unknown: state it in the "
                          "campaign file (offers: - id: ..., price: ...); it is not 0")
    others = [{"label": c.label, "amount": plain_amount(c.money.amount),
               "currency": c.money.currency, "at": c.at.isoformat()} for c in state.costs]
    other_totals: dict[str, Money] = {}
    for c in state.costs:
        prior = other_totals.get(c.money.currency, Money(Decimal(0), c.money.currency))
        other_totals[c.money.currency] = prior + c.money

    # Cost incurred: the package (when known) plus other costs, per currency, never mixed.
    incurred: dict[str, Money] = dict(other_totals)
    if committed is not None:
        prior = incurred.get(committed.currency, Money(Decimal(0), committed.currency))
        incurred[committed.currency] = prior + committed

    results = accepted_results(campaign, state)
    count = len(results)
    share = None
    undefined = None
    if count == 0:
        undefined = ("no accepted result: the rental share per accepted result is undefined "
                     "(D21); see the cost incurred and the reasons below")
    elif committed is None:
        undefined = "the package price is unknown, so the share per accepted result is too"
    else:
        share = committed.split(count)

    return {
        "campaign": campaign.id,
        "package": {"offer": pkg.offer.id, "gpu": pkg.offer.gpu, "gpus": pkg.offer.gpus,
                    "days": pkg.offer.days, "count": pkg.count,
                    "price": pkg.offer.price.as_json() if pkg.offer.price else None,
                    "order_ref": pkg.order_ref},
        "committed": committed.as_json() if committed is not None else None,
        "committed_note": committed_note,
        "other_costs": others,
        "other_costs_total": [m.as_json() for m in other_totals.values()],
        "cost_incurred": None if committed is None else [m.as_json() for m in incurred.values()],
        "accepted": count,
        "accepted_results": list(results),
        "accepted_runs": {rid: runs for rid, runs in results.items()},
        "overrides": {run_id: run.verdict_reason or "" for run_id, run in state.runs.items()
                      if run.verdict == "accepted" and run.verdict_override
                      and any(run_id in runs for runs in results.values())},
        "share_per_accepted": share.as_json() if share is not None else None,
        "undefined_reason": undefined,
        "rejections": rejections(campaign, state),
        "gpu_hours": gpu_hours(campaign, state, now),
        "earlier_attempts": earlier_attempts(campaign, state, now),
    }


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
        lines.append("  other costs (kept apart from the rental, D20):")
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
