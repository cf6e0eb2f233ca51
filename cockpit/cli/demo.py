"""`cockpit demo`: the digits campaign end to end on any machine, in minutes.

Copies ``sample_campaigns/digits`` into a working folder, sets the window to start
now and writes this interpreter into its stage commands, then runs it in auto mode:
the demo plays the person's part (marks the prep stage done, records the pilot
decision "continue" with a note saying it was scripted) and runs to the close.
With a terminal it opens the TUI; ``--headless`` (and no TTY, as in CI) prints
the events and the final summary.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cockpit.assets import asset_path
from cockpit.campaign.model import STATE_DIR
from cockpit.common.errors import InputError
from cockpit.common.event_kinds import EXPORT_DONE

DEMO_NOTE = "the demo's scripted choice: the pilot reached the floor, go on with the plan"
SAMPLE = asset_path("sample_campaigns", "digits")


def prepare(target: Path | None, now: datetime, steps: int | None = None) -> Path:
    """Copy the sample into ``target`` (default a new folder here); return the campaign file."""
    if not SAMPLE.is_dir():
        raise InputError(f"demo: the sample campaign is missing ({SAMPLE}); the install is "
                         "incomplete: reinstall the cockpit")
    if target is None:
        target = Path.cwd() / f"cockpit-demo-{now:%Y%m%d-%H%M%S}"
    if target.exists() and any(target.iterdir()):
        raise InputError(f"demo: {target} exists and is not empty; give --dir a new folder")
    shutil.copytree(SAMPLE, target, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(STATE_DIR, "ckpt", "out", "__pycache__"))
    path = target / "campaign.yaml"
    text = path.read_text()
    text = text.replace("start: 2026-12-02T08:00:00Z",
                        f"start: {now.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    # Stage commands say "{python}": the cockpit runs them with its own interpreter (a
    # venv needs nothing on PATH). Kept as the word, not an absolute path, so the plan
    # copy in the export names no folder that may not exist on the next machine (D23).
    if steps is not None:
        text = text.replace('"--steps", "600"', f'"--steps", "{steps}"')
    path.write_text(text)
    return path


def play_person(engine: Any) -> list[dict[str, Any]]:
    """The demo's scripted human part: mark prep done, decide at the pilot."""
    from cockpit.common.errors import ActionRefused

    written: list[dict[str, Any]] = []
    state = engine.state()
    try:
        if state.stages["prep"].state == "pending":
            written += engine.mark("prep", "done", note="demo: the corpus ships with the "
                                   "project, nothing to prepare")
        if "pilot" in state.pending_decisions:
            written += engine.decide("continue", stage="pilot", note=DEMO_NOTE)
    except ActionRefused:
        pass  # another cockpit did it first
    return written


def run_demo(args: argparse.Namespace) -> int:
    now = datetime.now(timezone.utc)
    path = prepare(Path(args.dir).resolve() if args.dir else None, now,
                   steps=getattr(args, "steps", None))
    print(f"demo campaign: {path}", flush=True)
    headless = args.headless or not sys.stdout.isatty()
    if not headless:
        from cockpit.tui.app import run_tui

        tui_args = argparse.Namespace(file=str(path), interval=args.interval, theme=None,
                                      auto=True, no_mouse=False, alerts=args.alerts,
                                      simulate_gpus=args.simulate_gpus)
        code = run_tui(tui_args, after_tick=play_person)
        print(summary(path))
        return code
    return _run_headless(path, args)


def _run_headless(path: Path, args: argparse.Namespace) -> int:
    from cockpit.fleet.open import open_engine

    engine = open_engine(path, auto=True, actor="demo", face="demo",
                         simulate_gpus=args.simulate_gpus,
                         alerts=args.alerts)
    deadline = time.monotonic() + args.timeout
    try:
        while True:
            snap = engine.tick()
            for ev in snap.new_events:
                print(f"{ev.fields['t']} {ev.text}", flush=True)
            if play_person(engine):
                continue  # the person's part may have unblocked stages: tick again first
            verdict = engine.until_done(engine.state())
            if verdict.code is not None:
                print(f"demo: {verdict.reason}", flush=True)
                break
            if time.monotonic() > deadline:
                print(f"demo: not done after {args.timeout:g} s", file=sys.stderr)
                return 1
            time.sleep(args.interval)
        if verdict.code != 0:
            print(failed_stage_logs(engine.state()), file=sys.stderr)
    finally:
        engine.close()
    print(summary(path))
    return verdict.code


def failed_stage_logs(state: Any, lines: int = 15) -> str:
    """The last stderr lines of every failed stage and where its full log is."""
    from cockpit.journal.fold import FAILED

    out: list[str] = []
    for stage in state.stages.values():
        if stage.state != FAILED or not stage.exit_file:
            continue
        err = Path(stage.exit_file).with_suffix(".err")
        try:
            tail = err.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            tail = ["(its log could not be read)"]
        out.append(f"demo: stage {stage.id} failed ({stage.reason or 'no reason recorded'}); "
                   f"last lines of {err}:")
        out.extend(f"  | {line}" for line in tail)
    return "\n".join(out)


def summary(path: Path) -> str:
    """The close in a few lines: runs, budget, export and how to verify it."""
    from cockpit.fleet.open import open_engine

    engine = open_engine(path, read_only=True, telemetry=False)
    snap = engine.tick()
    lines = ["", f"campaign {snap.campaign} closed:"]
    for run in snap.runs:
        why = f" — {run.stop_rule}: {run.stop_reason}" if run.stop_rule else ""
        verdict = f" [{run.verdict}]" if run.verdict else ""
        lines.append(f"  run {run.id}: {run.state}{verdict}{why}")
    if snap.budget:
        b = snap.budget
        share = b.share_per_accepted
        lines.append(f"  budget: {b.committed_label} committed, {b.accepted} accepted, "
                     + (f"{share} per accepted result"
                        if share else f"per result undefined ({b.undefined_reason})"))
    # A fresh engine's first snapshot carries the whole journal as its new events.
    exports = [e.fields for e in snap.new_events if e.kind == EXPORT_DONE]
    if exports:
        last = exports[-1]
        lines.append(f"  export: {last.get('path')} (verified: {last.get('verified')})")
        lines.append(f"  verify it: cockpit verify-export {last.get('path')}")
    return "\n".join(lines)
