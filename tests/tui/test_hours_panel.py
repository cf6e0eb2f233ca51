"""The budget panel's GPU-hours lines (issue 27): short enough for the 40-column panel,
and nothing recorded never reads as fine."""

from __future__ import annotations

from decimal import Decimal

from cockpit.close.hours import GpuMinute, HoursInputs, StageSpan, hours_bought
from cockpit.common.units import Money
from cockpit.tui.panels.base import level
from cockpit.tui.panels.budget import hours_lines

T0 = 1_700_000_040


def test_busy_of_held_then_unrecorded_and_the_gaps_with_their_share() -> None:
    minutes = tuple(GpuMinute(0, float(t), 90.0, None, 60) for t in range(T0, T0 + 7200, 60))
    h = hours_bought(HoursInputs(start=T0, end=T0 + 3 * 86400, now=T0 + 4 * 3600, gpus=1,
                                 price=Money(Decimal("47.14"), "USD"),
                                 spans=(StageSpan("a", (0,), T0 + 3600, T0 + 7200),),
                                 minutes=minutes))
    lines = [line.plain for line in hours_lines(h)]
    assert lines == ["GPU-h busy 2.0 of 4.0 held",
                     "unrecorded 2.0 · gaps 3h 1.96 USD"]
    assert all(len(line) <= 38 for line in lines)  # the panel's inner width
    assert hours_lines(None) == []


def test_nothing_recorded_is_in_the_warning_colour() -> None:
    h = hours_bought(HoursInputs(start=T0, end=T0 + 86400, now=T0 + 600, gpus=2,
                                 price=None))
    unrecorded = hours_lines(h)[1]
    assert unrecorded.plain.startswith("unrecorded 0.3")
    assert any(span.style == level("warn") for span in unrecorded.spans)


def test_a_long_tail_goes_on_two_lines_rather_than_wrapping() -> None:
    """12.5 h unrecorded and an 11h50m gap do not fit one line of the panel: each part
    gets its own line (a wrap would leave the currency alone on a line)."""
    h = hours_bought(HoursInputs(start=T0, end=T0 + 3 * 86400, now=T0 + 45000, gpus=1,
                                 price=Money(Decimal("47.14"), "USD"),
                                 spans=(StageSpan("a", (0,), T0 + 42600, T0 + 45000),)))
    lines = [line.plain for line in hours_lines(h)]
    assert lines == ["GPU-h busy 0.0 of 12.5 held", "unrecorded 12.5",
                     "gaps 11h50m 7.75 USD"]
    assert all(len(line) <= 36 for line in lines)
