"""The cockpit App: layout, keys, the tick loop and the engine actions.

The engine ticks in a thread worker; a one-shot timer is re-armed when a tick is
delivered, so ticks never overlap and a slow tick delays the next instead of piling
up. Each tick posts ``SnapshotTaken`` with the frozen Snapshot; the handler redraws
the panels in place inside ``batch_update`` (nothing while a dialog covers them).
Actions that write the journal ask first, run in a thread worker and toast what
they wrote; refusals are shown, never raised.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import Worker, WorkerState

from cockpit.common.errors import InputError
from cockpit.common.printable import printable, printable_block
from cockpit.engine import ActionRefused, Engine, describe_event
from cockpit.engine.snapshot import Snapshot
from cockpit.journal.log import JournalError
from cockpit.planning.schedule import plan_campaign
from cockpit.tui import panels
from cockpit.tui.dialogs import (
    ConfirmScreen,
    DecideScreen,
    FormScreen,
    InfoScreen,
    PickScreen,
    TimelineScreen,
)
from cockpit.tui.screens import ChartScreen, LogScreen, newest_logs
from cockpit.tui.themes import ThemeFile, ThemeMissing, resolve
from cockpit.tui.untrusted import DropUnprintable

JOURNAL_ACTIONS = ("start_stage", "stop_run", "verify", "decide", "accept", "reject", "mark",
                   "note", "cost", "export")

# The structural CSS (layout, sizes, breakpoints): loaded after the themes, so it wins
# ties the way the inline CSS string it replaces did.
STRUCTURE_PATH = Path(__file__).with_name("cockpit.tcss")


class SnapshotTaken(Message):
    """The engine finished a tick (its journal events first seen: ``snapshot.new_events``)."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class ActionRecorded(Message):
    """An engine action wrote these journal events."""

    def __init__(self, what: str, events: list[dict[str, Any]]) -> None:
        super().__init__()
        self.what = what
        self.events = events


