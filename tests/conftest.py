"""Shared fixtures and hooks: the cockpit command as a fixture; keep what a module shares
in one pytest-xdist worker. The helpers themselves live in tests/helpers/."""

from __future__ import annotations

import pytest

from tests.helpers.process import ROOT, SAMPLES, run_cockpit, wait_for  # noqa: F401


@pytest.fixture
def cockpit_cli():
    return run_cockpit


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
