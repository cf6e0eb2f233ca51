"""The engine's read of the flight recording for the faces (issue 27,
cockpit/engine/telemetry_history.py): a recording written through the recorder's own API at past
times reads back per GPU; a missing or garbage file is an empty answer with its reason,
never an error; on a time axis a column with nothing recorded is None, never 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.engine import Recorded, columns, thinned
from cockpit.engine.telemetry_history import read_recorded
from cockpit.telemetry.flight import FlightRecorder, Point
from tests.unit.test_recorder import gpu, host

T0 = 1_800_000_000 // 3600 * 3600  # a whole hour: minutes start at T0


def record(path: Path, seconds: range, utils: tuple[float, ...]) -> None:
    with FlightRecorder(path) as rec:
        rec.open()
        for sec in seconds:
            rec.record(float(sec), [gpu(i, u, 2**30, 100.0, 50.0) for i, u in enumerate(utils)],
                       host(25.0, 2**33))
        rec.flush(30.0)


def test_a_recording_reads_back_per_gpu_minutes_and_raw_seconds(tmp_path: Path) -> None:
    store = tmp_path / "recorder.sqlite"
    record(store, range(T0, T0 + 600), (90.0, 10.0))
    minutes = read_recorded(store, T0, T0 + 600)
    assert minutes.state == "read" and minutes.gpus == (0, 1)
    assert [p.value for p in minutes.gpu(0, "util")] == [90.0] * 10  # closed: the last minute too
    assert {p.value for p in minutes.gpu(1, "util")} == {10.0}
    assert minutes.host("cpu_percent") == ()  # not asked for
    raw = read_recorded(store, T0 + 540, T0 + 599, gpu=("util", "power"),
                        host=("cpu_percent",), raw=True)
    assert len(raw.gpu(0, "util")) == 60 and {p.span_s for p in raw.gpu(0, "util")} == {1}
    assert {p.value for p in raw.gpu(1, "power")} == {100.0}
    assert {p.value for p in raw.host("cpu_percent")} == {25.0}
    thin = read_recorded(store, T0, T0 + 599, raw=True, width=10)
    assert len(thin.gpu(0, "util")) <= 10 and sum(p.n for p in thin.gpu(0, "util")) == 600


def test_no_recording_and_a_garbage_one_are_empty_answers_that_say_why(
        tmp_path: Path) -> None:
    absent = read_recorded(tmp_path / "none.sqlite", T0, T0 + 60)
    assert (absent.state, absent.series, absent.gpus) == ("absent", {}, ())
    assert "no recording" in absent.reason
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not sqlite at all" * 100)
    unreadable = read_recorded(bad, T0, T0 + 60)
    assert unreadable.state == "unreadable" and unreadable.series == {}
    assert str(bad) in unreadable.reason
    with pytest.raises(ValueError):
        read_recorded(bad, T0, T0 + 60, gpu=("loss",))  # a caller's mistake, not the file's


def test_columns_say_none_where_nothing_was_recorded_never_zero() -> None:
    minute = [Point(float(T0 + 60 * m), 80.0, 70.0, 90.0, 60, 60) for m in range(10)]
    idle = [Point(float(T0 + 1200 + 60 * m), 0.0, 0.0, 0.0, 60, 60) for m in range(10)]
    cols = columns(minute + idle, T0, T0 + 1800, 3)  # 10 min a column
    assert cols == (80.0, None, 0.0)  # busy, unrecorded, idle (recorded 0 %)
    # A column narrower than a minute still shows the minute that covers it.
    assert columns(minute[:1], T0, T0 + 60, 4) == (80.0,) * 4
    # Weighted by samples: a minute of 30 samples at 100 and one of 10 at 0.
    mixed = [Point(float(T0), 100.0, 100.0, 100.0, 30, 60),
             Point(float(T0 + 60), 0.0, 0.0, 0.0, 10, 60)]
    assert columns(mixed, T0, T0 + 120, 1) == (75.0,)
    assert columns(minute, T0, T0, 5) == () and columns(minute, T0, T0 + 60, 0) == ()


def test_thinned_keeps_one_point_per_column_and_its_extremes() -> None:
    raw = [Point(float(T0 + s), float(s % 7), float(s % 7), float(s % 7), 1, 1)
           for s in range(700)]
    thin = thinned(raw, T0, T0 + 700, 7)
    assert len(thin) == 7
    assert all(p.lo == 0.0 and p.hi == 6.0 and p.n == 100 for p in thin)
    assert thin[0].t == T0 and thin[0].span_s == 100
    gap = raw[:100] + raw[600:]  # nothing recorded in between: no point, not a zero
    assert [p.t for p in thinned(gap, T0, T0 + 700, 7)] == [T0, T0 + 600]
    assert Recorded(0, 1).gpu(0, "util") == ()
