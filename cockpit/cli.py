"""Command-line entry point: parses arguments and hands each command to its module.

Bad input of any kind becomes located lines on stderr and exit code 2, never a
traceback. Commands that only read (check, plan, status, budget) write nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from cockpit import __version__
from cockpit.errors import InputError
from cockpit.units import format_hours, parse_duration

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in the cockpit, never a verdict on the campaign

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments as one line and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _duration_hours(text: str) -> float:
    try:
        return parse_duration(text) / 3600.0
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="cockpit", description="A terminal cockpit for a GPU training "
                     "campaign on a rented machine.")
    parser.add_argument("--version", action="version", version=f"cockpit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("check", help="validate a campaign file and give the plan's advice")
    p.add_argument("file")
    p.set_defaults(handler=cmd_check)

    p = sub.add_parser("plan", help="the schedule, window figures and overrun options")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--overrun", type=_duration_hours, default=0.0, metavar="DURATION",
                   help="what-if: add this much to the plan's end-to-end duration (e.g. 30h)")
    p.set_defaults(handler=cmd_plan)

    p = sub.add_parser("status", help="what the cockpit would show now (reads only)")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--line", action="store_true", help="one short line for a tmux status bar")
    _simulate(p)
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("headless", help="run the cockpit without a screen")
    p.add_argument("file")
    p.add_argument("--interval", type=_positive_seconds, default=1.0, metavar="SECONDS")
    p.add_argument("--auto", action="store_true",
                   help="start each stage when it is ready (stops at decision points)")
    p.add_argument("--until-done", action="store_true",
                   help="exit when nothing more can happen without a person (0 / 1 / 3)")
    p.add_argument("--status-log", default=None, metavar="PATH",
                   help="one JSON line per tick (default .cockpit/status.jsonl; rotated)")
    p.add_argument("--log", default=None, metavar="PATH",
                   help="also write the event lines to this file (rotated)")
    p.add_argument("--prom", default=None, metavar="PATH",
                   help="write the Prometheus textfile here each tick (atomic)")
    _simulate(p)
    p.set_defaults(handler=cmd_headless)

    p = sub.add_parser("tui", help="the cockpit on screen (also: cockpit FILE)")
    p.add_argument("file")
    p.add_argument("--interval", type=_positive_seconds, default=1.0, metavar="SECONDS")
    p.add_argument("--theme", default=None, help="default, light or high-contrast")
    p.add_argument("--auto", action="store_true",
                   help="start each stage when it is ready (stops at decision points)")
    p.add_argument("--no-mouse", action="store_true", help="for slow SSH links")
    _simulate(p)
    p.set_defaults(handler=cmd_tui)

    p = sub.add_parser("verify", help="reload a run's checkpoint in a fresh process (D17)")
    p.add_argument("file")
    p.add_argument("run", metavar="RUN_OR_STAGE")
    p.add_argument("--checkpoint", default=None, metavar="first|newest|PATH",
                   help="which checkpoint (default newest; first with --resume)")
    p.add_argument("--resume", action="store_true",
                   help="resume equivalence: restart from it for N steps and compare")
    p.set_defaults(handler=cmd_verify)

    p = sub.add_parser("demo", help="the digits campaign end to end, in minutes")
    p.add_argument("--headless", action="store_true", help="no screen: print events")
    p.add_argument("--dir", default=None, help="working folder (default: a new one here)")
    p.add_argument("--interval", type=_positive_seconds, default=0.5, metavar="SECONDS")
    p.add_argument("--timeout", type=_positive_seconds, default=1800, metavar="SECONDS")
    p.add_argument("--steps", type=int, default=None, help=argparse.SUPPRESS)
    _simulate(p)
    p.set_defaults(handler=cmd_demo)

    p = sub.add_parser("init", help="write a complete, commented campaign to start from")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--offer", default="rtx4090-3d", help="the package (an offer id of the catalog)")
    p.add_argument("--start", default="now", metavar="ISO|now",
                   help="when the rental window starts (default: now)")
    p.set_defaults(handler=cmd_init)

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
    p.set_defaults(handler=cmd_accept)

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

    from cockpit.close_commands import add_close_commands

    add_close_commands(sub)  # budget, export, verify-export
    return parser


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 86400:
        raise argparse.ArgumentTypeError(f"interval must be between 0 and 86400 s: {text!r}")
    return value


def _simulate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--simulate-gpus", type=int, default=None, metavar="N",
                   help="drive N simulated GPUs (labelled SIMULATED); also COCKPIT_SIMULATE_GPUS")


COMMANDS = ("check", "plan", "status", "headless", "tui", "verify", "demo", "init", "start", "mark",
            "stop", "decide", "accept", "note", "cost", "budget", "export", "verify-export")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    if words and not words[0].startswith("-") and words[0] not in COMMANDS:
        words.insert(0, "tui")  # `cockpit FILE` opens the cockpit
    args = parser.parse_args(words)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return handler(args)
    except InputError as exc:
        print(exc.text, file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - last line of defence: one line, never a traceback
        if os.environ.get("COCKPIT_DEBUG"):
            raise
        print(f"cockpit: internal error: {type(exc).__name__}: {exc}\n"
              "cockpit: this is a bug in the cockpit, please report it with the traceback "
              "(set COCKPIT_DEBUG=1 to see it)", file=sys.stderr)
        return EXIT_INTERNAL


def _engine(args: argparse.Namespace, **kwargs: Any) -> Any:
    from cockpit.engine import Engine

    return Engine.open(args.file, telemetry=False, **kwargs)


def _print_written(events: list[dict[str, Any]] | dict[str, Any]) -> None:
    from cockpit.engine import describe_event

    for event in events if isinstance(events, list) else [events]:
        print(f"journal #{event['seq']} {event['t']} {describe_event(event)}")


def _acting(handler: Handler) -> Handler:
    """Actions refused for a reason (not bad input) print it and exit 1."""

    def wrapped(args: argparse.Namespace) -> int:
        from cockpit.errors import ActionRefused
        from cockpit.journal import JournalError

        try:
            return handler(args)
        except ActionRefused as exc:
            print(f"cockpit {args.command}: refused: {exc}", file=sys.stderr)
            return 1
        except JournalError as exc:
            print(f"cockpit {args.command}: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT

    return wrapped


@_acting
def cmd_start(args: argparse.Namespace) -> int:
    _print_written(_engine(args, actor="cli").start(args.stage, force=args.force))
    return EXIT_OK


@_acting
def cmd_mark(args: argparse.Namespace) -> int:
    _print_written(_engine(args, actor="cli").mark(args.stage, args.what, args.note))
    return EXIT_OK


@_acting
def cmd_stop(args: argparse.Namespace) -> int:
    engine = _engine(args, actor="cli")
    event = engine.stop(args.target, args.reason)
    _print_written(event)
    grace = engine.campaign.settings.stop_grace_s
    if not engine.wait_stopped(event["run"], timeout=grace + 10):
        print(f"cockpit stop: run {event['run']} still alive after {grace + 10:g} s",
              file=sys.stderr)
        return 1
    _print_written([e for e in engine.journal.events() if e["seq"] > event["seq"]])
    return EXIT_OK


@_acting
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


@_acting
def cmd_decide(args: argparse.Namespace) -> int:
    _print_written(_engine(args, actor="cli").decide(args.outcome, stage=args.stage,
                                                     drops=args.drop, note=args.note))
    return EXIT_OK


@_acting
def cmd_accept(args: argparse.Namespace) -> int:
    _print_written(_engine(args, actor="cli").accept(args.run, args.note))
    return EXIT_OK


@_acting
def cmd_note(args: argparse.Namespace) -> int:
    _print_written(_engine(args, actor="cli").note(args.stage, args.text))
    return EXIT_OK


@_acting
def cmd_cost(args: argparse.Namespace) -> int:
    _print_written(_engine(args, actor="cli").cost(args.label, args.amount, args.currency))
    return EXIT_OK


# A headless instance writes a status line each tick; one fresher than this is "live".
LIVE_STATUS_S = 15.0


def _line_from_status_log(file: str) -> str | None:
    import time
    from pathlib import Path

    from cockpit.statusline import read_last_line, status_line

    log = Path(file).resolve().parent / ".cockpit" / "status.jsonl"
    try:
        if time.time() - log.stat().st_mtime > LIVE_STATUS_S:
            return None
    except OSError:
        return None
    last = read_last_line(log)
    if last is None:
        return None
    try:
        return status_line(json.loads(last))
    except (ValueError, KeyError, TypeError):
        return None


@_acting
def cmd_status(args: argparse.Namespace) -> int:
    if args.line:
        line = _line_from_status_log(args.file)
        if line is not None:
            print(line)
            return EXIT_OK
    from cockpit.engine import Engine
    from cockpit.render_text import status_text
    from cockpit.snapshot import snapshot_json
    from cockpit.statusline import status_line
    from cockpit.statuslog import compact_json

    if args.line:
        # No long NVML init for a status bar: GPUs show as n/a unless simulated.
        engine = Engine.open(args.file, read_only=True, simulate_gpus=args.simulate_gpus,
                             telemetry=bool(args.simulate_gpus))
        try:
            print(status_line(compact_json(engine.tick())))
        finally:
            engine.close()
        return EXIT_OK
    engine = Engine.open(args.file, read_only=True, simulate_gpus=args.simulate_gpus)
    try:
        snap = engine.tick()
    finally:
        engine.close()
    if args.json:
        print(json.dumps(snapshot_json(snap), indent=2))
    else:
        print(status_text(snap))
    return EXIT_OK


@_acting
def cmd_tui(args: argparse.Namespace) -> int:
    from cockpit.tui.app import run_tui

    return run_tui(args)


@_acting
def cmd_demo(args: argparse.Namespace) -> int:
    from cockpit.demo import run_demo

    return run_demo(args)


def cmd_init(args: argparse.Namespace) -> int:
    from cockpit.scaffold import run_init

    return run_init(args)


@_acting
def cmd_headless(args: argparse.Namespace) -> int:
    from cockpit.headless import run_headless

    return run_headless(args)


def cmd_check(args: argparse.Namespace) -> int:
    from cockpit.campaign import load_campaign
    from cockpit.planning.advice import plan_warnings

    campaign = load_campaign(args.file)
    for warning in plan_warnings(campaign):
        print(f"{args.file}: warning: {warning}", file=sys.stderr)
    print("ok")
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    from cockpit.campaign import load_campaign
    from cockpit.planning.advice import plan_warnings
    from cockpit.planning.schedule import plan_campaign

    campaign = load_campaign(args.file)
    plan = plan_campaign(campaign, args.overrun)
    warnings = plan_warnings(campaign)
    if args.json:
        print(json.dumps(plan_json(campaign, plan, warnings), indent=2))
        return EXIT_OK
    print(render_plan(campaign, plan, warnings))
    return EXIT_OK


def plan_json(campaign: Any, plan: Any, warnings: list[str]) -> dict[str, Any]:
    f = plan.figures
    return {
        "campaign": campaign.id,
        "question": campaign.question,
        "offer": campaign.package.offer.id,
        "count": campaign.package.count,
        "window_start": campaign.package.start.isoformat(),
        "window_hours": f.window_hours,
        "reserved_hours": f.reserved_hours,
        "unused_hours": f.unused_hours,
        "exceeds_by_hours": f.exceeds_by_hours,
        "overrun_hours": f.overrun_hours,
        "fits": f.fits,
        "gpu_busy_hours": f.gpu_busy_hours,
        "human_hours": f.human_hours,
        "cost": plan.cost.as_json() if plan.cost else None,
        "cost_note": None if plan.cost else "offer price unknown: state it under offers:",
        "stages": [
            {
                "id": s.stage.id,
                "start_hours": round(s.start, 4),
                "end_hours": round(s.end, 4),
                "hours": round(s.hours, 4),
                "resource": s.stage.resource_label,
                "category": s.stage.category,
                "machine": s.stage.machine,
                "decision_point": s.stage.decision_point,
            }
            for s in plan.slots
        ],
        "options": [_option_json(o) for o in plan.options],
        "warnings": warnings,
    }


def _option_json(option: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": option.kind, "fits": option.fits,
                           "reserved_hours": option.reserved_hours}
    if option.kind == "offer":
        out["offer"] = option.offer
        out["cost"] = option.cost.as_json() if option.cost else None
    else:
        out["drops"] = list(option.drops)
        out["saves_hours"] = option.saves_hours
    return out


def render_plan(campaign: Any, plan: Any, warnings: list[str]) -> str:
    pkg = campaign.package
    f = plan.figures
    cost = str(plan.cost) if plan.cost else "price unknown"
    lines = [
        f"campaign {campaign.id} · {pkg.offer.id} × {pkg.count} · {cost} for the package"
        f" · window {format_hours(f.window_hours)} h from {pkg.start.isoformat()}",
    ]
    if campaign.question:
        lines.append(f"question: {campaign.question}")
    lines.append("")
    width = max(len("stage"), *(len(s.stage.id) for s in plan.slots))
    lines.append(f"{'stage':<{width}}  {'resource':<9} {'category':<11} {'start':>6} {'end':>6}"
                 f" {'hours':>6}")
    for slot in plan.slots:
        mark = " ◆ decision" if slot.stage.decision_point else ""
        lines.append(f"{slot.stage.id:<{width}}  {slot.stage.resource_label:<9} "
                     f"{slot.stage.category:<11} {slot.start:>6.1f} {slot.end:>6.1f} "
                     f"{slot.hours:>6.1f}{mark}")
    lines.append("")
    reserved = f"reserved {format_hours(f.reserved_hours)} h"
    if f.overrun_hours:
        reserved += f" (with a {format_hours(f.overrun_hours)} h overrun)"
    window = f"of a {format_hours(f.window_hours)} h window"
    if f.fits:
        lines.append(f"{reserved} {window} · unused {format_hours(f.unused_hours)} h · fits")
    else:
        lines.append(f"{reserved} {window} · EXCEEDS by {format_hours(f.exceeds_by_hours)} h")
    lines.append(f"GPU busy {format_hours(f.gpu_busy_hours)} h · human "
                 f"{format_hours(f.human_hours)} h · durations are the plan's, not a promise "
                 "of the provider (D7)")
    if plan.options:
        lines.append("options (D11):")
        lines.extend(f"  - {o.describe()}" for o in plan.options)
    for warning in warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)
