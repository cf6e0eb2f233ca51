"""Every command's arguments, in the order ``cockpit --help`` lists them.

This module owns :func:`build_parser` (it composes the commands each handler module
declares: :mod:`cockpit.cli.actions`, :mod:`cockpit.cli.closing`, :mod:`cockpit.cli.rules`,
and here those of :mod:`cockpit.cli.campaign_cmds`), the ``--machine`` option of the
commands that act as one machine of a campaign, and the list of command names
(:data:`COMMANDS`) that tells ``cockpit FILE`` from ``cockpit COMMAND``.
"""

from __future__ import annotations

import argparse
from typing import Any

from cockpit import __version__
from cockpit.cli.actions import FLEET_ACTIONS, add_action_commands, add_verify_command
from cockpit.cli.alerts_cmd import add_alerts_command
from cockpit.cli.campaign_cmds import (
    cmd_check,
    cmd_demo,
    cmd_fleet,
    cmd_headless,
    cmd_init,
    cmd_plan,
    cmd_serve,
    cmd_status,
    cmd_tui,
)
from cockpit.cli.closing import add_close_commands
from cockpit.cli.common import Parser, add_machine_option, number_between
from cockpit.cli.prometheus import add_prometheus_command
from cockpit.cli.rules import add_rules_command
from cockpit.common.units import parse_duration

_positive_seconds = number_between(float, 0, 86400, "a number of seconds")

COMMANDS = ("check", "plan", "status", "headless", "tui", "serve", "verify", "demo", "init",
            "start", "mark", "stop", "decide", "accept", "reject", "note", "cost", "budget",
            "export", "verify-export", "next", "fleet", "rules", "alerts", "prometheus")
