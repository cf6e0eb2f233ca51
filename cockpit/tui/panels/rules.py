"""The stop rules panel: each rule's worst state, its fired/warned runs with the reason,
then the runs where it holds."""

from __future__ import annotations

from rich.text import Text

from cockpit.engine.snapshot import RuleView, Snapshot
from cockpit.tui import text as tx
from cockpit.tui.panels.base import LivePanel, block, level, styled

RULE_RANK = {"fired": 0, "blind": 1, "warn": 2, "ok": 3, "waiting": 4}  # blind: never
# seen, never ok; waiting: its run has not started (nothing watched yet, not ok either)


def rules_text(snap: Snapshot, last_fired: tuple[str, str] | None, width: int) -> Text:
    """The stop rules grouped by rule, with full rule and run names: the rule's worst
    state and what it watches, then its fired/warned runs one per line with the reason,
    then the runs where it holds, packed into lines."""
    groups: dict[str, list[RuleView]] = {}
    for r in snap.rules:
        groups.setdefault(r.rule, []).append(r)
    order = sorted(groups, key=lambda k: min(RULE_RANK.get(r.state, 3) for r in groups[k]))
    lines: list[Text] = []
    for rule_id in order:
        lines += _rule_lines(rule_id, groups[rule_id], last_fired, width)
    if not lines:
        lines.append(Text("no stop rules in the plan", style=level("muted")))
    return block(lines)


def _rule_lines(rule_id: str, views: list[RuleView], last_fired: tuple[str, str] | None,
                width: int) -> list[Text]:
    worst = min((r.state for r in views), key=lambda st: RULE_RANK.get(st, 3))
    worst_level = worst if worst in RULE_RANK and worst != "waiting" else "info"
    first = views[0]
    what = first.metric or first.kind
    lines = [styled([(f"{tx.LEVEL_MARK.get(worst_level, ' ')} ", level(worst_level)),
                     (rule_id, "bold"), (f"  {what} · {first.action}"
                                         + (" · default" if first.implicit else ""),
                                         level("muted"))])]
    held: list[str] = []
    waiting: list[str] = []
    for r in views:
        if r.state in ("fired", "warn", "blind"):
            last = last_fired == (r.rule, r.run)
            mark = tx.level_word(r.state, r.state + (" (last)" if last else ""))
            lines.append(styled([("  ", ""), (mark, level(r.state, "reverse" if last else "")),
                                 (f" {r.run}", "bold"), (f": {r.reason or ''}", "")]))
        elif r.state == "waiting" and r.reason:  # running, cannot tell yet
            lines.append(Text(f"  · {r.run}: {r.reason}", style=level("muted")))
        elif r.state == "waiting":
            waiting.append(r.run)
        else:
            value = f"={tx.metric(r.value)}" if r.value is not None else ""
            if r.kind in ("stalled", "underfed"):  # what it measures (an interval, a streak)
                value = f" ({r.reason})" if r.reason else ""
            held.append(f"✓ {r.run}{value}")
    line = "  "
    for item in held:
        if len(line) + len(item) + 2 > width and line.strip():
            lines.append(Text(line.rstrip(), style=level("ok")))
            line = "  "
        line += item + "  "
    if line.strip():
        lines.append(Text(line.rstrip(), style=level("ok")))
    if waiting:
        lines.append(Text(f"  · not started: {', '.join(waiting)}", style=level("muted")))
    return lines


class RulesPanel(LivePanel):
    def render_snapshot(self, snap: Snapshot, last_fired: tuple[str, str] | None) -> None:
        self.show(rules_text(snap, last_fired, max(self.content_size.width, 30)))
