"""The flight recording's format: its schema, limits, series keys, the values it
holds and how a value is checked going in and coming out, and what an SQLite error
means for the store (shared by the writer and the reader)."""

from __future__ import annotations

import errno
import functools
import math
import os
import sqlite3
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from cockpit.common.fsutil import SYMLINK_REFUSED
from cockpit.telemetry.model import GpuInfo, HostInfo
from cockpit.telemetry.nvml.vocabulary import ALARMING_THROTTLE

FORMAT = "cockpit-flight-recorder"
VERSION = 1
RAW_KEEP_S = 6 * 3600  # the raw tier's window (seconds of sample time)
BATCH_S = 5.0  # one transaction per this many seconds of samples
MAX_BUFFER = 64  # samples held in memory at most (a flush when it fills)
PRUNE_ROWS = 8192  # raw rows deleted at most per table per transaction
RETRY_S = 60.0  # a paused or refused recorder tries again this often (sample time)
NOTE_S = 900.0  # how long a one-off warning (a store moved aside) stays on screen
BUSY_MS = 50  # how long a write waits for another writer before the batch waits
BACKSTEP_S = 120  # a clock stepping back less than this waits; more restarts the clock
LEAP_S = 120  # sample time ahead of the monotonic clock by more than this: a clock step
MAX_PIDS = 16  # processes kept per GPU per second
MAX_GPUS = 1024  # a GPU index beyond this is not a GPU
KEEP_ASIDE = 3  # unreadable stores kept aside
WAL_LIMIT = 4 * 2**20  # the WAL is truncated to this after a checkpoint
MAX_READ_ROWS = 1_000_000  # what one read returns at most
QUEUE_BATCHES = 8  # batches handed to the writer thread and not written yet, at most
HANDOFF_WAIT_S = 1.0  # how long a hand-off waits for room in that queue
CLOSE_WAIT_S = 10.0  # how long a close waits for the writer

GPU_METRICS = ("util", "mem_used", "power", "temp", "sm_clock", "mem_clock", "throttled")
HOST_METRICS = ("cpu_percent", "mem_used")
DISK_METRICS = ("free",)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT)",
    "CREATE TABLE IF NOT EXISTS series(id INTEGER PRIMARY KEY, source TEXT NOT NULL,"
    " key TEXT NOT NULL, metric TEXT NOT NULL, UNIQUE(source, key, metric))",
    "CREATE TABLE IF NOT EXISTS gpu_raw(t INTEGER NOT NULL, gpu INTEGER NOT NULL,"
    " util REAL, mem_used INTEGER, power REAL, temp REAL, sm_clock INTEGER,"
    " mem_clock INTEGER, throttle TEXT, throttled INTEGER, pids TEXT,"
    " PRIMARY KEY (t, gpu)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS host_raw(t INTEGER PRIMARY KEY, cpu_percent REAL,"
    " mem_used INTEGER)",
    "CREATE TABLE IF NOT EXISTS disk_raw(t INTEGER NOT NULL, disk INTEGER NOT NULL,"
    " free INTEGER, PRIMARY KEY (t, disk)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS minute(series INTEGER NOT NULL, m INTEGER NOT NULL,"
    " n INTEGER NOT NULL, lo REAL, mean REAL, hi REAL, PRIMARY KEY (series, m))"
    " WITHOUT ROWID",
)
_TABLES = frozenset({"meta", "series", "gpu_raw", "host_raw", "disk_raw", "minute"})
_RAW_TABLES = ("gpu_raw", "host_raw", "disk_raw")
_INSERT_GPU = "INSERT OR IGNORE INTO gpu_raw VALUES (?,?,?,?,?,?,?,?,?,?,?)"
_INSERT_HOST = "INSERT OR IGNORE INTO host_raw VALUES (?,?,?)"
_INSERT_DISK = "INSERT OR IGNORE INTO disk_raw VALUES (?,?,?)"
_INSERT_MINUTE = "INSERT OR REPLACE INTO minute VALUES (?,?,?,?,?,?)"


def _aggregates(columns: Sequence[str]) -> str:
    return ", ".join(f"COUNT({c}), MIN({c}), AVG({c}), MAX({c})" for c in columns)


_AGG_GPU = (f"SELECT gpu, t / 60, {_aggregates(GPU_METRICS)} FROM gpu_raw"
            " WHERE t >= ? AND t < ? GROUP BY gpu, t / 60")
_AGG_HOST = (f"SELECT t / 60, {_aggregates(HOST_METRICS)} FROM host_raw"
             " WHERE t >= ? AND t < ? GROUP BY t / 60")
_AGG_DISK = (f"SELECT disk, t / 60, {_aggregates(DISK_METRICS)} FROM disk_raw"
             " WHERE t >= ? AND t < ? GROUP BY disk, t / 60")

# SQLite's primary result codes (``sqlite_errorcode & 0xff``).
_BUSY, _LOCKED, _CORRUPT, _FULL, _FORMAT, _NOTADB = 5, 6, 11, 13, 24, 26

Number = int | float
Row = tuple[Any, ...]


