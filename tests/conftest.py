"""Shared test helpers: run the real `cockpit` command in a subprocess; keep what a
module shares in one pytest-xdist worker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
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


@pytest.fixture
def cockpit_cli():
    return run_cockpit


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something true (returned), or fail after
    ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """When the suite runs in parallel (``-n 4 --dist loadgroup``, pytest-xdist), a test that uses a
    module-scoped fixture of ours (a demo run, an export) goes to the worker of its module's
    other such tests, so the fixture is built once, not once per worker. Found from the
    fixtures themselves, so a new module fixture needs no mark."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for name in info.names_closure:
            defs = info.name2fixturedefs.get(name, ())
            scopes = {d.scope for d in defs
                      if getattr(d.func, "__module__", "").startswith("tests.")} - {"function"}
            if scopes:
                # class and module scope: one worker per module; wider: one for all
                wide = scopes - {"class", "module"}
                item.add_marker(pytest.mark.xdist_group("shared" if wide else item.nodeid
                                                        .split("::")[0]))
                break
