"""The tiny parent of every stage process: records the exit code in a file.

A cockpit that re-attaches to a running stage is not its parent and cannot wait()
for it, so the stage runs under this wrapper, which lives in the stage's own
process group and writes ``{"code": N}`` atomically to the exit file when the
command ends. A SIGTERM to the group reaches the command; the wrapper itself
outlives it to record how it ended.

Usage: python -m cockpit.runs.wrapper EXIT_FILE -- ARGV...
       python -m cockpit.runs.wrapper EXIT_FILE --shell "COMMAND TEXT"
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from cockpit.common.fsutil import write_atomic


def _ignore(signum: int, frame: object) -> None:
    """A handler, not SIG_IGN: handlers reset on exec, so the command still gets the signal."""


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] not in ("--", "--shell"):
        print("usage: python -m cockpit.runs.wrapper EXIT_FILE -- ARGV...", file=sys.stderr)
        return 2
    exit_file = argv[0]
    shell = argv[1] == "--shell"
    command: str | list[str] = argv[2] if shell else argv[2:]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _ignore)
    started = time.time()
    try:
        child = subprocess.Popen(command, shell=shell)  # noqa: S602 - shell only when asked
    except OSError as exc:
        print(f"cockpit: cannot start {command!r}: {exc.strerror}", file=sys.stderr)
        _record(exit_file, 127, started, error=str(exc))
        return 127
    while True:
        try:
            code = child.wait()
            break
        except InterruptedError:
            continue
    _record(exit_file, code, started)
    return code if code >= 0 else 128 - code


def _record(path: str, code: int, started: float, error: str | None = None) -> None:
    record = {"code": code, "started": started, "ended": time.time(), "error": error}
    if code < 0:
        record["signal"] = signal.Signals(-code).name if -code in signal.valid_signals() else -code
    write_atomic(path, json.dumps(record), durable=True)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
