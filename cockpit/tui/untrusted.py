"""Where untrusted text meets the screen in the TUI: literal rendering and the last net.

The panels and dialogs make a run's or a peer's text printable with
:mod:`cockpit.common.printable` and pass it as :class:`rich.text.Text`, never as a ``str``
that Textual would parse as markup (a note ``[@click=app.quit]`` must read as itself).
:class:`DropUnprintable` is the net under all of that: a line filter on the app that
removes any control, ESC or bidi character still inside a rendered segment, so no
widget (ours or Textual's) can send a run's escape sequence to the terminal.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.color import Color
from textual.filter import LineFilter

from cockpit.common.printable import drop_unprintable, printable, printable_block


def literal(value: object, limit: int | None = None) -> Text:
    """``value`` as one printable line that Textual shows as written (no markup)."""
    if isinstance(value, Text):
        return value
    return Text(printable(value) if limit is None else printable(value, limit))


def literal_block(value: object) -> Text:
    """Like :func:`literal`, keeping newlines (a dialog's body, a notification)."""
    if isinstance(value, Text):
        return value
    return Text(printable_block(value))


class DropUnprintable(LineFilter):
    """Removes controls, ESC, C1 and bidi characters from every segment drawn.

    They take no cell (Rich measures them as zero width), so the layout is unchanged;
    text is normally made visible before it gets here, this only guarantees that
    nothing raw is left for the terminal to obey."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        out = []
        for seg in segments:
            text = seg.text
            if seg.control is None and not (text.isascii() and text.isprintable()):
                clean = drop_unprintable(text)
                if clean != text:
                    seg = Segment(clean, seg.style, seg.control)
            out.append(seg)
        return out
