"""The budget panel's GPU-hours lines (issue 27): short enough for the 40-column panel,
nothing recorded never reads as fine, and time is never priced (issue 41, D8)."""

from __future__ import annotations

from cockpit.close.hours import GpuMinute, HoursInputs, StageSpan, TimeSpan, hours_bought
from cockpit.tui.panels.base import level
from cockpit.tui.panels.budget import hours_lines

T0 = 1_700_000_040


def test_busy_of_held_then_unrecorded_and_the_gaps_as_a_share_of_the_window() -> None:
    minutes = tuple(GpuMinute(0, float(t), 90.0, None, 60) for t in range(T0, T0 + 7200, 60))
    h = hours_bought(HoursInputs(start=T0, end=T0 + 3 * 86400, now=T0 + 4 * 3600, gpus=1,
                                 spans=(StageSpan("a", (0,), T0 + 3600, T0 + 7200),),
                                 minutes=minutes))
    lines = [line.plain for line in hours_lines(h)]
    assert lines == ["GPU-h busy 2.0 of 4.0 held", "unrecorded 2.0",
                     "idle gaps 3h (4 % of window)"]  # 3 h of 72
    assert all(len(line) <= 38 for line in lines)  # the panel's inner width
    assert hours_lines(None) == []


def test_nothing_recorded_is_in_the_warning_colour() -> None:
    h = hours_bought(HoursInputs(start=T0, end=T0 + 86400, now=T0 + 600, gpus=2,
                                 ))
    unrecorded = hours_lines(h)[1]
    assert unrecorded.plain.startswith("unrecorded 0.3")
    assert any(span.style == level("warn") for span in unrecorded.spans)


def test_a_long_tail_goes_on_two_lines_rather_than_wrapping() -> None:
    """12.5 h unrecorded and an 11h50m gap do not fit one line of the panel: each part
    gets its own line (a wrap would leave a share alone on a line)."""
    h = hours_bought(HoursInputs(start=T0, end=T0 + 3 * 86400, now=T0 + 45000, gpus=1,
                                 spans=(StageSpan("a", (0,), T0 + 42600, T0 + 45000),)))
    lines = [line.plain for line in hours_lines(h)]
    assert lines == ["GPU-h busy 0.0 of 12.5 held", "unrecorded 12.5",
                     "idle gaps 11h50m (16 % of window)"]
    assert all(len(line) <= 36 for line in lines)


def test_a_human_or_cpu_stage_and_the_close_are_their_own_time_never_money() -> None:
    """A person's review and a CPU check while no GPU stage ran are said as such, not as
    idle GPUs; after the close the rest of the window is unused, not a gap."""
    h = 3600
    out = hours_bought(HoursInputs(
        start=T0, end=T0 + 3 * 86400, now=T0 + 8 * h, gpus=1,
        spans=(StageSpan("control", (0,), T0, T0 + 4 * h),),
        others=(TimeSpan("review", "human", T0 + 4 * h, T0 + 6 * h),
                TimeSpan("export", "cpu", T0 + 6 * h, T0 + 6 * h + 600)),
        closed_at=T0 + 6 * h + 600))
    lines = [line.plain for line in hours_lines(out)]
    assert lines == ["GPU-h busy 0.0 of 8.0 held", "unrecorded 8.0", "human stages 2h (3 %)",
                     "CPU stages 10m (<1 %)", "unused after close 2d17h (91 %)"]
    assert all(len(line) <= 36 for line in lines)
    assert not any("USD" in line or "gap" in line for line in lines)
