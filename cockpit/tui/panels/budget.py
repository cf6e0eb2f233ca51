"""The budget panel: committed, other costs, incurred, accepted results, the share."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from cockpit.common.durations import format_duration
from cockpit.common.units import format_share
from cockpit.engine.snapshot import Budget, HoursBought, Money, Snapshot
from cockpit.tui.panels.base import LivePanel, block, level, styled


class BudgetPanel(LivePanel):
    """Committed, the other costs, the total incurred, the accepted results and the
    rental share per result, or why it is undefined, in full: the panel wraps."""

    DEFAULT_CSS = "BudgetPanel { text-wrap: wrap; text-overflow: fold; }"

    def render_snapshot(self, snap: Snapshot, committed: str) -> None:
        b = snap.budget
        if b is not None:
            self.show(block(budget_lines(b) + hours_lines(snap.hours)))
            return
        accepted = sum(1 for r in snap.runs if r.verdict == "accepted")
        self.show(block([
            styled([("budget: committed ", ""), (committed, "bold")]),
            styled([("accepted results: ", ""), (str(accepted), "bold")]),
        ]))


def _money(items: Money | tuple[Money, ...] | None) -> str:
    """Amounts, one per currency (never mixed)."""
    if isinstance(items, Money):
        items = (items,)
    return " + ".join(str(m) for m in items or ()) or "0"


def budget_lines(b: Budget) -> list[Text]:
    packages = f" ({b.package.count} packages)" if b.package.count > 1 else ""
    lines = [styled([("committed ", ""), (_money(b.committed), "bold"), (packages, "")])
             if b.committed is not None
             else styled([("committed: price unknown", level("warn"))])]
    if b.other_costs:
        n = b.other_costs_count
        lines.append(styled([("other costs ", ""), (_money(b.other_costs_total), "bold"),
                             (f" ({n} item{'s' if n != 1 else ''})", "")]))
    else:
        lines.append(styled([("other costs none", "")]))
    lines.append(styled([("incurred ", ""), (_money(b.cost_incurred), "bold")])
                 if b.cost_incurred
                 else styled([("incurred: unknown (package price unknown)", level("warn"))]))
    lines.append(styled([("accepted results ", ""), (str(b.accepted), "bold"),
                         (f" ({len(b.overrides)} by override)" if b.overrides else "",
                          level("warn"))]))
    if b.share_per_accepted is not None:
        lines.append(styled([("rental per result ", ""), (_money(b.share_per_accepted), "bold")]))
    elif b.share_undefined:
        # In full (it says why, and that the share is undefined); wrapped by the panel.
        lines.append(styled([(b.share_undefined, level("warn"))]))
    return lines


HOURS_LINE = 36  # the budget panel's text width at 120 columns
PANEL_LABELS = {"idle": "idle gaps", "human": "human stages", "cpu": "CPU stages",
                "after_close": "unused after close"}


def hours_lines(h: HoursBought | None) -> list[Text]:
    """What the GPU-hours bought, in short lines (the panel is 40 columns): busy of held,
    then the unrecorded hours, the idle gaps in hours and as a share of the window, the
    time human and CPU stages ran while no GPU stage did, and the rest of the window
    unused after the close: time, never money (D8). Nothing recorded is said in the
    warning colour, never shown as fine."""
    if h is None:
        return []
    o = h.overall
    lines = [styled([("GPU-h busy ", ""), (f"{o.busy_h:.1f}", "bold"),
                     (f" of {o.held_h:.1f} held", "")])]
    tail: list[tuple[str, str | Style]] = []
    if o.unrecorded_s:
        tail.append((f"unrecorded {o.unrecorded_h:.1f}",
                     level("warn") if not o.busy_s + o.idle_s else ""))
    for name, seconds in h.kind_totals().items():
        if seconds:
            share = format_share(h.window_share(seconds), 0)
            tail.append((f"{PANEL_LABELS[name]} {format_duration(seconds)} ({share}"
                         f"{' of window' if name == 'idle' else ''})", ""))
    row: list[tuple[str, str | Style]] = []  # parts packed into lines, never wrapped
    for part in tail:
        if row and sum(len(t) for t, _ in row) + len(part[0]) + 3 * len(row) > HOURS_LINE:
            lines.append(styled(row))
            row = []
        row += [(" · ", "")] * bool(row) + [part]
    if row:
        lines.append(styled(row))
    return lines
