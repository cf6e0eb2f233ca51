"""LiveTable: a tick redraws only the rows that changed; the cursor stays on its row;
hostile cells stay cells (issue 25: the tables were a third of the TUI's CPU)."""

from __future__ import annotations

import asyncio
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult

from cockpit.tui.panels.table import MAX_COLUMN, LiveTable
from tests.helpers.process import pilot_until

COLUMNS = (("run", "run"), ("step", "step"), ("note", "note"))


def rows(steps: dict[str, int], note: str = "") -> list[tuple[str, tuple[Any, ...]]]:
    return [(key, (Text(key, style="bold"), f"{step:,}", note)) for key, step in steps.items()]


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield LiveTable(COLUMNS)


def drawn_lines(table: LiveTable) -> list[int]:
    """Record the lines the table draws from now on."""
    seen: list[int] = []
    draw = table.render_line

    def recording(y: int) -> Any:
        seen.append(y)
        return draw(y)
    table.render_line = recording  # type: ignore[method-assign]
    return seen


def line_text(table: LiveTable, y: int) -> str:
    return table.render_line(y).text


def test_one_changed_row_redraws_one_line_and_a_wider_value_widens_its_column() -> None:
    async def go() -> None:
        app = TableApp()
        async with app.run_test(size=(60, 12)) as pilot:
            table = app.query_one(LiveTable)
            seen = drawn_lines(table)
            table.sync(rows({"a": 1, "b": 2, "c": 3}))
            await pilot_until(pilot, lambda: {0, 1, 2, 3} <= set(seen), what="the first draw")
            await pilot.pause()
            seen.clear()
            table.sync(rows({"a": 1, "b": 20, "c": 3}))  # b's step changed, same width
            await pilot_until(pilot, lambda: seen, what="the changed row drawn")
            await pilot.pause()  # whatever else this refresh would draw
            assert set(seen) == {2}, seen  # the header is line 0, b is line 2
            assert "20" in line_text(table, 2) and line_text(table, 1).split() == ["a", "1"]
            seen.clear()
            table.sync(rows({"a": 1, "b": 20, "c": 3}))  # nothing changed: nothing drawn
            await pilot.pause()  # pending messages handled and the screen refreshed
            assert seen == []
            table.sync(rows({"a": 1, "b": 2_000_000, "c": 3}))  # wider: every line again
            await pilot_until(pilot, lambda: {0, 1, 2, 3} <= set(seen),
                              what="every line drawn again")
            assert line_text(table, 0).index("note") == line_text(table, 2).index("2,000,000") \
                + len("2,000,000") + 2
    asyncio.run(go())


def test_the_cursor_stays_on_its_row_when_the_order_changes_and_moves_with_keys() -> None:
    async def go() -> None:
        app = TableApp()
        async with app.run_test(size=(60, 12)) as pilot:
            table = app.query_one(LiveTable)
            table.sync(rows({"a": 1, "b": 2, "c": 3}))
            table.focus()
            await pilot.press("down", "down")
            assert table.cursor_key == "c"
            table.sync(rows({"c": 3, "a": 1, "b": 2}))  # a rule fired: c moves to the top
            assert table.cursor_key == "c" and table.cursor_row == 0
            await pilot.press("end")
            assert table.cursor_key == "b"
            await pilot.press("up")
            assert table.cursor_key == "a"
            table.sync(rows({"c": 3, "b": 2}))  # a's row went: the cursor stays in range
            assert table.cursor_key in ("c", "b")
            await pilot.click(LiveTable, offset=(2, 2))  # the second row (under the header)
            assert table.cursor_key == "b"
    asyncio.run(go())


def test_a_long_or_hostile_cell_stays_one_bounded_literal_cell() -> None:
    async def go() -> None:
        app = TableApp()
        async with app.run_test(size=(60, 12)) as pilot:
            table = app.query_one(LiveTable)
            seen = drawn_lines(table)
            hostile = "[@click=app.quit]\x1b[2J" + "x" * 10_000
            table.sync(rows({"a": 1}, note=hostile))
            await pilot_until(pilot, lambda: 1 in seen, what="the row drawn")
            assert table.virtual_size.width <= sum(w + 2 for w in (3, 4, MAX_COLUMN))
            text = line_text(table, 1)  # shown as written, the escape made visible
            assert "[@click=app.quit]" in text and "\x1b" not in text
            table.focus()
            await pilot.press("right", "right")  # a wide table scrolls sideways
            await pilot_until(pilot, lambda: table.scroll_x > 0 and line_text(table, 1) != text,
                              what="the table scrolled sideways")
    asyncio.run(go())


class PanelApp(App[None]):
    def compose(self) -> ComposeResult:
        from cockpit.tui.panels import LivePanel
        yield LivePanel()


def test_a_live_panel_lays_out_the_screen_only_when_its_shape_changes() -> None:
    from cockpit.tui.panels import LivePanel

    async def go() -> None:
        app = PanelApp()
        async with app.run_test(size=(60, 12)) as pilot:
            panel = app.query_one(LivePanel)
            layouts: list[bool] = []
            refresh = panel.refresh

            def recording(*args: Any, layout: bool = False, **kwargs: Any) -> Any:
                layouts.append(layout)
                return refresh(*args, layout=layout, **kwargs)
            panel.refresh = recording  # type: ignore[method-assign]
            panel.show("util 53%\nmem 46G")
            await pilot_until(pilot, lambda: panel.size.height == 2, what="the panel laid out")
            assert layouts and layouts[-1]
            layouts.clear()
            panel.show("util 91%\nmem 53G")  # new figures, same shape: no layout pass
            await pilot.pause()
            assert layouts and not any(layouts)
            assert "91%" in panel.render_line(0).text
            panel.show("util 91%\nmem 53G\nthrottle")  # a line more: the panel grows
            await pilot_until(pilot, lambda: panel.size.height == 3, what="the panel grown")
            assert any(layouts)
    asyncio.run(go())
