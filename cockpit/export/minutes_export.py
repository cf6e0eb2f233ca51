"""The flight recording's minute aggregates into the export (issue 27).

This module owns ``add_minutes``: every minute aggregate of the campaign's recording
(``.cockpit/recorder.sqlite``, read through
:class:`~cockpit.telemetry.flight.RecordingReader`, read-only) into
``data/telemetry/minutes.csv`` (the format: :mod:`cockpit.export.minutes_csv`), a
row at a time: never the whole recording in memory, never the raw seconds.

An export never fails because of the recording. No recording (telemetry never
sampled), one that cannot be read, or one with no complete minute yet: no file, and
the reason in ``data/manifest.json`` (``telemetry_minutes``), ``bag-info.txt``
(``Telemetry-Minutes``) and the export's warnings. A row that breaks the format's
rules (a hostile or damaged recording), rows past :data:`MAX_ROWS`, or a read that
fails half-way: the rows that pass are exported, the rest counted, and the file is
declared incomplete with the reason.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.export.minutes_csv import (
    HEADER,
    MAX_ROWS,
    MINUTES_FORMAT,
    MINUTES_PATH,
    MinuteRows,
    csv_line,
    minute_text,
    number_text,
)
from cockpit.export.payload import Payload
from cockpit.journal.paths import CampaignFiles
from cockpit.telemetry.flight import RecordingReader, RecordingUnreadable


@dataclass
class MinutesExport:
    """What ``add_minutes`` put in the bag (``path`` None: no file, ``reason`` why)."""

    path: str | None = None
    rows: int = 0
    series: int = 0
    first_minute: str | None = None
    last_minute: str | None = None
    skipped_rows: int = 0
    first_skip: str | None = None  # why the first row left out was
    stopped: str | None = None  # why the rows end early (the bound, a failed read)
    reason: str | None = None

    @property
    def complete(self) -> bool:
        return self.path is not None and not self.skipped_rows and self.stopped is None

    def as_json(self) -> dict[str, Any]:
        """manifest.json's ``telemetry_minutes``."""
        return {"path": self.path, "format": MINUTES_FORMAT if self.path else None,
                "rows": self.rows, "series": self.series,
                "first_minute": self.first_minute, "last_minute": self.last_minute,
                "complete": self.complete, "skipped_rows": self.skipped_rows,
                "reason": self.reason}

    def info(self) -> str:
        """bag-info.txt's ``Telemetry-Minutes``."""
        if self.path is None:
            return f"none: {self.reason}"
        return f"{self.rows} rows in {self.path}" + ("" if self.complete
                                                     else f" (incomplete: {self.reason})")


def add_minutes(payload: Payload, campaign: Campaign, warnings: list[str], *,
                max_rows: int = MAX_ROWS) -> MinutesExport:
    """The recording's minutes into ``data/telemetry/minutes.csv`` (see the module)."""
    out = MinutesExport()
    store = CampaignFiles.of(campaign).recorder
    label = payload.source_label(store)
    if not os.path.lexists(store):
        out.reason = (f"no flight recording ({label}): telemetry was never sampled for "
                      "this campaign")
    else:
        try:
            reader = RecordingReader.open(store)
        except RecordingUnreadable as exc:
            out.reason = f"the flight recording cannot be read: {_words(exc, store, label)}"
        else:
            with reader:
                rows = MinuteRows(max_rows=max_rows)
                entry = payload.add_lines(MINUTES_PATH.removeprefix("data/"),
                                          _lines(reader, rows, out, store, label))
            _sum_up(out, rows, entry.path if entry else None)
    if out.reason:
        warnings.append(f"telemetry minutes: {out.reason}")
    return out


def _lines(reader: RecordingReader, rows: MinuteRows, out: MinutesExport,
           store: os.PathLike[str], label: str) -> Iterator[bytes]:
    """The header (once a row passes), then each row that passes the format's rules."""
    started = False
    try:
        for key, point in reader.aggregates():
            if rows.full:
                out.stopped = f"more than {rows.max_rows} minute rows: the first " \
                              f"{rows.max_rows} are exported"
                return
            minute = minute_text(point.t)
            fields = [key.source, key.key, key.metric, minute or "", str(point.n),
                      number_text(point.lo), number_text(point.value), number_text(point.hi)]
            problem = rows.check(fields) if minute else f"minute at {point.t!r} s"
            if problem is not None:
                out.skipped_rows += 1
                out.first_skip = out.first_skip or f"{'/'.join(key)}: {problem}"
                continue
            if not started:
                started = True
                yield HEADER.encode()
            yield csv_line(fields).encode("utf-8")
    except (RecordingUnreadable, sqlite3.Error) as exc:
        out.stopped = f"the recording could not be read to its end: {_words(exc, store, label)}"


def _sum_up(out: MinutesExport, rows: MinuteRows, path: str | None) -> None:
    out.path = path
    out.rows, out.series = (rows.rows, rows.series) if path else (0, 0)
    if path and rows.first is not None and rows.last is not None:
        out.first_minute = minute_text(rows.first * 60.0)
        out.last_minute = minute_text(rows.last * 60.0)
    skipped = (f"{out.skipped_rows} minute row(s) of the recording break the format's "
               f"rules and are left out (first: {out.first_skip})") if out.skipped_rows else None
    why = "; ".join(w for w in (out.stopped, skipped) if w)
    if path is None:
        out.reason = why or "the flight recording holds no complete minute yet"
        if out.skipped_rows and not out.stopped:
            out.reason = f"no minute of the recording passes the format's rules: {skipped}"
    elif why:
        out.reason = why


def _words(exc: BaseException, store: os.PathLike[str], label: str) -> str:
    """An error's words with the store's absolute path said as the campaign says it."""
    return str(exc).replace(os.fspath(store), label)[:500]
