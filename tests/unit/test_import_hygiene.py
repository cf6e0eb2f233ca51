"""Import hygiene: no import cycle anywhere, and the plan package imports no run code.

Each module of ``cockpit`` is imported FIRST in its own fresh interpreter: a cycle that
only bites when a particular module is imported before the others shows up here.
"""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
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


def _import_alone(module: str) -> tuple[str, int, str]:
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    return module, proc.returncode, lines[-1] if lines else ""


@pytest.mark.slow  # one fresh interpreter per module (~180): ~25 s
def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    modules = all_modules()
    assert {"cockpit.campaign", "cockpit.runs.supervisor",
            "cockpit.close.acceptance"} <= set(modules)
    workers = max(2, min(8, (os.cpu_count() or 2) * 2))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(_import_alone, modules))
    failed = [f"{name}: exit {code}: {last}" for name, code, last in results if code != 0]
    assert not failed, "\n".join(failed)


PLAN_ALONE = """
import sys
import cockpit.campaign
outside = sorted(m for m in sys.modules
                 if m.startswith("cockpit.") and not m.startswith("cockpit.campaign")
                 and m not in ("cockpit.common", "cockpit.common.units",
                               "cockpit.common.errors", "cockpit.common.durations",
                               "cockpit.common.layout"))
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
                "cockpit.journal.folding")
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
