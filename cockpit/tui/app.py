"""The cockpit App: the engine, the tick, the themes, the keymap and the global keys.

The engine ticks in a thread worker; a one-shot timer is re-armed when a tick is
delivered, so ticks never overlap and a slow tick delays the next instead of piling
up. Each tick posts ``SnapshotTaken`` with the frozen Snapshot; its handler rings for a
fired rule and sets the ``snapshot`` reactive, which the screens follow (the main
screen, :mod:`cockpit.tui.main_screen`, draws it in place while it is the current one).
Actions that write the journal run in the action worker (:meth:`CockpitApp.act`) and
toast what they wrote; refusals are shown, never raised.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import App, SystemCommand
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.dom import DOMNode
from textual.message import Message
from textual.reactive import var
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from cockpit.common.errors import InputError
from cockpit.common.event_kinds import RULE_FIRED
from cockpit.common.printable import printable, printable_block
from cockpit.engine import (
    ActionRefused,
    CampaignFiles,
    Engine,
    JournalError,
    Recorded,
    describe_event,
)
from cockpit.engine.snapshot import Snapshot
from cockpit.headless.status_log import RotatingFile, compact_json, dumps
from cockpit.tui.dialogs import ConfirmScreen, InfoScreen
from cockpit.tui.keymap import load_keymap
from cockpit.tui.main_screen import CockpitScreen
from cockpit.tui.themes import ThemeFile, ThemeMissing, resolve
from cockpit.tui.untrusted import DropUnprintable

# The structural CSS (layout, sizes, breakpoints): loaded after the themes, so it wins
# ties the way the inline CSS string it replaces did.
STRUCTURE_PATH = Path(__file__).with_name("cockpit.tcss")
# The flight recording is read on open, then this often (seconds): the timeline's GPU
# rows are minute means, and a read is a few SQLite queries (never every tick).
RECORDED_EVERY_S = 60.0
SEED_S = 600  # the sparklines' seed: the recording's last seconds (the live ring's size)
SEED_GPU = ("util", "mem_used", "power", "temp")  # what the GPU panel keeps live


class SnapshotTaken(Message):
    """The engine finished a tick (its journal events first seen: ``snapshot.new_events``);
    ``recorded``: the flight recording read anew (the window so far: the GPUs' minute
    means), ``seed``: its last seconds, read once, for the sparklines."""

    def __init__(self, snapshot: Snapshot, recorded: Recorded | None = None,
                 seed: Recorded | None = None) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.recorded = recorded
        self.seed = seed


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


class CockpitApp(App[int]):
    CSS_PATH = STRUCTURE_PATH
    TITLE = "cockpit"
    # The keys of every screen; the main screen's own (s, x, a, ...) are in CockpitScreen.
    BINDINGS = [
        Binding("t", "next_theme", "Theme", id="next-theme", tooltip="next theme"),
        Binding("question_mark", "help", "Help", id="help", key_display="?"),
        Binding("q", "quit_cockpit", "Quit", id="quit", tooltip="quit (runs keep running)"),
    ]
    # The latest Snapshot: the screens follow it (``watch``); set on every tick.
    snapshot: var[Snapshot | None] = var(None, always_update=True, init=False)
    # What the flight recording holds of the window so far (set before the snapshot it
    # came with); ``seed``: its last seconds, for the sparklines, read on open.
    recorded: Recorded | None = None
    seed: Recorded | None = None

    def __init__(self, engine: Engine, *, interval: float = 1.0, theme: str = "default",
                 themes: dict[str, ThemeFile] | None = None,
                 after_tick: Callable[[Engine], list[dict[str, Any]]] | None = None,
                 status_log: Path | None = None) -> None:
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
        # The status line of each tick, as headless writes it: `status --line` (tmux's
        # status bar) reads it instead of loading the campaign.
        self.status_log = RotatingFile(status_log) if status_log is not None else None
        self._status_log_failed = False
        self.interval = interval
        self.theme_name = theme
        self.ticks = 0
        self.lock = threading.Lock()  # one engine call at a time (tick or action)
        self._timer: Timer | None = None
        self._ticking = False
        self.animation_level = "none"
        self.main: CockpitScreen | None = None
        self._recorded_next = 0.0  # monotonic time of the next read of the recording
        ids = [b.id for b in (*CockpitScreen.BINDINGS, *self.BINDINGS)
               if isinstance(b, Binding) and b.id]
        self.keymap, self.keymap_problems, self.keymap_file = load_keymap(ids)

    def get_default_screen(self) -> Screen[Any]:
        """The main screen: the first on the stack, under every dialog."""
        self.main = CockpitScreen(self.engine.campaign)
        return self.main

    def all_bindings(self) -> list[tuple[Binding, DOMNode]]:
        """Every key of the cockpit with the node whose ``key_available`` rules it, in the
        order the key bar and the help show them."""
        out: list[tuple[Binding, DOMNode]] = []
        for node, bindings in ((self.main or self, CockpitScreen.BINDINGS),
                               (self, CockpitApp.BINDINGS)):
            out += [(b, node) for b in bindings if isinstance(b, Binding)]
        return out

    def on_mount(self) -> None:
        self.title = f"cockpit · {self.engine.campaign.id}"
        self.apply_theme(self.theme_name)
        if self.keymap:
            self.set_keymap(self.keymap)
        if self.keymap_problems:
            self.notify("\n".join(self.keymap_problems), title=f"keymap {self.keymap_file}",
                        severity="warning", timeout=15)
        try:
            # The terminal went away (ssh drop outside tmux, pane killed): leave cleanly.
            import asyncio

            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGHUP, self._hangup)
            # `kill PID` (a served tab's end, a supervisor): quit as `q` does, so the
            # engine closes (the recording flushed, the lease given back with its time).
            loop.add_signal_handler(signal.SIGTERM, self.exit)
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
        """Swap the theme class; the panels' ``level--*`` colours follow from the CSS."""
        theme = self.themes[name]
        if theme.palette in self.available_themes:
            self.theme = theme.palette  # Textual owns the "-theme-*" classes: ours differ
        for other in self.themes:
            self.remove_class(f"-cockpit-theme-{other}")
        self.add_class(f"-cockpit-theme-{name}")
        self.theme_name = name
        # The panels resolve their colours when they draw: draw them with the new CSS.
        if self.main is not None:
            self.call_after_refresh(self.main.restyle)

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
        with self.lock:
            snap = self.engine.tick()
            if self.after_tick is not None and self.after_tick(self.engine):
                first = snap.new_events
                snap = self.engine.tick()  # what the person did may unblock stages
                snap = replace(snap, new_events=first + snap.new_events)
            if self.engine.reload_wanted is not None:  # the campaign file changed
                from cockpit.fleet.open import reopen_engine

                self.engine = reopen_engine(self.engine)
                self.call_from_thread(self._plan_reloaded, self.engine.campaign)
        recorded, seed = self._read_recorded(snap)
        self.post_message(SnapshotTaken(snap, recorded, seed))
        self._write_status(snap)

    def _plan_reloaded(self, campaign: Any) -> None:
        """The campaign file's new version is the plan now: the screen follows it."""
        if self.main is not None:
            self.main.set_campaign(campaign)
        self.notify(f"campaign file reloaded (version {campaign.sha256[:12]})", timeout=6)

    def _read_recorded(self, snap: Snapshot) -> tuple[Recorded | None, Recorded | None]:
        """The recording of the window so far, when due (on open, then every
        :data:`RECORDED_EVERY_S`), and on open its last :data:`SEED_S` seconds (in the
        tick worker: outside the engine's lock, never on the screen's thread)."""
        now = time.monotonic()
        if now < self._recorded_next:
            return None, None
        first = self._recorded_next == 0.0
        self._recorded_next = now + RECORDED_EVERY_S
        t1 = snap.taken_at.timestamp()
        live = [g.index for g in snap.gpus.gpus]
        recorded = self.engine.telemetry_history(snap.window.start.timestamp(), t1,
                                                 gpus=live)
        seed = self.engine.telemetry_history(t1 - SEED_S, t1, gpu=SEED_GPU,
                                             host=("cpu_percent", "mem_used"), raw=True,
                                             gpus=live) if first else None
        return recorded, seed

    def _write_status(self, snap: Snapshot) -> None:
        """The tick's status line (in the tick worker), while this face conducts (one
        writer: issue 39); a failure is told once."""
        if self.status_log is None or not snap.conductor.you:
            return
        try:
            self.status_log.write_line(dumps(compact_json(snap)))
            self._status_log_failed = False
        except OSError as exc:
            if not self._status_log_failed:
                self._status_log_failed = True
                self.call_from_thread(
                    self.notify, f"cannot write {self.status_log.path}: {exc.strerror or exc}"
                    " — `cockpit status --line` loads the campaign instead",
                    title="status log", severity="warning", timeout=10)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "tick" and event.state == WorkerState.ERROR:
            self._ticking = False
            self.notify(f"tick failed: {event.worker.error}", severity="error")
            self._arm(self.interval)

    def on_snapshot_taken(self, message: SnapshotTaken) -> None:
        self._ticking = False
        if not self.is_running or self.return_code is not None:
            return  # shutting down
        snap = message.snapshot
        self.ticks += 1
        if message.seed is not None:
            self.seed = message.seed
        if message.recorded is not None:
            self.recorded = message.recorded
        for ev in snap.new_events:
            if ev.kind == RULE_FIRED and not ev.earlier:
                self.bell()
                self.notify(ev.text, title="stop rule fired", severity="error", timeout=15)
        self.snapshot = snap
        self._arm(self.interval)

    # ------------------------------------------------------------------ acting
    @work(thread=True, group="action", exit_on_error=False)
    def act(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        try:
            with self.lock:
                result = fn(*args, **kwargs)
        except ActionRefused as exc:
            self.post_message(ActionRefusedShown(what, str(exc)))
            return
        except InputError as exc:
            self.post_message(ActionRefusedShown(what, exc.text))
            return
        except JournalError as exc:  # the journal could not be written
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

    # ------------------------------------------------------------------ global keys
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for binding, node in self.all_bindings():
            # A read-only face's palette lists no command that acts (its keys are gone).
            if binding.action in ("quit_cockpit",) or not node.check_action(binding.action, ()):
                continue
            yield SystemCommand(f"{binding.description} ({binding.key.split(',')[0]})",
                                binding.tooltip or binding.description,
                                lambda action=binding.action, node=node:
                                self.run_action(action, node))

    def pop_screen(self) -> AwaitComplete:
        """Textual's palette dismisses itself twice when Enter follows the typing at once
        (a quick typist, a served tab's client): the second pop is nothing, never a crash."""
        if len(self.screen_stack) <= 1:
            return AwaitComplete.nothing()  # type: ignore[no-untyped-call, no-any-return]
        return super().pop_screen()

    def action_help(self) -> None:
        lines = Text()
        for binding, node in self.all_bindings():
            moved = self.keymap.get(binding.id or "")
            keys = (moved or binding.key_display or binding.key).replace(",", " / ")
            available = getattr(node, "key_available", lambda action: True)
            lines.append(f"{keys:>8}  ", "bold")
            lines.append(f"{binding.description:<10} {binding.tooltip}")
            if not available(binding.action):
                lines.append("  (not now)", "dim")
            lines.append("\n")
        where = (f"keymap: {self.keymap_file}" + (" (applied)" if self.keymap else
                                                   " (none: the defaults above)"))
        lines.append(f"\n{where}; a line `binding-id = \"key\"` moves a key "
                     "(ids: " + ", ".join(b.id for b, _ in self.all_bindings() if b.id)
                     + ")\n", "dim")
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
        active = [r.id for r in self.snapshot.active_runs] if self.snapshot else []
        if not active:
            self.exit(0)
            return
        self.confirm_quit(active)

    @work(group="quit", exclusive=True)
    async def confirm_quit(self, active: list[str]) -> None:
        if await self.push_screen_wait(ConfirmScreen(
                "Quit the cockpit?",
                f"{len(active)} run(s) keep running: {', '.join(active)}.\nQuitting never "
                "stops a run; reopen with `cockpit FILE` to re-attach.\n\n"
                "y quits · n / Esc stays")):
            self.exit(0)


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

    fleet = bool(getattr(args, "fleet", False))  # `cockpit fleet` is no machine's face
    # A read-only face (a colleague's browser tab) watches: it neither acts at its
    # ticks, nor sends alerts, nor writes the status log; its keys that act are gone.
    read_only = bool(getattr(args, "read_only", False))
    # A served tab says so (COCKPIT_FACE=serve): "conducted by serve, pid …" on the others.
    face = None if fleet or read_only else os.environ.get("COCKPIT_FACE", "tui")[:20]
    engine = open_engine(args.file, auto=bool(args.auto) and not read_only, actor="tui",
                         face=face,
                         simulate_gpus=args.simulate_gpus, machine=getattr(args, "machine", None),
                         fleet=fleet, pull="background", read_only=read_only,
                         alerts=None if read_only else getattr(args, "alerts", []))
    if read_only:
        engine.writes_refused = ("this cockpit is read-only (tui --read-only, serve "
                                 "--read-only): it writes nothing")
    quiet = fleet or read_only
    app = CockpitApp(engine, interval=float(args.interval), theme=chosen.name, themes=themes,
                     after_tick=after_tick,
                     status_log=None if quiet else CampaignFiles.of(engine.campaign).status_log)
    try:
        app.run(mouse=not getattr(args, "no_mouse", False))
    finally:
        app.engine.close()  # the engine in use (a reload replaces the first)
        if app.status_log is not None:
            app.status_log.close()
    return app.return_code or 0
