"""Bounded telemetry history for sparklines and trends: the cockpit's one history.

This module owns the series buffers; the TUI's GPU sparklines read them (one
``TelemetryHistory`` per app, fed each snapshot) and ``bench/telemetry_bench.py``
measures them. Each series keeps two fixed-size
float32 rings: the last `fine_points` samples at full rate (600 = 10 minutes
at 1 Hz) and the last `coarse_points` one-minute means (4,320 = 72 hours).
Everything is allocated up front, so memory stays flat however long the
cockpit runs: about 20 KB per series, well under 1 MB for 8 GPUs. A missing
value (not supported, lost GPU) is stored as NaN so time stays aligned;
readers drop NaN by default. float32 is exact enough for display: memory in
bytes keeps ~7 significant digits.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

from cockpit.telemetry.model import GpuReading, HostInfo

GPU_SERIES: tuple[str, ...] = ("util", "mem_used", "power", "temp")
HOST_SERIES: tuple[str, ...] = ("cpu", "mem_used")

_NAN = float("nan")


class Ring:
    """A fixed-capacity ring of float32 values, oldest overwritten first."""

    __slots__ = ("_buf", "_cap", "_head", "_count")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._cap = capacity
        self._buf = array("f", bytes(4 * capacity))
        self._head = 0  # next write position
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def capacity(self) -> int:
        return self._cap

    @property
    def nbytes(self) -> int:
        return self._buf.itemsize * len(self._buf)

    def push(self, value: float) -> None:
        self._buf[self._head] = value
        self._head = (self._head + 1) % self._cap
        if self._count < self._cap:
            self._count += 1

    def extend(self, values: Sequence[float]) -> None:
        n = len(values)
        if n >= self._cap:
            self._buf[:] = array("f", values[n - self._cap :])
            self._head = 0
            self._count = self._cap
            return
        vals = array("f", values)
        first = min(n, self._cap - self._head)
        self._buf[self._head : self._head + first] = vals[:first]
        if first < n:
            self._buf[: n - first] = vals[first:]
        self._head = (self._head + n) % self._cap
        self._count = min(self._cap, self._count + n)

    def last(self, n: int) -> list[float]:
        """Up to n newest values, oldest first."""
        n = max(0, min(n, self._count))
        if n == 0:
            return []
        start = (self._head - n) % self._cap
        if start + n <= self._cap:
            return self._buf[start : start + n].tolist()
        return self._buf[start:].tolist() + self._buf[: self._head].tolist()


class Series:
    """Full-rate recent samples plus per-bucket means of the longer past."""

    __slots__ = ("fine", "coarse", "bucket_s", "pushed", "_bucket", "_sum", "_n")

    def __init__(
        self, fine_points: int = 600, coarse_points: int = 72 * 60, bucket_s: float = 60.0
    ) -> None:
        self.fine = Ring(fine_points)
        self.coarse = Ring(coarse_points)
        self.bucket_s = bucket_s
        self.pushed = 0  # samples ever added (missing ones too): the newest one's tick number
        self._bucket: int | None = None
        self._sum = 0.0
        self._n = 0

    @property
    def nbytes(self) -> int:
        return self.fine.nbytes + self.coarse.nbytes

    def push(self, value: float | None, now: float) -> None:
        v = _NAN if value is None else float(value)
        self.fine.push(v)
        self.pushed += 1
        self._enter_bucket(int(now // self.bucket_s))
        if v == v:  # not NaN
            self._sum += v
            self._n += 1

    def extend(self, values: Sequence[float], start: float, step: float) -> None:
        """Bulk-add evenly spaced samples (start, start+step, ...), NaN = missing.

        Same result as pushing them one by one, at a fraction of the cost:
        used to load history and by the memory benchmark.
        """
        n = len(values)
        if n == 0:
            return
        if step <= 0:
            raise ValueError("step must be positive")
        self.pushed += n
        i = 0
        while i < n:
            bucket = int((start + i * step) // self.bucket_s)
            self._enter_bucket(bucket)
            j = math.ceil(((bucket + 1) * self.bucket_s - start) / step)
            j = min(max(j, i + 1), n)
            chunk = values[i:j]
            total = sum(chunk)
            if total != total:  # some NaN in there: count the real ones only
                real = [x for x in chunk if x == x]
                total, count = sum(real), len(real)
            else:
                count = j - i
            self._sum += total
            self._n += count
            i = j
        self.fine.extend(values[max(0, n - self.fine.capacity) :])

    def _enter_bucket(self, bucket: int) -> None:
        if self._bucket is None:
            self._bucket = bucket
            return
        if bucket == self._bucket:
            return
        self.coarse.push(self._sum / self._n if self._n else _NAN)
        # minutes with no sample at all (cockpit asleep) stay visible as gaps
        gap = min(bucket - self._bucket - 1, self.coarse.capacity)
        for _ in range(max(0, gap)):
            self.coarse.push(_NAN)
        self._bucket = bucket
        self._sum = 0.0
        self._n = 0

    def recent(self, n: int, skip_missing: bool = True) -> list[float]:
        vals = self.fine.last(n)
        return [v for v in vals if v == v] if skip_missing else vals

    def buckets(self, n: int, skip_missing: bool = True) -> list[float]:
        """Up to n closed bucket means (one a minute by default), oldest first."""
        vals = self.coarse.last(n)
        return [v for v in vals if v == v] if skip_missing else vals


class TelemetryHistory:
    """Per-GPU series (util, mem_used, power, temp) and host series (cpu, mem_used)."""

    def __init__(
        self, fine_points: int = 600, coarse_points: int = 72 * 60, bucket_s: float = 60.0
    ) -> None:
        self._fine = fine_points
        self._coarse = coarse_points
        self._bucket_s = bucket_s
        self._series: dict[tuple[str, int | None], Series] = {}

    def series(self, name: str, gpu: int | None = None) -> Series:
        """The series for a GPU index (or the host when gpu is None), created on first use."""
        key = (name, gpu)
        s = self._series.get(key)
        if s is None:
            allowed = HOST_SERIES if gpu is None else GPU_SERIES
            if name not in allowed:
                raise KeyError(f"unknown series {name!r} for {'host' if gpu is None else 'GPU'}")
            s = self._series[key] = Series(self._fine, self._coarse, self._bucket_s)
        return s

    def find(self, name: str, gpu: int | None = None) -> Series | None:
        """The series if it was ever recorded, else None (never creates one)."""
        return self._series.get((name, gpu))

    def add(self, reading: GpuReading | None, host: HostInfo | None, now: float) -> None:
        if reading is not None:
            for g in reading.gpus:
                self.series("util", g.index).push(g.util, now)
                self.series("mem_used", g.index).push(g.mem_used, now)
                self.series("power", g.index).push(g.power, now)
                self.series("temp", g.index).push(g.temp, now)
        if host is not None:
            self.series("cpu").push(host.cpu_percent, now)
            self.series("mem_used").push(host.mem_used, now)

    def recent(
        self, series: str, gpu: int | None = None, n: int = 60, *, skip_missing: bool = True
    ) -> list[float]:
        """Up to n newest full-rate points, oldest first ([] if never recorded)."""
        s = self._series.get((series, gpu))
        return s.recent(n, skip_missing) if s is not None else []

    def minutes(
        self, series: str, gpu: int | None = None, n: int = 60, *, skip_missing: bool = True
    ) -> list[float]:
        """Up to n newest one-minute means, oldest first."""
        s = self._series.get((series, gpu))
        return s.buckets(n, skip_missing) if s is not None else []

    def keys(self) -> list[tuple[str, int | None]]:
        return list(self._series)

    @property
    def nbytes(self) -> int:
        """Bytes held by the ring buffers (fixed once every series exists)."""
        return sum(s.nbytes for s in self._series.values())
