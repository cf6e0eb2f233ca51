"""Shared fixtures and hooks: the cockpit command as a fixture; keep what a module shares
in one pytest-xdist worker. The helpers themselves live in tests/helpers/."""

from __future__ import annotations

import os
import sys

import pytest

from tests.helpers.process import ROOT, SAMPLES, run_cockpit, wait_for  # noqa: F401
from tests.helpers.report_file import reported  # noqa: F401 - a fixture

# Bytecode is cached for the test run, whatever the environment says: with
# PYTHONDONTWRITEBYTECODE set (some shells and CI images set it), every `cockpit`
# subprocess compiled the whole package again (0.8 s a call instead of 0.3 s) and every
# xdist worker rewrote every test module's asserts (11 s each). Set before the workers
# and the subprocesses start, so they inherit it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture
def cockpit_cli():
    return run_cockpit


# The modules that keep cores busy, in two lanes: real training (one worker, one after
# another) and the outside programs (Chromium, Prometheus, a fresh venv's pip: one other
# worker). A lane never overlaps itself, so a loaded 2-core machine is not loaded further
# by the suite; two lanes, because one held the suite's critical path (9 of its 10 min).
TRAINING, SERVICES = "heavy", "heavy-services"
HEAVY = {
    "tests/e2e/test_demo.py": TRAINING,  # the demo campaign trained once, shared by its tests
    "tests/e2e/test_init.py": TRAINING,  # the template trained end to end
    "tests/e2e/test_init_frameworks.py": TRAINING,  # the hf and lightning templates
    "tests/e2e/test_landing.py": TRAINING,  # the digits script trained to the landing
    "tests/e2e/test_integration_hf.py": TRAINING,  # the real Trainer, in process and in a run
    "tests/e2e/test_integration_lightning.py": TRAINING,  # a real Lightning run
    "tests/e2e/test_resume_frameworks.py": TRAINING,  # the Trainer and Lightning, resumed
    "tests/e2e/test_serve_browser.py": SERVICES,  # Chromium
    "tests/e2e/test_prometheus_server.py": SERVICES,  # Prometheus and node_exporter
    "tests/e2e/test_export_rebuild.py": SERVICES,  # a fresh venv rebuilt from a bag
}


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers a core (most tests wait on real processes, terminals and
    sshd), at least 2, at most 8; the CPU-heavy tests share a worker per lane (HEAVY)."""
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """When the suite runs in parallel (``-n 4 --dist loadgroup``, pytest-xdist), a test that uses a
    module-scoped fixture of ours (a demo run, an export) goes to the worker of its module's
    other such tests, so the fixture is built once, not once per worker. Found from the
    fixtures themselves, so a new module fixture needs no mark."""
    for item in items:
        lane = HEAVY.get(item.nodeid.split("::")[0])
        if lane is not None:  # CPU-heavy: its lane's worker, one after another
            item.add_marker(pytest.mark.xdist_group(lane))
            continue  # (its module fixture is built once in that worker too)
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
    _slow_modules_first(items)
    # End to end is slow by kind (the real command, real processes, sshd, training):
    # `-m 'not slow'` is the quick loop of unit, engine and TUI tests.
    for item in items:
        if item.nodeid.startswith("tests/e2e/"):
            item.add_marker(pytest.mark.slow)


def _slow_modules_first(items: list[pytest.Item]) -> None:
    """The modules that hold a test marked slow go first, each module kept whole and in
    its order: pytest-xdist hands out work in this order, so the long ones start while
    the short ones fill the other processes, instead of one of them running alone at the
    end (a long module run last is the suite's tail)."""
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    slow = {module(item) for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: module(item) not in slow)  # stable: order kept inside