# The commands that act as one machine of a multi-machine campaign.
MACHINE_COMMANDS = ("status", "headless", "tui", "serve", "verify", "start", "mark", "stop",
                    "decide", "accept", "reject", "note", "cost", "budget", "export", "next")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="cockpit", description="A terminal cockpit for a GPU training "
                    "campaign on a rented machine.")
    parser.add_argument("--version", action="version", version=f"cockpit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    _add_plan_commands(sub)  # check, plan, status
    _add_face_commands(sub)  # headless, tui, serve
    add_verify_command(sub)
    _add_start_commands(sub)  # demo, init
    add_action_commands(sub)  # start, mark, stop, decide, accept, reject, note, cost
    add_close_commands(sub)  # budget, export, verify-export, next
    _add_fleet_command(sub)
    add_rules_command(sub)
    add_alerts_command(sub)
    add_prometheus_command(sub)
    for name, choice in sub.choices.items():
        if name in MACHINE_COMMANDS:
            add_machine_option(choice)
    return parser


def _duration_hours(text: str) -> float:
    try:
        return parse_duration(text) / 3600.0
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _duration_seconds(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 0 and 65535: {text!r}")
    return port


def _tab_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of tabs: {text!r}") from None
    if not 1 <= count <= 256:
        raise argparse.ArgumentTypeError(f"must be between 1 and 256: {text!r}")
    return count


def _simulate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--simulate-gpus", type=int, default=None, metavar="N",
                   help="drive N simulated GPUs (labelled SIMULATED); also COCKPIT_SIMULATE_GPUS")


def _add_plan_commands(sub: Any) -> None:
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


def _prom_port(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prom-port", type=_port, default=None, metavar="P",
                   help="serve the same metrics at http://127.0.0.1:P/metrics for a "
                        "Prometheus server to scrape (0: any free port)")
    p.add_argument("--prom-host", default="127.0.0.1", metavar="ADDRESS",
                   help="the address --prom-port listens on (default 127.0.0.1; another "
                        "is said in a warning: the figures name the campaign)")


def _add_face_commands(sub: Any) -> None:
    p = sub.add_parser("headless", help="run the cockpit without a screen")
    p.add_argument("file")
    p.add_argument("--interval", type=_positive_seconds, default=1.0, metavar="SECONDS")
    p.add_argument("--auto", action="store_true",
                   help="start each stage when it is ready (stops at decision points)")
    p.add_argument("--until-done", action="store_true",
                   help="exit when nothing more can happen without a person (0 done; "
                        "1 / 3 / 4 / 5 / 6: docs/commands.md)")
    p.add_argument("--status-log", default=None, metavar="PATH",
                   help="one JSON line per tick (default .cockpit/status.jsonl; rotated)")
    p.add_argument("--log", default=None, metavar="PATH",
                   help="also write the event lines to this file (rotated)")
    p.add_argument("--prom", default=None, metavar="PATH",
                   help="write the Prometheus textfile here each tick (atomic)")
    _prom_port(p)
    p.add_argument("--remind", type=_duration_seconds, default=1800.0, metavar="DURATION",
                   help="repeat each 'NEEDS A PERSON' line this often while it holds "
                        "(default 30m)")
    _alerts(p)
    _simulate(p)
    p.set_defaults(handler=cmd_headless)

    p = sub.add_parser("tui", help="the cockpit on screen (also: cockpit FILE)")
    p.add_argument("file")
    p.add_argument("--interval", type=_positive_seconds, default=1.0, metavar="SECONDS")
    p.add_argument("--theme", default=None, help="default, light or high-contrast")
    p.add_argument("--auto", action="store_true",
                   help="start each stage when it is ready (stops at decision points)")
    p.add_argument("--no-mouse", action="store_true", help="for slow SSH links")
    p.add_argument("--read-only", action="store_true",
                   help="a face that writes nothing: no key that acts, no alerts sent "
                        "(a colleague's view; what `serve --read-only` runs)")
    _alerts(p)
    _simulate(p)
    p.set_defaults(handler=cmd_tui)

    p = sub.add_parser("serve", help="the same cockpit in a browser (the serve extra), on "
                       "127.0.0.1 behind a one-time token: reach it with ssh -L")
    p.add_argument("file")
    p.add_argument("--port", type=_port, default=8765, metavar="P",
                   help="the port to listen on (default 8765; 0: any free one)")
    p.add_argument("--host", default="127.0.0.1", metavar="ADDRESS",
                   help="the address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--allow-remote", action="store_true",
                   help="mean it: listen on an address other machines reach (plain HTTP; "
                        "anyone with the token can stop runs)")
    p.add_argument("--read-only", action="store_true",
                   help="every tab is a read-only face: no key writes the journal")
    p.add_argument("--max-tabs", type=_tab_count, default=8, metavar="N",
                   help="at most N tabs open at once, each its own cockpit process "
                        "(default 8); the next is refused and told why")
    p.add_argument("--interval", type=_positive_seconds, default=1.0, metavar="SECONDS")
    p.add_argument("--theme", default=None, help="default, light or high-contrast")
    _simulate(p)
    p.set_defaults(handler=cmd_serve)


def _alerts(p: Any) -> None:
    p.add_argument("--alerts", action="append", default=[], metavar="URL",
                   help="send alerts to this apprise URL too (repeatable), beside the "
                        "alerts file's targets ($COCKPIT_ALERTS or "
                        "~/.config/cockpit/alerts.yaml)")


def _add_start_commands(sub: Any) -> None:
    p = sub.add_parser("demo", help="the digits campaign end to end, in minutes")
    p.add_argument("--headless", action="store_true", help="no screen: print events")
    p.add_argument("--dir", default=None, help="working folder (default: a new one here)")
    p.add_argument("--interval", type=_positive_seconds, default=0.5, metavar="SECONDS")
    p.add_argument("--timeout", type=_positive_seconds, default=1800, metavar="SECONDS")
    p.add_argument("--steps", type=int, default=None, help=argparse.SUPPRESS)
    _alerts(p)
    _simulate(p)
    p.set_defaults(handler=cmd_demo)

    p = sub.add_parser("init", help="write a complete, commented campaign to start from")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--offer", default="rtx4090-3d", help="the package (an offer id of the catalog)")
    p.add_argument("--start", default="now", metavar="ISO|now",
                   help="when the rental window starts (default: now)")
    p.add_argument("--framework", default="plain", metavar="hf|lightning|plain",
                   help="the training script: the Hugging Face Trainer, PyTorch Lightning, "
                   "or a plain PyTorch loop (default)")
    p.set_defaults(handler=cmd_init)


def _add_fleet_command(sub: Any) -> None:
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
    _prom_port(p)
    p.add_argument("--status-log", default=None, metavar="PATH", help=argparse.SUPPRESS)
    p.epilog = ("cockpit fleet FILE ACTION ...: run an action on the machine that owns it, "
                "with the arguments of that command: " + ", ".join(FLEET_ACTIONS))
    p.set_defaults(handler=cmd_fleet, fleet=True, auto=False, until_done=False,
                   simulate_gpus=None, action=[])