class ActionRefusedShown(Message):
    """An engine action was refused (or got bad input): show why."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__()
        self.what = what
        self.reason = reason


def rich_color(value: str) -> str:
    """A Textual colour variable as a Rich style ("ansi_green" -> "green")."""
    value = value.split()[0] if value else ""
    return value[5:] if value.startswith("ansi_") else value


class CockpitApp(App[int]):
    CSS_PATH = STRUCTURE_PATH
    TITLE = "cockpit"
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
        Binding("t", "next_theme", "Theme", id="next-theme", tooltip="next theme"),
        Binding("question_mark", "help", "Help", id="help", key_display="?"),
        Binding("q", "quit_cockpit", "Quit", id="quit", tooltip="quit (runs keep running)"),
    ]

    def __init__(self, engine: Engine, *, interval: float = 1.0, theme: str = "default",
                 themes: dict[str, ThemeFile] | None = None,
                 after_tick: Callable[[Engine], list[dict[str, Any]]] | None = None) -> None:
        if themes is None:
            chosen, themes = resolve(theme)
            theme = chosen.name
        self.themes = themes
        super().__init__(css_path=[*(t.path for t in themes.values()), STRUCTURE_PATH])
        # The last net under every widget: no control byte of a run's text is drawn raw.
        self._filters.append(DropUnprintable())
        self.engine = engine
        # Called after each tick in the worker (the demo plays the person's part here).
        self.after_tick = after_tick
        self.interval = interval
        self.theme_name = theme
        self.snapshot: Snapshot | None = None
        self.levels: dict[str, str] = dict(panels.DEFAULT_LEVELS)
        self.ticks = 0
        self.last_fired: tuple[str, str] | None = None
        self._lock = threading.Lock()  # one engine call at a time (tick or action)
        self._timer: Any = None
        self._ticking = False
        self._redraw_pending = False
        self._available: tuple[bool, ...] = ()
        campaign = engine.campaign
        self.slots = plan_campaign(campaign).slots
        cost = campaign.package.cost
        self.committed = str(cost) if cost is not None else "price unknown (state it)"
        self.animation_level = "none"
        from cockpit.tui.keymap import load_keymap

        ids = [b.id for b in self.BINDINGS if isinstance(b, Binding) and b.id]
        self.keymap, self.keymap_problems, self.keymap_file = load_keymap(ids)

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
            yield panels.LiveTable(panels.STAGE_COLUMNS, id="stages")
            with Horizontal(id="lower"):
                yield panels.LiveTable(panels.RUN_COLUMNS, id="runs")
                with VerticalScroll(id="rules"):
                    yield panels.RulesPanel(id="rules-panel")
            yield panels.WarningsPanel(id="warnings")
            with Horizontal(id="bottom"):  # side by side: the stages table gets the rows
                yield panels.Timeline(id="timeline")
                yield panels.EventLog(id="events")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.title = f"cockpit · {self.engine.campaign.id}"
        for wid, title in (("window", "window"), ("budget", "budget"), ("stages", "stages"),
                           ("runs", "runs & checkpoints"), ("rules", "stop rules"),
                           ("now", "now: running · fired rules"),
                           ("timeline", "timeline (T: full screen)"), ("events", "events")):
            self.query_one(f"#{wid}").border_title = title
        main = self.screen  # panels live on the first screen; dialogs stack above it
        self.window_panel = main.query_one(panels.WindowPanel)
        self.budget_panel = main.query_one(panels.BudgetPanel)
        self.gpu_panel = main.query_one(panels.GpuPanel)
        self.host_line = main.query_one(panels.HostLine)
        self.stages_table = main.query_one("#stages", panels.LiveTable)
        self.runs_table = main.query_one("#runs", panels.LiveTable)
        self.rules_panel = main.query_one(panels.RulesPanel)
        self.now_panel = main.query_one(panels.NowPanel)
        self.timeline = main.query_one(panels.Timeline)
        self.warnings_panel = main.query_one(panels.WarningsPanel)
        self.event_log = main.query_one(panels.EventLog)
        self.apply_theme(self.theme_name)
        if self.keymap:
            self.set_keymap(self.keymap)
        if self.keymap_problems:
            self.notify("\n".join(self.keymap_problems), title=f"keymap {self.keymap_file}",
                        severity="warning", timeout=15)
        self.stages_table.focus()  # arrows move through the stages from the start
        try:
            # The terminal went away (ssh drop outside tmux, pane killed): leave cleanly.
            import asyncio

            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self._hangup)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
        self._arm(0)

    def _hangup(self) -> None:
        """The terminal is gone: exit, and if a write to the dead tty hangs, leave anyway.

        Runs are detached and journal appends atomic, so a hard exit loses nothing."""
        self.exit(0)
        timer = threading.Timer(2.0, os._exit, args=(0,))
        timer.daemon = True
        timer.start()

    # ------------------------------------------------------------------ themes
    def apply_theme(self, name: str) -> None:
        theme = self.themes[name]
        if theme.palette in self.available_themes:
            self.theme = theme.palette  # Textual owns the "-theme-*" classes: ours differ
        for other in self.themes:
            self.remove_class(f"-cockpit-theme-{other}")
        self.add_class(f"-cockpit-theme-{name}")
        self.theme_name = name
        v = self.get_css_variables()
        self.levels = {
            "ok": rich_color(v.get("success", "green")),
            "warn": rich_color(v.get("warning", "yellow")),
            "fired": "bold " + rich_color(v.get("error", "red")),
            "blind": "bold " + rich_color(v.get("accent", "magenta")),
            "info": "", "muted": "dim",
            "accent": rich_color(v.get("primary", "blue")) if not self.current_theme.dark
            else rich_color(v.get("secondary", "cyan") if self.current_theme.ansi
                            else v.get("primary-lighten-2", "cyan")),
        }
        for panel in self.screen_stack[0].query("LivePanel, GpuPanel, LiveTable"):
            # query() yields Widget; the selector names only classes that have forget().
            panel.forget()  # type: ignore[attr-defined]
        if self.snapshot is not None and len(self.screen_stack) == 1:
            self.draw(self.snapshot)

    def action_next_theme(self) -> None:
        names = list(self.themes)
        name = names[(names.index(self.theme_name) + 1) % len(names)]
        self.apply_theme(name)
        self.notify(f"theme {name}", timeout=2)

    # ------------------------------------------------------------------ the tick
    def _arm(self, delay: float) -> None:
        # One-shot, re-armed by the handler of each tick: ticks never overlap.
        self._timer = self.set_timer(max(delay, 0.001), self._wake)

    def _wake(self) -> None:
        if self._ticking:
            return
        self._ticking = True
        self._collect()

    def kick(self) -> None:
        """Tick now (after an action) unless a tick is already under way."""
        if not self._ticking:
            if self._timer is not None:
                self._timer.stop()
            self._wake()

    @work(thread=True, group="tick", exit_on_error=False)
    def _collect(self) -> None:
        with self._lock:
            snap = self.engine.tick()
            if self.after_tick is not None and self.after_tick(self.engine):
                first = snap.new_events
                snap = self.engine.tick()  # what the person did may unblock stages
                snap = replace(snap, new_events=first + snap.new_events)
        self.post_message(SnapshotTaken(snap))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "tick" and event.state == WorkerState.ERROR:
            self._ticking = False
            self.notify(f"tick failed: {event.worker.error}", severity="error")
            self._arm(self.interval)

    def on_snapshot_taken(self, message: SnapshotTaken) -> None:
        self._ticking = False
        if not self.is_running or not self.screen_stack:
            return  # shutting down
        snap = message.snapshot
        self.snapshot = snap
        self.ticks += 1
        for ev in snap.new_events:
            if ev.kind != "rule_fired":
                continue
            self.last_fired = (str(ev.fields.get("rule")), str(ev.fields.get("run")))
            if not ev.earlier:
                self.bell()
                self.notify(ev.text, title="stop rule fired", severity="error", timeout=15)
        self.gpu_panel.record(snap)
        if len(self.screen_stack) == 1:
            self.draw(snap)
        elif isinstance(self.screen, TimelineScreen):
            self.draw_timeline_screen(self.screen)
        elif isinstance(self.screen, ChartScreen):
            self.screen.update_snapshot(snap)
        available = tuple(self.check_action(a, ()) is True for a in JOURNAL_ACTIONS)
        if available != self._available:
            self._available = available
            self.refresh_bindings()
        self._arm(self.interval)

    def draw(self, snap: Snapshot) -> None:
        lv = self.levels
        with self.batch_update():
            self.window_panel.render_snapshot(snap, lv)
            self.budget_panel.render_snapshot(snap, self.committed, lv)
            # Hidden panels (collapsed at this size) are not drawn; they are on resize.
            if self.now_panel.display:
                self.now_panel.render_snapshot(snap, lv)
            if self.gpu_panel.parent is not None and self.gpu_panel.parent.display:
                self.gpu_panel.render_snapshot(snap, lv)
                self.host_line.render_snapshot(snap, lv)
            self.stages_table.sync(panels.stage_rows(snap, lv))
            if self.runs_table.parent is not None and self.runs_table.parent.display:
                self.runs_table.sync(panels.run_rows(snap, lv))
                self.rules_panel.render_snapshot(snap, self.last_fired, lv)
            if self.timeline.display and self.timeline.size.width:
                self.timeline.render_snapshot(snap, self.slots, lv)
            self.warnings_panel.render_snapshot(snap, lv)
            self.event_log.render_snapshot(snap, lv)

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        if self.snapshot is not None and len(self.screen_stack) == 1:
            self.draw(self.snapshot)

    def on_resize(self) -> None:
        if not self.screen_stack:
            return
        for panel in self.screen_stack[0].query("LivePanel, GpuPanel"):
            # query() yields Widget; the selector names only classes that have forget().
            panel.forget()  # type: ignore[attr-defined]
        self.redraw_soon()

    def redraw_soon(self) -> None:
        """One redraw after the next refresh, however many panels asked for it."""
        if self._redraw_pending or self.snapshot is None:
            return
        self._redraw_pending = True

        def redraw() -> None:
            self._redraw_pending = False
            if self.snapshot is not None and len(self.screen_stack) == 1:
                self.draw(self.snapshot)

        self.call_after_refresh(redraw)

    def draw_timeline_screen(self, screen: TimelineScreen) -> None:
        if self.snapshot is None:
            return
        screen.query_one("#timeline-full", panels.Timeline).render_snapshot(
            self.snapshot, self.slots, self.levels, detailed=True)

    # ------------------------------------------------------------------ keys
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action not in (*JOURNAL_ACTIONS, "options", "timeline"):
            return True
        if len(self.screen_stack) > 1:
            return False  # a dialog has the keys
        snap = self.snapshot
        if snap is None:
            return None
        if action == "start_stage":
            return any(s.state == "ready" for s in snap.stages) or None
        if action == "stop_run":
            return bool(self._stoppable(snap)) or None
        if action == "verify":
            return any(r.state != "not_started" for r in snap.runs) or None
        if action == "decide":
            return bool(snap.pending_decisions) or None
        if action == "accept":
            return bool(self._acceptable(snap)) or None
        if action == "reject":
            return bool(self._rejectable(snap)) or None
        if action == "mark":
            return bool(self._markable(snap)) or None
        if action == "options":
            return bool(snap.window.options) or None
        return True

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            if binding.action in ("quit_cockpit",):
                continue
            yield SystemCommand(f"{binding.description} ({binding.key.split(',')[0]})",
                                binding.tooltip or binding.description,
                                lambda action=binding.action: self.run_action(action))

    @staticmethod
    def _acceptable(snap: Snapshot) -> list[str]:
        """Runs the engine would accept: ended well, never stopped (D15)."""
        return [r.id for r in panels.runs_in_order(snap)
                if r.state == "succeeded" and r.stop_rule is None and r.produces_result
                and r.verdict != "accepted"]

    @staticmethod
    def _rejectable(snap: Snapshot) -> list[str]:
        return [r.id for r in panels.runs_in_order(snap)
                if r.state in ("succeeded", "failed") and r.stop_rule is None
                and r.produces_result and r.verdict != "rejected"]

    @staticmethod
    def _stoppable(snap: Snapshot) -> list[str]:
        return [r.id for r in snap.active_runs if r.stop_rule is None]

    @staticmethod
    def _markable(snap: Snapshot) -> list[tuple[str, tuple[str, ...]]]:
        out: list[tuple[str, tuple[str, ...]]] = []
        for s in snap.stages:
            if s.state == "needs-person":
                out.append((s.id, ("started", "done")))
            elif s.state == "running" and not s.has_command:
                out.append((s.id, ("done",)))
        return out

    # ------------------------------------------------------------------ acting
    def ask(self, title: str, body: str, then: Callable[[], object]) -> None:
        """y/n before anything is written; only an explicit y goes on."""
        def answered(yes: bool | None) -> None:
            if yes:
                then()
        self.push_screen(ConfirmScreen(title, body), answered)

    @work(thread=True, group="action", exit_on_error=False)
    def act(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        try:
            with self._lock:
                result = fn(*args, **kwargs)
        except ActionRefused as exc:
            self.post_message(ActionRefusedShown(what, str(exc)))
            return
        except InputError as exc:
            self.post_message(ActionRefusedShown(what, exc.text))
            return
        except JournalError as exc:
            self.post_message(ActionRefusedShown(what, str(exc)))
            return
        events = result if isinstance(result, list) else ([result] if isinstance(result, dict)
                                                            else [])
        self.post_message(ActionRecorded(what, events))

    def on_action_recorded(self, message: ActionRecorded) -> None:
        lines = [f"#{ev.get('seq')} {describe_event(ev)}" for ev in message.events
                 if isinstance(ev, dict) and "kind" in ev]
        self.notify("\n".join(lines) or "done", title=f"{message.what}: written to the journal",
                    timeout=8)
        self.kick()

    def on_action_refused_shown(self, message: ActionRefusedShown) -> None:
        self.notify(message.reason, title=f"{message.what}: refused", severity="error",
                    timeout=10)

    def pick(self, title: str, items: list[tuple[str, str]], then: Callable[[str], None]) -> None:
        def picked(choice: str | None) -> None:
            if choice:
                then(choice)
        self.push_screen(PickScreen(title, items), picked)

    def action_start_stage(self) -> None:
        snap = self.snapshot
        ready = [s for s in snap.stages if s.state == "ready"] if snap else []
        if not ready:
            self.notify("no stage is ready to start", severity="warning")
            return

        def chosen(stage_id: str) -> None:
            stage = self.engine.campaign.stage(stage_id)
            command = stage.command if isinstance(stage.command, str) else " ".join(
                stage.command or ())
            self.ask(f"Start stage {stage_id}?",
                     f"runs: {command}\non: {stage.resource_label} · "
                     f"{stage.category}\n\ny starts it · n / Esc cancels",
                     lambda: self.act("start", self.engine.start, stage_id))

        self.pick("Start which stage?", [(s.id, f"{s.id}  ({s.category}, {s.resource})")
                                         for s in ready], chosen)

    def action_stop_run(self) -> None:
        snap = self.snapshot
        runs = self._stoppable(snap) if snap else []
        if not runs:
            self.notify("no run is running", severity="warning")
            return
        grace = self.engine.campaign.settings.stop_grace_s

        def reason_for(run_id: str) -> None:
            def got(values: dict[str, str] | None) -> None:
                if not values:
                    return
                reason = values["reason"].strip()
                self.ask(f"Stop run {run_id}?",
                         f"reason: {reason}\nSIGTERM now, SIGKILL after {grace:g} s; the run "
                         "keeps its id and the reason (D15).\n\ny stops it · n / Esc cancels",
                         lambda: self.act("stop", self.engine.stop, run_id, reason))

            self.push_screen(FormScreen(
                f"Stop run {run_id}", [("reason", "reason (kept with the run, D15)", "")],
                check=lambda v: None if v["reason"].strip() else "a reason is required (D15)"),
                got)

        if len(runs) == 1:
            reason_for(runs[0])
        else:
            self.pick("Stop which run?", [(r, r) for r in runs], reason_for)

    def action_verify(self) -> None:
        verify = getattr(self.engine, "verify", None)
        if verify is None:
            self.notify("verification not yet available", severity="warning")
            return
        snap = self.snapshot
        runs = [r.id for r in snap.runs if r.state != "not_started"] if snap else []
        if not runs:
            self.notify("no run to verify", severity="warning")
            return

        def chosen(run_id: str) -> None:
            self.ask(f"Verify the latest checkpoint of {run_id}?",
                     "reloads it in a new process and journals the result (D17).\n\n"
                     "y verifies · n / Esc cancels",
                     lambda: self.act("verify", verify, run_id))

        if len(runs) == 1:
            chosen(runs[0])
        else:
            self.pick("Verify which run's checkpoint?", [(r, r) for r in runs], chosen)

    def action_decide(self) -> None:
        snap = self.snapshot
        if snap is None or not snap.pending_decisions:
            self.notify("no decision is pending", severity="warning")
            return
        droppable = [s.id for s in snap.stages if s.category != "essential"
                     and s.state in ("waiting", "ready", "blocked", "needs-person")]

        def at(stage_id: str) -> None:
            def got(answer: dict[str, Any] | None) -> None:
                if not answer:
                    return
                drops = answer["drops"]
                body = (f"outcome: {answer['outcome']}"
                        + (f"\ndrop: {', '.join(drops)}" if drops else "")
                        + f"\nnote: {answer['note']}\n\ny records it · n / Esc cancels")
                self.ask(f"Record the decision at {stage_id}?", body,
                         lambda: self.act("decide", self.engine.decide, answer["outcome"],
                                          stage=stage_id, drops=drops, note=answer["note"]))

            self.push_screen(DecideScreen(stage_id, droppable,
                                          panels.decision_context(snap, stage_id,
                                                                  self.engine.campaign)), got)

        pending = list(snap.pending_decisions)
        if len(pending) == 1:
            at(pending[0])
        else:
            self.pick("Decide at which stage?", [(p, p) for p in pending], at)

    def action_mark(self) -> None:
        snap = self.snapshot
        markable = dict(self._markable(snap)) if snap else {}
        if not markable:
            self.notify("no manual stage to mark", severity="warning")
            return

        def stage_chosen(stage_id: str) -> None:
            def what_chosen(what: str) -> None:
                self.ask(f"Mark {stage_id} {what}?", "y records it · n / Esc cancels",
                         lambda: self.act("mark", self.engine.mark, stage_id, what))

            self.pick(f"Mark {stage_id} as", [(w, w) for w in markable[stage_id]], what_chosen)

        self.pick("Mark which manual stage?", [(s, f"{s}  ({', '.join(w)})")
                                               for s, w in markable.items()], stage_chosen)

    def action_note(self) -> None:
        snap = self.snapshot
        if snap is None:
            return

        def stage_chosen(stage_id: str) -> None:
            def got(values: dict[str, str] | None) -> None:
                if not values:
                    return
                text = values["text"].strip()
                self.ask(f"Add this note to {stage_id}?", f"{text}\n\ny records it · n / Esc "
                         "cancels", lambda: self.act("note", self.engine.note, stage_id, text))

            self.push_screen(FormScreen(f"Note on {stage_id} (D24)", [("text", "note", "")],
                                        check=lambda v: None if v["text"].strip()
                                        else "the note is empty"), got)

        running = [s.id for s in snap.stages if s.state == "running"]
        order = running + [s.id for s in snap.stages if s.id not in running]
        self.pick("Note on which stage?", [(s, s) for s in order], stage_chosen)

    def action_cost(self) -> None:
        def check(v: dict[str, str]) -> str | None:
            if not v["label"].strip():
                return "the label is empty"
            try:
                Decimal(v["amount"].strip())
            except InvalidOperation:
                return f"{v['amount']!r} is not an amount"
            return None if v["currency"].strip() else "the currency is empty"

        def got(values: dict[str, str] | None) -> None:
            if not values:
                return
            label, amount = values["label"].strip(), values["amount"].strip()
            currency = values["currency"].strip().upper()
            self.ask("Record this cost?", f"{label}: {amount} {currency}\nkept apart from the "
                     "rental price (D20)\n\ny records it · n / Esc cancels",
                     lambda: self.act("cost", self.engine.cost, label, amount, currency))

        self.push_screen(FormScreen("Another cost (D20)", [
            ("label", "what it was for", ""), ("amount", "amount (e.g. 12.50)", ""),
            ("currency", "currency", "USD")], check=check), got)

    def action_export(self) -> None:
        """One export path: with an export stage in the plan, `e` completes that stage
        (starts its command, or exports and marks a manual one done); else it exports."""
        snap = self.snapshot
        campaign = self.engine.campaign
        stage = next((s for s in campaign.stages if (s.role or s.id) == "export"), None)
        view = snap.stage(stage.id) if snap is not None and stage is not None else None
        if stage is not None and view is not None and view.state not in ("done", "dropped",
                                                                           "skipped"):
            if view.state == "running":
                self.notify(f"the export stage {stage.id!r} is running", severity="warning")
                return
            if stage.command is not None:
                waits = view.state != "ready"
                self.ask(f"Start the export stage {stage.id}?",
                         f"runs its command; the stage is done when the export is written"
                         f"{' (it waits for earlier stages: started anyway)' if waits else ''}"
                         ".\n\ny starts it · n / Esc cancels",
                         lambda: self.act("export", self.engine.start, stage.id, force=waits))
                return

            def export_and_mark() -> list[Mapping[str, Any]]:
                done = self.engine.export()
                marked = self.engine.mark(stage.id, "done",
                                          note=f"exported with e: {done.get('path') or 'bag'}")
                return [done, *marked]

            self.ask("Export the result bundle now?",
                     f"writes and verifies the export, then marks stage {stage.id} done.\n\n"
                     "y exports · n / Esc cancels", lambda: self.act("export", export_and_mark))
            return
        self.ask("Export the result bundle now?", "y exports · n / Esc cancels",
                 lambda: self.act("export", self.engine.export))

    def _selected_run(self, candidates: list[str]) -> str | None:
        """The run under the runs table's cursor when it has the focus and is a candidate."""
        table = self.runs_table
        if self.focused is table and table.row_count:
            try:
                key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            except Exception:  # noqa: BLE001 - no row under the cursor
                return None
            if key in candidates:
                return str(key)
        return None

    def _one_run(self, title: str, candidates: list[str], then: Callable[[str], None]) -> None:
        chosen = self._selected_run(candidates)
        if chosen is not None or len(candidates) == 1:
            then(chosen or candidates[0])
        else:
            self.pick(title, [(r, r) for r in candidates], then)

    def _with_checks(self, run_id: str, then: Callable[[str], None]) -> None:
        """The run's acceptance checks evaluated (off the loop: a reload takes time)."""
        self.notify(f"checking {run_id}'s acceptance…", timeout=3)

        def evaluate() -> None:
            from cockpit.close.acceptance import evaluate_acceptance

            try:
                with self._lock:
                    state = self.engine.state()
                ok, reasons = evaluate_acceptance(self.engine.campaign, state, run_id)
                text = "\n".join(f"  {'✓' if ok else '·'} {why}" for why in reasons)
                text = (f"acceptance checks: {'✓ all pass' if ok else '✗ not all pass'}\n"
                        + text)
            except Exception as exc:  # noqa: BLE001 - shown, never raised
                text = f"acceptance checks could not run: {exc}"
            self.call_from_thread(then, text)

        self.run_worker(evaluate, thread=True, group="checks", exit_on_error=False)

    def action_accept(self) -> None:
        snap = self.snapshot
        runs = self._acceptable(snap) if snap else []
        if not runs:
            self.notify("no ended run to accept (a stopped run never is, D15)",
                        severity="warning")
            return

        def chosen(run_id: str) -> None:
            def show(checks: str) -> None:
                def got(values: dict[str, str] | None) -> None:
                    if values is None:
                        return
                    note = values["note"].strip()
                    self.ask(f"Accept the result of {run_id}?",
                             f"{checks}\nnote: {note or '(none)'}\n\ny records it · n / Esc "
                             "cancels",
                             # The CLI's rule: failing checks are accepted only as a
                             # recorded override, and only with a note saying why.
                             lambda: self.act("accept", self.engine.accept, run_id,
                                              note or None, override=bool(note)))

                self.push_screen(FormScreen(
                    f"Accept {run_id}",
                    [("note", "note (why; if its checks fail, a note makes an override)", "")],
                    body=checks), got)
            self._with_checks(run_id, show)

        self._one_run("Accept which run?", runs, chosen)

    def action_reject(self) -> None:
        snap = self.snapshot
        runs = self._rejectable(snap) if snap else []
        if not runs:
            self.notify("no ended run to reject", severity="warning")
            return

        def chosen(run_id: str) -> None:
            def show(checks: str) -> None:
                def got(values: dict[str, str] | None) -> None:
                    if not values:
                        return
                    note = values["note"].strip()
                    self.ask(f"Reject the result of {run_id}?",
                             f"{checks}\nnote: {note}\n\ny records it · n / Esc cancels",
                             lambda: self.act("reject", self.engine.reject, run_id, note))

                self.push_screen(FormScreen(
                    f"Reject {run_id}", [("note", "note: why (required)", "")], body=checks,
                    check=lambda v: None if v["note"].strip() else "say why it is rejected"),
                    got)
            self._with_checks(run_id, show)

        self._one_run("Reject which run?", runs, chosen)

    def action_chart(self) -> None:
        screen = ChartScreen(self.engine.campaign)
        self.push_screen(screen)
        if self.snapshot is not None:
            snap = self.snapshot
            self.call_after_refresh(screen.update_snapshot, snap)

    def action_log(self) -> None:
        snap = self.snapshot
        runs = [r for r in panels.runs_in_order(snap) if r.state != "not_started"] if snap \
            else []
        if not runs:
            self.notify("no run has started: no output yet", severity="warning")
            return
        stages = {r.id: r.stage for r in runs}

        def chosen(run_id: str) -> None:
            stage = stages.get(run_id) or run_id
            out, err = newest_logs(self.engine.campaign, stage)
            self.push_screen(LogScreen(run_id, stage, out, err))

        self._one_run("Whose output?", [r.id for r in runs], chosen)

    def action_options(self) -> None:
        snap = self.snapshot
        if snap is None or not snap.window.options:
            self.notify("the forecast fits: no options needed")
            return
        w = snap.window
        body = (f"The forecast ends {w.forecast_end:%m-%d %H:%M}, past the window end "
                f"{w.end:%m-%d %H:%M} by {-w.forecast_slack_s / 3600:.1f} h (D11).\n\n"
                + "\n".join(f"{i}. {o}" for i, o in enumerate(w.options, 1)))
        self.push_screen(InfoScreen("Overrun options", body))

    def action_timeline(self) -> None:
        screen = TimelineScreen()
        self.push_screen(screen)
        self.call_after_refresh(self.draw_timeline_screen, screen)

    def action_help(self) -> None:
        lines = Text()
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            moved = self.keymap.get(binding.id or "")
            keys = (moved or binding.key_display or binding.key).replace(",", " / ")
            now = self.check_action(binding.action, ())
            lines.append(f"{keys:>8}  ", "bold")
            lines.append(f"{binding.description:<10} {binding.tooltip}")
            if now is None:
                lines.append("  (not now)", "dim")
            lines.append("\n")
        where = (f"keymap: {self.keymap_file}" + (" (applied)" if self.keymap else
                                                   " (none: the defaults above)"))
        lines.append(f"\n{where}; a line `binding-id = \"key\"` moves a key "
                     "(ids: " + ", ".join(b.id for b in self.BINDINGS
                                          if isinstance(b, Binding) and b.id) + ")\n", "dim")
        lines.append("\nEvery key that writes the journal asks y/n first; Esc always cancels.\n"
                     "Quitting never stops a run: reopen with `cockpit FILE` to re-attach.\n"
                     "ctrl+p: the command palette.", "dim")
        self.push_screen(InfoScreen("Keys", lines))

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Every notification is literal text: what it says often comes from a run, a
        note or a refusal naming untrusted text (Textual would parse it as markup)."""
        super().notify(printable_block(message, 4000), title=printable(title, 200),
                       severity=severity, timeout=timeout, markup=markup)

    def action_quit_cockpit(self) -> None:
        snap = self.snapshot
        active = [r.id for r in snap.active_runs] if snap else []
        if not active:
            self.exit(0)
            return
        self.ask("Quit the cockpit?",
                 f"{len(active)} run(s) keep running: {', '.join(active)}.\nQuitting never "
                 "stops a run; reopen with `cockpit FILE` to re-attach.\n\n"
                 "y quits · n / Esc stays", lambda: self.exit(0))


def run_tui(args: argparse.Namespace, *,
            after_tick: Callable[[Engine], list[dict[str, Any]]] | None = None) -> int:
    """``cockpit tui FILE`` / ``cockpit FILE``: 0 on quit, 2 on bad input.

    ``after_tick`` runs after each tick (the demo plays the person's part there)."""
    try:
        chosen, themes = resolve(getattr(args, "theme", None))
    except ThemeMissing as exc:
        print(f"cockpit: {exc}", file=sys.stderr)
        return 2
    from cockpit.fleet.open import open_engine

    engine = open_engine(args.file, auto=bool(args.auto), actor="tui",
                         simulate_gpus=args.simulate_gpus, machine=getattr(args, "machine", None),
                         fleet=bool(getattr(args, "fleet", False)), pull="background")
    app = CockpitApp(engine, interval=float(args.interval), theme=chosen.name, themes=themes,
                     after_tick=after_tick)
    try:
        app.run(mouse=not getattr(args, "no_mouse", False))
    finally:
        engine.close()
    return app.return_code or 0
