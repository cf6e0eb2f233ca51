"""Full screens behind a key: the metric chart (``g``), a run's output (``l``) and the
timeline (``T``), and :class:`SnapshotScreen`, what the main screen and the chart and
timeline share: they follow the app's latest Snapshot and draw only while current.

The chart uses textual-plotext's ``PlotextPlot`` (plotext drawn by a maintained
Textual widget: axes, legend, log scale and markers without our own drawing code).
It is rebuilt only while the screen is shown and only when its data changed (the
runs' newest points, the metric or the scale). The log screen follows the stage's
``.cockpit/logs/<stage>.<ts>.out``/``.err`` files, reading only new bytes, once a
second while it is shown, into bounded logs; what it reads and keeps is bounded per
line and in total, and every line is made printable (the bounds are beside the code).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult, ScreenStackError
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Label, RichLog
from textual_plotext import PlotextPlot

from cockpit.campaign.model import Campaign
from cockpit.common.event_kinds import RULE_BLIND, RULE_FIRED, RUN_EXITED, STAGE_FINISHED, STOP_DONE
from cockpit.common.printable import printable
from cockpit.engine import Recorded
from cockpit.engine.snapshot import Slot, Snapshot
from cockpit.tui.chart_data import (
    TELEMETRY,
    Overlay,
    Series,
    YRange,
    chart_metrics,
    clipped,
    run_series,
    short_number,
    telemetry_lines,
    ticks,
    y_range,
)
from cockpit.tui.decision import thresholds
from cockpit.tui.panels.timeline import Timeline

BEHIND_DIALOG_S = 5.0  # the dashboard behind a dialog draws this often (and on a rule)
URGENT_KINDS = frozenset({RULE_FIRED, RULE_BLIND, RUN_EXITED, STAGE_FINISHED, STOP_DONE})
CHART_REDRAW_S = 2.0  # live points redraw the chart at most this often (plotext's cost)
COLORS = ("cyan", "orange", "green", "magenta", "blue", "red", "yellow", "white")
MARKERS = ("hd", "dot", "+", "x", "o", "*", "fhd", "sd")
TELEMETRY_EVERY_S = 60.0  # the recording is read again this often while the chart shows
TELEMETRY_SPAN_S = 6 * 3600  # the chart over time covers at least this much of the past
TIMELINE_FIXED_ROWS = 9  # the title (2), the four lanes, the marks, the legend, a margin


class SnapshotScreen(Screen[None]):
    """A screen that shows the app's latest Snapshot: it follows the app's ``snapshot``
    and draws it while a person sees it: when it is on top, and under dialogs (modal
    screens drawn over it), so the dashboard never freezes behind a dialog (issue 25):
    there every :data:`BEHIND_DIALOG_S` (each draw is blended with the dialog's dimmed
    backdrop), and at once when a rule fires or a run ends. Under a full screen (the
    chart, a log) it draws nothing, and again when it shows."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.snapshot: Snapshot | None = None
        self._shown_at = -math.inf  # monotonic time of the last draw (behind a dialog)
        self._show_later = False  # a draw of the latest is scheduled

    def on_mount(self) -> None:
        self.watch(self.app, "snapshot", self._snapshot_taken)

    def _snapshot_taken(self, snap: Snapshot | None) -> None:
        if snap is None:
            return
        self.snapshot = snap
        self.snapshot_taken(snap)
        if not self.on_top:
            return
        behind = self.app.screen is not self
        now = time.monotonic()
        # Behind a dialog every draw is blended with its dimmed backdrop: draw every
        # BEHIND_DIALOG_S, and at once when a rule fired or a decision became due.
        urgent = any(ev.kind in URGENT_KINDS and not ev.earlier for ev in snap.new_events)
        wait = BEHIND_DIALOG_S - (now - self._shown_at)
        if behind and not urgent and wait > 0:
            if not self._show_later:  # the latest is drawn when the wait is over
                self._show_later = True
                self.set_timer(wait, self._draw_latest)
            return
        self._shown_at = now
        self.update_snapshot(snap)

    def on_screen_resume(self) -> None:
        if self.snapshot is not None:
            self.call_after_refresh(self._draw_latest)

    def _draw_latest(self) -> None:
        self._show_later = False
        if self.snapshot is not None and self.on_top:
            self._shown_at = time.monotonic()
            self.update_snapshot(self.snapshot)

    @property
    def on_top(self) -> bool:
        """The person sees this screen: it is the top one, or only dialogs (modal
        screens, drawn over it) are above it."""
        try:
            stack = self.app.screen_stack
        except ScreenStackError:  # shutting down
            return False
        if self not in stack:
            return False
        return all(isinstance(s, ModalScreen) for s in stack[stack.index(self) + 1:])

    def snapshot_taken(self, snap: Snapshot) -> None:
        """Every Snapshot, shown or not (collect what must not miss one)."""

    def update_snapshot(self, snap: Snapshot) -> None:
        """Draw ``snap`` (called only while this screen is the current one)."""


