"""Import hygiene: no import cycle anywhere, and the plan package imports no run code.

Each module of ``cockpit`` is imported FIRST in its own fresh interpreter: a cycle that
only bites when a particular module is imported before the others shows up here.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cockpit"


def _walk(path: Path, prefix: str) -> Iterator[str]:
    # pkgutil.iter_modules on a folder lists its modules without importing anything.
    for info in pkgutil.iter_modules([str(path)]):
        name = prefix + info.name
        yield name
        if info.ispkg:
            yield from _walk(path / info.name, name + ".")


def all_modules() -> list[str]:
    return ["cockpit", *_walk(PACKAGE, "cockpit.")]


# One interpreter loads the libraries the package is built on (never a cockpit module),
# then forks a child per module: each child imports its module FIRST of the package, so a
# cycle that bites only in one order still shows, without ~180 interpreters started and
# textual, rich and yaml imported ~220 times (49 s of CPU; now 15 s on one core).
FORK_EACH = """
import os, sys, traceback
import textual.app, textual.widgets, rich.text, yaml, psutil  # noqa: F401 (shared, not ours)
import argparse, csv, email.utils, json, sqlite3, statistics  # noqa: F401
try:
    import textual_plotext  # noqa: F401 (the charts: an optional dependency)
except ImportError:
    pass
assert not [m for m in sys.modules if m == "cockpit" or m.startswith("cockpit.")]
for module in sys.argv[1:]:
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            __import__(module)
        except BaseException:
            last = traceback.format_exc().strip().splitlines()[-1]
            print(f"FAILED {module}: {last}", flush=True)
            os._exit(3)  # said above
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 3):  # killed, or exited on import
        print(f"FAILED {module}: exit {os.waitstatus_to_exitcode(status)}", flush=True)
print("CHECKED", len(sys.argv) - 1, flush=True)
"""


@pytest.mark.slow  # a child forked per module (~200)
def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    modules = all_modules()
    assert {"cockpit.campaign", "cockpit.runs.supervisor",
            "cockpit.close.acceptance"} <= set(modules)
    proc = subprocess.run([sys.executable, "-c", FORK_EACH, *modules], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    failed = [line for line in proc.stdout.splitlines() if line.startswith("FAILED")]
    assert not failed, "\n".join(failed) + proc.stderr[-2000:]
    assert proc.returncode == 0 and f"CHECKED {len(modules)}" in proc.stdout, proc.stderr


PLAN_ALONE = """
import sys
import cockpit.campaign
outside = sorted(m for m in sys.modules
                 if m.startswith("cockpit.") and not m.startswith("cockpit.campaign")
                 and m not in ("cockpit.common", "cockpit.common.units",
                               "cockpit.common.errors", "cockpit.common.durations",
                               "cockpit.common.event_kinds",
                               "cockpit.common.layout", "cockpit.common.metric_names"))
print("OUTSIDE", outside)
"""


def test_the_plan_package_imports_no_run_code() -> None:
    proc = subprocess.run([sys.executable, "-c", PLAN_ALONE], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "OUTSIDE []" in proc.stdout, proc.stdout
    for name in ("cockpit.runs", "cockpit.close.acceptance", "cockpit.engine"):
        assert f"'{name}" not in proc.stdout


PLANNING_ALONE = """
import sys
import cockpit.planning.advice, cockpit.planning.calibrate, cockpit.planning.deadline
import cockpit.planning.forecast, cockpit.planning.schedule
print("LOADED", sorted(sys.modules))
"""
# What planning may pull in: the plan model, the pure fold, text and units. The journal
# file (journal.log), runs, telemetry, the close and every face are I/O: never.
PLANNING_MAY = ("cockpit.planning", "cockpit.campaign", "cockpit.common",
                "cockpit.journal.fold", "cockpit.journal.format", "cockpit.journal.events",
                "cockpit.journal.fields", "cockpit.journal.peer_checks", "cockpit.journal.state",
                "cockpit.journal.fold_draft")
IO_MODULES = ("subprocess", "socket", "fcntl", "threading", "psutil", "pynvml")


def test_planning_imports_nothing_with_io() -> None:
    proc = subprocess.run([sys.executable, "-c", PLANNING_ALONE], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.split("LOADED", 1)[1]
    names = [n.strip(" '[]\n") for n in loaded.split(",")]
    ours = [n for n in names if n.startswith("cockpit.")
            and n not in ("cockpit.journal",) and not n.startswith(PLANNING_MAY)]
    assert ours == [], f"planning pulls in: {ours}"
    assert "cockpit.planning.advice" in names and "cockpit.journal.fold" in names
    assert [n for n in IO_MODULES if n in names] == []
