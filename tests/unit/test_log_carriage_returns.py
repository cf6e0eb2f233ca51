"""The log view renders carriage returns as a terminal would (issue 42): tqdm's progress
bar, which Trainer and Lightning print, redraws itself on one line with ``\\r``; the
view shows its last state, not a wall of ``\\x0d``, and stays printable."""

from __future__ import annotations

import io

import pytest

from cockpit.tui.full_screens import OVERWRITES, as_overwritten, log_lines


def test_a_real_tqdm_bar_shows_its_last_state() -> None:
    tqdm = pytest.importorskip("tqdm").tqdm
    out = io.StringIO()
    for _ in tqdm(range(37), file=out, mininterval=0, ncols=60, ascii=False):
        pass
    data = f"start\n{out.getvalue()}done\n".encode()
    assert data.count(b"\r") > 30  # the bar really redrew itself on one line
    lines = log_lines(data[:-1])
    assert lines[0] == "start" and lines[-1] == "done"
    bar = lines[1]
    assert "37/37" in bar and "100%" in bar, bar
    assert "\\x0d" not in bar and "0/37" not in bar.replace("37/37", ""), bar


def test_an_older_longer_segment_shows_past_the_newest_one() -> None:
    assert as_overwritten("loading 100%\rdone") == "doneing 100%"
    assert as_overwritten("abc\r\r") == "abc"  # a redraw that ends the line changes nothing
    assert as_overwritten("plain") == "plain"
    assert log_lines(b"a\r\nb") == ["a", "b"]  # CRLF is a line end


def test_escapes_stay_visible_after_the_overwrite() -> None:
    (line,) = log_lines(b"\x1b]52;c;UFdORUQ=\x07 bar 10%\r\x1b[2J bar 20%")
    assert "\x1b" not in line and "\\x1b[2J bar 20%" in line, line


def test_a_bar_redrawn_for_hours_reads_only_its_newest_segments() -> None:
    old = "x" * 500  # a long segment further back than OVERWRITES is not looked at
    line = "\r".join([old] + [f"{i:>4}" for i in range(OVERWRITES + 10)])
    assert as_overwritten(line) == f"{OVERWRITES + 9:>4}"