class ChartScreen(SnapshotScreen):
    """One metric over steps, every run in its own colour and marker, with the bounds
    of the stop rules and acceptance checks on that metric as horizontal lines. It opens
    on the loss of the runs that train; a diverging run is clipped to the plot's edge
    and named, non-finite values are counted in the legend, a range of more than three
    decades switches to log scale (``s`` chooses), the run under the runs table's cursor
    is drawn last and marked ◀ (:mod:`cockpit.tui.chart_data`)."""

    BINDINGS = [
        Binding("escape,g,q", "close", "Back", id="chart-close"),
        Binding("m", "next_metric", "Next metric", id="chart-next-metric"),
        Binding("M", "previous_metric", "Previous metric", id="chart-previous-metric"),
        Binding("s", "toggle_scale", "Log/linear", id="chart-scale"),
        Binding("u", "next_telemetry", "GPU/host", id="chart-telemetry"),
    ]

    def __init__(self, campaign: Campaign, highlight: str | None = None) -> None:
        super().__init__()
        self.campaign = campaign
        self.highlight = highlight  # the run under the runs table's cursor
        self.metric: str | None = None
        self.log_scale: bool | None = None  # None: chosen from the data (three decades)
        self.metrics: list[str] = []
        self.labels: list[str] = []  # what the last draw put in the legend (tests read it)
        self.bounds: YRange | None = None  # the last draw's y-range (tests read it)
        self._drawn: Any = None
        self._view: Any = None  # metric, scale and width of the last draw
        self._drawn_at = -math.inf  # monotonic time of the last draw
        self._later = False  # a redraw is scheduled
        self.telemetry: int | None = None  # which of TELEMETRY is beside the metric
        self.recorded: Recorded | None = None  # what the recording answered for it
        self._asked: tuple[Any, ...] | None = None  # what was asked of it, and when
        self.overlay: list[str] = []  # the last draw's telemetry lines (tests read it)

    def compose(self) -> ComposeResult:
        yield Label("", id="chart-title", classes="dialog-title")
        yield PlotextPlot(id="chart-plot")
        yield Label("m / M: metric · s: log / linear · u: a GPU/host metric beside it over "
                    "time · Esc or g: back", classes="dialog-hint")

    def update_snapshot(self, snap: Snapshot) -> None:
        """Redraw when the picture changed (only while this screen shows): the series
        are thinned to the plot's width first, so a new point that changes nothing at
        this width draws nothing; new points of live runs redraw at most every
        :data:`CHART_REDRAW_S` (another metric, scale or size: at once)."""
        self.snapshot = snap
        self.metrics = chart_metrics(snap)
        if self.metric not in self.metrics:
            self.metric = self.metrics[0] if self.metrics else None
        width = max(20, self.query_one(PlotextPlot).size.width - 12)
        self._ask_recording(snap, width)
        view = (self.metric, self.log_scale, width, self.telemetry, id(self.recorded))
        wait = CHART_REDRAW_S - (time.monotonic() - self._drawn_at)
        if view == self._view and wait > 0:
            if not self._later:
                self._later = True
                self.set_timer(wait, self._redraw_later)
            return
        picture = self._picture(snap, width)
        if picture == self._drawn:
            return
        self._drawn, self._view, self._drawn_at = picture, view, time.monotonic()
        self._draw(*picture)

    def _redraw_later(self) -> None:
        self._later = False
        if self.snapshot is not None and self.on_top:
            self.update_snapshot(self.snapshot)

    def _ask_recording(self, snap: Snapshot, width: int) -> None:
        """Read the chosen GPU/host metric from the recording (in a worker) when it is
        another or the width changed, and every :data:`TELEMETRY_EVERY_S`."""
        if self.telemetry is None:
            return
        now = time.monotonic()
        key = (self.telemetry, width)
        if self._asked is not None and self._asked[0] == key \
                and now - self._asked[1] < TELEMETRY_EVERY_S:
            return
        self._asked = (key, now)
        metric, source = TELEMETRY[self.telemetry][:2]
        t1 = snap.taken_at.timestamp()
        times = [p.t for r in snap.runs for p in r.points if p.t is not None]
        # The runs' span, and at least the raw tier's hours (what the GPUs did before).
        t0 = min(min(times, default=t1), t1 - TELEMETRY_SPAN_S)
        self._read_recording(self.telemetry, t0, t1, width, metric, source,
                             [g.index for g in snap.gpus.gpus])

    @work(thread=True, group="chart-recording", exclusive=True, exit_on_error=False)
    def _read_recording(self, choice: int, t0: float, t1: float, width: int, metric: str,
                        source: str, live: list[int]) -> None:
        engine = getattr(self.app, "engine", None)
        if engine is None:
            return
        recorded = engine.telemetry_history(
            t0, t1, gpu=(metric,) if source == "gpu" else (),
            host=(metric,) if source == "host" else (), raw=True, width=width, gpus=live)
        self.app.call_from_thread(self._recording_read, choice, recorded)

    def _recording_read(self, choice: int, recorded: Recorded) -> None:
        if choice == self.telemetry:
            self.recorded = recorded
            if self.snapshot is not None and self.on_top:
                self.update_snapshot(self.snapshot)

    def _picture(self, snap: Snapshot, width: int) -> tuple[Any, ...]:
        metric = self.metric
        now = snap.taken_at.timestamp() if self.telemetry is not None else None
        overlay = telemetry_lines(self.telemetry, self.recorded, snap.taken_at.timestamp(),
                                  len(COLORS))
        if metric is None:
            return (None, None, (), None, overlay)
        plotted = [r for r in snap.runs if any(metric in p.values for p in r.points)]
        if self.highlight in {r.id for r in plotted}:  # drawn last: on top
            plotted.sort(key=lambda r: r.id == self.highlight)
        log = bool(self.log_scale)
        bounds_at = [t.value for t in thresholds(self.campaign, metric, [r.id for r in plotted])]
        data = {r.id: run_series(r, metric, width, log, now) for r in plotted}
        bounds = y_range(data, self.log_scale, bounds_at)
        if bounds is not None and bounds.log and not log:  # chosen here: positive values only
            data = {r.id: run_series(r, metric, width, True, now) for r in plotted}
            bounds = y_range(data, True, bounds_at)
        states = tuple((r.id, r.state) for r in plotted)
        return (metric, bounds, tuple(data.items()), states, overlay)

    def _draw_overlay(self, plt: Any, overlay: Overlay
                      ) -> None:
        self.overlay = []
        for i, (label, s) in enumerate(overlay[1]):
            if s.xs:
                plt.plot(list(s.xs), list(s.ys), label=label, yside="right",
                         color=COLORS[(len(COLORS) - 1 - i) % len(COLORS)], marker="braille")
                self.overlay.append(label)
        plt.ylabel(overlay[0], yside="right")
        plt.xlabel("hours before now")

    def _draw(self, metric: str | None, bounds: YRange | None,
              data: tuple[tuple[str, Series], ...], states: tuple[tuple[str, str], ...] | None,
              overlay: Overlay = ("", ())) -> None:
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        title = self.query_one("#chart-title", Label)
        self.labels, self.bounds = [], bounds
        if metric is None or states is None:
            title.update("no run has reported a metric yet")
            plot.refresh()
            return
        state = dict(states)
        lo_x, hi_x = math.inf, -math.inf
        for i, (run_id, s) in enumerate(data):
            label = f"{run_id} ({state[run_id]})"
            if bounds is not None and run_id in bounds.clipped:
                label += f" ▲ beyond {short_number(bounds.hi)}: clipped"
            if s.non_finite:
                label += (f" ✗ {s.non_finite} non-finite from step "
                          f"{short_number(s.first_non_finite or 0)}")
            if run_id == self.highlight:
                label += " ◀"
            self.labels.append(label)
            if not s.xs or bounds is None:
                continue
            plt.plot(list(s.xs), clipped(s.ys, bounds), label=label,
                     color=COLORS[i % len(COLORS)],
                     marker="fhd" if run_id == self.highlight else MARKERS[i % len(MARKERS)])
            lo_x, hi_x = min(lo_x, s.xs[0]), max(hi_x, s.xs[-1])
        if not math.isfinite(lo_x):
            lo_x, hi_x = 0.0, 1.0
        log = bounds is not None and bounds.log
        for line in thresholds(self.campaign, metric, [run_id for run_id, _ in data]):
            if (log and line.value <= 0) or (bounds is not None
                                             and not bounds.lo <= line.value <= bounds.hi):
                self.labels.append(f"{line.label} (off the plot)")
                continue
            plt.plot([lo_x, hi_x], [line.value, line.value], label=line.label, color="red",
                     marker="-")
            self.labels.append(line.label)
        plt.yscale("log" if log else "linear")
        if bounds is not None and not log:  # plotext labels a log axis in powers of ten
            plt.ylim(bounds.lo, bounds.hi)
            plt.yticks(*ticks(bounds))
        plt.xlabel("step")
        if self.telemetry is not None:
            self._draw_overlay(plt, overlay)
        scale = "log" if log else "linear"
        chosen = "" if self.log_scale is not None else " (auto)"
        over = f" over time · {overlay[0]} on the right" if self.telemetry is not None \
            else " over steps"
        title.update(Text.assemble((printable(metric, 100), "bold"),
                                   f"{over} · {len(data)} run(s) · {scale} scale{chosen}"
                                   f" · metric {self.metrics.index(metric) + 1}/"
                                   f"{len(self.metrics)}"))
        plot.refresh()

    def _step_metric(self, by: int) -> None:
        if not self.metrics:
            return
        index = self.metrics.index(self.metric) if self.metric in self.metrics else 0
        self.metric = self.metrics[(index + by) % len(self.metrics)]
        if self.snapshot is not None:
            self.update_snapshot(self.snapshot)

    def action_next_metric(self) -> None:
        self._step_metric(1)

    def action_previous_metric(self) -> None:
        self._step_metric(-1)

    def action_toggle_scale(self) -> None:
        shown = self.bounds.log if self.bounds is not None else bool(self.log_scale)
        self.log_scale = not shown  # the person's choice from now on
        if self.snapshot is not None:
            self.update_snapshot(self.snapshot)

    def action_next_telemetry(self) -> None:
        """None → each of :data:`TELEMETRY` → none again."""
        at = -1 if self.telemetry is None else self.telemetry
        self.telemetry = at + 1 if at + 1 < len(TELEMETRY) else None
        self.recorded, self._asked = None, None
        if self.snapshot is not None:
            self.update_snapshot(self.snapshot)

    def action_close(self) -> None:
        self.dismiss(None)


