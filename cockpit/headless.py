"""Headless mode: the engine's tick loop without a screen, printing one line per event.

Same engine as the TUI; no Textual import on this path. SIGTERM/SIGINT finish the
current tick and exit 0 — runs are never stopped by leaving.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

from cockpit.engine import Engine
from cockpit.statuslog import RotatingFile, compact_json, dumps, prometheus_text, write_atomic


def status_log_path(campaign_file: str | Path) -> Path:
    """Default status log: beside the journal, so `status --line` finds it without loading."""
    return Path(campaign_file).resolve().parent / ".cockpit" / "status.jsonl"


def run_headless(args: argparse.Namespace, out: Any = None) -> int:
    out = out or sys.stdout
    engine = Engine.open(args.file, auto=args.auto, actor="headless",
                         simulate_gpus=args.simulate_gpus)
    status_log = RotatingFile(Path(args.status_log) if args.status_log
                              else status_log_path(args.file))
    event_log = RotatingFile(Path(args.log)) if args.log else None
    prom = Path(args.prom) if args.prom else None
    flags = {"stop": False, "reopen": False}

    def ask_stop(signum: int, frame: Any) -> None:
        flags["stop"] = True

    def ask_reopen(signum: int, frame: Any) -> None:
        flags["reopen"] = True

    old = {sig: signal.signal(sig, ask_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    old[signal.SIGHUP] = signal.signal(signal.SIGHUP, ask_reopen)

    def emit(line: str) -> None:
        print(line, file=out, flush=True)
        if event_log is not None:
            event_log.write_line(line)

    try:
        while True:
            started = time.monotonic()
            snap = engine.tick()
            # Events from before this process started are history: print only what is new.
            events = [ev for ev in snap.new_events if not ev.earlier]
            if flags["reopen"]:
                flags["reopen"] = False
                status_log.reopen()
                if event_log is not None:
                    event_log.reopen()
            for ev in events:
                emit(f"{ev.fields['t']} {ev.text}")
            status_log.write_line(dumps(compact_json(snap)))
            if prom is not None:
                write_atomic(prom, prometheus_text(snap))
            if flags["stop"]:
                emit(f"{snap.taken_at.isoformat()} headless stopped by signal; runs keep going")
                return 0
            if args.until_done:
                verdict = engine.until_done(engine.state())
                if verdict.code is not None:
                    emit(f"{snap.taken_at.isoformat()} until-done: {verdict.reason} "
                         f"(exit {verdict.code})")
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
