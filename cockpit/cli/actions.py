"""The actions a person takes from the command line: start, mark, stop, decide, accept,
note, cost and verify.

This module owns their arguments (``add_verify_command(sub)``,
``add_action_commands(sub)``; ``action_parser()``, the same arguments alone, checks an
action that ``cockpit fleet FILE ACTION ...`` runs on another machine) and their
handlers. Each builds the engine for the campaign file as
this cockpit's machine, calls the one engine action and prints the journal lines it
wrote; a refusal is one line and exit 1 (:func:`cockpit.cli.common.acting`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cockpit.cli.common import EXIT_OK, Parser, acting, add_machine_option, machine_of
from cockpit.common.event_kinds import STAGE_STARTED

# The actions `cockpit fleet FILE ACTION ...` runs on the owning machine.
FLEET_ACTIONS = ("start", "stop", "mark", "decide", "accept", "reject", "note", "cost")


def add_verify_command(sub: Any) -> None:
    p = sub.add_parser("verify", help="reload a run's checkpoint in a fresh process (D17)")
    p.add_argument("file")
    p.add_argument("run", metavar="RUN_OR_STAGE")
    p.add_argument("--checkpoint", default=None, metavar="first|newest|PATH",
                   help="which checkpoint (default newest; first with --resume)")
    p.add_argument("--resume", action="store_true",
                   help="resume equivalence: restart from it for N steps and compare")
    p.set_defaults(handler=cmd_verify)


def add_action_commands(sub: Any) -> None:
    """The actions a person takes on a stage or a run (those of :data:`FLEET_ACTIONS`)."""
    p = sub.add_parser("start", help="launch a stage's command, detached")
    p.add_argument("file")
    p.add_argument("stage")
    p.add_argument("--force", action="store_true",
                   help="start even if its GPU is held or its `after` stages have not ended")
    p.set_defaults(handler=cmd_start)

    p = sub.add_parser("mark", help="mark a stage without a command started, done or skipped")
    p.add_argument("file")
    p.add_argument("stage")
    p.add_argument("what", choices=["started", "done", "skipped"])
    p.add_argument("--note", default=None)
    p.set_defaults(handler=cmd_mark)

    p = sub.add_parser("stop", help="stop a run (SIGTERM, grace, SIGKILL) and record why")
    p.add_argument("file")
    p.add_argument("target", metavar="RUN_OR_STAGE")
    p.add_argument("--reason", required=True)
    p.set_defaults(handler=cmd_stop)

    p = sub.add_parser("decide", help="record the decision at a decision point (D4)")
    p.add_argument("file")
    p.add_argument("outcome", choices=["continue", "limit", "revise"])
    p.add_argument("--stage", default=None)
    p.add_argument("--drop", nargs="+", default=[], metavar="STAGE")
    p.add_argument("--note", required=True)
    p.set_defaults(handler=cmd_decide)

    p = sub.add_parser("accept", help="accept a run's result (never a stopped run, D15)")
    p.add_argument("file")
    p.add_argument("run")
    p.add_argument("--note", default=None)
    p.add_argument("--override", action="store_true",
                   help="accept although its acceptance checks fail (needs --note; recorded)")
    p.set_defaults(handler=cmd_accept)

    p = sub.add_parser("reject", help="reject a run's result (a later verdict replaces one)")
    p.add_argument("file")
    p.add_argument("run")
    p.add_argument("--note", required=True)
    p.set_defaults(handler=cmd_reject)

    p = sub.add_parser("note", help="record an explanation on a stage (D24)")
    p.add_argument("file")
    p.add_argument("stage")
    p.add_argument("text")
    p.set_defaults(handler=cmd_note)

    p = sub.add_parser("cost", help="record another cost, kept apart from the rental (D20)")
    p.add_argument("file")
    p.add_argument("label")
    p.add_argument("amount")
    p.add_argument("--currency", default="USD")
    p.set_defaults(handler=cmd_cost)
    for name in FLEET_ACTIONS:  # what `cockpit fleet` reads of an action on another machine
        sub.choices[name].add_argument("--json", action="store_true",
                                       help="print the events written as one JSON list")


def action_parser() -> argparse.ArgumentParser:
    """The fleet's actions alone, as ``cockpit ACTION`` parses them (same messages)."""
    parser = Parser(prog="cockpit")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    add_action_commands(sub)
    for choice in sub.choices.values():
        add_machine_option(choice)  # accepted as `cockpit ACTION` accepts it
    return parser


def _engine(args: argparse.Namespace, **kwargs: Any) -> Any:
    from cockpit.fleet.open import open_engine

    return open_engine(args.file, telemetry=False, machine=machine_of(args), **kwargs)


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
    engine = _engine(args, actor="cli")
    if not args.force:
        _refuse_done(engine, args.stage)
    written = engine.start(args.stage, force=args.force)
    _print_written(written, args)
    for event in written:  # the window, an earlier attempt's files: said, not refused
        if event.get("kind") == STAGE_STARTED and event.get("warning"):
            print(f"cockpit start: warning: {event['warning']}", file=sys.stderr)
    return EXIT_OK


def _refuse_done(engine: Any, stage_id: str) -> None:
    """A stage that is done starts again only with ``--force``, as the screen asks first:
    one line and exit 2 (the command as typed would redo finished work)."""
    from cockpit.common.errors import InputError
    from cockpit.engine.affordances import done_refusal
    from cockpit.journal.fold import DONE

    st = engine.state().stages.get(stage_id)
    stage = next((s for s in engine.campaign.stages if s.id == stage_id), None)
    if st is not None and stage is not None and st.state == DONE:
        raise InputError(f"cockpit start: {done_refusal(stage)}")


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
    after = [e for e in engine.journal.recent() if e["seq"] > event["seq"]]
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
