"""The fold of the campaign-wide records: the plan and rules as recorded, decisions,
notes and other costs."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from cockpit.common.event_kinds import EXPORT_DONE, PLAN_CHANGED, PLAN_RECORDED, RULES_RECORDED
from cockpit.common.units import Money, other_cost
from cockpit.journal.fields import Event
from cockpit.journal.fold_draft import Folding, Handler, when
from cockpit.journal.state import DROPPED, PENDING, CostEntry, Decision

NOTES_KEPT = 50  # a stage's newest notes the state lists
COSTS_KEPT = 50  # the newest other costs the state lists (the totals count every one)


def plan_recorded(f: Folding, ev: Event) -> None:
    f.plan_hash = f.latest_plan = ev.get("sha256")


def plan_changed(f: Folding, ev: Event) -> None:
    f.latest_plan = ev.get("sha256")


def rules_recorded(f: Folding, ev: Event) -> None:
    f.rules_hash = ev.get("sha256")


def decision(f: Folding, ev: Event) -> None:
    """The decision at a stage; it drops the stages it names that are still pending."""
    stage_id = ev.get("stage")
    if not isinstance(stage_id, str):
        return
    drops = tuple(ev.get("drops") or ())
    f.decisions[stage_id] = Decision(stage_id, str(ev.get("outcome")), drops,
                                     str(ev.get("note", "")), when(ev))
    for dropped in drops:
        if dropped in f.stages and f.stages[dropped].get("state", PENDING) == PENDING:
            f.stages[dropped].update(state=DROPPED, ended_at=when(ev),
                                     reason=f"dropped by the {ev.get('outcome')} decision")


def note(f: Folding, ev: Event) -> None:
    """A stage's notes: the newest :data:`NOTES_KEPT` (between that and twice it) and
    how many there were (the journal holds them all)."""
    stage_id = ev.get("stage")
    if isinstance(stage_id, str):
        kept = f.notes.setdefault(stage_id, [])
        kept.append(str(ev.get("text", "")))
        if len(kept) > 2 * NOTES_KEPT:
            del kept[:-NOTES_KEPT]
        f.notes_count[stage_id] = f.notes_count.get(stage_id, 0) + 1


def cost(f: Folding, ev: Event) -> None:
    try:
        money = other_cost(ev.get("label", ""), ev.get("amount"), ev.get("currency", "USD"))
    except ValueError as exc:  # a reader without a machine checks it here
        f.warnings.append(f"journal event {ev.get('seq')}: cost not counted: {exc}")
        return
    f.costs.append(CostEntry(str(ev.get("label", "")), money, when(ev)))
    if len(f.costs) > 2 * COSTS_KEPT:
        del f.costs[:-COSTS_KEPT]  # the newest are listed; every one is in the totals
    prior = f.cost_totals.get(money.currency, Money(Decimal(0), money.currency))
    f.cost_totals[money.currency] = prior + money
    f.costs_count += 1


def export_done(f: Folding, ev: Event) -> None:
    """The newest export written (verified or kept failed): what closed the campaign
    and how big it is (D19's retrieval time). One kept beside the current export after
    failing verification is not it (the current one is still what is fetched)."""
    if not ev.get("kept_failed"):
        f.export = ev


RECORD_HANDLERS: Mapping[str, Handler] = {
    PLAN_RECORDED: plan_recorded,
    PLAN_CHANGED: plan_changed,
    RULES_RECORDED: rules_recorded,
    "decision": decision,
    "note": note,
    "cost": cost,
    EXPORT_DONE: export_done,
}
