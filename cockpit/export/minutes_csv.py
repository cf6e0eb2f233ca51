"""The flight recording's minutes in the export: the format of ``data/telemetry/minutes.csv``
and its check in verify-export (issue 27).

This module owns the format, the rules every row obeys (:class:`MinuteRows`, one
row after another in constant memory: the export writes only rows that pass them, so
an export never fails because the recording is bad) and the "telemetry minutes"
check of verify-export (:func:`minutes_check`). The writer is
:mod:`cockpit.export.minutes_export`.

The file (UTF-8, lines ending in LF, CSV quoting only where a field needs it)::

    source,key,metric,minute_utc,n,min,mean,max
    gpu,0,util,2026-12-02T10:00:00Z,60,0.0,41.25,97.0

- ``source`` ``gpu`` (``key`` its index: ``0``, ``1``...), ``host`` (``key`` empty) or
  ``disk`` (``key`` its path, at most :data:`MAX_KEY_CHARS` characters, no control
  character); ``metric`` one of the source's: GPU ``util`` (%), ``mem_used``
  (bytes), ``power`` (W), ``temp`` (°C), ``sm_clock``, ``mem_clock`` (MHz),
  ``throttled`` (0/1); host ``cpu_percent`` (%), ``mem_used`` (bytes); disk ``free``
  (bytes);
- ``minute_utc`` the minute's start (``YYYY-MM-DDTHH:MM:00Z``): the samples of
  [that minute, the next);
- ``n`` how many samples the minute holds (a positive integer); ``min``, ``mean``,
  ``max`` of those samples, finite numbers written as Python's ``repr`` of a float
  (they read back to the very same float). The mean is an average computed by
  SQLite: it may fall outside [min, max] by rounding, by at most :data:`MEAN_SLACK`
  of their magnitude, never more.

One row per series per minute, every row of a series together and its minutes
strictly increasing. At most :data:`MAX_ROWS` rows (72 h of 8 GPUs at 9 series each
is about 311,000) and :data:`MAX_SERIES` series. Only the minute aggregates are
exported, never the raw seconds. ``data/manifest.json`` declares the file under
``telemetry_minutes``: its path, rows, series, first and last minute, and, when rows
were left out (or there is no file), ``complete: false`` and the reason.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from cockpit.export.export_checks import Check, bag_member
from cockpit.telemetry.flight import DISK_METRICS, GPU_METRICS, HOST_METRICS

MINUTES_PATH = "data/telemetry/minutes.csv"
MINUTES_FORMAT = "cockpit-minutes/1"
MANIFEST_KEY = "telemetry_minutes"
COLUMNS = ("source", "key", "metric", "minute_utc", "n", "min", "mean", "max")
HEADER = ",".join(COLUMNS) + "\n"
METRICS = {"gpu": GPU_METRICS, "host": HOST_METRICS, "disk": DISK_METRICS}
MAX_ROWS = 2_000_000  # ~170 MB: 72 h x 8 GPUs (~311k rows) six times over
MAX_SERIES = 4096
MAX_KEY_CHARS = 512
MAX_LINE_BYTES = 4096  # a row is under 200 bytes but for a disk's path
MEAN_SLACK = 1e-9  # SQLite's AVG rounds: a mean a few ulps past min or max is honest
MAX_FAILURES = 20  # named per file; the rest counted

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_EPOCH_DAY = _EPOCH.date().toordinal()
_MINUTE = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):00Z")
_GPU_KEY = re.compile(r"0|[1-9][0-9]{0,3}")
_INT = re.compile(r"[1-9][0-9]{0,18}")
_QUOTED = re.compile(r'[,"\r\n]')  # a field holding one of these is quoted


def minute_text(t: float) -> str | None:
    """The ``minute_utc`` of a minute starting ``t`` seconds after the epoch; None when it
    is not a whole minute a calendar can name."""
    if not math.isfinite(t) or t % 60:
        return None
    try:
        d = _EPOCH + timedelta(seconds=t)
    except OverflowError:
        return None
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:00Z"


def minute_of(text: str) -> int | None:
    """Minutes since the epoch of a ``minute_utc`` text, or None when it is not one."""
    match = _MINUTE.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute = (int(g) for g in match.groups())
    try:
        days = date(year, month, day).toordinal() - _EPOCH_DAY
    except ValueError:
        return None
    return days * 1440 + hour * 60 + minute if hour < 24 and minute < 60 else None


def number_text(value: float) -> str:
    return repr(float(value))


def csv_line(fields: list[str]) -> str:
    """One row as the file holds it (the writer's and the check's one spelling)."""
    if not any(map(_QUOTED.search, fields)):
        return ",".join(fields) + "\n"  # what csv's writer writes, without its cost
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(fields)
    return out.getvalue()


def _series_problem(source: str, key: str, metric: str) -> str | None:
    if source not in METRICS:
        return f"source {source[:40]!r} is not gpu, host or disk"
    if metric not in METRICS[source]:
        return f"metric {metric[:40]!r} is not a {source} metric"
    if source == "gpu":
        return None if _GPU_KEY.fullmatch(key) else f"GPU key {key!r} is not a GPU index"
    if source == "host":
        return None if key == "" else f"host key {key!r} is not empty"
    if not key or len(key) > MAX_KEY_CHARS:
        return f"disk key of {len(key)} characters (1 to {MAX_KEY_CHARS})"
    if any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in key):
        return "disk key holds a control character"
    return None


def _number(text: str, column: str) -> tuple[float | None, str | None]:
    try:
        value = float(text)
    except ValueError:
        return None, f"{column} {text[:40]!r} is not a number"
    if not math.isfinite(value):
        return None, f"{column} {text[:40]!r} is not a finite number"
    if number_text(value) != text:
        return None, f"{column} {text[:40]!r} is not written as repr of a float"
    return value, None


def _values_problem(fields: list[str]) -> str | None:
    """What is wrong with n, min, mean and max, or None."""
    if not _INT.fullmatch(fields[4]):
        return f"n {fields[4][:40]!r} is not a positive integer"
    values = []
    for column, text in zip(COLUMNS[5:], fields[5:], strict=True):
        value, problem = _number(text, column)
        if problem or value is None:
            return problem
        values.append(value)
    low, mean, high = values
    if low > high:
        return f"min {low!r} is above max {high!r}"
    slack = MEAN_SLACK * max(abs(low), abs(high))
    if not low - slack <= mean <= high + slack:
        return f"mean {mean!r} is outside [min {low!r}, max {high!r}]"
    return None


@dataclass
class MinuteRows:
    """The rules of the rows, applied one row after another (constant memory but the
    names of the series seen, at most ``max_series``); ``check`` counts a good row."""

    max_rows: int = MAX_ROWS
    max_series: int = MAX_SERIES
    rows: int = 0
    first: int | None = None  # minutes since the epoch
    last: int | None = None
    _seen: set[tuple[str, str, str]] = field(default_factory=set)
    _current: tuple[str, str, str] | None = None
    _minute: int = 0

    @property
    def series(self) -> int:
        return len(self._seen)

    @property
    def full(self) -> bool:
        return self.rows >= self.max_rows

    def check(self, fields: list[str]) -> str | None:
        """None for a good row (counted), else what is wrong with it (nothing counted)."""
        if len(fields) != len(COLUMNS):
            return f"{len(fields)} fields, not {len(COLUMNS)}"
        series = (fields[0], fields[1], fields[2])
        new = series != self._current  # a series' name is checked once, where it begins
        if new:
            problem = _series_problem(*series)
            if problem:
                return problem
            if series in self._seen:
                return f"series {'/'.join(series)[:200]} appears again after another " \
                       "series began"
            if len(self._seen) >= self.max_series:
                return f"more than {self.max_series} series"
        problem = _values_problem(fields)
        if problem:
            return problem
        minute = minute_of(fields[3])
        if minute is None:
            return f"minute_utc {fields[3][:40]!r} is not a minute (YYYY-MM-DDTHH:MM:00Z)"
        if not new and minute <= self._minute:
            return f"minute {fields[3]} is not after the series' previous minute"
        if self.full:
            return f"more than {self.max_rows} rows"
        self._seen.add(series)
        self._current, self._minute = series, minute
        self.rows += 1
        self.first = minute if self.first is None else min(self.first, minute)
        self.last = minute if self.last is None else max(self.last, minute)
        return None


def scan_minutes(path: Path, rows: MinuteRows) -> list[str]:
    """Every problem of the file at ``path`` (at most :data:`MAX_FAILURES`, each with its
    line), its good rows counted in ``rows``; read a line at a time."""
    failures: list[str] = []

    def fail(line: int, why: str) -> bool:
        failures.append(f"{MINUTES_PATH} line {line}: {why}")
        return len(failures) >= MAX_FAILURES

    with open(path, "rb") as handle:
        if handle.readline(len(HEADER) + 1) != HEADER.encode():
            return [f"{MINUTES_PATH} line 1: the header is not exactly {HEADER.strip()!r}"]
        number = 1
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            number += 1
            if rows.full:
                fail(number, f"more than {rows.max_rows} rows (the format's bound)")
                break
            if not raw.endswith(b"\n"):
                why = "longer than 4096 bytes" if len(raw) > MAX_LINE_BYTES else \
                    "the last line does not end with a line break"
                fail(number, why)
                break
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                if fail(number, "not UTF-8"):
                    break
                continue
            fields = next(csv.reader([text[:-1]]), [])
            problem = rows.check(fields)
            if problem is None and csv_line(fields) != text:
                problem = "not written as the export writes a row (quoting, spaces)"
            if problem and fail(number, problem):
                break
    return failures


def minutes_check(bag: Path, manifest: dict[str, Any], *, max_rows: int = MAX_ROWS) -> Check:
    """verify-export's "telemetry minutes": the file the manifest declares, row by row,
    or the reason it declares for there being none."""
    name = "telemetry minutes"
    entry = manifest.get(MANIFEST_KEY)
    present = os.path.lexists(bag / MINUTES_PATH)
    if not isinstance(entry, dict):
        if present:
            return Check(name, False, (f"{MINUTES_PATH} is in the bag but data/manifest.json "
                                       f"does not declare it ({MANIFEST_KEY})",))
        return Check(name, True, warnings=(
            f"data/manifest.json says nothing of the flight recording's minutes ({MANIFEST_KEY}):"
            " an export from before the recorder",), detail="not declared")
    reason = entry.get("reason")
    reason_text = reason.strip() if isinstance(reason, str) else ""
    if entry.get("path") is None:
        failures = [] if reason_text else [f"data/manifest.json declares no {MINUTES_PATH} "
                                           "without saying why"]
        if present:
            failures.append(f"{MINUTES_PATH} is in the bag but data/manifest.json says it "
                            "is not")
        return Check(name, not failures, tuple(failures),
                     (f"no telemetry minutes in this export: {reason_text[:500]}",),
                     "not in this export")
    if entry.get("path") != MINUTES_PATH:
        return Check(name, False, (f"data/manifest.json declares the minutes at "
                                   f"{str(entry.get('path'))[:200]!r}, not {MINUTES_PATH}",))
    target = bag_member(bag, MINUTES_PATH)
    if target is None or not target.is_file():
        return Check(name, False, (f"{MINUTES_PATH}, declared in data/manifest.json, is not "
                                   "a file of the bag",))
    rows = MinuteRows(max_rows=max_rows)
    failures = scan_minutes(target, rows)
    declared = entry.get("rows")
    if not failures and (isinstance(declared, bool) or declared != rows.rows):
        failures.append(f"{MINUTES_PATH} holds {rows.rows} rows; data/manifest.json declares "
                        f"{str(declared)[:40]}")
    warnings: tuple[str, ...] = ()
    if entry.get("complete") is not True:
        warnings = (f"{MINUTES_PATH} does not hold every minute of the recording: "
                    f"{reason_text[:500] or 'no reason given'}",)
    detail = f"{rows.rows} minute rows of {rows.series} series"
    if rows.first is not None and rows.last is not None:
        detail += f", {minute_text(rows.first * 60.0)} to {minute_text(rows.last * 60.0)}"
    return Check(name, not failures, tuple(failures), warnings, detail)