# ---------------------------------------------------------------------- logs
# A run's output is untrusted and unbounded: a script can print 8 × 1 MB lines a second,
# or OSC 52 / ESC[2J / U+202E. The log view holds bounded bytes at every step:
TAIL_BYTES = 64 * 1024  # what is shown of a long log when the screen opens
READ_BYTES = 256 * 1024  # at most this much is read per file per refresh (once a second);
#                          a flood beyond it is skipped (its size is said), never buffered
LINE_CHARS = 1000  # characters shown of one line (escapes included); the rest is counted
LOG_LINES = 2000  # lines kept per pane: at most about LOG_LINES × LINE_CHARS characters
REFRESH_LINES = 200  # lines written per pane per refresh: a flood of short lines shows its
#                      newest ones and says how many it skipped (the pane shows ~20 anyway)
# Every line is made printable (cockpit.common.printable): escapes are shown, never sent.


OVERWRITES = 64  # carriage-return segments of one line looked at, newest first


def as_overwritten(line: str) -> str:
    """One line as a terminal leaves it: each ``\\r`` returns to the first column and
    what follows overwrites what was there (tqdm's progress bar redraws itself a few
    times a second on one line: a terminal shows its last state, not a wall of
    ``\\x0d``). The newest segment wins; an older, longer one shows past its end. Only
    the newest :data:`OVERWRITES` segments are read (an hour of a bar is one line)."""
    body = line.rstrip("\r")  # "\r\n" and a redraw that ends the line change nothing
    if "\r" not in body:
        return body
    shown = ""
    for segment in reversed(body.rsplit("\r", OVERWRITES)[-OVERWRITES:]):
        if len(segment) > len(shown):
            shown += segment[len(shown):]
    return shown


