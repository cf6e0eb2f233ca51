"""What every live panel shares: level tags, the redraw-on-change Static, the resize note.

Colour lives only in the theme files. The text builders tag what they draw with a
*level* (ok / warn / fired / blind / muted / accent: :func:`level`), a Rich style that
carries no colour; the widget that shows the text swaps each tag for the style its
theme gives the component class ``level--NAME`` (:func:`resolve`). So the pure
builders stay testable without an app, and ``t`` recolours without any Python table.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any, ClassVar
from weakref import WeakKeyDictionary

from rich.cells import cell_len
from rich.style import Style
from rich.text import Span, Text
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from cockpit.tui.untrusted import literal_block

LEVELS = ("ok", "warn", "fired", "blind", "muted", "accent")
LEVEL_CLASSES = {f"level--{name}" for name in LEVELS}
_META = "cockpit-level"


@cache
def level(name: str, extra: str = "") -> Style:
    """The tag of a level (``extra``: plain attributes such as ``"bold"`` / ``"reverse"``).

    "info" (and any name not in :data:`LEVELS`) is the text's own colour: no tag."""
    base = Style.parse(extra) if extra else Style()
    return base + Style(meta={_META: name}) if name in LEVELS else base


def block(lines: Iterable[Text]) -> Text:
    """Lines joined into one Text that never wraps (a panel's height is fixed)."""
    out = Text("\n", no_wrap=True, overflow="ellipsis").join(lines)
    out.no_wrap, out.overflow = True, "ellipsis"
    return out


def styled(parts: Iterable[tuple[str, str | Style]]) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    for chunk, style in parts:
        out.append(chunk, style or None)
    return out


class PanelResized(Message):
    """A panel's size changed: its width-dependent text wants drawing again."""


# Each widget's resolved level styles, for the theme they were resolved under (a theme
# change starts afresh): the GPU rows resolve the same few styles every tick.
_RESOLVED: WeakKeyDictionary[Widget, tuple[object, dict[Style, Style]]] = WeakKeyDictionary()


def resolve(widget: Widget, text: Text) -> Text:
    """``text`` with each level tag replaced by the style ``widget``'s theme gives the
    level (``widget`` lists :data:`LEVEL_CLASSES` in its ``COMPONENT_CLASSES``)."""
    theme = (widget.app.theme, getattr(widget.app, "theme_name", None))
    cached = _RESOLVED.get(widget)
    if cached is None or cached[0] != theme:
        cached = _RESOLVED[widget] = (theme, {})
    seen = cached[1]

    def one(style: str | Style) -> str | Style:
        if not isinstance(style, Style) or not style._meta:
            return style
        if style not in seen:
            name = style.meta.get(_META)
            seen[style] = (style.clear_meta_and_links()
                           + widget.get_component_rich_style(f"level--{name}", partial=True)
                           if name in LEVELS else style)
        return seen[style]

    out = text.copy()
    out.style = one(out.style)
    out.spans = [Span(s.start, s.end, one(s.style)) for s in out.spans]
    return out


class LivePanel(Static):
    """A Static that redraws only when its text changed (bytes on the wire cost)."""

    DEFAULT_CSS = "LivePanel { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }"
    COMPONENT_CLASSES: ClassVar[set[str]] = LEVEL_CLASSES

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._last: str | None = None
        self._shape: tuple[int, ...] | None = None

    def show(self, content: Text | str) -> bool:
        if isinstance(content, str):
            content = literal_block(content)  # never parsed as markup
        content = resolve(self, content)
        key = content.markup
        if key == self._last:
            return False
        self._last = key
        # A layout pass arranges the whole screen: only when the text's shape (its
        # lines' widths) changed, when the panel wraps (words decide its height), or
        # when an auto-height panel's size disagrees with its lines (a layout pass
        # that raced the text's update on a loaded machine: one more pass mends it).
        shape = tuple(cell_len(line) for line in content.plain.split("\n"))
        height = self.styles.height
        layout = (shape != self._shape or self.styles.text_wrap == "wrap"
                  or (height is not None and height.is_auto
                      and self.size.height != len(shape)))
        self._shape = shape
        self.update(content, layout=layout)
        return True

    def forget(self) -> None:
        """Drop the memory of the last text (after a theme change, colours differ)."""
        self._last = None

    def on_resize(self) -> None:
        # Width-dependent text (bars, timeline): draw again at the new size.
        self.forget()
        self.post_message(PanelResized())
