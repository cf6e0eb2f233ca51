"""The fold in progress: what the handlers of each event kind update.

:class:`Folding` holds a mutable draft of every stage and run (a dict of the fields
its frozen state will have) and the campaign-wide records; the handlers
(:mod:`cockpit.journal.fold_stages`, :mod:`cockpit.journal.fold_runs`,
:mod:`cockpit.journal.fold_records`) each take it and one event; :mod:`cockpit.journal.fold`
dispatches by kind and freezes the result into a
:class:`cockpit.journal.state.CampaignState`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.common.units import Money
from cockpit.journal.fields import Event
from cockpit.journal.format import parse_time
from cockpit.journal.state import CostEntry, Decision, FiredRule

Draft = dict[str, Any]  # a stage's or run's fields while the fold runs


@dataclass
class Folding:
    campaign: Campaign
    stages: dict[str, Draft]
    runs: dict[str, Draft]
    notes: dict[str, list[str]] = field(default_factory=dict)
    verified: dict[str, list[Event]] = field(default_factory=dict)
    fired: list[FiredRule] = field(default_factory=list)
    decisions: dict[str, Decision] = field(default_factory=dict)
    costs: list[CostEntry] = field(default_factory=list)  # the newest (fold_records)
    cost_totals: dict[str, Money] = field(default_factory=dict)  # every cost, per currency
    costs_count: int = 0
    notes_count: dict[str, int] = field(default_factory=dict)  # every note, per stage
    warnings: list[str] = field(default_factory=list)
    plan_hash: str | None = None
    latest_plan: str | None = None
    rules_hash: str | None = None
    export: Event | None = None  # the newest export_done event (fold_records.export_done)

    @classmethod
    def start(cls, campaign: Campaign) -> Folding:
        return cls(campaign,
                   stages={s.id: {"id": s.id, "run": s.run} for s in campaign.stages},
                   runs={r: {"id": r} for r in campaign.runs})

    def stage(self, ev: Event) -> Draft | None:
        """The draft of the plan's stage the event names (None: none of the plan's)."""
        stage_id = ev.get("stage")
        return self.stages.get(stage_id) if isinstance(stage_id, str) else None

    def run(self, ev: Event) -> Draft | None:
        """The draft of the run the event names (any run id: a stale one is kept too)."""
        run_id = ev.get("run")
        return self.runs.setdefault(run_id, {"id": run_id}) if isinstance(run_id, str) \
            else None


Handler = Callable[[Folding, Event], None]


def when(event: Event) -> datetime:
    return parse_time(str(event["t"]))


def seconds(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None