def log_lines(data: bytes, most: int = REFRESH_LINES) -> list[str]:
    """The last ``most`` lines of ``data`` as the screen shows them: decoded, carriage
    returns applied as a terminal would (:func:`as_overwritten`), each bounded to
    :data:`LINE_CHARS` and made printable (a tab stays a space, escapes are shown); a
    first line says how many were skipped."""
    raws = data.split(b"\n")
    out = []
    if len(raws) > most:
        out.append(f"… {len(raws) - most} lines skipped (the run writes faster than shown)")
        raws = raws[-most:]
    for raw in raws:
        if b"\r" in raw:  # overwritten in characters, not bytes (a bar's █ is 3 bytes)
            raw = as_overwritten(raw.decode("utf-8", errors="replace")).encode()
        cut = raw[:LINE_CHARS * 4]  # UTF-8: at most 4 bytes a character
        text = cut.decode("utf-8", errors="replace")
        extra = len(raw) - len(cut)
        line = printable(text, LINE_CHARS)
        if len(line) > LINE_CHARS + 40:  # a shown escape is up to 6 characters: bound again
            line = line[:LINE_CHARS] + f"… (+{len(line) - LINE_CHARS} chars shown as escapes)"
        if extra > 0 and len(text) <= LINE_CHARS:
            line += f"… (+{extra} bytes)"
        out.append(line)
    return out


