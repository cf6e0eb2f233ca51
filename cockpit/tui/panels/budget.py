"""The budget panel: committed, other costs, incurred, accepted results, the share."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from cockpit.engine.snapshot import Snapshot
from cockpit.tui.panels.base import LivePanel, block, level, styled
from cockpit.tui.snapshot_gaps import budget_reason


class BudgetPanel(LivePanel):
    """Committed, the other costs, the total incurred, the accepted results and the
    rental share per result, or why it is undefined, in full: the panel wraps."""

    DEFAULT_CSS = "BudgetPanel { text-wrap: wrap; text-overflow: fold; }"

    def render_snapshot(self, snap: Snapshot, committed: str) -> None:
        b = snap.budget
        if isinstance(b, dict):
            self.show(block(budget_lines(b)))
            return
        accepted = sum(1 for r in snap.runs if r.verdict == "accepted")
        self.show(block([
            styled([("budget: committed ", ""), (committed, "bold")]),
            styled([("accepted results: ", ""), (str(accepted), "bold")]),
        ]))


def _money(items: Any) -> str:
    """``[{"amount": "12.5", "currency": "USD"}, ...]`` (never mixed: one per currency)."""
    if isinstance(items, dict):
        items = [items]
    return " + ".join(f"{m.get('amount', '?')} {m.get('currency', '')}".strip()
                      for m in items or [] if isinstance(m, dict)) or "0"


def budget_lines(b: dict[str, Any]) -> list[Text]:
    money = b.get("committed")
    pkg = b.get("package") if isinstance(b.get("package"), dict) else {}
    count = pkg.get("count") if isinstance(pkg, dict) else None
    packages = f" ({count} packages)" if isinstance(count, int) and count > 1 else ""
    lines = [styled([("committed ", ""), (_money(money), "bold"), (packages, "")])
             if money else styled([("committed: price unknown", level("warn"))])]
    others = b.get("other_costs") or []
    if others:
        n = len(others)
        lines.append(styled([("other costs ", ""), (_money(b.get("other_costs_total")), "bold"),
                             (f" ({n} item{'s' if n != 1 else ''})", "")]))
    else:
        lines.append(styled([("other costs none", "")]))
    incurred = b.get("cost_incurred")
    lines.append(styled([("incurred ", ""), (_money(incurred), "bold")]) if incurred
                 else styled([("incurred: unknown (package price unknown)", level("warn"))]))
    overrides = b.get("overrides") or {}
    lines.append(styled([("accepted results ", ""), (str(b.get("accepted", 0)), "bold"),
                         (f" ({len(overrides)} by override)" if overrides else "",
                          level("warn"))]))
    share = b.get("share_per_accepted")
    if isinstance(share, dict):
        lines.append(styled([("rental per result ", ""), (_money(share), "bold")]))
    elif b.get("undefined_reason"):
        # In full (it says why, and that the share is undefined); wrapped by the panel.
        lines.append(styled([(budget_reason(str(b["undefined_reason"])), level("warn"))]))
    return lines
