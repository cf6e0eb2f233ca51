"""LiveTable: a DataTable fed whole rows by key, touching only the cells that changed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from cockpit.tui.panels.base import LEVEL_CLASSES, resolve
from cockpit.tui.untrusted import literal


class LiveTable(DataTable[Any]):
    """A DataTable fed whole rows by key; only changed cells are touched. Its cells'
    level tags are coloured from its component classes (``level--*``)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = LEVEL_CLASSES

    def __init__(self, columns: Sequence[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self._columns = columns
        self._cells: dict[str, tuple[Any, ...]] = {}

    def on_mount(self) -> None:
        for key, label in self._columns:
            self.add_column(label, key=key)

    async def _on_idle(self, event: events.Idle) -> None:
        # Textual (8.2) widens auto-width columns on idle but keeps the cells it rendered
        # before at the old width (its cell cache ignores the width): a row drawn in
        # between stays cut short ("con" for "control") until one of its values changes,
        # which for a run not started is never. When a width moved, drop those renders.
        before = [c.content_width for c in self.columns.values()]
        await super()._on_idle(event)
        if [c.content_width for c in self.columns.values()] != before:
            clear = getattr(self, "_clear_caches", None)
            if callable(clear):
                clear()
                self.refresh()

    def sync(self, rows: Sequence[tuple[str, tuple[Any, ...]]]) -> None:
        keys = [key for key, _ in rows]
        kept = [k for k in self._cells if k in keys]
        if kept != [k for k in keys if k in self._cells]:
            # The order changed (a rule fired and moves to the top): rare, so rebuild.
            self.clear()
            self._cells = {}
        for key in [k for k in self._cells if k not in keys]:
            self.remove_row(key)
            del self._cells[key]
        for key, values in rows:
            # A str cell would be parsed as markup (a metric named "[@click=app.quit]"):
            # every cell is literal Text, made printable.
            values = tuple(resolve(self, literal(v) if isinstance(v, str) else v)
                           if isinstance(v, (str, Text)) else v for v in values)
            old = self._cells.get(key)
            if old is None:
                self.add_row(*values, key=key)
            else:
                for (col, _), before, after in zip(self._columns, old, values, strict=True):
                    if _plain(before) != _plain(after):
                        # Re-measuring a column redraws the whole table: only when the new
                        # text no longer fits (elapsed times and steps tick every second).
                        self.update_cell(key, col, after,
                                         update_width=_width(after) > self._col_width(col))
            self._cells[key] = values

    def _col_width(self, col: str) -> int:
        column = self.columns.get(ColumnKey(col))
        return column.content_width if column is not None else 0

    def forget(self) -> None:
        """Redraw every cell next time (a theme change recolours them)."""
        self._cells = {k: tuple(None for _ in v) for k, v in self._cells.items()}


def _plain(value: Any) -> Any:
    return value.markup if isinstance(value, Text) else value


def _width(value: Any) -> int:
    return value.cell_len if isinstance(value, Text) else cell_len(str(value))
