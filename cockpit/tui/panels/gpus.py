"""The GPU panel: a banner (real, simulated or unavailable) and one line per GPU with
bars and, when wide, sparklines from the one bounded telemetry history, seeded on open
from the flight recording's last seconds (a restarted cockpit shows the curves from
before the restart; a second that was not recorded stays a gap)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical

from cockpit.engine import Recorded
from cockpit.engine.snapshot import RunView, Snapshot
from cockpit.telemetry import GpuInfo, Series, TelemetryHistory
from cockpit.tui import text as tx
from cockpit.tui.panels.base import LivePanel, PanelResized, level, styled

SPARK_TICKS_PER_CELL = 6  # one sparkline cell per 6 ticks: cells shift every 6 ticks
# The recording's series → the live history's (host CPU is "cpu" there).
HISTORY_NAMES = {("gpu", "util"): "util", ("gpu", "mem_used"): "mem_used",
                 ("gpu", "power"): "power", ("gpu", "temp"): "temp",
                 ("host", "cpu_percent"): "cpu", ("host", "mem_used"): "mem_used"}


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

    def compose(self) -> ComposeResult:
        yield LivePanel(id="gpu-banner")

    def seed(self, recorded: Recorded) -> None:
        """The recording's seconds (``t0`` up to ``t1``) put into the history, one value
        a second (a minute's aggregate: its mean each second), before any live sample:
        a series already live is left alone; a second not recorded stays NaN (a gap)."""
        start = math.floor(recorded.t0)
        size = min(int(recorded.t1 - start), 24 * 3600)
        for key, points in recorded.series.items():
            name = HISTORY_NAMES.get((key.source, key.metric))
            gpu = int(key.key) if key.source == "gpu" else None
            if name is None or size <= 0 or self.history.find(name, gpu) is not None:
                continue
            values = [math.nan] * size
            for p in points:
                for sec in range(int(p.t - start), int(p.t - start) + max(p.span_s, 1)):
                    if 0 <= sec < size:
                        values[sec] = p.value
            if any(v == v for v in values):
                self.history.series(name, gpu).extend(values, start, 1.0)

    def record(self, snap: Snapshot) -> None:
        """Collect history even while nothing is drawn (modal open)."""
        self.history.add(snap.gpus, snap.host, snap.taken_at.timestamp())

    def render_snapshot(self, snap: Snapshot) -> None:
        reading = snap.gpus
        banner = self.query_one("#gpu-banner", LivePanel)
        if reading.status == "unavailable":
            banner.show(styled([("GPU telemetry unavailable: ", level("warn")),
                                (str(reading.error), "")]))
        elif reading.status == "simulated":
            banner.show(styled([(" SIMULATED ", level("warn", "reverse")),
                                (f" {len(reading.gpus)} simulated GPUs: not real readings",
                                 level("warn"))]))
        else:
            driver = f" · driver {reading.driver}" if reading.driver else ""
            banner.show(styled([(f"{len(reading.gpus)} GPUs{driver}", level("muted"))]))
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
            row.show(self._line(g, width, on_gpu.get(g.index, ())))
        for index in [i for i in self._rows if i not in seen]:
            self._rows.pop(index).remove()

    def on_resize(self) -> None:
        self.forget()
        self.post_message(PanelResized())

    def forget(self) -> None:
        self.query_one("#gpu-banner", LivePanel).forget()
        for row in self._rows.values():
            row.forget()

    def _line(self, g: GpuInfo, width: int, runs: Sequence[str]) -> Text:
        name = (g.name or "GPU").replace("NVIDIA ", "")
        if g.lost:
            return styled([(f"{g.index} {name[:14]:<14} ", "bold"),
                           ("✗ LOST: the GPU stopped answering", level("fired"))])
        wide = width >= 110
        bar_w = 10 if wide else 5
        spark_w = 12 if wide else 0
        parts: list[tuple[str, str | Style]] = [(f"{g.index} {name[:14]:<14} ", "bold")]
        parts += self._util_and_memory(g, bar_w, spark_w)
        parts.append((f" {g.temp:3.0f}°C" if g.temp is not None else " temp n/a", ""))
        if g.power is not None:
            limit = f"/{g.power_limit:.0f}" if g.power_limit else ""
            parts.append((f" {g.power:3.0f}{limit}W", ""))
        else:
            parts.append((" power n/a", level("muted")))
        if g.throttle:
            parts.append((f" ! throttle: {','.join(g.throttle)}", level("warn")))
        if runs:
            parts.append((f" ▶ {','.join(runs)}", level("accent")))
        elif g.processes:
            parts.append((f" {len(g.processes)} proc", level("muted")))
        return styled(parts)

    def _util_and_memory(self, g: GpuInfo, bar_w: int, spark_w: int
                         ) -> list[tuple[str, str | Style]]:
        util = g.util
        mem_frac = (g.mem_used / g.mem_total) if g.mem_used is not None and g.mem_total else None
        parts: list[tuple[str, str | Style]] = []
        if util is None:
            parts.append(("util n/a".ljust(bar_w + 10), level("muted")))
        else:
            parts += [("util ", ""), (tx.bar(util / 100, bar_w), _load(util)),
                      (f" {util:3.0f}% ", "")]
        if spark_w:
            cells = spark_cells(self.history.find("util", g.index), spark_w)
            parts.append((tx.sparkline(cells, spark_w), level("accent")))
        if mem_frac is None:
            parts.append((" mem n/a".ljust(bar_w + 16), level("muted")))
        else:
            parts += [(" mem ", ""), (tx.bar(mem_frac, bar_w), _load(mem_frac * 100)),
                      (f" {(g.mem_used or 0) / 2**30:3.0f}/{(g.mem_total or 0) / 2**30:.0f}G ",
                       "")]
        if spark_w:
            cells = spark_cells(self.history.find("mem_used", g.index), spark_w,
                                scale=100 / g.mem_total) if g.mem_total else []
            parts.append((tx.sparkline(cells, spark_w), level("accent")))
        return parts


def _load(percent: float) -> Style:
    return level("fired") if percent >= 95 else level("ok")


def _runs_by_gpu(runs: Sequence[RunView]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for r in runs:
        if r.state == "running":
            for i in r.gpus:
                out.setdefault(i, []).append(r.id)
    return out
