"""The actions a person takes from the command line: start, mark, stop, decide, accept,
note, cost and verify.

This module owns their handlers. Each builds the engine for the campaign file, calls
the one engine action and prints the journal lines it wrote; a refusal is one line and
exit 1 (:func:`cockpit.cli.common.acting`). Their arguments are declared in
:func:`cockpit.cli.build_parser`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cockpit.cli.common import EXIT_OK, acting


def _engine(args: argparse.Namespace, **kwargs: Any) -> Any:
    from cockpit.fleet.open import open_engine

    return open_engine(args.file, telemetry=False, **kwargs)


def _print_written(events: list[dict[str, Any]] | dict[str, Any] | None,
                   args: argparse.Namespace | None = None) -> None:
    """The events written, a line each; with ``--json``, one JSON list (what `cockpit
    fleet` reads of an action it ran here)."""
    from cockpit.engine import describe_event

    written = events if isinstance(events, list) else [events] if events else []
    if args is not None and getattr(args, "json", False):
        print(json.dumps(written, default=str))
        return
    for event in written:
        print(f"journal #{event['seq']} {event['t']} {describe_event(event)}")


@acting
def cmd_start(args: argparse.Namespace) -> int:
    _print_written(_engine(args, actor="cli").start(args.stage, force=args.force), args)
    return EXIT_OK


@acting
def cmd_mark(args: argparse.Namespace) -> int:
    _print_written(_engine(args, actor="cli").mark(args.stage, args.what, args.note), args)
    return EXIT_OK


@acting
def cmd_stop(args: argparse.Namespace) -> int:
    engine = _engine(args, actor="cli")
    event = engine.stop(args.target, args.reason)
    if not args.json:
        _print_written(event)
    grace = engine.campaign.settings.stop_grace_s
    stopped = engine.wait_stopped(event["run"], timeout=grace + 10)
    after = [e for e in engine.journal.events() if e["seq"] > event["seq"]]
    _print_written([event, *after] if args.json else after, args)
    if not stopped:
        print(f"cockpit stop: run {event['run']} still alive after {grace + 10:g} s",
              file=sys.stderr)
        return 1
    return EXIT_OK


@acting
def cmd_verify(args: argparse.Namespace) -> int:
    engine = _engine(args, actor="cli")
    if args.resume:
        event = engine.verify_resume(args.run, args.checkpoint or "first")
        _print_written(event)
        return EXIT_OK if event["ok"] else 1
    event = engine.verify(args.run, args.checkpoint or "newest")
    _print_written(event)
    print(f"  layout: {event.get('layout')} · load {event.get('load_seconds')} s")
    for word in event.get("missing") or []:
        print(f"  missing: {word}")
    for warning in event.get("warnings") or []:
        print(f"  warning: {warning}")
    return EXIT_OK if event["ok"] else 1


@acting
def cmd_decide(args: argparse.Namespace) -> int:
    _print_written(_engine(args, actor="cli").decide(args.outcome, stage=args.stage,
                                                     drops=args.drop, note=args.note), args)
    return EXIT_OK


@acting
def cmd_accept(args: argparse.Namespace) -> int:
    event = _engine(args, actor="cli").accept(args.run, args.note, override=args.override)
    if event is None and not args.json:
        print(f"run {args.run} is already accepted: nothing written")
    else:
        _print_written(event, args)
    return EXIT_OK


@acting
def cmd_reject(args: argparse.Namespace) -> int:
    event = _engine(args, actor="cli").reject(args.run, args.note)
    if event is None and not args.json:
        print(f"run {args.run} is already rejected: nothing written")
    else:
        _print_written(event, args)
    return EXIT_OK


@acting
def cmd_note(args: argparse.Namespace) -> int:
    _print_written(_engine(args, actor="cli").note(args.stage, args.text), args)
    return EXIT_OK


@acting
def cmd_cost(args: argparse.Namespace) -> int:
    _print_written(_engine(args, actor="cli").cost(args.label, args.amount, args.currency),
                   args)
    return EXIT_OK
