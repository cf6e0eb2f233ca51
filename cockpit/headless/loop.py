"""Headless mode: the engine's tick loop without a screen, printing one line per event.

Same engine as the TUI; no Textual import on this path. SIGTERM/SIGINT finish the
current tick and exit 0 — runs are never stopped by leaving.

A write that fails (a full disk under the status log, the event log, the Prometheus
file or the journal) never ends headless: it warns on stderr and in whichever log
still works, and the next tick tries again. Runs keep being watched meanwhile.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

from cockpit.common.fsutil import write_atomic
from cockpit.common.net import is_loopback
from cockpit.common.printable import printable
from cockpit.engine import CampaignFiles, JournalError
from cockpit.engine.snapshot import Snapshot
from cockpit.headless.prom_http import MetricsEndpoint
from cockpit.headless.prometheus import VIEWER_FAMILIES
from cockpit.headless.prometheus import render as prometheus_text
from cockpit.headless.status_log import (
    RotatingFile,
    compact_json,
    dumps,
)


def status_log_path(campaign_file: str | Path) -> Path:
    """Default status log: beside the journal, so `status --line` finds it without loading."""
    return CampaignFiles.beside(campaign_file).status_log


WARN_REPEAT_S = 60.0  # the same failure is warned again at most this often


EMIT_LINE_LIMIT = 4000  # characters of one event line on stdout and in --log

class WriteWarnings:
    """Failed writes in words: each new failure at once, a lasting one once a minute."""

    def __init__(self, err: Any) -> None:
        self.err = err
        self._last: dict[str, tuple[str, float]] = {}
        self.count = 0

    def failed(self, what: str, exc: BaseException, also: Any = None) -> None:
        self.count += 1
        text = f"{what}: {exc}"
        if isinstance(exc, OSError) and exc.strerror:
            text = f"{what}: {exc.strerror}" + (f" ({exc.filename})" if exc.filename else "")
        now = time.monotonic()
        previous = self._last.get(what)
        if previous is not None and previous[0] == text and now - previous[1] < WARN_REPEAT_S:
            return
        self._last[what] = (text, now)
        line = f"cockpit headless: warning: {text}; still running, retrying next tick"
        try:
            print(line, file=self.err, flush=True)
        except OSError:
            pass
        if also is not None:
            try:
                also(line)
            except OSError:
                pass

    def ok(self, what: str) -> None:
        if self._last.pop(what, None) is not None:
            try:
                print(f"cockpit headless: {what}: working again", file=self.err, flush=True)
            except OSError:
                pass


def refuse_linked_outputs(*paths: Path | None) -> None:
    """Bad input (exit 2) when an output path is a symbolic link: never written through."""
    from cockpit.common.errors import InputError
    from cockpit.common.fsutil import SYMLINK_REFUSED

    for path in paths:
        if path is not None and path.is_symlink():
            raise InputError(f"cockpit headless: cannot write {path}: {SYMLINK_REFUSED}")


def run_headless(args: argparse.Namespace, out: Any = None) -> int:
    fleet = bool(getattr(args, "fleet", False))
    default_log = status_log_path(args.file)
    if fleet:  # never the status log of a machine's own headless in the same folder
        default_log = default_log.with_name("fleet-status.jsonl")
    refuse_linked_outputs(Path(args.status_log) if args.status_log else default_log,
                          Path(args.log) if args.log else None,
                          Path(args.prom) if args.prom else None)
    endpoint = prom_endpoint(args)  # a port in use is said before the engine opens
    from cockpit.fleet.open import open_engine

    engine = open_engine(args.file, auto=args.auto, actor="headless",
                         face="fleet" if fleet else "headless",
                         simulate_gpus=args.simulate_gpus, machine=getattr(args, "machine", None),
                         fleet=fleet, pull="background", alerts=getattr(args, "alerts", []))
    if args.status_log and not fleet:  # so that `status --line` finds it untold
        record_status_log(args.file, Path(args.status_log))
    loop = HeadlessLoop(args, engine, out or sys.stdout,
                        Path(args.status_log) if args.status_log else default_log, endpoint)
    return loop.run()


def prom_endpoint(args: argparse.Namespace) -> MetricsEndpoint | None:
    """``--prom-port``: listening now (its port printed: ``0`` picks a free one)."""
    port = getattr(args, "prom_port", None)
    if port is None:
        return None
    host = args.prom_host
    endpoint = MetricsEndpoint(host, port)
    where = f"[{host}]" if ":" in host else host
    print(f"cockpit headless: metrics at http://{where}:{endpoint.port}/metrics",
          file=sys.stderr, flush=True)
    if not is_loopback(host):
        print(f"cockpit headless: warning: --prom-host {host} is reachable beyond this "
              "machine: anyone who reaches it reads the campaign's figures and names",
              file=sys.stderr, flush=True)
    return endpoint


def record_status_log(campaign_file: str | Path, status_log: Path) -> None:
    """Record a custom status log's absolute path in ``.cockpit/`` (a failure to is a
    warning: the log itself is still written)."""
    pointer = CampaignFiles.beside(campaign_file).status_log_pointer
    try:
        write_atomic(pointer, f"{status_log.resolve()}\n")
    except OSError as exc:
        print(f"cockpit headless: warning: cannot record the status log in {pointer}: "
              f"{exc.strerror or exc}", file=sys.stderr)


class HeadlessLoop:
    """The tick loop's outputs: event lines, the status log, the Prometheus file and
    endpoint, and
    the signals (TERM/INT stop it, HUP reopens the logs for logrotate)."""

    def __init__(self, args: argparse.Namespace, engine: Any, out: Any,
                 status_log: Path, endpoint: MetricsEndpoint | None = None) -> None:
        self.args = args
        self.engine = engine
        self.out = out
        self.status_log = RotatingFile(status_log)
        self.event_log = RotatingFile(Path(args.log)) if args.log else None
        self.prom = Path(args.prom) if args.prom else None
        self.endpoint = endpoint
        self.flags = {"stop": False, "reopen": False}
        # What needs a person, and when it was last said (monotonic): said once at
        # once, then again every ``--remind`` while it holds; said at once if it recurs.
        self.told: dict[str, float] = {}
        self.warnings = WriteWarnings(sys.stderr)
        self.role: str | None = None  # who conducts, as last said (said when it changes)
        self.refused: str | None = None  # the campaign file's refused edit, as last said

    def log_line(self, line: str) -> None:
        """Into the event log, when there is one and it works."""
        if self.event_log is None:
            return
        try:
            self.event_log.write_line(line)
        except OSError as exc:
            self.warnings.failed(f"event log {self.event_log.path}", exc)
        else:
            self.warnings.ok(f"event log {self.event_log.path}")

    def emit(self, line: str) -> None:
        # An event's line holds a run's, a note's or a peer's text: printable before it
        # reaches a terminal or the --log file (a `tail -f` of it is a terminal too).
        line = printable(line, EMIT_LINE_LIMIT)
        try:
            print(line, file=self.out, flush=True)
        except OSError as exc:
            self.warnings.failed("standard output", exc)
        self.log_line(line)

    def _write(self, what: str, write: Any) -> None:
        try:
            write()
        except OSError as exc:
            self.warnings.failed(what, exc, also=self.log_line)
        else:
            self.warnings.ok(what)

    def tick(self) -> Snapshot | None:
        try:
            snap: Snapshot = self.engine.tick()
        except (JournalError, OSError) as exc:
            # The journal (or a file the tick writes) cannot be written now: nothing
            # the tick decided is lost (it is decided again from the journal), so
            # warn and tick again.
            self.warnings.failed("tick", exc, also=self.log_line)
            return None
        self.warnings.ok("tick")
        return snap

    def outputs(self, snap: Snapshot) -> None:
        """The new events, the status log line and the Prometheus file of one tick (the
        last two only while this face conducts: one writer each, issue 39)."""
        # Events from before this process started are history: print only new ones.
        for ev in (ev for ev in snap.new_events if not ev.earlier):
            self.emit(f"{ev.fields['t']} {ev.text}")
        self.say_role(snap)
        if snap.plan_refused != self.refused:  # an edit that does not load: said once
            self.refused = snap.plan_refused
            if snap.plan_refused is not None:
                self.emit(f"{snap.taken_at.isoformat()} campaign file edit refused: "
                          f"{snap.plan_refused}; the plan in force is unchanged")
        self.remind(snap)
        if snap.conductor.you:  # a viewer: the conductor writes the status log
            self._write(f"status log {self.status_log.path}",
                        lambda: self.status_log.write_line(dumps(compact_json(snap))))
        prom, endpoint = self.prom, self.endpoint
        if prom is None and endpoint is None:
            return
        # Once, for both ways of being scraped; a viewer's says only who conducts.
        text = prometheus_text(snap, None if snap.conductor.you else VIEWER_FAMILIES)
        if prom is not None:
            self._write(f"Prometheus file {prom}", lambda: write_atomic(prom, text))
        if endpoint is not None:
            endpoint.publish(text)

    def say_role(self, snap: Snapshot) -> None:
        """``conducting`` / ``viewer: conducted by …`` / ``NOT CONDUCTED``, when it
        changes (a takeover is a line in the output)."""
        view = snap.conductor
        role = "you" if view.you else f"{view.face}:{view.pid}" if view.conducted else "none"
        if role != self.role:
            self.role = role
            words = ("conducting: the guards, alerts, recording and status log are this "
                     "face's" if view.you else f"viewer: {view.words()}")
            self.emit(f"{snap.taken_at.isoformat()} {words}")

    def remind(self, snap: Snapshot) -> None:
        """``NEEDS A PERSON: …`` for each need (a decision, a verdict, a blind rule): at
        once, then every ``--remind`` while it holds."""
        now, every = time.monotonic(), float(getattr(self.args, "remind", 1800.0))
        needs = snap.needs_person()
        for need in needs:
            said = self.told.get(need.key)
            if said is None or now - said >= every:
                self.told[need.key] = now
                again = "" if said is None else " (still)"
                self.emit(f"{snap.taken_at.isoformat()} NEEDS A PERSON{again}: {need.text}")
        held = {need.key for need in needs}
        for key in [k for k in self.told if k not in held]:
            del self.told[key]  # done: a need that comes back is said at once

    def step(self) -> int | None:
        """One tick and its outputs; the exit code when the loop ends. A stop asked
        before the tick ends the loop first: no new tick (no takeover, no start) after
        a SIGTERM."""
        if self.flags.get("stop"):
            self.emit(f"{self.engine.clock.now().isoformat()} headless stopped by signal; "
                      "runs keep going")
            return 0
        snap = self.tick()
        if self.flags["reopen"]:
            self.flags["reopen"] = False
            self.status_log.reopen()
            if self.event_log is not None:
                self.event_log.reopen()
        if snap is not None:
            self.outputs(snap)
        if self.engine.reload_wanted is not None:  # the campaign file changed: load it
            from cockpit.fleet.open import reopen_engine

            version = self.engine.reload_wanted
            self.engine = reopen_engine(self.engine)
            self.emit(f"{self.engine.clock.now().isoformat()} campaign file reloaded "
                      f"(version {version.sha256[:12]})")
        stamp = (snap.taken_at if snap is not None else self.engine.clock.now()).isoformat()
        if self.flags["stop"]:
            self.emit(f"{stamp} headless stopped by signal; runs keep going")
            return 0
        if self.args.until_done:
            verdict = self.engine.until_done(self.engine.state())
            if verdict.code is not None:
                self.emit(f"{stamp} until-done: {verdict.reason} (exit {verdict.code})")
                return int(verdict.code)
        return None

    def run(self) -> int:
        def ask_stop(signum: int, frame: Any) -> None:
            self.flags["stop"] = True

        def ask_reopen(signum: int, frame: Any) -> None:
            self.flags["reopen"] = True

        old = {sig: signal.signal(sig, ask_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        old[signal.SIGHUP] = signal.signal(signal.SIGHUP, ask_reopen)
        try:
            while True:
                started = time.monotonic()
                code = self.step()
                if code is not None:
                    return code
                remaining = self.args.interval - (time.monotonic() - started)
                if remaining > 0:
                    time.sleep(remaining)
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
            self.status_log.close()
            if self.event_log is not None:
                self.event_log.close()
            if self.endpoint is not None:
                self.endpoint.close()
            self.engine.close()
