"""Why a run failed, in words: its exit code (a signal by name) and the last meaningful
line of its stderr, read once when the stage ends and journaled in its reason.

The tail is read with a byte bound (a run may have written gigabytes) and made printable
(:mod:`cockpit.common.printable`): the run wrote it, so it may hold ESC or bidi controls.
"""

from __future__ import annotations

import os
import re
import signal

from cockpit.common.printable import printable

# How much of the end of stderr is read: enough for a traceback's last lines, bounded.
TAIL_BYTES = 64 * 1024
# Characters of the line kept in the reason (it is shown in a stage's row and a log line).
LINE_CHARS = 200

# tqdm-like progress bars ("42%|####  | 42/100 [00:01<00:02, 30.1it/s]"): noise, not a cause.
_PROGRESS = re.compile(r"\d+%\|.*\||\d+(\.\d+)?\s*(it|s)/(s|it)\]")


def exit_words(code: int | None, sig: object = None) -> str | None:
    """``exit code 1``, ``killed by SIGKILL`` (a negative code is a signal); None: no code."""
    if code is None:
        return None
    if code < 0:
        name = sig if isinstance(sig, str) and sig else None
        if name is None:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
        return f"killed by {name}"
    return f"exit code {code}"


def _meaningful(line: str) -> bool:
    """Not a traceback frame, its header, a caret marker or a progress bar."""
    if not line.strip() or line[:1].isspace():
        return False  # blank, or an indented frame / source line of a traceback
    if line.startswith("Traceback (most recent call last)"):
        return False
    if line.startswith(("During handling of the above exception",
                        "The above exception was the direct cause")):
        return False
    return not _PROGRESS.search(line)


def last_stderr_line(path: str | None, limit: int = TAIL_BYTES) -> str | None:
    """The last meaningful line of the file's last ``limit`` bytes, printable; None: none."""
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(size - limit, 0))
            data = handle.read(limit)
    except OSError:
        return None
    # A carriage return redraws a line in place (progress bars): only its last draw counts.
    lines = [part.rsplit("\r", 1)[-1].rstrip()
             for part in data.decode("utf-8", errors="replace").split("\n")]
    if size > limit and lines:
        lines = lines[1:]  # the first one was cut by the bound
    chosen = next((ln for ln in reversed(lines) if _meaningful(ln)), None)
    if chosen is None:  # nothing but frames or bars: the last non-blank line still says more
        chosen = next((ln.strip() for ln in reversed(lines) if ln.strip()), None)
    return printable(chosen, LINE_CHARS) if chosen else None


def stderr_path(exit_file: str | None) -> str | None:
    """A run's stderr beside its exit file (``<base>.exit`` -> ``<base>.err``)."""
    if not exit_file or not exit_file.endswith(".exit"):
        return None
    return exit_file[:-len(".exit")] + ".err"


def failure_reason(code: int | None, sig: object, exit_file: str | None) -> str | None:
    """``exit code 1: ValueError: bad split``; None when there is no exit code."""
    words = exit_words(code, sig)
    if words is None:
        return None
    line = last_stderr_line(stderr_path(exit_file))
    return f"{words}: {line}" if line else words
