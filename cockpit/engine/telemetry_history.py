"""Recorded telemetry for the faces: what the flight recording holds between two times.

The faces never open SQLite: they ask :meth:`Engine.telemetry_history
<cockpit.engine.facade.Engine.telemetry_history>`, which reads the campaign's
``.cockpit/recorder.sqlite`` through :class:`~cockpit.telemetry.flight.RecordingReader`
(read-only, every value checked) and hands back frozen points: a cockpit opened on
day 2 shows day 1. A missing or unreadable recording is an empty answer that says
why (:attr:`Recorded.state`), never an error. The pure :func:`columns` puts points on
a time axis of N columns, None where nothing was recorded: unknown is never drawn as
idle or busy. :func:`thinned` keeps a long raw series to one point per column.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cockpit.telemetry.flight import (
    GPU_METRICS,
    HOST_METRICS,
    Point,
    RecordingReader,
    RecordingUnreadable,
    SeriesKey,
    gpu_series,
    host_series,
)

MAX_GPUS = 64  # GPU indices read from one recording (a hostile file may name thousands)


@dataclass(frozen=True)
class Recorded:
    """What was read between ``t0`` and ``t1`` (seconds since the epoch).

    ``state``: "read"; "absent" (no recording yet: nothing was ever recorded here);
    "unreadable" (``reason`` says why). ``gpus``: the GPU indices the recording holds."""

    t0: float
    t1: float
    state: str = "read"
    reason: str = ""
    gpus: tuple[int, ...] = ()
    series: Mapping[SeriesKey, tuple[Point, ...]] = field(default_factory=dict)

    def gpu(self, index: int, metric: str) -> tuple[Point, ...]:
        return self.series.get(SeriesKey("gpu", str(index), metric), ())

    def host(self, metric: str) -> tuple[Point, ...]:
        return self.series.get(SeriesKey("host", "", metric), ())


def read_recorded(path: Path, t0: float, t1: float, *, gpu: Sequence[str] = ("util",),
                  host: Sequence[str] = (), raw: bool = False, width: int | None = None,
                  gpus: Iterable[int] = ()) -> Recorded:
    """``gpu`` metrics of every recorded GPU (those with a series, and ``gpus``: the
    live ones, whose first minute may not be aggregated yet) and ``host`` metrics
    between ``t0`` and ``t1``: minute aggregates, or with ``raw`` the raw seconds where
    still kept; with ``width``, at most one point per column (:func:`thinned`). Never
    raises on the file: a missing or bad recording is an empty :class:`Recorded` with
    its reason."""
    for metric in gpu:
        if metric not in GPU_METRICS:
            raise ValueError(f"not a GPU metric: {metric!r}")
    for metric in host:
        if metric not in HOST_METRICS:
            raise ValueError(f"not a host metric: {metric!r}")
    try:
        reader = RecordingReader.open(path)
    except RecordingUnreadable as exc:
        state = "unreadable" if os.path.lexists(path) else "absent"
        return Recorded(t0, t1, state, str(exc))
    with reader:
        try:
            found = tuple(reader.gpu_indices()[:MAX_GPUS])
            indices = tuple(sorted({*found, *(i for i in gpus if 0 <= i < 10_000)}))
            keys = [gpu_series(i, m) for i in indices[:MAX_GPUS] for m in gpu] + \
                [host_series(m) for m in host]
            series: dict[SeriesKey, tuple[Point, ...]] = {}
            for key in keys:
                points = reader.series(key, t0, t1) if raw else reader.minutes(key, t0, t1)
                if width is not None:
                    points = thinned(points, t0, t1, width)
                series[key] = tuple(points)
        except RecordingUnreadable as exc:
            return Recorded(t0, t1, "unreadable", str(exc))
    return Recorded(t0, t1, "read", "", found, series)


def _span(point: Point, t0: float, step: float, width: int) -> range:
    """The columns a point's time span [t, t + span_s) overlaps (none if outside)."""
    first = math.floor((point.t - t0) / step)
    last = math.ceil((point.t + max(point.span_s, 1) - t0) / step) - 1
    return range(max(first, 0), min(last, width - 1) + 1)


def columns(points: Sequence[Point], t0: float, t1: float,
            width: int) -> tuple[float | None, ...]:
    """One value per column of ``[t0, t1)`` cut in ``width``: the mean of the samples
    whose span overlaps the column (each point weighted by its samples), None where no
    sample was recorded."""
    if width <= 0 or t1 <= t0:
        return ()
    step = (t1 - t0) / width
    sums = [0.0] * width
    counts = [0] * width
    for p in points:
        weight = max(p.n, 1)
        for c in _span(p, t0, step, width):
            sums[c] += p.value * weight
            counts[c] += weight
    return tuple(s / n if n else None for s, n in zip(sums, counts, strict=True))


def thinned(points: Sequence[Point], t0: float, t1: float, width: int) -> list[Point]:
    """At most one point per column of ``[t0, t1)`` cut in ``width``: the column's
    samples merged (mean weighted by samples, lowest, highest); a column with none
    stays empty (a gap, not a zero)."""
    if width <= 0 or t1 <= t0 or len(points) <= width:
        return list(points)
    step = (t1 - t0) / width
    groups: dict[int, list[Point]] = {}
    for p in points:
        groups.setdefault(min(max(math.floor((p.t - t0) / step), 0), width - 1), []).append(p)
    out = []
    for c in sorted(groups):
        group = groups[c]
        n = sum(max(p.n, 1) for p in group)
        mean = sum(p.value * max(p.n, 1) for p in group) / n
        end = max(p.t + p.span_s for p in group)
        out.append(Point(group[0].t, mean, min(p.lo for p in group),
                         max(p.hi for p in group), n, int(end - group[0].t)))
    return out
