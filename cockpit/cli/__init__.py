"""Command-line entry point: the parser, the dispatch and the exit codes.

This module owns ``main`` (``cockpit = cockpit.cli:main``, ``python -m cockpit``),
``build_parser`` (every command's arguments, in the order ``--help`` lists them) and
the last line of defence: bad input of any kind becomes located lines on stderr and
exit code 2, a bug exit code 70 with one line, never a traceback. The handlers live
by what they do: :mod:`cockpit.cli.campaign_cmds` (check, plan, status, headless,
tui, demo, init), :mod:`cockpit.cli.actions` (start, mark, stop, decide, accept, reject, note,
cost, verify) and :mod:`cockpit.cli.closing` (budget, export, verify-export).
Commands that only read (check, plan, status, budget) write nothing.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from cockpit import __version__
from cockpit.cli.actions import (
    cmd_accept,
    cmd_cost,
    cmd_decide,
    cmd_mark,
    cmd_note,
    cmd_reject,
    cmd_start,
    cmd_stop,
    cmd_verify,
)
from cockpit.cli.campaign_cmds import (
    cmd_check,
    cmd_demo,
    cmd_fleet,
    cmd_headless,
    cmd_init,
    cmd_plan,
    cmd_status,
    cmd_tui,
)
from cockpit.cli.closing import add_close_commands
from cockpit.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_REFUSED,
    Handler,
    number_between,
)
from cockpit.common.errors import InputError
from cockpit.common.printable import printable_block
from cockpit.common.units import parse_duration

_positive_seconds = number_between(float, 0, 86400, "a number of seconds")

__all__ = ["COMMANDS", "EXIT_BAD_INPUT", "EXIT_INTERNAL", "EXIT_OK", "build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments as one line and exit 2."""

    def error(self, message: str) -> NoReturn:
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

    add_close_commands(sub)  # budget, export, verify-export

    p = sub.add_parser("fleet", help="every machine of the campaign over SSH: the same "
                       "screen, status and headless outputs; actions run where the stage lives")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="status: one JSON object on stdout")
    p.add_argument("--line", action="store_true", help="status: one short line")
    p.add_argument("--headless", action="store_true", help="the headless loop, no screen")
    p.add_argument("--interval", type=_positive_seconds, default=2.0, metavar="SECONDS")
    p.add_argument("--theme", default=None, help="default, light or high-contrast")
    p.add_argument("--no-mouse", action="store_true", help="for slow SSH links")
    p.add_argument("--log", default=None, metavar="PATH", help=argparse.SUPPRESS)
    p.add_argument("--prom", default=None, metavar="PATH", help=argparse.SUPPRESS)
    p.add_argument("--status-log", default=None, metavar="PATH", help=argparse.SUPPRESS)
    p.epilog = ("cockpit fleet FILE ACTION ...: run an action on the machine that owns it, "
                "with the arguments of that command: " + ", ".join(FLEET_ACTIONS))
    p.set_defaults(handler=cmd_fleet, fleet=True, auto=False, until_done=False,
                   simulate_gpus=None, action=[])

    for name, choice in sub.choices.items():
        if name in MACHINE_COMMANDS:
            choice.add_argument("--machine", type=int, default=None, metavar="N",
                                help="this cockpit is machine N of the campaign (D12; also "
                                     "COCKPIT_MACHINE; default 1): it runs only its stages")
    for name in FLEET_ACTIONS:  # what `cockpit fleet` reads of an action on another machine
        sub.choices[name].add_argument("--json", action="store_true",
                                       help="print the events written as one JSON list")
    return parser


# The actions `cockpit fleet FILE ACTION ...` runs on the owning machine.
FLEET_ACTIONS = ("start", "stop", "mark", "decide", "accept", "reject", "note", "cost")
# The commands that act as one machine of a multi-machine campaign.
MACHINE_COMMANDS = ("status", "headless", "tui", "verify", "start", "mark", "stop", "decide",
                    "accept", "reject", "note", "cost", "budget", "export", "next")



def _simulate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--simulate-gpus", type=int, default=None, metavar="N",
                   help="drive N simulated GPUs (labelled SIMULATED); also COCKPIT_SIMULATE_GPUS")


COMMANDS = ("check", "plan", "status", "headless", "tui", "verify", "demo", "init", "start", "mark",
            "stop", "decide", "accept", "reject", "note", "cost", "budget", "export",
            "verify-export", "next", "fleet")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    if words and not words[0].startswith("-") and words[0] not in COMMANDS:
        words.insert(0, "tui")  # `cockpit FILE` opens the cockpit
    action: list[str] = []
    if words[:1] == ["fleet"]:  # `cockpit fleet FILE ACTION ...`: the action's own words
        at = next((i for i, w in enumerate(words) if i >= 2 and w in FLEET_ACTIONS), None)
        if at is not None:
            words, action = words[:at], words[at:]
    args = parser.parse_args(words)
    if action:
        args.action = action
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    machine = getattr(args, "machine", None)
    prior = os.environ.get("COCKPIT_MACHINE")
    try:
        if machine is not None:
            if machine < 1:
                print(f"cockpit: --machine {machine}: a machine is a number from 1",
                      file=sys.stderr)
                return EXIT_BAD_INPUT
            os.environ["COCKPIT_MACHINE"] = str(machine)
        return handler(args)
    except InputError as exc:
        print(printable_block(exc.text), file=sys.stderr)  # it may quote a file's text
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - last line of defence: one line, never a traceback
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            # The machine is full, the input was fine: exit 1 with the path, never 2 or 70.
            where = f" writing {exc.filename}" if exc.filename else ""
            print(f"cockpit: no space left on the device{where}: free some space and run "
                  "it again", file=sys.stderr)
            return EXIT_REFUSED
        if os.environ.get("COCKPIT_DEBUG"):
            raise
        print(f"cockpit: internal error: {type(exc).__name__}: {printable_block(exc)}\n"
              "cockpit: this is a bug in the cockpit, please report it with the traceback "
              "(set COCKPIT_DEBUG=1 to see it)", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        if machine is not None:
            if prior is None:
                os.environ.pop("COCKPIT_MACHINE", None)
            else:
                os.environ["COCKPIT_MACHINE"] = prior
