"""The stages table: every stage's state, time against plan, progress and decision."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from cockpit.common.units import format_duration
from cockpit.engine.snapshot import Snapshot, StageView
from cockpit.tui import text as tx
from cockpit.tui.panels.base import level
from cockpit.tui.panels.table import LiveTable

STAGE_COLUMNS = (("state", "state"), ("stage", "stage"), ("category", "category"),
                 ("resource", "resource"), ("time", "elapsed / planned"),
                 ("progress", "progress · ETA"), ("decision", "decision"))

# Tables sort what is running first, then what needs a person, then the plan order.
STAGE_RANK = {"running": 0, "needs-person": 1}


def stages_in_order(snap: Snapshot) -> list[StageView]:
    return sorted(snap.stages, key=lambda s: STAGE_RANK.get(s.state, 2))  # stable: plan order


def stage_rows(snap: Snapshot) -> list[tuple[str, tuple[Any, ...]]]:
    return [(s.id, _stage_cells(s)) for s in stages_in_order(snap)]


def _stage_cells(s: StageView) -> tuple[Any, ...]:
    greyed = s.state in ("dropped", "skipped")
    base = level("muted") if greyed else ""
    state = Text(tx.stage_state(s.state),
                 style=level("muted") if greyed else level(tx.STAGE_LEVEL.get(s.state, "info")))
    ratio = s.elapsed_s / s.planned_s if s.planned_s else 0.0
    if s.started_at is None:
        time_cell = Text(f"- / {format_duration(s.planned_s)}", style=base)
    else:
        over = ratio > 1.0
        time_cell = Text.assemble(
            (tx.bar(min(ratio, 1.0), 6), level("warn") if over else level("accent")),
            (f" {format_duration(s.elapsed_s)} / {format_duration(s.planned_s)}",
             level("warn") if over else base))
    progress = ""
    if s.progress is not None:
        progress = f"{tx.bar(s.progress, 6)} {s.progress * 100:3.0f}%"
    if s.eta is not None:
        progress += f" ETA {s.eta:%H:%M}"
    if not progress and s.reason:
        progress = s.reason[:40]
    decision = f"◆ {s.decision or 'after it ends'}" if s.decision_point else ""
    return (state, Text(s.id, style=base or "bold"), Text(s.category, style=base),
            Text(s.resource, style=base), time_cell, Text(progress, style=base),
            Text(decision, style=level("warn") if s.decision == "pending" else base))


class StagesTable(LiveTable):
    """The stages, running first, then those that need a person, then the plan order."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(STAGE_COLUMNS, **kwargs)

    def render_snapshot(self, snap: Snapshot) -> None:
        self.sync(stage_rows(snap))
