"""What every CLI command shares: exit codes, the handler type, the parser class, this
cockpit's machine, refusals as exit 1.

This module owns ``EXIT_OK`` / ``EXIT_BAD_INPUT`` / ``EXIT_INTERNAL`` (re-exported by
:mod:`cockpit.cli.dispatch`), :class:`Parser` (bad arguments as one line and exit 2),
:func:`machine_of` (``--machine``, else ``COCKPIT_MACHINE``, else 1: the only place that
reads the variable; every command passes the machine on as a value) and ``acting``, the
wrapper that turns an action refused for a reason into one line and exit 1 (and an
unusable journal into exit 2; a journal on a full disk into exit 1, with its path: the
input was fine).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable
from typing import NoReturn

EXIT_OK = 0
EXIT_REFUSED = 1  # a refusal or a verdict; also "no space left", naming the path
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in the cockpit, never a verdict on the campaign

Handler = Callable[[argparse.Namespace], int]

MACHINE_ENV = "COCKPIT_MACHINE"


class Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments as one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")


def machine_from_env() -> int:
    """COCKPIT_MACHINE (a number from 1), or 1."""
    from cockpit.common.errors import InputError

    raw = os.environ.get(MACHINE_ENV, "").strip()
    if not raw:
        return 1
    if not raw.isdigit() or int(raw) < 1:
        raise InputError(f"{MACHINE_ENV}={raw!r}: a machine is a number from 1")
    return int(raw)


def add_machine_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--machine", type=int, default=None, metavar="N",
                   help=f"this cockpit is machine N of the campaign (D12; also {MACHINE_ENV}; "
                        "default 1): it runs only its stages")


def machine_of(args: argparse.Namespace) -> int:
    """This cockpit's machine of the campaign (D12): ``--machine N``, else
    COCKPIT_MACHINE, else 1."""
    given = getattr(args, "machine", None)
    return int(given) if given is not None else machine_from_env()


def number_between(convert: Callable[[str], float], low: float, high: float,
                   what: str) -> Callable[[str], float]:
    """An argparse type: ``convert(text)`` strictly between ``low`` and ``high`` (argparse
    turns its error into one usage line and exit 2)."""

    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not low < value < high:
            raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}: {text!r}")
        return value

    return parse


def acting(handler: Handler) -> Handler:
    """Actions refused for a reason (not bad input) print it and exit 1."""

    def wrapped(args: argparse.Namespace) -> int:
        from cockpit.common.errors import ActionRefused
        from cockpit.common.printable import printable  # a refusal names runs, notes, paths
        from cockpit.journal.log import JournalError

        try:
            return handler(args)
        except ActionRefused as exc:
            print(f"cockpit {args.command}: refused: {printable(exc, 2000)}", file=sys.stderr)
            return 1
        except JournalError as exc:
            print(f"cockpit {args.command}: {printable(exc, 2000)}", file=sys.stderr)
            # A full disk is not bad input: the command was right, the machine is full.
            return EXIT_REFUSED if exc.errno == errno.ENOSPC else EXIT_BAD_INPUT

    return wrapped