class SeriesKey(NamedTuple):
    """One recorded series: ``source`` 'gpu' (``key`` its index), 'host' (``key`` '')
    or 'disk' (``key`` its path), and the ``metric``."""

    source: str
    key: str
    metric: str


def gpu_series(index: int, metric: str) -> SeriesKey:
    if metric not in GPU_METRICS:
        raise ValueError(f"not a GPU metric: {metric!r} (one of {', '.join(GPU_METRICS)})")
    return SeriesKey("gpu", str(index), metric)


def host_series(metric: str) -> SeriesKey:
    if metric not in HOST_METRICS:
        raise ValueError(f"not a host metric: {metric!r} (one of {', '.join(HOST_METRICS)})")
    return SeriesKey("host", "", metric)


def disk_series(path: str) -> SeriesKey:
    return SeriesKey("disk", path, "free")


class Point(NamedTuple):
    """A raw second (``span_s`` 1, ``n`` 1, lo = value = hi) or a minute's aggregate
    (``span_s`` 60: ``value`` the mean, ``t`` the minute's start)."""

    t: float
    value: float
    lo: float
    hi: float
    n: int
    span_s: int


class Totals(NamedTuple):
    """One series over the whole campaign (every aggregated minute)."""

    n: int
    lo: float | None
    mean: float | None
    hi: float | None
    first_t: float
    last_t: float


class RecordingUnreadable(Exception):
    """A recording a reader cannot open (none yet, a link, not a recording, corrupt)."""


class _Refused(OSError):
    """The store file is not one the cockpit writes into (a link, not a regular file)."""


class _Foreign(sqlite3.DatabaseError):
    """A database that is not a flight recording (other tables, another version)."""


def _number(value: object) -> Number | None:
    """A finite number (int or float) or None: what a reading may put in a column."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value if -(2**63) < value < 2**63 else None
    return None


def _as_float(value: object) -> float | None:
    """A value read back: a finite number as float, anything else (text a hostile
    process wrote, NULL) None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def _gpu_row(sec: int, gpu: GpuInfo) -> Row | None:
    index = gpu.index
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < MAX_GPUS:
        return None
    throttle: str | None = None
    held = 0
    if gpu.throttle:
        words = [w for w in gpu.throttle if isinstance(w, str)]
        throttle = ",".join(words)[:256] or None
        held = int(any(w in ALARMING_THROTTLE for w in words))
    pids = [str(p.pid) for p in gpu.processes[:MAX_PIDS] if type(p.pid) is int]
    return (sec, index, _number(gpu.util), _number(gpu.mem_used), _number(gpu.power),
            _number(gpu.temp), _number(gpu.sm_clock), _number(gpu.mem_clock), throttle,
            None if gpu.lost else held, ",".join(pids) or None)


def _kind(exc: BaseException) -> str:
    """What an error from SQLite means here: 'corrupt', 'full', 'busy' or 'unwritable'."""
    if isinstance(exc, _Foreign):
        return "corrupt"
    if isinstance(exc, OSError):
        return "full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "unwritable"
    code = getattr(exc, "sqlite_errorcode", None)
    code = code & 0xFF if isinstance(code, int) else None
    text = str(exc).lower()
    if code in (_CORRUPT, _NOTADB, _FORMAT) or "malformed" in text \
            or "not a database" in text:
        return "corrupt"
    if code == _FULL or "is full" in text:
        return "full"
    if code in (_BUSY, _LOCKED) or "locked" in text or "busy" in text:
        return "busy"
    return "unwritable"


def _siblings(path: Path) -> tuple[Path, Path, Path]:
    """The store and the two files SQLite keeps beside it in WAL mode."""
    return path, Path(f"{path}-wal"), Path(f"{path}-shm")


class _Sample(NamedTuple):
    """One tick's readings as the sampler made them (frozen): rows are built later,
    by the writer thread, off the tick."""

    sec: int
    gpus: tuple[GpuInfo, ...]
    host: HostInfo | None


class _Batch(NamedTuple):
    samples: list[_Sample]
    final: bool  # the recorder closes: the open minute is aggregated too
    newest: int | None  # the newest second taken (a final batch may hold none)
    leap: tuple[int, int] | None = None  # the last clock step forward: (at, by seconds)


def _rows(batch: Sequence[_Sample]) -> tuple[list[Row], list[Row], list[tuple[int, str, Any]]]:
    """The raw rows of a batch: GPUs, host, disks (a disk by its path)."""
    gpus: list[Row] = []
    hosts: list[Row] = []
    disks: list[tuple[int, str, Any]] = []
    for sample in batch:
        sec = sample.sec
        for gpu in sample.gpus:
            row = _gpu_row(sec, gpu)
            if row is not None:
                gpus.append(row)
        host = sample.host
        if host is not None:
            hosts.append((sec, _number(host.cpu_percent), _number(host.mem_used)))
            disks.extend((sec, d.path, _number(d.free)) for d in host.disks
                         if isinstance(d.path, str))
    return gpus, hosts, disks


