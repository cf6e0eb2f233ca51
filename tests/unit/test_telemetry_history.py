"""Bounded history: rings, minute means, bulk fill, flat memory; and IdleDetector."""

from __future__ import annotations

import math

import pytest

from cockpit.telemetry import (
    GpuSampler,
    HostInfo,
    IdleDetector,
    TelemetryHistory,
)
from cockpit.telemetry.history import Ring, Series
from cockpit.telemetry.simulated.nvml import FakeGpu, FakeNvml


def test_ring_keeps_newest_in_order() -> None:
    r = Ring(4)
    assert r.last(3) == []
    for v in range(1, 7):
        r.push(v)
    assert len(r) == 4 and r.last(10) == [3.0, 4.0, 5.0, 6.0] and r.last(2) == [5.0, 6.0]
    r.extend([7, 8, 9])
    assert r.last(4) == [6.0, 7.0, 8.0, 9.0]
    r.extend(list(range(100)))
    assert r.last(4) == [96.0, 97.0, 98.0, 99.0]


def test_series_minute_means_and_gaps() -> None:
    s = Series(fine_points=10, coarse_points=100)
    for t in range(180):  # three minutes at 1 Hz: values 0, 1, 2 per minute
        s.push(t // 60, now=float(t))
    s.push(5, now=180.0)  # enters minute 3: closes minute 2
    assert s.buckets(10) == [0.0, 1.0, 2.0]
    assert s.recent(3) == [2.0, 2.0, 5.0]
    s.push(7, now=180.0 + 5 * 60)  # asleep for four whole minutes
    raw = s.buckets(10, skip_missing=False)
    assert raw[:4] == [0.0, 1.0, 2.0, 5.0]
    assert len(raw) == 8 and all(math.isnan(x) for x in raw[4:])


def test_missing_values_are_gaps_not_zeros() -> None:
    s = Series(fine_points=10, coarse_points=10)
    s.push(10, 0.0)
    s.push(None, 1.0)
    s.push(20, 2.0)
    s.push(None, 60.0)
    assert s.recent(10) == [10.0, 20.0]
    assert math.isnan(s.recent(10, skip_missing=False)[1])
    assert s.buckets(5) == [15.0]  # mean of the real values only


def test_bulk_extend_equals_pushing_one_by_one() -> None:
    values = [float((i * 7) % 100) for i in range(1000)]
    values[100:130] = [math.nan] * 30
    a = Series(fine_points=50, coarse_points=20)
    b = Series(fine_points=50, coarse_points=20)
    start = 37.0
    for i, v in enumerate(values):
        a.push(v, start + i * 1.0)
    b.extend(values[:333], start, 1.0)
    b.extend(values[333:], start + 333, 1.0)  # chunks join mid-minute
    assert a.recent(50) == b.recent(50)
    assert a.buckets(20) == pytest.approx(b.buckets(20))
    assert len(a.buckets(20)) == 17  # t = 37..1036 s: minutes 0..16 closed


def test_memory_stays_flat_however_long_it_runs() -> None:
    s = Series()
    s.extend([1.0] * 86_400, 0.0, 1.0)
    one_day = s.nbytes
    for day in range(1, 4):
        s.extend([float(day)] * 86_400, day * 86_400.0, 1.0)
    assert s.nbytes == one_day == (600 + 4320) * 4
    assert len(s.fine) == 600 and len(s.coarse) == 4320
    assert s.buckets(1) == [3.0]


def test_history_from_sampler_readings() -> None:
    t = [0.0]
    fake = FakeNvml([FakeGpu(util=10), FakeGpu(util=90, lost_after=5)])
    sampler = GpuSampler(nvml=fake.module(), clock=lambda: t[0])
    hist = TelemetryHistory()
    host = HostInfo(
        cpu_percent=25.0,
        cpu_count=4,
        load1=None,
        mem_used=1,
        mem_total=2,
        swap_used=0,
        swap_total=0,
        disks=(),
        own_cpu_percent=0.0,
        own_rss=1,
        warnings=(),
    )
    for i in range(8):
        fake.gpus[0].util = 10 + i
        hist.add(sampler.sample(), host, t[0])
        t[0] += 1
    assert hist.recent("util", 0, 3) == [15.0, 16.0, 17.0]
    assert hist.recent("util", 1, 100) == [90.0] * 5  # lost after 5 reads: gaps after
    assert len(hist.recent("util", 1, 100, skip_missing=False)) == 8
    assert hist.recent("power", 0, 1) == [70.0]
    assert hist.recent("cpu", None, 2) == [25.0, 25.0]
    assert hist.recent("util", 7) == []
    assert ("temp", 1) in hist.keys()
    with pytest.raises(KeyError):
        hist.series("fan", 0)
    hist.add(None, None, 60.0)  # unavailable readings are fine
    assert hist.minutes("util", 0) == []  # minute 0 still open
    hist.add(sampler.sample(), host, 60.0)
    assert hist.minutes("util", 0) == [13.5]  # mean of 10..17


def test_history_bytes_for_eight_gpus() -> None:
    hist = TelemetryHistory()
    for g in range(8):
        for name in ("util", "mem_used", "power", "temp"):
            hist.series(name, g)
    hist.series("cpu")
    hist.series("mem_used")
    assert hist.nbytes == 34 * (600 + 4320) * 4  # about 670 KB


# --- IdleDetector -------------------------------------------------------------------


def test_idle_warns_only_after_grace_while_a_stage_runs() -> None:
    d = IdleDetector(threshold_pct=5.0, grace_s=600)
    assert d.update(0, 2.0, True) is None
    assert d.update(600, 1.0, True) is None  # exactly the grace: not yet
    msg = d.update(601, 0.0, True)
    assert msg == "GPU idle: utilization under 5% for 10m while a GPU stage runs"
    assert d.update(601 + 3600, 0.0, True) == (
        "GPU idle: utilization under 5% for 1h10m while a GPU stage runs"
    )


@pytest.mark.parametrize(("util", "running"), [(50.0, True), (None, True), (0.0, False)])
def test_idle_resets_on_work_unknown_or_no_stage(util: float | None, running: bool) -> None:
    d = IdleDetector(grace_s=10)
    d.update(0, 0.0, True)
    assert d.update(5, util, running) is None
    assert d.idle_since is None
    assert d.update(12, 0.0, True) is None  # the clock started again at 12
    assert d.update(23, 0.0, True) is not None


def test_idle_many_gpus_needs_all_idle() -> None:
    d = IdleDetector(grace_s=10)
    d.update_many(0, [0.0, 1.0, None], True)
    assert d.update_many(11, [0.0, 1.0, None], True) is not None
    assert d.update_many(12, [0.0, 80.0], True) is None
    assert d.update_many(30, [None, None], True) is None


def test_series_counts_every_sample_pushed_missing_ones_too():
    s = Series(fine_points=4, coarse_points=4)
    for v in (1.0, None, 3.0):
        s.push(v, 0.0)
    s.extend([4.0, 5.0], start=1.0, step=1.0)
    assert s.pushed == 5
    assert len(s.fine) == 4  # bounded, while the count goes on


def test_tui_sparkline_cells_group_by_absolute_tick_and_skip_missing():
    pytest.importorskip("textual")
    from cockpit.tui.panels import spark_cells

    s = Series(fine_points=100, coarse_points=4)
    for tick in range(14):  # cells of 6 ticks: [0..5], [6..11], [12, 13]
        s.push(None if tick == 7 else float(tick), float(tick))
    assert spark_cells(s, width=3, per_cell=6) == [5.0, 11.0, 13.0]
    assert spark_cells(s, width=2, per_cell=6, scale=2.0) == [22.0, 26.0]
    assert spark_cells(None, width=3) == []
