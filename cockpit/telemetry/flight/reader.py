"""The one way to read a flight recording back: read-only, every value checked."""

from __future__ import annotations

import math
import os
import sqlite3
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from cockpit.telemetry.flight.store import (
    BUSY_MS,
    GPU_METRICS,
    HOST_METRICS,
    MAX_READ_ROWS,
    Point,
    RecordingUnreadable,
    SeriesKey,
    Totals,
    _as_float,
    _check_recording,
    _minute_point,
    _raw_table,
    _refuse_links,
)


class RecordingReader:
    """A read-only view of a recording (``mode=ro``): a series between two times (raw
    where kept, else minute aggregates), the minutes of the whole campaign, and totals.
    Every value read is checked: a number, or the row is skipped."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db = db
        self.path = path

    @classmethod
    def open(cls, path: Path) -> RecordingReader:
        """Open ``path`` read-only; :class:`RecordingUnreadable` says why it cannot be."""
        path = Path(os.path.abspath(path))
        if not os.path.lexists(path):
            raise RecordingUnreadable(f"no recording yet at {path}")
        try:
            _refuse_links(path)
        except OSError as exc:
            raise RecordingUnreadable(f"{path}: {exc.strerror}") from None
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise RecordingUnreadable(f"{path}: not a regular file")
        try:
            db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True,
                                 timeout=BUSY_MS / 1000 * 4, check_same_thread=False)
        except sqlite3.Error as exc:
            raise RecordingUnreadable(f"{path}: {exc}") from None
        try:
            db.execute("PRAGMA query_only=1")
            tables = {str(r[0]) for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
            _check_recording(db, tables)
        except sqlite3.Error as exc:
            db.close()
            raise RecordingUnreadable(f"{path}: {exc}") from None
        return cls(db, path)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._db.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise RecordingUnreadable(f"{self.path}: {exc}") from None

    def series_keys(self) -> list[SeriesKey]:
        return [SeriesKey(str(s), str(k), str(m)) for s, k, m in self._query(
            "SELECT source, key, metric FROM series ORDER BY source, key, metric")]

    def gpu_indices(self) -> list[int]:
        """The GPUs the recording holds: those with a series (aggregated) and those in
        the raw tier (a first minute not aggregated yet)."""
        found = {int(k.key) for k in self.series_keys()
                 if k.source == "gpu" and k.key.isdigit() and len(k.key) <= 4}
        found |= {int(g) for (g,) in self._query("SELECT DISTINCT gpu FROM gpu_raw")
                  if isinstance(g, int) and 0 <= g < 10_000}
        return sorted(found)

    def _id(self, key: SeriesKey) -> int | None:
        rows = self._query("SELECT id FROM series WHERE source=? AND key=? AND metric=?", key)
        return int(rows[0][0]) if rows and isinstance(rows[0][0], int) else None

    def raw_span(self, source: str = "gpu") -> tuple[int, int] | None:
        """The oldest and newest second of the raw tier of ``source`` ('gpu', 'host',
        'disk'), or None when it holds nothing."""
        table = _raw_table(source)
        first = self._query(f"SELECT t FROM {table} ORDER BY t LIMIT 1")
        last = self._query(f"SELECT t FROM {table} ORDER BY t DESC LIMIT 1")
        if not first or not last or not isinstance(first[0][0], int) \
                or not isinstance(last[0][0], int):
            return None
        return int(first[0][0]), int(last[0][0])

    def series(self, key: SeriesKey, t0: float, t1: float) -> list[Point]:
        """``key`` between ``t0`` and ``t1`` (seconds since the epoch, both included),
        oldest first: the minute aggregates up to where the raw tier begins, then each
        raw second."""
        span = self.raw_span(key.source)
        raw_from = span[0] if span else math.inf
        points = [p for p in self.minutes(key, t0, t1) if p.t + 60 <= raw_from]
        if span is None:
            return points
        lo = max(t0, raw_from)
        if key.source == "gpu":
            if key.metric not in GPU_METRICS or not key.key.isdigit():
                return points
            rows = self._query(f"SELECT t, {key.metric} FROM gpu_raw WHERE t >= ? AND t <= ?"
                               " AND gpu = ? ORDER BY t LIMIT ?",
                               (lo, t1, int(key.key), MAX_READ_ROWS))
        elif key.source == "host":
            if key.metric not in HOST_METRICS:
                return points
            rows = self._query(f"SELECT t, {key.metric} FROM host_raw WHERE t >= ? AND t <= ?"
                               " ORDER BY t LIMIT ?", (lo, t1, MAX_READ_ROWS))
        else:
            sid = self._id(key)
            if sid is None:
                return points
            rows = self._query("SELECT t, free FROM disk_raw WHERE t >= ? AND t <= ?"
                               " AND disk = ? ORDER BY t LIMIT ?", (lo, t1, sid, MAX_READ_ROWS))
        for t, raw in rows:
            value = _as_float(raw)
            if value is not None and isinstance(t, int):
                points.append(Point(float(t), value, value, value, 1, 1))
        return points

    def minutes(self, key: SeriesKey, t0: float | None = None,
                t1: float | None = None) -> list[Point]:
        """The minute aggregates of ``key`` (those overlapping ``t0``..``t1``; None: the
        whole campaign), oldest first."""
        sid = self._id(key)
        if sid is None:
            return []
        m0 = math.floor(t0 / 60) if t0 is not None else -(2**62)
        m1 = math.floor(t1 / 60) if t1 is not None else 2**62
        out = []
        for m, n, lo, mean, hi in self._query(
                "SELECT m, n, lo, mean, hi FROM minute WHERE series = ? AND m >= ? AND m <= ?"
                " ORDER BY m LIMIT ?", (sid, m0, m1, MAX_READ_ROWS)):
            point = _minute_point(m, n, lo, mean, hi)
            if point is not None:
                out.append(point)
        return out

    def aggregates(self) -> Iterator[tuple[SeriesKey, Point]]:
        """Every minute aggregate of the whole campaign, series by series."""
        keys = {int(i): SeriesKey(str(s), str(k), str(m)) for i, s, k, m in self._query(
            "SELECT id, source, key, metric FROM series") if isinstance(i, int)}
        try:
            cursor = self._db.execute("SELECT series, m, n, lo, mean, hi FROM minute"
                                      " ORDER BY series, m")
            for sid, m, n, lo, mean, hi in cursor:
                key = keys.get(sid)
                point = _minute_point(m, n, lo, mean, hi)
                if key is not None and point is not None:
                    yield key, point
        except sqlite3.Error as exc:
            raise RecordingUnreadable(f"{self.path}: {exc}") from None

    def totals(self) -> dict[SeriesKey, Totals]:
        """Each series over the whole campaign: its samples, lowest, mean, highest, and
        its first and last minute's start."""
        out: dict[SeriesKey, Totals] = {}
        for source, key, metric, n, lo, total, hi, first, last in self._query(
                "SELECT s.source, s.key, s.metric, SUM(a.n), MIN(a.lo), SUM(a.mean * a.n),"
                " MAX(a.hi), MIN(a.m), MAX(a.m) FROM minute AS a JOIN series AS s"
                " ON s.id = a.series GROUP BY a.series"):
            if not isinstance(n, int) or n <= 0 or not isinstance(first, int) \
                    or not isinstance(last, int):
                continue
            mean = _as_float(total)
            out[SeriesKey(str(source), str(key), str(metric))] = Totals(
                n, _as_float(lo), None if mean is None else mean / n, _as_float(hi),
                first * 60.0, last * 60.0)
        return out
