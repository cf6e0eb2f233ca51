"""The main screen during a campaign with running stages, at 60x20, 80x24, 120x40 and
200x60: what must always be visible is (the running stages, each running run with its
step and loss, the fired rule, the window line and the key bar), and the SVG baselines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pytest_textual_snapshot")

from cockpit.tui.app import CockpitApp  # noqa: E402
from tests.helpers.tui_campaign import running_campaign  # noqa: E402
from tests.tui.test_tui_snapshots import ready  # noqa: E402

SIZES = [(60, 20), (80, 24), (120, 40), (200, 60)]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_running_campaign_at_every_size(snap_compare: Any, tmp_path: Path,
                                        size: tuple[int, int]) -> None:
    app = CockpitApp(running_campaign(tmp_path), interval=3600, theme="default")
    seen: dict[str, str] = {}
    assert snap_compare(app, terminal_size=size, run_before=ready(seen))
    text = seen["text"]
    assert "window 12-02 08:00" in text, text  # the window line
    assert "fits" in text
    for stage in ("control", "diverge"):
        assert re.search(rf"▶ (running\s+)?{stage}", text), (stage, size, text)
    # Every running run with its step and its loss.
    for step, loss in (("2,400/6,000", "0.3278"), ("1,800/6,000", "0.4071")):
        assert step in text and loss in text, (step, loss, size, text)
    assert "finite-loss" in text and "wild-lr" in text  # the fired rule, full names
    # The key bar: help and quit at any width, the keys that apply now first.
    assert "? Help" in text and "q Quit" in text and "x Stop" in text
    assert "you conduct" in text  # who conducts, on the stages' border at every size


@pytest.mark.parametrize("size", [(120, 40), (200, 60)], ids=["120x40", "200x60"])
def test_budget_panel_shows_costs_and_the_whole_undefined_reason(
        tmp_path: Path, size: tuple[int, int]) -> None:
    """Issue 16: the budget panel shows the other costs, the total incurred and the
    undefined reason in full (wrapped, not cut); below 32 rows or 100 columns it
    collapses (README: what collapses, in order)."""
    import asyncio

    from tests.helpers.tui_campaign import NOW

    engine = running_campaign(tmp_path)
    engine.cost("cloud storage", "12.50", "USD", now=NOW)
    engine.cost("dataset licence", "30", "USD", now=NOW)
    seen: dict[str, str] = {}

    async def go() -> None:
        app = CockpitApp(engine, interval=3600, theme="default")
        async with app.run_test(size=size) as pilot:
            await ready(seen)(pilot)
            r = app.query_one("#budget").region  # the panel's rows, inside its border
            rows = [row for row in seen["text"].splitlines()  # less the SVG's title line
                    if row.strip() != "cockpit · test-campaign"][r.y + 1:r.bottom - 1]
            seen["budget"] = " ".join(row[r.x + 2:r.right - 2].strip() for row in rows)
    asyncio.run(go())
    text = seen["text"]
    assert "committed 47.14 USD" in text
    assert "other costs 42.50 USD (2 items)" in text
    assert "incurred 89.64 USD" in text  # 47.14 + 12.50 + 30
    assert "accepted results 0" in text
    # The reason, every word of it, across the wrapped lines of the panel.
    reason = "no accepted result: the rental share per accepted result is undefined (D21)"
    assert reason in seen["budget"], (seen["budget"], text)


@pytest.mark.parametrize("size", [(80, 24), (120, 24)], ids=["80x24", "120x24"])
def test_budget_collapses_when_small(tmp_path: Path, size: tuple[int, int]) -> None:
    import asyncio

    seen: dict[str, str] = {}

    async def go() -> None:
        app = CockpitApp(running_campaign(tmp_path), interval=3600, theme="default")
        async with app.run_test(size=size) as pilot:
            await ready(seen)(pilot)
            assert not app.query_one("#budget").display
            assert app.query_one("#window").region.height == 3  # the window line stays
    asyncio.run(go())
    assert "incurred" not in seen["text"] and "window 12-02 08:00" in seen["text"]
