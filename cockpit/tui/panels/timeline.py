"""The timeline: the rental window as one strip, plan above and reality below, the
human's lane apart from the machine's, with the now / forecast / retrieve marks, and
under the stage bars one row per GPU: its utilization on the same time axis, from the
flight recording's minute means (▁ idle … █ busy; a dim · where nothing was recorded,
blank ahead of now: unknown is never drawn as idle or busy). Fewer rows than GPUs: the
last row says how many are not shown."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rich.style import Style
from rich.text import Text

from cockpit.common.printable import printable
from cockpit.engine import Recorded, columns
from cockpit.engine.snapshot import Slot, Snapshot, StageView
from cockpit.tui import text as tx
from cockpit.tui.panels.base import LivePanel, block, level, styled

LABEL_W = 13
Bar = tuple[int, int, str, Style]
UTIL_BLOCKS = "▁▂▃▄▅▆▇█"  # 0 % … 100 %: an idle minute is ▁, never blank
MAIN_GPU_ROWS = 4  # the main screen's panel: at most this many GPU rows ("+N GPUs" last)


class Timeline(LivePanel):
    """The rental window as one strip: plan above, reality below, human and machine apart."""

    def render_snapshot(self, snap: Snapshot, slots: Sequence[Slot], detailed: bool = False,
                        recorded: Recorded | None = None,
                        gpu_rows: int = MAIN_GPU_ROWS) -> None:
        self.show(timeline_text(snap, slots, max(self.content_size.width, 30), detailed,
                                recorded, gpu_rows))


class _Scale:
    """Columns of the strip: a time, or hours from the window's start, to a column."""

    def __init__(self, snap: Snapshot, cols: int) -> None:
        self.start = snap.window.start
        self.total = (snap.window.end - snap.window.start).total_seconds() or 1.0
        self.cols = cols

    def at(self, when: datetime) -> int:
        return self._col((when - self.start).total_seconds() / self.total)

    def hours(self, hours: float) -> int:
        return self._col(hours * 3600 / self.total)

    def _col(self, fraction: float) -> int:
        return int(min(max(fraction, 0.0), 1.0) * (self.cols - 1))


def timeline_text(snap: Snapshot, slots: Sequence[Slot], width: int,
                  detailed: bool = False, recorded: Recorded | None = None,
                  gpu_rows: int = MAIN_GPU_ROWS) -> Text:
    w = snap.window
    scale = _Scale(snap, max(width - LABEL_W - 2, 10))
    views = {s.id: s for s in snap.stages}
    out = [_lane_line(name, bars, scale.cols)
           for name, bars in _lanes(snap, slots, views, scale)]
    if recorded is not None:
        out += gpu_lines(snap, recorded, scale, gpu_rows)
    marks = [" "] * scale.cols
    legend: list[tuple[str, str | Style]] = []
    for ch, at, label, lv in (("R", w.retrieval_deadline, "retrieve", "warn"),
                              ("F", w.forecast_end, "forecast",
                               tx.VERDICT_LEVEL.get(w.verdict, "info")),
                              ("▲", snap.taken_at, "now", "accent")):
        marks[scale.at(at)] = ch
        legend.append((f"{ch} {label} {at:%m-%d %H:%M}  ", level(lv)))
    out.append(Text(" " * LABEL_W + " " + "".join(marks), style="bold"))
    legend.append((f"window {w.start:%m-%d %H:%M} → {w.end:%m-%d %H:%M}", ""))
    out.append(styled([(" " * LABEL_W + " ", ""), *legend]))
    if detailed:
        out.append(Text(""))
        out += [_slot_line(slot, views.get(slot.stage.id)) for slot in slots]
    return block(out)