class LogFollower:
    """Reads what a file gained since the last read (from its tail the first time), at
    most :data:`READ_BYTES` a call: when the file grew by more, the older part is
    skipped and said so."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.offset: int | None = None

    def read(self) -> list[str]:
        if self.path is None:
            return []
        skipped = 0
        try:
            size = self.path.stat().st_size
            if self.offset is None or size < self.offset:
                self.offset = max(size - TAIL_BYTES, 0)
            if size - self.offset > READ_BYTES:
                skipped = size - READ_BYTES - self.offset
                self.offset = size - READ_BYTES
            if size == self.offset:
                return []
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read(min(size - self.offset, READ_BYTES))
        except OSError:
            return []
        cut = data.rfind(b"\n") + 1  # a partial last line waits for its newline
        if cut == 0 and len(data) < READ_BYTES and not skipped:
            return []
        data = data[:cut] if cut else data
        self.offset += len(data)
        lines = log_lines(data[:-1] if data.endswith(b"\n") else data)
        if skipped:
            lines.insert(0, f"… {skipped} bytes skipped (the run writes faster than shown)")
        return lines


class LogScreen(Screen[None]):
    """A run's stdout and stderr tails, following live, with the full logs' paths."""

    BINDINGS = [Binding("escape,l,q", "close", "Back", id="log-close")]

    def __init__(self, run: str, stage: str, out: Path | None, err: Path | None) -> None:
        super().__init__()
        self.run_id, self.stage = run, stage
        self.followers = (LogFollower(out), LogFollower(err))

    def compose(self) -> ComposeResult:
        out, err = (f.path for f in self.followers)
        yield Label(Text(f"output of run {printable(self.run_id)} (stage "
                         f"{printable(self.stage)}) — Esc / l goes back"),
                    classes="dialog-title")
        with Vertical(id="log-out-box"):
            yield Label(Text(f"stdout: {printable(out or 'no log yet')}"), id="log-out-path")
            yield RichLog(id="log-out", max_lines=LOG_LINES, wrap=False, markup=False,
                          auto_scroll=True)
        with Vertical(id="log-err-box"):
            yield Label(Text(f"stderr: {printable(err or 'no log yet')}"), id="log-err-path")
            yield RichLog(id="log-err", max_lines=LOG_LINES, wrap=False, markup=False,
                          auto_scroll=True)

    def on_mount(self) -> None:
        self.follow()
        self.set_interval(1.0, self.follow)  # a screen's timers stop when it is closed

    def follow(self) -> None:
        for follower, wid in zip(self.followers, ("#log-out", "#log-err"), strict=True):
            lines = follower.read()
            if lines:
                log = self.query_one(wid, RichLog)
                for line in lines:
                    log.write(Text(line))

    def action_close(self) -> None:
        self.dismiss(None)


class TimelineScreen(SnapshotScreen):
    """The whole rental window full-screen, with each stage's planned and real times."""

    BINDINGS = [Binding("escape,T,w,q", "close", "Back", id="timeline-close")]

    def __init__(self, slots: Sequence[Slot]) -> None:
        super().__init__()
        self.slots = slots

    def compose(self) -> ComposeResult:
        yield Label("Timeline of the rental window — Esc / T goes back", classes="dialog-title")
        with VerticalScroll():
            yield Timeline(id="timeline-full")

    def update_snapshot(self, snap: Snapshot) -> None:
        recorded = getattr(self.app, "recorded", None)
        # The GPU rows get what the screen has left under its title, lanes and marks
        # (the stages' detail below them scrolls).
        rows = max(self.size.height - TIMELINE_FIXED_ROWS, 1)
        self.query_one("#timeline-full", Timeline).render_snapshot(
            snap, self.slots, detailed=True,
            recorded=recorded if isinstance(recorded, Recorded) else None, gpu_rows=rows)

    def on_resize(self) -> None:
        # The strip's width and the GPU rows that fit follow the terminal's size.
        if self.snapshot is not None:
            self.call_after_refresh(self._draw_latest)

    def action_close(self) -> None:
        self.dismiss(None)
