"""The main screen: the panels' layout, the campaign's keys and what they may do now.

It follows the app's latest Snapshot (:class:`~cockpit.tui.full_screens.SnapshotScreen`):
every Snapshot feeds the GPU history and the last fired rule; the panels are drawn in
place inside ``batch_update`` while a person sees this screen (on top, or under a
dialog: the dashboard never freezes behind one), and again when it shows once more. A
panel whose size changed posts :class:`PanelResized`; one redraw follows, however many
asked. The keys start the flows of :class:`~cockpit.tui.flows.FlowScreen`.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Size

from cockpit.campaign.model import Campaign
from cockpit.common.event_kinds import RULE_FIRED
from cockpit.engine import Recorded
from cockpit.engine.snapshot import Snapshot
from cockpit.tui import offers, panels
from cockpit.tui.dialogs import InfoScreen
from cockpit.tui.flows import FlowScreen
from cockpit.tui.full_screens import ChartScreen, TimelineScreen
from cockpit.tui.keybar import KeyBar, urgent_actions

# The keys that write the journal (greyed in the key bar when they do not apply now).
JOURNAL_ACTIONS = ("start_stage", "stop_run", "verify", "decide", "accept", "reject", "mark",
                   "note", "cost", "export")

BORDER_TITLES = (("window", "window"), ("budget", "budget"), ("stages", "stages"),
                 ("runs", "runs & checkpoints"), ("rules", "stop rules"),
                 ("now", "now: running · fired rules"),
                 ("timeline", "timeline (T: full screen)"), ("events", "events"))


class CockpitScreen(FlowScreen):
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    # Below 32 rows the now panel replaces the GPU, runs and rules panels; below 50 the
    # timeline and events go behind T (README: "The cockpit on screen").
    VERTICAL_BREAKPOINTS = [(0, "-tiny"), (22, "-short"), (32, "-tall"), (50, "-huge")]
    BINDINGS = [
        Binding("s", "start_stage", "Start", id="start-stage", tooltip="start a ready stage"),
        Binding("x", "stop_run", "Stop", id="stop-run", tooltip="stop a run, with a reason"),
        Binding("v", "verify", "Verify", id="verify", tooltip="verify a checkpoint now"),
        Binding("d", "decide", "Decide", id="decide", tooltip="record a pending decision"),
        Binding("a", "accept", "Accept", id="accept",
                tooltip="accept an ended run's result (its checks shown first)"),
        Binding("r", "reject", "Reject", id="reject",
                tooltip="reject an ended run's result, with why"),
        Binding("g", "chart", "Chart", id="chart", tooltip="a metric of every run over steps"),
        Binding("l", "log", "Log", id="log", tooltip="a run's output, following"),
        Binding("m", "mark", "Mark", id="mark", tooltip="mark a manual stage started/done"),
        Binding("n", "note", "Note", id="note", tooltip="note on a stage"),
        Binding("c", "cost", "Cost", id="cost", tooltip="add another cost"),
        Binding("e", "export", "Export", id="export",
                tooltip="export the result bundle (the plan's export stage when it has one)"),
        Binding("o", "options", "Options", id="options", show=False,
                tooltip="the options when the forecast exceeds the window (D11)"),
        Binding("T,w", "timeline", "Timeline", key_display="T", id="timeline",
                tooltip="full-screen timeline"),
    ]

    def __init__(self, campaign: Campaign) -> None:
        super().__init__(id="cockpit")
        self.set_campaign(campaign)
        self.last_fired: tuple[str, str] | None = None
        self._available: tuple[object, ...] = ()
        self._redraw_pending = False
        self._size_drawn: Size | None = None
        self._seeded = False  # the GPU history got the recording's last seconds
        self._conductor_tag = ""  # who conducts, as the stages' border says it

    def set_campaign(self, campaign: Campaign) -> None:
        """The plan this screen draws against (a reloaded campaign file replaces it;
        everything else it draws comes from the Snapshot)."""
        self.campaign = campaign
        cost = campaign.package.cost
        self.committed = str(cost) if cost is not None else "price unknown (state it)"

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        with Vertical(id="main"):
            with Horizontal(id="top"):
                yield panels.WindowPanel(id="window")
                yield panels.BudgetPanel(id="budget")
            yield panels.NowPanel(id="now")
            with Vertical(id="gpus") as gpus:
                gpus.border_title = "GPUs"
                yield panels.GpuPanel(id="gpu-panel")
                yield panels.HostLine(id="host")
            yield panels.StagesTable(id="stages")
            with Horizontal(id="lower"):
                yield panels.RunsTable(id="runs")
                with VerticalScroll(id="rules"):
                    yield panels.RulesPanel(id="rules-panel")
            yield panels.WarningsPanel(id="warnings")
            with Horizontal(id="bottom"):  # side by side: the stages table gets the rows
                yield panels.Timeline(id="timeline")
                yield panels.EventLog(id="events")
        yield KeyBar(id="keybar")

    def on_mount(self) -> None:
        for wid, title in BORDER_TITLES:
            self.query_one(f"#{wid}").border_title = title
        self.window_panel = self.query_one(panels.WindowPanel)
        self.budget_panel = self.query_one(panels.BudgetPanel)
        self.gpu_panel = self.query_one(panels.GpuPanel)
        self.host_line = self.query_one(panels.HostLine)
        self.stages_table = self.query_one(panels.StagesTable)
        self.runs_table = self.query_one(panels.RunsTable)
        self.rules_panel = self.query_one(panels.RulesPanel)
        self.now_panel = self.query_one(panels.NowPanel)
        self.timeline = self.query_one(panels.Timeline)
        self.warnings_panel = self.query_one(panels.WarningsPanel)
        self.event_log = self.query_one(panels.EventLog)
        self.stages_table.focus()  # arrows move through the stages from the start

    # ------------------------------------------------------------------ drawing
    def snapshot_taken(self, snap: Snapshot) -> None:
        for ev in snap.new_events:
            if ev.kind == RULE_FIRED:
                self.last_fired = (str(ev.fields.get("rule")), str(ev.fields.get("run")))
        seed = getattr(self.app, "seed", None)
        if isinstance(seed, Recorded) and not self._seeded:
            self._seeded = True  # once, before the first live sample
            self.gpu_panel.seed(seed)
        self.gpu_panel.record(snap)
        available = (*(self.key_available(a) for a in JOURNAL_ACTIONS),
                     frozenset(urgent_actions(snap)))
        if available != self._available:
            self._available = available
            self.refresh_bindings()

    def update_snapshot(self, snap: Snapshot) -> None:
        with self.app.batch_update():
            self.window_panel.render_snapshot(snap)
            # Who conducts (issue 39), on the stages' border: the one border drawn at
            # every size (60x20 included), so every face says it.
            tag = conductor_tag(snap)
            if tag != self._conductor_tag:  # setting it repaints the whole table
                self._conductor_tag = self.stages_table.border_subtitle = tag
            self.budget_panel.render_snapshot(snap, self.committed)
            # Hidden panels (collapsed at this size) are not drawn; they are on resize.
            if self.now_panel.display:
                self.now_panel.render_snapshot(snap)
            if self.gpu_panel.parent is not None and self.gpu_panel.parent.display:
                self.gpu_panel.render_snapshot(snap)
                self.host_line.render_snapshot(snap)
            self.stages_table.render_snapshot(snap)
            if self.runs_table.parent is not None and self.runs_table.parent.display:
                self.runs_table.render_snapshot(snap)
                self.rules_panel.render_snapshot(snap, self.last_fired)
            if self.timeline.display and self.timeline.size.width:
                self.timeline.render_snapshot(snap, snap.schedule,
                                              recorded=self.recorded_history())
            self.warnings_panel.render_snapshot(snap)
            self.event_log.render_snapshot(snap)

    def recorded_history(self) -> Recorded | None:
        """What the app last read of the flight recording (None: not read yet)."""
        recorded = getattr(self.app, "recorded", None)
        return recorded if isinstance(recorded, Recorded) else None

    def on_panel_resized(self, message: panels.PanelResized) -> None:
        message.stop()
        self.redraw_soon()

    def on_resize(self, event: events.Resize) -> None:
        # Textual also sends a screen its unchanged size (a layout pass): only a new
        # size of the terminal is worth drawing every panel again (a full frame).
        if event.size != self._size_drawn:
            self._size_drawn = event.size
            self.restyle()

    def restyle(self) -> None:
        """Draw every panel anew (the size or the theme changed: colours, widths)."""
        for panel in self.query("LivePanel, GpuPanel, LiveTable"):
            # query() yields Widget; the selector names only classes that have forget().
            panel.forget()  # type: ignore[attr-defined]
        self.redraw_soon()

    def redraw_soon(self) -> None:
        """One redraw after the next refresh, however many panels asked for it."""
        if self._redraw_pending or self.snapshot is None:
            return
        self._redraw_pending = True
        self.call_after_refresh(self._redraw)

    def _redraw(self) -> None:
        self._redraw_pending = False
        if self.snapshot is not None and self.on_top:
            self.update_snapshot(self.snapshot)

    # ------------------------------------------------------------------ keys
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A read-only face has no key that acts: gone from the key bar, and pressed,
        nothing (its engine would refuse it too)."""
        engine = getattr(self.app, "engine", None)
        if action in JOURNAL_ACTIONS and getattr(engine, "writes_refused", None) is not None:
            return False
        return True

    def key_available(self, action: str) -> bool:
        """The key applies now (else the key bar greys it; pressing it says why)."""
        if action not in (*JOURNAL_ACTIONS, "options", "timeline"):
            return True
        snap = self.snapshot
        if snap is None:
            return False
        candidates: dict[str, Any] = {
            "start_stage": offers.startable, "stop_run": offers.stoppable,
            "verify": offers.verifiable, "accept": offers.acceptable,
            "reject": offers.rejectable,
            "mark": offers.markable, "decide": lambda s: s.pending_decisions,
            "options": lambda s: s.window.options,
        }
        if action in candidates:
            return bool(candidates[action](snap))
        return True

    def selected_run(self, candidates: list[str], focused: bool = True) -> str | None:
        """The run under the runs table's cursor when it is a candidate (and, unless
        ``focused`` is False, when the table has the focus)."""
        table = self.runs_table
        if (self.focused is table or not focused) and table.row_count:
            key = table.cursor_key
            if key in candidates:
                return str(key)
        return None

    def refuse(self, why: str) -> None:
        """Say why a key does nothing now (literal text: it may name a run)."""
        self.app.notify(why, severity="warning")

    def action_start_stage(self) -> None:
        snap = self.snapshot
        ids = offers.startable(snap) if snap else []
        ready = [(s.id, f"{s.id}  ({s.category}, {s.resource})") for s in snap.stages
                 if s.id in ids] if snap else []
        if not ready:
            return self.refuse("no stage is ready to start")
        self.begin(lambda: self.start_flow(ready))

    def action_stop_run(self) -> None:
        runs = offers.stoppable(self.snapshot) if self.snapshot else []
        if not runs:
            return self.refuse("no run is running")
        self.begin(lambda: self.stop_flow(runs))

    def action_verify(self) -> None:
        runs = offers.verifiable(self.snapshot) if self.snapshot else []
        if not runs:
            return self.refuse("no run to verify")
        self.begin(lambda: self.verify_flow(runs))

    def action_decide(self) -> None:
        snap = self.snapshot
        if snap is None or not snap.pending_decisions:
            return self.refuse("no decision is pending")
        pending, droppable = list(snap.pending_decisions), offers.droppable(snap)
        self.begin(lambda: self.decide_flow(pending, droppable))

    def action_mark(self) -> None:
        markable = dict(offers.markable(self.snapshot)) if self.snapshot else {}
        if not markable:
            return self.refuse("no manual stage to mark")
        self.begin(lambda: self.mark_flow(markable))

    def action_note(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        running = [s.id for s in snap.stages if s.state == "running"]
        order = running + [s.id for s in snap.stages if s.id not in running]
        self.begin(lambda: self.note_flow(order))

    def action_cost(self) -> None:
        self.begin(self.cost_flow)

    def action_export(self) -> None:
        if self.snapshot is None:
            return None
        action = self.snapshot.export_action
        if not action.allowed.ok:
            return self.refuse(action.allowed.why_not)
        self.begin(lambda: self.export_flow(action))

    def action_accept(self) -> None:
        runs = offers.acceptable(self.snapshot) if self.snapshot else []
        if not runs:
            return self.refuse("no ended run to accept (a stopped run never is, D15)")
        self.begin(lambda: self.accept_flow(runs))

    def action_reject(self) -> None:
        runs = offers.rejectable(self.snapshot) if self.snapshot else []
        if not runs:
            return self.refuse("no ended run to reject")
        self.begin(lambda: self.reject_flow(runs))

    def action_log(self) -> None:
        runs = [r for r in offers.runs_in_order(self.snapshot) if r.state != "not_started"] \
            if self.snapshot else []
        if not runs:
            return self.refuse("no run has started: no output yet")
        stages = {r.id: r.stage or r.id for r in runs}
        running = next((r.id for r in runs if r.state == "running"), None)
        self.begin(lambda: self.log_flow(stages, running))

    def action_chart(self) -> None:
        runs = [r.id for r in self.snapshot.runs] if self.snapshot else []
        self.app.push_screen(ChartScreen(self.campaign, self.selected_run(runs, focused=False)))

    def action_timeline(self) -> None:
        self.app.push_screen(TimelineScreen(self.snapshot.schedule if self.snapshot else ()))

    def action_options(self) -> None:
        snap = self.snapshot
        if snap is None or not snap.window.options:
            self.app.notify("the forecast fits: no options needed")
            return
        w = snap.window
        body = (f"The forecast ends {w.forecast_end:%m-%d %H:%M}, past the window end "
                f"{w.end:%m-%d %H:%M} by {-w.forecast_slack_s / 3600:.1f} h (D11).\n\n"
                + "\n".join(f"{i}. {o}" for i, o in enumerate(w.options, 1)))
        self.app.push_screen(InfoScreen("Overrun options", body))


def conductor_tag(snap: Snapshot) -> str:
    """``you conduct`` · ``viewer · conducted by headless 4121`` · ``NOT CONDUCTED``."""
    view = snap.conductor
    if view.you:
        return "you conduct"
    if view.conducted:
        return f"viewer · conducted by {view.face or 'another face'} {view.pid or ''}".rstrip()
    return "NOT CONDUCTED"