def _series_id(db: sqlite3.Connection, ids: dict[SeriesKey, int],
               key: SeriesKey) -> int:
    found = ids.get(key)
    if found is None:
        db.execute("INSERT OR IGNORE INTO series(source, key, metric) VALUES (?,?,?)", key)
        found = int(db.execute("SELECT id FROM series WHERE source=? AND key=? AND metric=?",
                               key).fetchone()[0])
        ids[key] = found
    return found


def _aggregate(db: sqlite3.Connection, ids: dict[SeriesKey, int],
               first: int, end: int) -> None:
    """Minutes ``first`` to ``end`` (excluded), from their raw rows."""
    lo, hi = first * 60, end * 60
    rows: list[tuple[Any, ...]] = []

    def add(key: SeriesKey, m: int, values: Sequence[Any]) -> None:
        if values[0]:  # a minute with no reading of the series has no row
            rows.append((_series_id(db, ids, key), m, *values))

    for gpu, m, *values in db.execute(_AGG_GPU, (lo, hi)).fetchall():
        for i, metric in enumerate(GPU_METRICS):
            add(SeriesKey("gpu", str(gpu), metric), m, values[4 * i:4 * i + 4])
    for m, *values in db.execute(_AGG_HOST, (lo, hi)).fetchall():
        for i, metric in enumerate(HOST_METRICS):
            add(SeriesKey("host", "", metric), m, values[4 * i:4 * i + 4])
    disks = {v: k for k, v in ids.items() if k.source == "disk"}
    for disk, m, *values in db.execute(_AGG_DISK, (lo, hi)).fetchall():
        key = disks.get(disk)
        if key is None:
            row = db.execute("SELECT source, key, metric FROM series WHERE id=?",
                             (disk,)).fetchone()
            key = SeriesKey(*row) if row else None
        if key is not None:
            add(key, m, values)
    db.executemany(_INSERT_MINUTE, rows)


def _prune(db: sqlite3.Connection, cutoff: int) -> None:
    """Raw rows older than ``cutoff`` (the raw window's start, never past the minutes
    aggregated), whole minutes, a bounded batch per table."""
    for table in _RAW_TABLES:
        oldest = db.execute(f"SELECT t FROM {table} ORDER BY t LIMIT 1").fetchone()
        if oldest is None or oldest[0] >= cutoff:
            continue
        limit = cutoff
        far = None if cutoff - oldest[0] <= 600 else db.execute(  # usually a minute
            f"SELECT t FROM {table} ORDER BY t LIMIT 1 OFFSET ?", (PRUNE_ROWS,)).fetchone()
        if far is not None and far[0] < cutoff:
            limit = far[0] // 60 * 60
            if limit <= oldest[0]:
                limit = far[0]  # a minute of more rows than a batch: part of it
        db.execute(f"DELETE FROM {table} WHERE t < ?", (limit,))


def _int_or_none(text: object) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def _refuse_links(path: Path) -> None:
    """OSError when the store or its WAL files are a symbolic link, a hard link to
    another name, or not a regular file: never followed, never written through."""
    for file in _siblings(path):
        try:
            info = os.lstat(file)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(info.st_mode):
            raise _Refused(errno.ELOOP, SYMLINK_REFUSED, str(file))
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise _Refused(errno.EPERM, "it is not a regular file of its own (a hard link "
                           "or a device), and the cockpit writes only into its own file",
                           str(file))


@functools.cache
def _expected_sql() -> dict[str, str]:
    """What ``sqlite_master`` holds for each table of the schema (as this SQLite writes it)."""
    db = sqlite3.connect(":memory:")
    try:
        for statement in _SCHEMA:
            db.execute(statement)
        return {str(n): str(q) for n, q in
                db.execute("SELECT name, sql FROM sqlite_master WHERE type='table'")}
    finally:
        db.close()


def _check_recording(db: sqlite3.Connection, tables: set[str]) -> None:
    """A database whose tables, their columns and meta say it is a flight recording of
    this version."""
    if not _TABLES <= tables:
        raise _Foreign(f"not a flight recording (tables: {', '.join(sorted(tables)[:6])})")
    found = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type='table'"))
    if any(found.get(name) != sql for name, sql in _expected_sql().items()):
        raise _Foreign("not a flight recording (its tables differ)")
    meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('format', 'version')")
                .fetchall())
    if meta.get("format") != FORMAT or meta.get("version") != str(VERSION):
        raise _Foreign(f"not a flight recording of version {VERSION} "
                       f"(format {meta.get('format')!r}, version {meta.get('version')!r})")


def _raw_table(source: str) -> str:
    tables = {"gpu": "gpu_raw", "host": "host_raw", "disk": "disk_raw"}
    if source not in tables:
        raise ValueError(f"not a source: {source!r} (gpu, host or disk)")
    return tables[source]


def _minute_point(m: object, n: object, lo: object, mean: object, hi: object) -> Point | None:
    value, low, high = _as_float(mean), _as_float(lo), _as_float(hi)
    if not isinstance(m, int) or not isinstance(n, int) or n <= 0 or value is None \
            or low is None or high is None:
        return None
    return Point(m * 60.0, value, low, high, n, 60)
