"""Running the real `cockpit` command in a subprocess, and waiting for a condition."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_campaigns"


def run_cockpit(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                timeout: float = 180, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m cockpit ARGS`` as a user would, capturing text output. The timeout
    only catches a hang: the suite runs in parallel, and a busy box is slow."""
    full_env = dict(os.environ)
    full_env.pop("COCKPIT_SIMULATE_GPUS", None)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "cockpit", *args],
        cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout, input=input,
    )


POLL_S = 0.05  # how often the poll helpers look again


async def pilot_until(pilot: Any, predicate: Callable[[], Any], timeout: float = 30.0,
                      what: str = "condition") -> Any:
    """The TUI's :func:`wait_for`: let the app process what is pending (``pilot.pause()``),
    then look; poll every :data:`POLL_S` until ``predicate`` holds with the current screen
    mounted (a screen just pushed is ``app.screen`` before its widgets are composed), or
    fail after ``timeout`` seconds naming ``what``. Engine ticks run in thread workers in
    real time: this is the one place a TUI test lets real time pass."""
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        await pilot.pause()
        value = predicate()
        if value and pilot.app.screen.is_mounted:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(POLL_S)


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something true (returned), or fail after
    ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(POLL_S)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def end(proc: subprocess.Popen[Any], grace: float = 15.0) -> None:
    """End a process the test started, by its pid: TERM, then KILL after ``grace``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
