"""`l` from the field (issue 43): with several runs started, the "Whose output?" list
highlights the running run, not the finished run under the runs table's cursor (whose
log, picked by Enter, was empty)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("textual_plotext")

from textual.widgets import OptionList  # noqa: E402

from cockpit.tui.app import CockpitApp  # noqa: E402
from cockpit.tui.dialogs import PickScreen  # noqa: E402
from cockpit.tui.full_screens import LogScreen  # noqa: E402
from tests.helpers.tui_campaign import NOW, running_campaign  # noqa: E402
from tests.tui.test_tui_keys_issue15 import FixedClock  # noqa: E402
from tests.tui.test_tui_pilot import until  # noqa: E402

SIZE = (120, 40)


def test_l_highlights_the_running_run_not_the_cursor_row(tmp_path: Path) -> None:
    engine = running_campaign(tmp_path)
    for stage in ("control", "diverge"):  # two runs end; variant-a goes on
        engine.supervisor.finish(stage, 0)  # type: ignore[attr-defined]
    later = NOW + timedelta(minutes=1)
    engine.clock = FixedClock(later)
    snap = engine.tick(later)
    assert [r.id for r in snap.runs if r.state == "running"] == ["variant-a"]

    async def go() -> None:
        app = CockpitApp(engine, interval=3600)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None and app.main is not None
                        and app.main.runs_table.row_count > 0)
            main = app.main
            assert main is not None
            table = main.runs_table
            assert main.focused is not table
            # The cursor stays on the row it was on (control, while it ran): an ended run.
            table.cursor_row = next(i for i in range(table.row_count)
                                    if table.row_key_at(i) == "control")
            assert table.cursor_key == "control"
            await pilot.press("l")
            await until(pilot, lambda: isinstance(app.screen, PickScreen))
            options = app.screen.query_one(OptionList)
            highlighted = options.get_option_at_index(options.highlighted or 0).id
            assert highlighted == "variant-a"
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, LogScreen))
            assert app.screen.run_id == "variant-a"  # type: ignore[attr-defined]
            await pilot.press("escape")
    asyncio.run(go())
