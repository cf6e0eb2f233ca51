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

from cockpit.common.printable import printable
from cockpit.headless.status_log import (
    RotatingFile,
    compact_json,
    dumps,
    prometheus_text,
    write_atomic,
)
from cockpit.journal.log import JournalError
from cockpit.journal.paths import CampaignFiles


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
    out = out or sys.stdout
    fleet = bool(getattr(args, "fleet", False))
    default_log = status_log_path(args.file)
    if fleet:  # never the status log of a machine's own headless in the same folder
        default_log = default_log.with_name("fleet-status.jsonl")
    refuse_linked_outputs(Path(args.status_log) if args.status_log else default_log,
                          Path(args.log) if args.log else None,
                          Path(args.prom) if args.prom else None)
    from cockpit.fleet.open import open_engine

    engine = open_engine(args.file, auto=args.auto, actor="headless",
                         simulate_gpus=args.simulate_gpus, machine=getattr(args, "machine", None),
                         fleet=fleet, pull="background")
    status_log = RotatingFile(Path(args.status_log) if args.status_log else default_log)
    event_log = RotatingFile(Path(args.log)) if args.log else None
    prom = Path(args.prom) if args.prom else None
    flags = {"stop": False, "reopen": False}

    def ask_stop(signum: int, frame: Any) -> None:
        flags["stop"] = True

    def ask_reopen(signum: int, frame: Any) -> None:
        flags["reopen"] = True

    old = {sig: signal.signal(sig, ask_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    old[signal.SIGHUP] = signal.signal(signal.SIGHUP, ask_reopen)

    warnings = WriteWarnings(sys.stderr)

    def log_line(line: str) -> None:
        """Into the event log, when there is one and it works."""
        if event_log is None:
            return
        try:
            event_log.write_line(line)
        except OSError as exc:
            warnings.failed(f"event log {event_log.path}", exc)
        else:
            warnings.ok(f"event log {event_log.path}")

    def emit(line: str) -> None:
        # An event's line holds a run's, a note's or a peer's text: printable before it
        # reaches a terminal or the --log file (a `tail -f` of it is a terminal too).
        line = printable(line, EMIT_LINE_LIMIT)
        try:
            print(line, file=out, flush=True)
        except OSError as exc:
            warnings.failed("standard output", exc)
        log_line(line)

    try:
        while True:
            started = time.monotonic()
            try:
                snap = engine.tick()
            except (JournalError, OSError) as exc:
                # The journal (or a file the tick writes) cannot be written now: nothing
                # the tick decided is lost (it is decided again from the journal), so
                # warn and tick again.
                warnings.failed("tick", exc, also=log_line)
                snap = None
            else:
                warnings.ok("tick")
            if flags["reopen"]:
                flags["reopen"] = False
                status_log.reopen()
                if event_log is not None:
                    event_log.reopen()
            if snap is not None:
                # Events from before this process started are history: print only new ones.
                for ev in (ev for ev in snap.new_events if not ev.earlier):
                    emit(f"{ev.fields['t']} {ev.text}")
                try:
                    status_log.write_line(dumps(compact_json(snap)))
                except OSError as exc:
                    warnings.failed(f"status log {status_log.path}", exc, also=log_line)
                else:
                    warnings.ok(f"status log {status_log.path}")
                if prom is not None:
                    try:
                        write_atomic(prom, prometheus_text(snap))
                    except OSError as exc:
                        warnings.failed(f"Prometheus file {prom}", exc, also=log_line)
                    else:
                        warnings.ok(f"Prometheus file {prom}")
            stamp = (snap.taken_at if snap is not None else engine.clock.now()).isoformat()
            if flags["stop"]:
                emit(f"{stamp} headless stopped by signal; runs keep going")
                return 0
            if args.until_done:
                verdict = engine.until_done(engine.state())
                if verdict.code is not None:
                    emit(f"{stamp} until-done: {verdict.reason} (exit {verdict.code})")
                    return verdict.code
            remaining = args.interval - (time.monotonic() - started)
            if remaining > 0:
                time.sleep(remaining)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        status_log.close()
        if event_log is not None:
            event_log.close()
        engine.close()
