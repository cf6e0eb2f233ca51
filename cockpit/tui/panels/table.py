"""LiveTable: rows by key, drawn line by line; a tick redraws only the rows that changed.

Textual's DataTable re-renders every visible row when one cell changes (its caches are
keyed by a table-wide update count), and the stages' and runs' elapsed times change
every second: that was a third of the cockpit's steady CPU (issue 25). Here each row is
one cached line (a :class:`~textual.strip.Strip`); a changed row redraws its own line,
a wider value widens its column (a full redraw, rare: columns never shrink while the
rows stay), and the header stays on top while the rows scroll.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cockpit.tui.panels.base import LEVEL_CLASSES, resolve
from cockpit.tui.untrusted import literal

# A column never grows past this (a metric name or a reason of a megabyte stays a cell).
MAX_COLUMN = 60


class LiveTable(ScrollView, can_focus=True):
    """Rows fed whole by key (:meth:`sync`); a cursor row (arrows, click) that stays on
    its row when the order changes. Cells' level tags are coloured from the component
    classes ``level--*``; the header and cursor from ``livetable--*``."""

    COMPONENT_CLASSES: ClassVar[set[str]] = LEVEL_CLASSES | {
        "livetable--header", "livetable--cursor", "livetable--cursor-blurred"}
    DEFAULT_CSS = """
    LiveTable { height: auto; max-height: 100%; background: $surface; color: $foreground; }
    LiveTable > .livetable--header { text-style: bold; background: $panel; color: $foreground; }
    LiveTable > .livetable--cursor { background: $block-cursor-background;
        color: $block-cursor-foreground; text-style: $block-cursor-text-style; }
    LiveTable > .livetable--cursor-blurred { background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground; text-style: $block-cursor-blurred-text-style; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "up", show=False),
        Binding("down", "cursor(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "cursor(-1000000)", "first", show=False),
        Binding("end", "cursor(1000000)", "last", show=False),
    ]

    def __init__(self, columns: Sequence[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._columns = tuple(columns)
        self._order: list[str] = []
        self._cells: dict[str, tuple[Text, ...]] = {}
        self._widths = [min(len(label), MAX_COLUMN) for _, label in self._columns]
        self._strips: dict[str, Strip] = {}
        self._header: Strip | None = None
        self.cursor_row = 0

    # ------------------------------------------------------------------ data
    @property
    def row_count(self) -> int:
        return len(self._order)

    def row_key_at(self, row: int) -> str | None:
        return self._order[row] if 0 <= row < len(self._order) else None

    @property
    def cursor_key(self) -> str | None:
        """The key of the row under the cursor (None when the table is empty)."""
        return self.row_key_at(self.cursor_row)

    def sync(self, rows: Sequence[tuple[str, tuple[Any, ...]]]) -> None:
        """Show exactly ``rows`` (key, cells), in this order."""
        cells = {key: tuple(self._cell(v) for v in values) for key, values in rows}
        order = [key for key, _ in rows]
        if order != self._order:
            # The rows came, went or moved (a rule fired): rare, so draw them all anew;
            # the cursor stays on the row it was on.
            held = self.cursor_key
            self._order, self._cells, self._strips = order, cells, {}
            self._widths = self._measure(cells.values())
            self.cursor_row = order.index(held) if held in cells else \
                min(self.cursor_row, max(len(order) - 1, 0))
            self._resized()
            return
        changed = [key for key in order if not _same(cells[key], self._cells[key])]
        if not changed:
            return
        for key in changed:
            self._cells[key] = cells[key]
            self._strips.pop(key, None)
        widths = [max(a, b) for a, b in zip(self._widths, self._measure(
            cells[k] for k in changed), strict=True)]
        if widths != self._widths:
            self._widths, self._strips = widths, {}
            self._resized()
            return
        for key in changed:
            self.refresh_line(order.index(key) + 1)

    def forget(self) -> None:
        """Draw every row anew next time (a theme change recolours the cells)."""
        self._order, self._cells, self._strips, self._header = [], {}, {}, None
        self.refresh()

    def _cell(self, value: Any) -> Text:
        # A str cell would be parsed as markup by others (a metric named
        # "[@click=app.quit]"): every cell is literal Text, made printable.
        text = literal(value) if not isinstance(value, Text) else value
        return resolve(self, text)

    def _measure(self, rows: Any) -> list[int]:
        widths = [min(len(label), MAX_COLUMN) for _, label in self._columns]
        for cells in rows:
            widths = [max(w, min(c.cell_len, MAX_COLUMN)) for w, c in zip(widths, cells,
                                                                          strict=True)]
        return widths

    def _resized(self) -> None:
        self._header = None
        self.virtual_size = Size(sum(w + 2 for w in self._widths), len(self._order) + 1)
        self.refresh(layout=True)

    # ------------------------------------------------------------------ drawing
    def _line(self, cells: Sequence[Text], pad: Style | None = None) -> Strip:
        """One row: each cell cut to its column, one space either side (in ``pad``)."""
        text = Text(no_wrap=True, end="")
        for cell, width in zip(cells, self._widths, strict=True):
            shown = cell.copy()
            shown.truncate(width, overflow="ellipsis")
            text.append(" ", pad)
            text.append_text(shown)
            text.append(" " * (width - shown.cell_len + 1), pad)
        return Strip(list(text.render(self.app.console)), text.cell_len)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width, base = self.size.width, self.rich_style
        if y == 0:
            if self._header is None:  # the labels in the header's style, underlined or not
                style = self.get_component_rich_style("livetable--header")
                labels = [Text(label, style=style) for _, label in self._columns]
                self._header = self._line(labels, Style(bgcolor=style.bgcolor))
            strip = self._header
        else:
            row = y - 1 + scroll_y
            key = self.row_key_at(row)
            if key is None:
                return Strip.blank(width, base)
            strip = self._strips.get(key) or self._strips.setdefault(
                key, self._line(self._cells[key]))
            if row == self.cursor_row:  # the cursor bar spans the whole width
                cursor = self.get_component_rich_style(
                    "livetable--cursor" if self.has_focus else "livetable--cursor-blurred")
                line = strip.apply_style(base).crop_extend(scroll_x, scroll_x + width, base)
                return Strip(Segment.apply_style(line, post_style=cursor), width)
        return strip.apply_style(base).crop_extend(scroll_x, scroll_x + width, base)

    # ------------------------------------------------------------------ cursor
    def move_cursor(self, row: int) -> None:
        """Put the cursor on ``row`` (clamped) and scroll it into view."""
        if not self._order:
            return
        row = max(0, min(row, len(self._order) - 1))
        if row != self.cursor_row:
            self.refresh_line(self.cursor_row + 1)
            self.cursor_row = row
            self.refresh_line(row + 1)
        visible = max(self.size.height - 1, 1)  # the header takes a line
        if row < self.scroll_y:
            self.scroll_to(y=row, animate=False)
        elif row >= self.scroll_y + visible:
            self.scroll_to(y=row - visible + 1, animate=False)

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self.cursor_row + direction * max(self.size.height - 2, 1))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and offset.y >= 1:
            self.move_cursor(offset.y - 1 + round(self.scroll_y))

    def on_focus(self) -> None:
        self.refresh_line(self.cursor_row + 1)

    def on_blur(self) -> None:
        self.refresh_line(self.cursor_row + 1)


def _same(new: tuple[Text, ...], old: tuple[Text, ...]) -> bool:
    """The same text in the same styles (Text's own == ignores its base style)."""
    return all(a.plain == b.plain and a.style == b.style and a.spans == b.spans
               for a, b in zip(new, old, strict=True))
