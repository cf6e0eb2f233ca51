"""Regenerate the docs' screenshots: `PYTHONPATH=. python docs/screenshots.py`.

The campaign is the layout tests' (tests/helpers/tui_campaign.py): three runs running,
one whose loss went NaN so its rule fired, a fixed clock and simulated GPUs, plus two
other costs for the budget panel. Writes docs/cockpit-80x24.svg and
docs/cockpit-120x40.svg (the main screen), docs/cockpit-chart.svg (the chart screen,
`g`, at 120x40) and docs/decide-80x24.svg (the decision after the pilot at 80x24, its
note being typed).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from cockpit.tui.app import CockpitApp
from tests.helpers.tui_campaign import NOW, running_campaign

DOCS = Path(__file__).resolve().parent


async def shoot(name: str, size: tuple[int, int], keys: tuple[str, ...] = (),
                pilot_done: bool = False) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        engine = running_campaign(Path(tmp))
        engine.cost("cloud storage", "12.50", "USD", now=NOW)
        if pilot_done:  # a decision is due
            engine.mark("pilot", "started", now=NOW)
            engine.mark("pilot", "done", now=NOW)
        app = CockpitApp(engine, interval=3600, theme="default")
        async with app.run_test(size=size) as pilot:
            for _ in range(100):
                if app.snapshot is not None and app.main.stages_table.row_count:
                    break
                await pilot.pause(0.05)
            for key in keys:
                await pilot.press(key)
                await pilot.pause(0.5)
            if not keys:
                app.set_focus(None)
            await pilot.pause(0.5)
            (DOCS / name).write_text(app.export_screenshot())


async def main() -> None:
    await shoot("cockpit-80x24.svg", (80, 24))
    await shoot("cockpit-120x40.svg", (120, 40))
    await shoot("cockpit-chart.svg", (120, 40), ("g",))
    await shoot("decide-80x24.svg", (80, 24), ("d", "enter", *"pilot", "space", *"fits"),
                pilot_done=True)


if __name__ == "__main__":
    asyncio.run(main())
