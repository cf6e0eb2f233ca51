"""The commands' dispatch and the exit codes.

This module owns ``main`` (every command but the status line a status log answers:
:mod:`cockpit.cli` tries that first) and the last line of defence: bad input of any
kind becomes located lines on stderr and exit code 2, a bug exit code 70 with one
line, never a traceback. Every command's arguments are declared in
:mod:`cockpit.cli.parser` (``build_parser``). The handlers live by what they do:
:mod:`cockpit.cli.campaign_cmds` (check, plan, status, headless, tui, demo, init,
fleet), :mod:`cockpit.cli.actions` (start, mark, stop, decide, accept, reject, note,
cost, verify), :mod:`cockpit.cli.closing` (budget, export, verify-export, next) and
:mod:`cockpit.cli.rules` (rules). Commands that only read (check, plan, status,
budget, rules) write nothing. This cockpit's machine (``--machine``, else
COCKPIT_MACHINE) is resolved here once and passed on as a value.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence

from cockpit.cli.actions import FLEET_ACTIONS
from cockpit.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_REFUSED,
    Handler,
    machine_of,
)
from cockpit.cli.parser import COMMANDS, MACHINE_COMMANDS, build_parser
from cockpit.common.errors import InputError
from cockpit.common.printable import printable_block

__all__ = ["COMMANDS", "EXIT_BAD_INPUT", "EXIT_INTERNAL", "EXIT_OK", "FLEET_ACTIONS",
           "MACHINE_COMMANDS", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    words, action = _split_words(list(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(words)
    if action:
        args.action = action
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    machine = getattr(args, "machine", None)
    if machine is not None and machine < 1:
        print(f"cockpit: --machine {machine}: a machine is a number from 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _run(handler, args)


def _split_words(words: list[str]) -> tuple[list[str], list[str]]:
    """The words argparse reads, and the action of `cockpit fleet FILE ACTION ...` (its
    own words, checked by the action's parser)."""
    if words and not words[0].startswith("-") and words[0] not in COMMANDS:
        words.insert(0, "tui")  # `cockpit FILE` opens the cockpit
    if words[:1] == ["fleet"]:
        at = next((i for i, w in enumerate(words) if i >= 2 and w in FLEET_ACTIONS), None)
        if at is not None:
            return words[:at], words[at:]
    return words, []


def _run(handler: Handler, args: argparse.Namespace) -> int:
    """The handler, behind the last line of defence."""
    try:
        if args.command in MACHINE_COMMANDS:
            args.machine = machine_of(args)  # read once here; a value from now on
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
