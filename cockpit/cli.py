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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
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
        print(f"cockpit: internal error: {type(exc).__name__}: {exc} "
              "(set COCKPIT_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1


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
