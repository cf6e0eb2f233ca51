"""The face's structure (issue 23): colours come only from the theme files, through the
panels' ``level--*`` component classes; a flow is one dialog at a time; the main screen
draws only while it is on top."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual")

from cockpit.tui.app import CockpitApp
from cockpit.tui.dialogs import FormScreen  # noqa: E402
from cockpit.tui.full_screens import ChartScreen  # noqa: E402
from cockpit.tui.panels.base import LEVEL_CLASSES  # noqa: E402
from cockpit.tui.themes import discover  # noqa: E402
from tests.helpers.tui_campaign import running_campaign  # noqa: E402
from tests.tui.test_tui_pilot import until  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SIZE = (120, 40)


def test_every_shipped_theme_styles_every_level() -> None:
    themes = discover(ROOT / "themes")
    assert {"default", "light", "high-contrast"} <= set(themes)
    for theme in themes.values():
        text = theme.path.read_text(encoding="utf-8")
        missing = sorted(c for c in LEVEL_CLASSES if f".{c} " not in text)
        assert not missing, f"{theme.path.name} does not style {missing}"


def accent_bar(app: CockpitApp) -> str:
    """The window panel's text as last drawn, with its styles (Rich markup)."""
    assert app.main is not None
    return app.main.window_panel._last or ""


def test_the_theme_key_recolours_the_panels_from_the_css(tmp_path: Path) -> None:
    async def go() -> None:
        app = CockpitApp(running_campaign(tmp_path), interval=3600, theme="default")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "█" in accent_bar(app))
            # default: accent is $primary-lighten-2 of textual-dark; light: $primary
            assert "#539eff" in accent_bar(app), accent_bar(app)
            await pilot.press("t")
            await until(pilot, lambda: "#004578" in accent_bar(app))
            assert "#539eff" not in accent_bar(app)
            await pilot.press("t")  # high-contrast: the terminal's own 16 colours
            await until(pilot, lambda: "cyan" in accent_bar(app) or "color(6)" in
                        accent_bar(app))
    asyncio.run(go())


def test_a_key_pressed_twice_opens_one_dialog(tmp_path: Path) -> None:
    async def go() -> None:
        app = CockpitApp(running_campaign(tmp_path), interval=3600)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None)
            assert app.main is not None
            app.main.action_cost()
            app.main.action_cost()  # before the first dialog is up
            await until(pilot, lambda: isinstance(app.screen, FormScreen))
            await pilot.pause()  # what the second call left pending (nothing: one flow)
            assert sum(isinstance(s, FormScreen) for s in app.screen_stack) == 1
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is app.main)
            app.main.action_cost()  # the flow ended: the key works again
            await until(pilot, lambda: isinstance(app.screen, FormScreen))
            await pilot.press("escape")
    asyncio.run(go())


def test_the_main_screen_draws_behind_a_dialog_and_not_under_a_full_screen(
        tmp_path: Path) -> None:
    drawn: list[Any] = []

    async def go() -> None:
        app = CockpitApp(running_campaign(tmp_path), interval=3600)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None)
            main = app.main
            assert main is not None
            draw = main.update_snapshot
            main.update_snapshot = lambda snap: (drawn.append(snap), draw(snap))  # type: ignore[method-assign]
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, FormScreen))
            await pilot.pause()
            drawn.clear()
            app.kick()  # a tick while the dialog is up: drawn behind it (issue 25)
            await until(pilot, lambda: app.ticks >= 2 and drawn and drawn[-1] is app.snapshot)
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is main)
            await pilot.press("g")  # the chart covers the whole screen
            await until(pilot, lambda: isinstance(app.screen, ChartScreen))
            await pilot.pause()
            drawn.clear()
            ticks = app.ticks
            app.kick()  # collected, not drawn: nobody sees the main screen
            await until(pilot, lambda: app.ticks > ticks)  # the tick's snapshot handled
            await pilot.pause()  # and what its handling left pending
            assert drawn == [] and main.snapshot is app.snapshot
            await pilot.press("escape")  # shown again: the latest is drawn
            await until(pilot, lambda: drawn and drawn[-1] is app.snapshot)
    asyncio.run(go())
