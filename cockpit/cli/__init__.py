"""Command-line entry point (``cockpit = cockpit.cli:main``, ``python -m cockpit``).

``cockpit status FILE --line`` is what tmux runs every few seconds: it is answered here
from the freshest status log with the standard library alone
(:func:`cockpit.headless.status_line.line_from_status_log`), in the time a bare
interpreter takes to start. Every other command, and a line no log can give (a
campaign no face has opened), goes to :func:`cockpit.cli.dispatch.main` (the dispatch
and the exit codes). This module imports nothing else at its top: every command pays
for it first.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    campaign_file = status_line_file(words)
    if campaign_file is not None:
        from cockpit.headless.status_line import line_from_status_log

        line = line_from_status_log(campaign_file)
        if line is not None:
            try:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
            except BrokenPipeError:
                pass
            return 0
    from cockpit.cli.dispatch import main as cli_main

    return cli_main(words)


def status_line_file(words: list[str]) -> str | None:
    """The campaign file of exactly `status FILE --line` (any other option: None, the
    full command reads it)."""
    if len(words) != 3 or words[0] != "status" or "--line" not in words[1:]:
        return None
    other = words[2] if words[1] == "--line" else words[1]
    return None if other.startswith("-") else other
