"""The live panels of the main screen; each renders one part of a Snapshot in place.

Every panel keeps what it last drew and touches the screen only when that changed:
a Static is updated only when its text differs, a table updates only the cells
whose value changed and removes only rows whose key went away. Histories (GPU
sparklines, the event log) are bounded.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.containers import Vertical
from textual.widgets import DataTable, RichLog, Static
from textual.widgets.data_table import ColumnKey

from cockpit.campaign.model import Campaign, MetricCheck
from cockpit.common.units import format_count, format_duration, format_percent, format_rate
from cockpit.engine.snapshot import RuleView, RunView, Snapshot, StageView
from cockpit.headless.render_text import run_metric_names
from cockpit.planning.schedule import Slot
from cockpit.telemetry import GpuInfo, Series, TelemetryHistory, format_bytes
from cockpit.tui import text as tx
from cockpit.tui.untrusted import literal, literal_block

Levels = Mapping[str, str]  # level (ok/warn/fired/info/muted) -> Rich style

DEFAULT_LEVELS: dict[str, str] = {"ok": "green", "warn": "yellow", "fired": "bold red",
                                  "blind": "bold magenta",
                                  "info": "", "muted": "dim", "accent": "bold"}


def block(lines: Iterable[Text]) -> Text:
    """Lines joined into one Text that never wraps (a panel's height is fixed)."""
    out = Text("\n", no_wrap=True, overflow="ellipsis").join(lines)
    out.no_wrap, out.overflow = True, "ellipsis"
    return out


def styled(parts: Iterable[tuple[str, str]]) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    for chunk, style in parts:
        out.append(chunk, style or None)
    return out


class LivePanel(Static):
    """A Static that redraws only when its text changed (bytes on the wire cost)."""

    DEFAULT_CSS = "LivePanel { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._last: str | None = None
        self._last_style: Any = None

    def show(self, content: Text | str) -> bool:
        if isinstance(content, str):
            content = literal_block(content)  # never parsed as markup
        key = content.markup
        if key == self._last:
            return False
        self._last = key
        self.update(content)
        return True

    def forget(self) -> None:
        """Drop the memory of the last text (after a theme change, colours differ)."""
        self._last = None

    def on_resize(self) -> None:
        # Width-dependent text (bars, timeline): draw again at the new size.
        self.forget()
        redraw = getattr(self.app, "redraw_soon", None)
        if redraw is not None:
            redraw()


# ---------------------------------------------------------------------- window
class WindowPanel(LivePanel):
    def render_snapshot(self, snap: Snapshot, levels: Levels) -> None:
        w = snap.window
        level = tx.VERDICT_LEVEL.get(w.verdict, "info")
        width = max(self.content_size.width, 20)
        bar_w = max(min(width - 70, 30), 6)
        verdict = (f"exceeds by {tx.hours_text(-w.forecast_slack_s)}" if w.verdict == "exceeds"
                   else f"{w.verdict} ({tx.hours_text(w.forecast_slack_s)} to spare)")
        lines: list[Text] = [
            styled([("window ", "bold"), (f"{w.start:%m-%d %H:%M} → {w.end:%m-%d %H:%M} UTC  ",
                                          ""),
                    (tx.countdown(w.remaining_s), "bold"), (" left  ", ""),
                    (tx.bar(w.used_pct / 100, bar_w), levels["accent"]),
                    (f" {w.used_pct:.0f}% used", "")]),
            styled([("forecast end ", ""), (tx.clock(w.forecast_end), "bold"),
                    ("  ", ""), (tx.level_word(level, verdict), levels[level]),
                    # D13: the pilot's measured/planned ratio scales the GPU stages left.
                    (f"  pilot ×{w.pilot_ratio:.2f}" if w.pilot_ratio is not None else "",
                     levels["warn"] if (w.pilot_ratio or 1.0) > 1.0 else ""),
                    ("   retrieve by ", ""), (tx.clock(w.retrieval_deadline), "bold")]),
        ]
        if w.options:
            lines.append(styled([("options (o): ", levels["warn"]),
                                 (" · ".join(w.options), "")]))
        elif snap.pending_decisions:
            lines.append(styled([("decision pending at ", levels["warn"]),
                                 (", ".join(snap.pending_decisions), "bold"),
                                 (" — press d", "")]))
        elif snap.revised:
            lines.append(styled([("the question is under revision: nothing more starts",
                                  levels["warn"])]))
        elif snap.conclusion and any(r.verdict == "accepted" for r in snap.runs):
            lines.append(styled([("conclusion: ", "bold"), (snap.conclusion, "")]))
        else:
            lines.append(styled([(f"question: {snap.question}", levels["muted"])]))
        self.set_class(w.verdict == "exceeds", "-exceeds")
        self.set_class(w.verdict == "tight", "-tight")
        self.show(block(lines))


# ---------------------------------------------------------------------- budget
class BudgetPanel(LivePanel):
    """Committed, the other costs, the total incurred, the accepted results and the
    rental share per result, or why it is undefined, in full: the panel wraps."""

    DEFAULT_CSS = "BudgetPanel { text-wrap: wrap; text-overflow: fold; }"

    def render_snapshot(self, snap: Snapshot, committed: str, levels: Levels) -> None:
        b = snap.budget
        if isinstance(b, dict):
            self.show(block(budget_lines(b, levels)))
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


def budget_lines(b: dict[str, Any], levels: Levels) -> list[Text]:
    money = b.get("committed")
    pkg = b.get("package") if isinstance(b.get("package"), dict) else {}
    count = pkg.get("count") if isinstance(pkg, dict) else None
    packages = f" ({count} packages)" if isinstance(count, int) and count > 1 else ""
    lines = [styled([("committed ", ""), (_money(money), "bold"), (packages, "")])
             if money else styled([("committed: price unknown", levels["warn"])])]
    others = b.get("other_costs") or []
    if others:
        n = len(others)
        lines.append(styled([("other costs ", ""), (_money(b.get("other_costs_total")), "bold"),
                             (f" ({n} item{'s' if n != 1 else ''})", "")]))
    else:
        lines.append(styled([("other costs none", "")]))
    incurred = b.get("cost_incurred")
    lines.append(styled([("incurred ", ""), (_money(incurred), "bold")]) if incurred
                 else styled([("incurred: unknown (package price unknown)", levels["warn"])]))
    overrides = b.get("overrides") or {}
    lines.append(styled([("accepted results ", ""), (str(b.get("accepted", 0)), "bold"),
                         (f" ({len(overrides)} by override)" if overrides else "",
                          levels["warn"])]))
    share = b.get("share_per_accepted")
    if isinstance(share, dict):
        lines.append(styled([("rental per result ", ""), (_money(share), "bold")]))
    elif b.get("undefined_reason"):
        # In full (it says why, and that the share is undefined); wrapped by the panel.
        reason = str(b["undefined_reason"]).replace("; see the cost incurred and the reasons "
                                                    "below", "")
        lines.append(styled([(reason, levels["warn"])]))
    return lines


# ---------------------------------------------------------------------- GPUs
SPARK_TICKS_PER_CELL = 6  # one sparkline cell per 6 ticks: cells shift every 6 ticks


def spark_cells(series: Series | None, width: int, scale: float = 1.0,
                per_cell: int = SPARK_TICKS_PER_CELL) -> list[float]:
    """The newest ``width`` sparkline cells of a series: the max of each ``per_cell`` ticks.

    Cells are grouped by absolute tick number, so they shift only every ``per_cell``
    ticks; missing samples (NaN) are left out, a cell with none is not drawn.
    """
    if series is None:
        return []
    values = series.recent((width + 1) * per_cell, skip_missing=False)
    first = series.pushed - len(values)
    groups: dict[int, list[float]] = {}
    for i, v in enumerate(values):
        if v == v:  # not NaN
            groups.setdefault((first + i) // per_cell, []).append(max(0.0, v * scale))
    return [max(groups[k]) for k in sorted(groups)][-width:]


class GpuPanel(Vertical):
    DEFAULT_CSS = "GpuPanel { height: auto; } GpuPanel > LivePanel { height: 1; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # The one bounded history (telemetry.history); the sparklines read from it.
        self.history = TelemetryHistory()
        self._rows: dict[int, LivePanel] = {}

    def compose(self) -> Any:
        yield LivePanel(id="gpu-banner")

    def record(self, snap: Snapshot) -> None:
        """Collect history even while nothing is drawn (modal open)."""
        self.history.add(snap.gpus, snap.host, snap.taken_at.timestamp())

    def render_snapshot(self, snap: Snapshot, levels: Levels) -> None:
        reading = snap.gpus
        banner = self.query_one("#gpu-banner", LivePanel)
        if reading.status == "unavailable":
            banner.show(styled([("GPU telemetry unavailable: ", levels["warn"]),
                                (str(reading.error), "")]))
        elif reading.status == "simulated":
            banner.show(styled([(" SIMULATED ", "reverse " + levels["warn"]),
                                (f" {len(reading.gpus)} simulated GPUs: not real readings",
                                 levels["warn"])]))
        else:
            driver = f" · driver {reading.driver}" if reading.driver else ""
            banner.show(styled([(f"{len(reading.gpus)} GPUs{driver}", levels["muted"])]))
        width = max(self.content_size.width, 40)
        on_gpu = _runs_by_gpu(snap.runs)
        seen = set()
        for g in reading.gpus:
            seen.add(g.index)
            row = self._rows.get(g.index)
            if row is None:
                row = LivePanel(id=f"gpu-{g.index}", classes="gpu-row")
                self._rows[g.index] = row
                self.mount(row)
            row.show(self._line(g, width, on_gpu.get(g.index, ()), levels))
        for index in [i for i in self._rows if i not in seen]:
            self._rows.pop(index).remove()

    def on_resize(self) -> None:
        self.forget()
        redraw = getattr(self.app, "redraw_soon", None)
        if redraw is not None:
            redraw()

    def forget(self) -> None:
        self.query_one("#gpu-banner", LivePanel).forget()
        for row in self._rows.values():
            row.forget()

    def _line(self, g: GpuInfo, width: int, runs: Sequence[str], levels: Levels) -> Text:
        name = (g.name or "GPU").replace("NVIDIA ", "")
        if g.lost:
            return styled([(f"{g.index} {name[:14]:<14} ", "bold"),
                           ("✗ LOST: the GPU stopped answering", levels["fired"])])
        wide = width >= 110
        bar_w = 10 if wide else 5
        spark_w = 12 if wide else 0
        util = g.util
        mem_frac = (g.mem_used / g.mem_total) if g.mem_used is not None and g.mem_total else None
        parts: list[tuple[str, str]] = [(f"{g.index} {name[:14]:<14} ", "bold")]
        if util is None:
            parts.append(("util n/a".ljust(bar_w + 10), levels["muted"]))
        else:
            parts += [("util ", ""), (tx.bar(util / 100, bar_w), _load(util, levels)),
                      (f" {util:3.0f}% ", "")]
        if spark_w:
            cells = spark_cells(self.history.find("util", g.index), spark_w)
            parts.append((tx.sparkline(cells, spark_w), levels["accent"]))
        if mem_frac is None:
            parts.append((" mem n/a".ljust(bar_w + 16), levels["muted"]))
        else:
            parts += [(" mem ", ""), (tx.bar(mem_frac, bar_w), _load(mem_frac * 100, levels)),
                      (f" {(g.mem_used or 0) / 2**30:3.0f}/{(g.mem_total or 0) / 2**30:.0f}G ",
                       "")]
        if spark_w:
            cells = spark_cells(self.history.find("mem_used", g.index), spark_w,
                                scale=100 / g.mem_total) if g.mem_total else []
            parts.append((tx.sparkline(cells, spark_w), levels["accent"]))
        parts.append((f" {g.temp:3.0f}°C" if g.temp is not None else " temp n/a", ""))
        if g.power is not None:
            limit = f"/{g.power_limit:.0f}" if g.power_limit else ""
            parts.append((f" {g.power:3.0f}{limit}W", ""))
        else:
            parts.append((" power n/a", levels["muted"]))
        if g.throttle:
            parts.append((f" ! throttle: {','.join(g.throttle)}", levels["warn"]))
        if runs:
            parts.append((f" ▶ {','.join(runs)}", levels["accent"]))
        elif g.processes:
            parts.append((f" {len(g.processes)} proc", levels["muted"]))
        return styled(parts)


def _load(percent: float, levels: Levels) -> str:
    return levels["fired"] if percent >= 95 else levels["ok"]


def _runs_by_gpu(runs: Sequence[RunView]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for r in runs:
        if r.state == "running":
            for i in r.gpus:
                out.setdefault(i, []).append(r.id)
    return out


# ---------------------------------------------------------------------- tables
class LiveTable(DataTable[Any]):
    """A DataTable fed whole rows by key; only changed cells are touched."""

    def __init__(self, columns: Sequence[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self._columns = columns
        self._cells: dict[str, tuple[Any, ...]] = {}

    def on_mount(self) -> None:
        for key, label in self._columns:
            self.add_column(label, key=key)

    async def _on_idle(self, event: events.Idle) -> None:
        # Textual (8.2) widens auto-width columns on idle but keeps the cells it rendered
        # before at the old width (its cell cache ignores the width): a row drawn in
        # between stays cut short ("con" for "control") until one of its values changes,
        # which for a run not started is never. When a width moved, drop those renders.
        before = [c.content_width for c in self.columns.values()]
        await super()._on_idle(event)
        if [c.content_width for c in self.columns.values()] != before:
            clear = getattr(self, "_clear_caches", None)
            if callable(clear):
                clear()
                self.refresh()

    def sync(self, rows: Sequence[tuple[str, tuple[Any, ...]]]) -> None:
        keys = [key for key, _ in rows]
        kept = [k for k in self._cells if k in keys]
        if kept != [k for k in keys if k in self._cells]:
            # The order changed (a rule fired and moves to the top): rare, so rebuild.
            self.clear()
            self._cells = {}
        for key in [k for k in self._cells if k not in keys]:
            self.remove_row(key)
            del self._cells[key]
        for key, values in rows:
            # A str cell would be parsed as markup (a metric named "[@click=app.quit]"):
            # every cell is literal Text, made printable.
            values = tuple(literal(v) if isinstance(v, str) else v for v in values)
            old = self._cells.get(key)
            if old is None:
                self.add_row(*values, key=key)
            else:
                for (col, _), before, after in zip(self._columns, old, values, strict=True):
                    if _plain(before) != _plain(after):
                        # Re-measuring a column redraws the whole table: only when the new
                        # text no longer fits (elapsed times and steps tick every second).
                        self.update_cell(key, col, after,
                                         update_width=_width(after) > self._col_width(col))
            self._cells[key] = values

    def _col_width(self, col: str) -> int:
        column = self.columns.get(ColumnKey(col))
        return column.content_width if column is not None else 0

    def forget(self) -> None:
        """Redraw every cell next time (a theme change recolours them)."""
        self._cells = {k: tuple(None for _ in v) for k, v in self._cells.items()}


def _plain(value: Any) -> Any:
    return value.markup if isinstance(value, Text) else value


def _width(value: Any) -> int:
    return value.cell_len if isinstance(value, Text) else cell_len(str(value))


STAGE_COLUMNS = (("state", "state"), ("stage", "stage"), ("category", "category"),
                 ("resource", "resource"), ("time", "elapsed / planned"),
                 ("progress", "progress · ETA"), ("decision", "decision"))


# Tables sort what is running first, then what needs a person, then the plan order.
STAGE_RANK = {"running": 0, "needs-person": 1}


def stages_in_order(snap: Snapshot) -> list[StageView]:
    return sorted(snap.stages, key=lambda s: STAGE_RANK.get(s.state, 2))  # stable: plan order


def run_needs_person(r: RunView) -> bool:
    """Ended well, no verdict yet: a person accepts or rejects it (a / r)."""
    return r.state == "succeeded" and r.verdict is None


def runs_in_order(snap: Snapshot) -> list[RunView]:
    return sorted(snap.runs, key=lambda r: 0 if r.state == "running"
                  else (1 if run_needs_person(r) else 2))


def key_values(r: RunView, name: str | None, most: int = 200) -> list[float]:
    """The last ``most`` reported values of ``name`` from the run's recent points."""
    if name is None:
        return []
    out: list[float] = []
    for p in reversed(r.points):
        v = p.values.get(name)
        if v is not None:
            out.append(v)
            if len(out) >= most:
                break
    out.reverse()
    return out


def loss_cell(r: RunView, spark_w: int = 8, label: bool = False) -> str:
    """``loss 0.4123 ▇▆▄▃▂▁``: the key metric's last value and its recent curve."""
    name = r.key_metric
    if name is None or name not in r.metrics:
        return "-"
    values = key_values(r, name, spark_w * 4)
    # One cell per 4 reports: the curve moves slowly, not on every tick.
    cells = [values[i] for i in range(len(values) - 1, -1, -4)][::-1] if values else []
    spark = tx.scaled_sparkline(cells, spark_w).rstrip() if len(cells) > 1 else ""
    prefix = f"{name} " if label or name != "loss" else ""
    return f"{prefix}{tx.metric(r.metrics[name])} {spark}".rstrip()


def step_text(r: RunView) -> str:
    if r.step is None:
        return "-"
    return format_count(r.step) + (f"/{format_count(r.max_steps)}" if r.max_steps else "")


def rate_text(r: RunView) -> str:
    if r.state != "running" or not r.rate:
        return ""
    eta = f" ETA {r.eta:%H:%M}" if r.eta is not None else ""
    return f"{format_rate(r.rate)}{eta}"


def stage_rows(snap: Snapshot, levels: Levels) -> list[tuple[str, tuple[Any, ...]]]:
    rows = []
    for s in stages_in_order(snap):
        greyed = s.state in ("dropped", "skipped")
        level = tx.STAGE_LEVEL.get(s.state, "info")
        base = levels["muted"] if greyed else ""
        state = Text(tx.stage_state(s.state), style=levels["muted"] if greyed else levels[level])
        ratio = s.elapsed_s / s.planned_s if s.planned_s else 0.0
        if s.started_at is None:
            time_cell = Text(f"- / {format_duration(s.planned_s)}", style=base)
        else:
            over = ratio > 1.0
            time_cell = Text.assemble(
                (tx.bar(min(ratio, 1.0), 6), levels["warn"] if over else levels["accent"]),
                (f" {format_duration(s.elapsed_s)} / {format_duration(s.planned_s)}",
                 levels["warn"] if over else base))
        progress = ""
        if s.progress is not None:
            progress = f"{tx.bar(s.progress, 6)} {s.progress * 100:3.0f}%"
        if s.eta is not None:
            progress += f" ETA {s.eta:%H:%M}"
        if not progress and s.reason:
            progress = s.reason[:40]
        decision = ""
        if s.decision_point:
            decision = f"◆ {s.decision or 'after it ends'}"
        rows.append((s.id, (
            state, Text(s.id, style=base or "bold"), Text(s.category, style=base),
            Text(s.resource, style=base), time_cell, Text(progress, style=base),
            Text(decision, style=levels["warn"] if s.decision == "pending" else base))))
    return rows


# Step, loss and throughput first: they are what a person looks for; the checkpoint
# columns follow (the table scrolls sideways when they do not fit).
RUN_COLUMNS = (("run", "run"), ("state", "state"), ("step", "step"), ("loss", "loss · curve"),
               ("rate", "throughput · ETA"), ("metrics", "checks & rules metrics"),
               ("verdict", "verdict"), ("ckpt", "checkpoint"), ("verified", "verified"),
               ("cost", "save cost"))


def run_rows(snap: Snapshot, levels: Levels) -> list[tuple[str, tuple[Any, ...]]]:
    rows = []
    for r in runs_in_order(snap):
        level = tx.STAGE_LEVEL.get(r.state, "info")
        names = [m for m in run_metric_names(r) if m != r.key_metric]
        metrics = " ".join(f"{m}={tx.metric(r.metrics[m])}" for m in names)
        if r.stalled:
            metrics = tx.level_word("warn", "stalled") + (f" {metrics}" if metrics else "")
        elif r.stale_s is not None and r.stale_s > 120 and r.state == "running":
            metrics += f" (stale {format_duration(r.stale_s)})"
        ck = r.checkpoint
        if ck is None:
            ckpt, verified, cost = Text("none yet", style=levels["muted"]), Text(""), ""
        else:
            age = "-" if ck.age_s is None else f"{format_duration(ck.age_s)} old"
            ckpt = Text(f"{age} step {format_count(ck.step)}")
            if ck.advice:
                ckpt.append(" ! interval", levels["warn"])
            v = ck.verified or "not verified"
            vlevel = "ok" if v == "ok" else ("fired" if v.startswith("failed") else "warn")
            verified = Text(tx.level_word(vlevel, v[:30]), style=levels[vlevel])
            cost = "-" if ck.save_cost_s is None else f"{ck.save_cost_s:.1f} s"
        verdict_level = {"accepted": "ok", "rejected": "fired"}.get(r.verdict or "", "info")
        verdict = r.verdict or ""
        if r.stop_rule:
            verdict = f"stopped by {r.stop_rule}"
            verdict_level = "fired"
        elif run_needs_person(r):
            verdict, verdict_level = "a/r: accept or reject", "warn"
        rows.append((r.id, (
            Text(r.id, style="bold"), Text(tx.stage_state(r.state), style=levels[level]),
            step_text(r), Text(loss_cell(r), style="bold" if r.state == "running" else ""),
            rate_text(r), metrics,
            Text(tx.level_word(verdict_level, verdict) if verdict else "",
                 style=levels[verdict_level]),
            ckpt, verified, cost)))
    return rows


RULE_RANK = {"fired": 0, "blind": 1, "warn": 2, "ok": 3, "waiting": 4}  # blind: never
# seen, never ok; waiting: its run has not started (nothing watched yet, not ok either)


def rules_text(snap: Snapshot, last_fired: tuple[str, str] | None, width: int,
               levels: Levels) -> Text:
    """The stop rules grouped by rule, with full rule and run names: the rule's worst
    state and what it watches, then its fired/warned runs one per line with the reason,
    then the runs where it holds, packed into lines."""
    groups: dict[str, list[RuleView]] = {}
    for r in snap.rules:
        groups.setdefault(r.rule, []).append(r)
    order = sorted(groups, key=lambda k: min(RULE_RANK.get(r.state, 3) for r in groups[k]))
    lines: list[Text] = []
    for rule_id in order:
        views = groups[rule_id]
        worst = min((r.state for r in views), key=lambda st: RULE_RANK.get(st, 3))
        level = worst if worst in RULE_RANK and worst != "waiting" else "info"
        first = views[0]
        what = first.metric or first.kind
        lines.append(styled([(f"{tx.LEVEL_MARK.get(level, ' ')} ", levels[level]),
                             (rule_id, "bold"), (f"  {what} · {first.action}"
                                                 + (" · default" if first.implicit else ""),
                                                 levels["muted"])]))
        held: list[str] = []
        waiting: list[str] = []
        for r in views:
            if r.state in ("fired", "warn", "blind"):
                last = last_fired == (r.rule, r.run)
                mark = tx.level_word(r.state, r.state + (" (last)" if last else ""))
                lines.append(styled([("  ", ""), (mark, levels[r.state] + (" reverse" if last
                                                                        else "")),
                                     (f" {r.run}", "bold"), (f": {r.reason or ''}", "")]))
            elif r.state == "waiting" and r.reason:  # running, cannot tell yet
                lines.append(Text(f"  · {r.run}: {r.reason}", style=levels["muted"]))
            elif r.state == "waiting":
                waiting.append(r.run)
            else:
                value = f"={tx.metric(r.value)}" if r.value is not None else ""
                if r.kind == "stalled":  # what it measures: the interval, or none yet
                    value = f" ({r.reason})" if r.reason else ""
                held.append(f"✓ {r.run}{value}")
        line = "  "
        for item in held:
            if len(line) + len(item) + 2 > width and line.strip():
                lines.append(Text(line.rstrip(), style=levels["ok"]))
                line = "  "
            line += item + "  "
        if line.strip():
            lines.append(Text(line.rstrip(), style=levels["ok"]))
        if waiting:
            lines.append(Text(f"  · not started: {', '.join(waiting)}", style=levels["muted"]))
    if not lines:
        lines.append(Text("no stop rules in the plan", style=levels["muted"]))
    return block(lines)


class RulesPanel(LivePanel):
    def render_snapshot(self, snap: Snapshot, last_fired: tuple[str, str] | None,
                        levels: Levels) -> None:
        self.show(rules_text(snap, last_fired, max(self.content_size.width, 30), levels))


# ---------------------------------------------------------------------- now
def now_lines(snap: Snapshot, levels: Levels) -> list[Text]:
    """What is running (stage, run, step, loss, throughput, ETA) and every fired rule:
    the lines that stay on screen at any size."""
    lines: list[Text] = []
    runs = {r.id: r for r in snap.runs}
    for s in snap.stages:
        if s.state != "running":
            continue
        r = runs.get(s.run) if s.run else None
        parts: list[tuple[str, str]] = [("▶ ", levels["accent"]), (s.id, "bold")]
        if r is not None:
            # Step and loss right after the stage: the line is cut from the right.
            parts.append((f" {step_text(r)}", ""))
            parts.append((f"  {loss_cell(r, 6, label=True)}" if r.key_metric
                          else "  no metrics yet", "bold"))
            if r.id != s.id:
                parts.append((f"  run {r.id}", ""))
            rate = rate_text(r)
            if rate:
                parts.append((f"  {rate}", ""))
            names = [m for m in run_metric_names(r) if m != r.key_metric][:2]
            if names:
                parts.append(("  " + " ".join(f"{m}={tx.metric(r.metrics[m])}" for m in names),
                              levels["muted"]))
        else:
            parts.append((f"  {format_duration(s.elapsed_s)} / {format_duration(s.planned_s)}"
                          + ("  (manual: m marks it done)" if not s.has_command else ""), ""))
        lines.append(styled(parts))
    if not lines:
        ready = [s.id for s in snap.stages if s.state == "ready"]
        waiting = [s.id for s in snap.stages if s.state == "needs-person"]
        hint = (f"ready: {', '.join(ready)} (s starts)" if ready else
                f"needs a person: {', '.join(waiting)} (m marks)" if waiting else "")
        lines.append(styled([("nothing running", levels["muted"]),
                             (f"  {hint}" if hint else "", "")]))
    for rule in snap.rules:
        if rule.state in ("fired", "blind"):
            lines.append(styled([(tx.level_word(rule.state, rule.state + " "),
                                  levels[rule.state]),
                                 (rule.rule, "bold"), (" on ", ""), (rule.run, "bold"),
                                 (f": {rule.reason or ''}", "")]))
    return lines


def gpu_summary_line(snap: Snapshot, levels: Levels) -> Text:
    if snap.machines:  # several machines (D12): each one's GPUs, labelled by machine
        line = Text()
        if snap.machine is not None:
            line.append(f"machine {snap.machine}: ", "bold")
            line.append_text(_own_gpu_summary(snap, levels))
        for m in snap.machines:
            if len(line):
                line.append(" · ")
            line.append(f"machine {m.machine}: ", "bold")
            if m.reachable is False:
                age = "never" if m.data_age_s is None else f"{m.data_age_s:.0f}s old"
                line.append(f"UNREACHABLE (data {age})", levels["fired"])
                continue
            utils = [float(g["util"]) for g in m.gpus
                     if isinstance(g.get("util"), (int, float))]
            line.append(f"{len(m.gpus)} GPUs" if m.gpus else "no GPU data")
            if utils:
                line.append(f" util {sum(utils) / len(utils):.0f}% avg")
        return line
    return _own_gpu_summary(snap, levels)


def _own_gpu_summary(snap: Snapshot, levels: Levels) -> Text:
    reading = snap.gpus
    if reading.status == "unavailable":
        return styled([("GPU telemetry unavailable", levels["warn"])])
    gpus = [g for g in reading.gpus if not g.lost]
    utils = [g.util for g in gpus if g.util is not None]
    temps = [g.temp for g in gpus if g.temp is not None]
    lost = len(reading.gpus) - len(gpus)
    throttled = sum(1 for g in gpus if g.throttle)
    parts: list[tuple[str, str]] = []
    if reading.status == "simulated":
        parts.append(("SIMULATED ", "reverse " + levels["warn"]))
    parts.append((f"{len(reading.gpus)} GPUs", "bold"))
    if utils:
        parts.append((f" util {sum(utils) / len(utils):.0f}% avg", ""))
    if temps:
        parts.append((f" · max {max(temps):.0f}°C", ""))
    if lost:
        parts.append((f" · ✗ {lost} LOST", levels["fired"]))
    if throttled:
        parts.append((f" · ! {throttled} throttled", levels["warn"]))
    return styled(parts)


class NowPanel(LivePanel):
    """Running stages and runs with step and loss, fired rules and a one-line GPU
    summary: shown where the tables do not fit (short or narrow)."""

    def render_snapshot(self, snap: Snapshot, levels: Levels) -> None:
        self.show(block([*now_lines(snap, levels), gpu_summary_line(snap, levels)]))


# ---------------------------------------------------------------------- thresholds
@dataclass(frozen=True)
class Threshold:
    """A bound on a metric: a stop rule's or an acceptance check's (chart line, decide)."""

    label: str
    value: float
    bound: str = "max"  # "min": values below it fail / stop; "max": values above it

    def holds(self, value: float) -> bool:
        return value >= self.value if self.bound == "min" else value <= self.value


def thresholds(campaign: Campaign, metric: str, runs: Sequence[str]) -> list[Threshold]:
    """The bounds on ``metric`` from the stop rules and acceptance checks of ``runs``."""
    out: dict[tuple[str, float], Threshold] = {}
    for rule in campaign.stop_rules:
        if rule.metric != metric or not any(rule.applies_to(r) for r in runs):
            continue
        if rule.min is not None:
            out[("min", rule.min)] = Threshold(f"rule {rule.id}: stop < {rule.min:g}", rule.min,
                                                "min")
        if rule.max is not None:
            out[("max", rule.max)] = Threshold(f"rule {rule.id}: stop > {rule.max:g}", rule.max)
    for run_id in runs:
        spec = campaign.runs.get(run_id)
        for check in spec.acceptance if spec else ():
            if not isinstance(check, MetricCheck) or check.metric != metric:
                continue
            if check.min is not None and ("min", check.min) not in out:
                out[("min", check.min)] = Threshold(f"accept ≥ {check.min:g}", check.min,
                                                       "min")
            if check.max is not None and ("max", check.max) not in out:
                out[("max", check.max)] = Threshold(f"accept ≤ {check.max:g}", check.max)
    return list(out.values())



def decision_context(snap: Snapshot, stage_id: str, campaign: Campaign) -> Text:
    """What a decision rests on: the stage's measured vs planned time, its run's metrics
    against the thresholds, and the forecast with the pilot's ratio applied (D4, D13)."""
    lines: list[Text] = []
    view = snap.stage(stage_id)
    if view is not None and view.started_at is not None:
        ratio = view.elapsed_s / view.planned_s if view.planned_s else None
        lines.append(styled([("time: ", "bold"),
                             (f"measured {format_duration(view.elapsed_s)} vs planned "
                              f"{format_duration(view.planned_s)}", ""),
                             (f" (×{ratio:.2f})" if ratio else "", "bold")]))
    runs = [snap.run(view.run)] if view is not None and view.run else []
    shown = [r for r in runs if r is not None] or [r for r in snap.runs if r.metrics]
    for r in shown:
        names = run_metric_names(r, most=6)
        if not names:
            lines.append(Text(f"run {r.id}: no metrics reported"))
            continue
        lines.append(styled([("run ", "bold"), (r.id, "bold"),
                             (f" ({r.state}, step {step_text(r)})", "")]))
        for name in names:
            value = r.metrics[name]
            parts: list[tuple[str, str]] = [(f"  {name} {tx.metric(value)}", "")]
            for line in thresholds(campaign, name, [r.id]):
                parts.append((f"  {'✓' if line.holds(value) else '✗'} {line.label}", ""))
            lines.append(styled(parts))
    w = snap.window
    verdict = (f"✗ exceeds the window by {tx.hours_text(-w.forecast_slack_s)}"
               if w.forecast_slack_s < 0 else
               f"✓ fits, {tx.hours_text(w.forecast_slack_s)} to spare")
    scaled = (f" with the pilot's ×{w.pilot_ratio:.2f} applied to the GPU stages left"
              if w.pilot_ratio is not None else f" ({w.pilot_note})" if w.pilot_note
              else " (no pilot ratio yet: plan durations)")
    lines.append(styled([("forecast: ", "bold"), (f"ends {tx.clock(w.forecast_end)}{scaled}: ",
                                                   ""), (verdict, "bold")]))
    return block(lines)


# ---------------------------------------------------------------------- timeline
class Timeline(LivePanel):
    """The rental window as one strip: plan above, reality below, human and machine apart."""

    def render_snapshot(self, snap: Snapshot, slots: Sequence[Slot], levels: Levels,
                        detailed: bool = False) -> None:
        self.show(timeline_text(snap, slots, max(self.content_size.width, 30), levels, detailed))


def timeline_text(snap: Snapshot, slots: Sequence[Slot], width: int, levels: Levels,
                  detailed: bool = False) -> Text:
    w = snap.window
    label_w = 13
    cols = max(width - label_w - 2, 10)
    total = (w.end - w.start).total_seconds() or 1.0

    def col(at: datetime) -> int:
        return int(min(max((at - w.start).total_seconds() / total, 0.0), 1.0) * (cols - 1))

    def col_h(hours: float) -> int:
        return int(min(max(hours * 3600 / total, 0.0), 1.0) * (cols - 1))

    lanes: list[tuple[str, list[tuple[int, int, str, str]]]] = []
    views = {s.id: s for s in snap.stages}
    for lane, human in (("human", True), ("machine", False)):
        plan: list[tuple[int, int, str, str]] = []
        real: list[tuple[int, int, str, str]] = []
        for slot in slots:
            if slot.stage.is_human != human:
                continue
            view = views.get(slot.stage.id)
            dropped = slot.dropped or (view is not None and view.state == "dropped")
            plan.append((col_h(slot.start), max(col_h(slot.end), col_h(slot.start) + 1),
                         slot.stage.id, levels["muted"] if dropped else levels["accent"]))
            if view is not None and view.started_at is not None:
                end = view.ended_at or snap.taken_at
                level = tx.STAGE_LEVEL.get(view.state, "info")
                real.append((col(view.started_at), max(col(end), col(view.started_at) + 1),
                             slot.stage.id, levels[level] or levels["accent"]))
        lanes.append((f"{lane} plan", plan))
        lanes.append((f"{' ' * len(lane)} real", real))

    out: list[Text] = []
    for name, bars in lanes:
        line = Text(f"{name:<{label_w}}│", no_wrap=True)
        cells = [("·" if i % max(cols // 12, 1) == 0 else " ", levels["muted"])
                 for i in range(cols)]
        for i, (a, b, sid, style) in enumerate(bars):
            shade = "█" if i % 2 == 0 else "▓"
            for c in range(a, min(b, cols)):
                cells[c] = (shade, style)
            if b - a >= len(sid) + 2:  # the name inside its bar when it fits
                for k, ch in enumerate(sid):
                    cells[a + 1 + k] = (ch, "reverse " + style)
        for ch, style in cells:
            line.append(ch, style or None)
        line.append("│")
        out.append(line)
    marks = [" "] * cols
    legend: list[tuple[str, str]] = []
    for ch, at, label, level in (("R", w.retrieval_deadline, "retrieve", "warn"),
                                 ("F", w.forecast_end, "forecast",
                                  tx.VERDICT_LEVEL.get(w.verdict, "info")),
                                 ("▲", snap.taken_at, "now", "accent")):
        marks[col(at)] = ch
        legend.append((f"{ch} {label} {at:%m-%d %H:%M}  ", levels[level]))
    out.append(Text(" " * label_w + " " + "".join(marks), style="bold"))
    legend.append((f"window {w.start:%m-%d %H:%M} → {w.end:%m-%d %H:%M}", ""))
    out.append(styled([(" " * label_w + " ", ""), *legend]))
    if detailed:
        out.append(Text(""))
        for slot in slots:
            view = views.get(slot.stage.id)
            realized = "not started"
            if view is not None and view.started_at is not None:
                realized = (f"{view.started_at:%m-%d %H:%M} → "
                        f"{tx.clock(view.ended_at) if view.ended_at else 'now'}")
            out.append(styled([
                (f"{tx.stage_state(view.state if view else '?'):<16}", ""),
                (f"{slot.stage.id:<16}", "bold"),
                (f"plan +{slot.start:5.1f} h → +{slot.end:5.1f} h   ", ""),
                (f"real {realized}", "")]))
    return block(out)


# ---------------------------------------------------------------------- events
class EventLog(RichLog):
    """The latest journal events, bounded; only events not yet shown are written."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_lines=200, wrap=False, markup=False, auto_scroll=True, **kwargs)
        self._seq = 0
        self._warnings: tuple[str, ...] = ()

    def render_snapshot(self, snap: Snapshot, levels: Levels) -> None:
        for ev in snap.events:
            if ev.seq <= self._seq:
                continue
            self._seq = ev.seq
            style = levels["fired"] if ev.kind in ("rule_fired", "stop_requested") else (
                levels["warn"] if ev.kind == "warning" else "")
            self.write(styled([(f"{ev.at:%m-%d %H:%M:%S} ", levels["muted"]),
                               (ev.text, style)]))


class WarningsPanel(LivePanel):
    def render_snapshot(self, snap: Snapshot, levels: Levels) -> None:
        if self.display != bool(snap.warnings):
            self.display = bool(snap.warnings)
        if snap.warnings:
            self.show(block(styled([("! warning: ", levels["warn"]), (w, "")])
                                      for w in snap.warnings[:3]))


# ---------------------------------------------------------------------- host
class HostLine(LivePanel):
    """Host readings, redrawn at most every ``every_s``: second-by-second CPU noise is
    not worth bytes on an SSH link."""

    every_s = 5.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next = 0.0

    def forget(self) -> None:
        super().forget()
        self._next = 0.0

    def render_snapshot(self, snap: Snapshot, levels: Levels) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.every_s
        h = snap.host
        if h is None:
            self.show(Text("host: not sampled", style=levels["muted"]))
            return
        disk = ""
        if h.disks:
            d = min(h.disks, key=lambda d: d.free)
            disk = f" · disk free {format_bytes(d.free)}" + (" (LOW)" if d.low else "")
        # Rounded so the line (and the wire) stays still while nothing really moves.
        self.show(styled([
            ("host ", "bold"),
            (f"CPU {format_percent(h.cpu_percent):>4} of {h.cpu_count} · RAM "
             f"{format_bytes(h.mem_used)}/"
             f"{format_bytes(h.mem_total)}{disk}", ""),
            (" · cockpit ", "bold"),
            (f"{format_percent(h.own_cpu_percent)} CPU {h.own_rss / 2**20:.0f} MB RSS", ""),
        ]))