def _lanes(snap: Snapshot, slots: Sequence[Slot], views: dict[str, StageView],
           scale: _Scale) -> list[tuple[str, list[Bar]]]:
    lanes: list[tuple[str, list[Bar]]] = []
    for lane, human in (("human", True), ("machine", False)):
        plan: list[Bar] = []
        real: list[Bar] = []
        for slot in slots:
            if slot.stage.is_human != human:
                continue
            view = views.get(slot.stage.id)
            dropped = slot.dropped or (view is not None and view.state == "dropped")
            start = scale.hours(slot.start)
            plan.append((start, max(scale.hours(slot.end), start + 1), slot.stage.id,
                         level("muted") if dropped else level("accent")))
            if view is not None and view.started_at is not None:
                began = scale.at(view.started_at)
                state_level = tx.STAGE_LEVEL.get(view.state, "info")
                real.append((began, max(scale.at(view.ended_at or snap.taken_at), began + 1),
                             slot.stage.id,
                             level(state_level if state_level != "info" else "accent")))
        lanes.append((f"{lane} plan", plan))
        lanes.append((f"{' ' * len(lane)} real", real))
    return lanes


def _lane_line(name: str, bars: list[Bar], cols: int) -> Text:
    line = Text(f"{name:<{LABEL_W}}│", no_wrap=True)
    cells: list[tuple[str, Style]] = [("·" if i % max(cols // 12, 1) == 0 else " ",
                                       level("muted")) for i in range(cols)]
    for i, (a, b, sid, style) in enumerate(bars):
        shade = "█" if i % 2 == 0 else "▓"
        for c in range(a, min(b, cols)):
            cells[c] = (shade, style)
        if b - a >= len(sid) + 2:  # the name inside its bar when it fits
            for k, ch in enumerate(sid):
                cells[a + 1 + k] = (ch, Style(reverse=True) + style)
    for ch, style in cells:
        line.append(ch, style or None)
    line.append("│")
    return line


def gpu_lines(snap: Snapshot, recorded: Recorded, scale: _Scale, rows: int) -> list[Text]:
    """One line per GPU (at most ``rows``, the last saying how many more there are):
    its utilization per column from the recording, or one line saying why there is
    none (no recording yet, unreadable, nothing recorded)."""
    label = f"{'GPU util':<{LABEL_W}}│"
    if recorded.state == "absent":
        return [styled([(label, ""), ("no recording yet", level("muted"))])]
    if recorded.state != "read":
        return [styled([(label, ""), ("recording unreadable: ", level("warn")),
                        (printable(recorded.reason, 300), level("muted"))])]
    indices = sorted({*recorded.gpus, *(g.index for g in snap.gpus.gpus)})
    if not indices:
        return [styled([(label, ""), ("nothing recorded", level("muted"))])]
    shown = indices if len(indices) <= max(rows, 1) else indices[:max(rows - 1, 0)]
    # Column c holds the times _Scale puts in it: [start + c·step, start + (c+1)·step).
    t0 = scale.start.timestamp()
    step = scale.total / max(scale.cols - 1, 1)
    now_col = scale.at(snap.taken_at)
    out = [_util_line(i, columns(recorded.gpu(i, "util"), t0, t0 + step * scale.cols,
                                 scale.cols), now_col) for i in shown]
    if len(shown) < len(indices):
        out.append(styled([(f"{'':<{LABEL_W}}│", ""),
                           (f"+{len(indices) - len(shown)} GPUs (T: full screen)",
                            level("muted"))]))
    return out


def _util_line(index: int, values: Sequence[float | None], now_col: int) -> Text:
    line = Text(f"{f'gpu {index} util':<{LABEL_W}}│", no_wrap=True)
    for c, value in enumerate(values):
        if value is None:
            line.append(" " if c > now_col else "·", level("muted"))
        else:
            share = min(max(value, 0.0), 100.0) / 100
            line.append(UTIL_BLOCKS[min(int(share * len(UTIL_BLOCKS)), len(UTIL_BLOCKS) - 1)],
                        level("accent"))
    line.append("│")
    return line


def _slot_line(slot: Slot, view: StageView | None) -> Text:
    realized = "not started"
    if view is not None and view.started_at is not None:
        realized = (f"{view.started_at:%m-%d %H:%M} → "
                    f"{tx.clock(view.ended_at) if view.ended_at else 'now'}")
    return styled([
        (f"{tx.stage_state(view.state if view else '?'):<16}", ""),
        (f"{slot.stage.id:<16}", "bold"),
        (f"plan +{slot.start:5.1f} h → +{slot.end:5.1f} h   ", ""),
        (f"real {realized}", "")])
