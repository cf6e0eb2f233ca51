"""The one rule for untrusted text: what a run, a peer, a journal line or a bag wrote
is made printable before a terminal, a log line meant for a terminal or Markdown sees it.

A training script that prints ``ESC]52;…`` (OSC 52 writes the clipboard through tmux),
``ESC]0;…`` (the window title), ``ESC[2J`` or a cursor move, or a name holding U+202E
(which reverses what follows) must not steer the person's terminal. Every C0 and C1
control, DEL, ESC, the bidi overrides and isolates, the line and paragraph separators
and lone surrogates are shown as visible escapes (``\\x1b``, ``\\u202e``); text is
bounded in length. Colour and style come only from the cockpit's own code.

``printable`` is for one line (a name, a reason, a note in an event line);
``printable_block`` keeps newlines and tabs (a run's log, a multi-line note in
REPORT.md). Both are pure and cheap: printable ASCII within the bound is returned as is.
"""

from __future__ import annotations

LINE_LIMIT = 500  # characters of one untrusted value on one line
BLOCK_LIMIT = 200_000  # characters of an untrusted multi-line block

# Bidirectional formatting: embeddings/overrides (202A-202E), isolates (2066-2069), the
# marks (200E/200F, 061C), and the zero-width joiners/spaces and BOM that hide text.
_BIDI_AND_HIDDEN = (
    [0x061C, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2028, 0x2029, 0xFEFF]
    + list(range(0x202A, 0x202F))
    + list(range(0x2066, 0x206A))
)


def _escape(cp: int) -> str:
    return f"\\x{cp:02x}" if cp <= 0xFF else f"\\u{cp:04x}"


def _table(keep: str) -> dict[int, str]:
    codes = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI_AND_HIDDEN,
             *range(0xD800, 0xE000)]  # lone surrogates: unencodable, never written raw
    return {cp: _escape(cp) for cp in codes if chr(cp) not in keep}


_LINE = _table(keep="")
_LINE[0x09] = " "  # a tab on one line is a space, not a cursor jump
_BLOCK = _table(keep="\n\t")


def _bound(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (+{len(text) - limit} chars)"


def printable(value: object, limit: int = LINE_LIMIT) -> str:
    """``value`` as one visible line: no control, no bidi override; at most ``limit``
    characters of ``value`` are kept (plus a marker saying how much was cut), each escaped
    one shown as 4 to 6 characters (``\x1b``, ``\u202e``)."""
    text = value if isinstance(value, str) else str(value)
    if text.isascii() and text.isprintable():
        return _bound(text, limit)
    # Bound first (a 1 MB line costs no more than its shown part), then escape.
    cut = _bound(text, limit)
    return cut.translate(_LINE)


def printable_block(value: object, limit: int = BLOCK_LIMIT) -> str:
    """Like :func:`printable`, but newlines and tabs stay (a log, a multi-line note);
    ``\\r`` is shown, so a line cannot overwrite itself on screen."""
    text = value if isinstance(value, str) else str(value)
    return _bound(text, limit).translate(_BLOCK)


_DROP: dict[int, None] = dict.fromkeys(_LINE)


def drop_unprintable(text: str) -> str:
    """``text`` without the characters :func:`printable` would escape. Only for the last
    net under a screen (the TUI's line filter): the cells are already laid out and these
    characters take none, so removing them keeps every column where it was."""
    if text.isascii() and text.isprintable():
        return text
    return text.translate(_DROP)


def is_printable(text: str) -> bool:
    """True when :func:`printable` would leave ``text`` (within the bound) unchanged."""
    return text.translate(_LINE) == text
