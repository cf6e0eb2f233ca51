"""The one rule for untrusted text (cockpit.common.printable): every escape class a hostile run
can print becomes visible, and nothing else changes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cockpit.common.printable import LINE_LIMIT, printable, printable_block

HOSTILE = [
    "\x1b]52;c;ZXZpbA==\x07",  # OSC 52: writes the clipboard through tmux
    "\x1b]0;pwned\x07",  # OSC 0: the window title
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "\x1b[10A\x1b[5C",  # cursor moves
    "\x9b31m",  # C1 CSI
    "\x9d0;title\x9c",  # C1 OSC ... ST
    "abc\u202edcba",  # right-to-left override
    "\u2066iso\u2069",  # isolates
    "over\rwrite",  # carriage return
    "bell\x07 back\x08 del\x7f",
    "\ud800lone surrogate",
]


def _has_control(text: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c in "\u202e\u2066\u2069\ud800"
               for c in text)


def test_every_escape_class_becomes_visible() -> None:
    for raw in HOSTILE:
        shown = printable(raw)
        assert not _has_control(shown), (raw, shown)
        assert "\\x" in shown or "\\u" in shown, shown
        shown.encode("utf-8")  # never an unencodable surrogate


def test_block_keeps_lines_and_shows_carriage_returns() -> None:
    shown = printable_block("step 1\tloss 2\nstep 2\rfake\x1b[2J\n")
    assert shown == "step 1\tloss 2\nstep 2\\x0dfake\\x1b[2J\n"


def test_plain_text_is_unchanged_and_bounded() -> None:
    assert printable("train/loss=0.31 · ✓ ünïcode") == "train/loss=0.31 · ✓ ünïcode"
    long = "x" * (LINE_LIMIT + 10)
    shown = printable(long)
    assert shown.startswith("x" * LINE_LIMIT) and shown.endswith("(+10 chars)")


def test_tab_on_one_line_is_a_space() -> None:
    assert printable("a\tb") == "a b"


@given(st.text())
def test_printable_never_leaks_a_control(text: str) -> None:
    shown = printable(text)
    assert not _has_control(shown)
    assert "\n" not in shown


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cc", "Cf", "Cs",
                                                                        "Zl", "Zp"])))
def test_printable_text_passes_through(text: str) -> None:
    assert printable(text, limit=10**6) == text
