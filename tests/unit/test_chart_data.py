"""The chart's data (issue 25): a diverging run never flattens the others, spikes survive
the thinning, tick labels stay short, non-finite values are counted, not plotted."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.tui.chart_data import Series, bucketed, short_number, ticks, y_range


def curve(n: int, start: float, end: float) -> Series:
    xs = tuple(float(i * 10) for i in range(n))
    ys = tuple(start + (end - start) * i / (n - 1) for i in range(n))
    return Series(xs, ys)


def test_a_diverging_run_is_clipped_and_the_others_fill_the_plot() -> None:
    runs = {"control": curve(200, 2.5, 0.31), "variant-a": curve(200, 2.4, 0.28),
            "wild-lr": Series(tuple(float(i) for i in range(50)),
                              tuple(0.5 * 10 ** (i / 2) for i in range(50)))}
    bounds = y_range(runs)
    assert bounds is not None and bounds.clipped == ("wild-lr",) and not bounds.log
    sane = [v for name in ("control", "variant-a") for v in runs[name].ys]
    assert (max(sane) - min(sane)) / (bounds.hi - bounds.lo) > 0.5
    assert bounds.hi < 10  # not 1e24
    labels = ticks(bounds)[1]
    assert all(len(label) <= 7 for label in labels), labels


def test_three_decades_of_one_positive_run_switch_to_log_unless_chosen() -> None:
    runs = {"r": curve(100, 10.0, 1e-4)}
    assert y_range(runs) is not None and y_range(runs).log  # type: ignore[union-attr]
    assert not y_range(runs, log=False).log  # type: ignore[union-attr]
    assert not y_range({"r": curve(100, 2.0, 0.5)}).log  # type: ignore[union-attr]


def test_bucketing_keeps_a_spike_and_bounds_the_points() -> None:
    xs = [float(i) for i in range(100_000)]
    ys = [1.0] * 100_000
    ys[77_777] = 1000.0
    bx, by = bucketed(xs, ys, 120)
    assert len(bx) <= 240 and 1000.0 in by and bx == sorted(bx)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: v != 0))
def test_short_numbers_are_short_and_close(value: float) -> None:
    text = short_number(value)
    assert len(text) <= 9, text  # -6.7e-121 at the very worst
    if 1e-300 < abs(value) < 1e300:
        assert math.isclose(float(text), value, rel_tol=0.05)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_metric_value_is_never_a_row_of_digits(value: float) -> None:
    from cockpit.common.units import format_count, format_number
    for text in (format_number(value), format_count(value)):
        assert len(text) <= 14, text  # -1,234,567.9 at most; 4.02e19 for a diverging loss
