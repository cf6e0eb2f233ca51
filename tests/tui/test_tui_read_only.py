"""A read-only face (issue 28: `tui --read-only`, what `serve --read-only` runs in each
browser tab): no key that writes is on the key bar or does anything, and its engine
refuses every action whatever asks; the same keys on a writing face open their flows."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cockpit.common.errors import ActionRefused
from cockpit.tui.app import CockpitApp
from cockpit.tui.main_screen import JOURNAL_ACTIONS
from tests.helpers.tui_campaign import running_campaign
from tests.tui.test_tui_pilot import flow_done, until

READ_ONLY = "this cockpit is read-only"


def keys_shown(app: CockpitApp) -> set[str]:
    return {b.action for _n, b, _e, _t in app.screen.active_bindings.values()}


def press_every_writing_key(tmp_path: Path, read_only: bool) -> tuple[set[str], set[str]]:
    """(the actions on the key bar, the screens a writing key opened) for a running
    campaign's cockpit."""
    engine = running_campaign(tmp_path)
    if read_only:
        engine.writes_refused = READ_ONLY
    opened: set[str] = set()
    shown: set[str] = set()

    async def go() -> None:
        app = CockpitApp(engine, interval=3600)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.snapshot is not None)
            shown.update(keys_shown(app))
            for key in ("x", "s", "v", "n", "c", "m", "e", "a", "r", "d"):
                await pilot.press(key)
                # What the key did is done: its flow put up a dialog, or ended (refused,
                # or no flow began at all: a read-only face's key does nothing).
                await until(pilot, lambda: app.screen is not app.main or flow_done(app))
                if app.screen is not app.main:
                    opened.add(type(app.screen).__name__)
                    while app.screen is not app.main:
                        dialog = app.screen
                        await pilot.press("escape")
                        await until(pilot, lambda d=dialog: app.screen is not d)
                    await until(pilot, lambda: flow_done(app))  # the next key may begin one
    asyncio.run(go())
    return shown, opened


def test_a_read_only_face_shows_and_opens_nothing_that_writes(tmp_path: Path) -> None:
    shown, opened = press_every_writing_key(tmp_path / "ro", read_only=True)
    assert not shown & set(JOURNAL_ACTIONS), shown
    assert opened == set(), opened
    # The same campaign on a writing face: the keys are there and open their dialogs.
    shown, opened = press_every_writing_key(tmp_path / "rw", read_only=False)
    assert {"stop_run", "note", "cost"} <= shown
    assert opened, "no key opened a dialog on a writing face"


def test_a_read_only_engine_refuses_every_action_and_writes_nothing(tmp_path: Path) -> None:
    engine = running_campaign(tmp_path)
    journal = engine.campaign.state_dir / "journal.jsonl"
    engine.writes_refused = READ_ONLY
    before = journal.read_bytes()
    for act in (lambda: engine.stop("control", "why"), lambda: engine.start("pilot"),
                lambda: engine.note("prep", "hi"), lambda: engine.cost("x", "1"),
                lambda: engine.mark("prep", "done"), lambda: engine.accept("control"),
                lambda: engine.reject("control", "no"), lambda: engine.verify("control"),
                lambda: engine.export(), lambda: engine.decide("go", note="n")):
        with pytest.raises(ActionRefused, match=READ_ONLY):
            act()
    assert journal.read_bytes() == before
