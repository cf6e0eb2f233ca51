"""A run's metric stream: every metric file of one run, polled together.

This module owns :class:`MetricStream` (latest values, a bounded deque of recent points,
a bounded queue of events) and states what its readers guarantee. The readers, one per
format, live in :mod:`cockpit.runs.metrics.readers`; the point types and number parsing
in :mod:`cockpit.runs.metrics.values`; all are re-exported here. The readers turn metrics
files written by training code into :class:`MetricPoint` values, cheaply, on every
engine tick:

- JSON lines (what :mod:`cockpit.report` writes): ``{"t": ..., "step": 120, "loss": 0.41}``;
  records with an ``"event"`` key (``checkpoint_started``, ``checkpoint_written``, ...)
  are events, kept apart from metrics.
- Hugging Face Trainer ``trainer_state.json`` (its ``log_history``), given as the file
  or as the output folder (then the newest ``checkpoint-N/trainer_state.json`` by N).
- PyTorch Lightning ``CSVLogger`` ``metrics.csv`` (sparse rows, rewritten whole with a
  wider header when a new metric appears).

What every reader guarantees:

- Each poll reads only bytes added since the last one (one ``stat`` when nothing
  changed). A file replaced (new inode), truncated (size below the offset) or rewritten
  in place (its first line or the bytes before the offset differ) is read again from
  the start. After such a restart, records that repeat what was already delivered (same
  first record, same position) are not delivered twice, so a Lightning header rewrite
  does not replay history; a file with different content is delivered in full.
- A partial last line waits for its newline.
- Garbage (undecodable, not an object, a malformed row) is counted, never fatal.
- ``NaN`` and infinities in any common spelling (``NaN``, ``nan``, ``Infinity``, ``inf``,
  ``-inf``, ``-Infinity``, any case, as bare JSON tokens or as strings) are floats.
- Values are floats (booleans are not metrics), ``step`` is an int.
- Staleness is visible: ``last_read_at``, ``last_change_at``, ``last_record_at`` are
  wall-clock seconds (from an injectable clock).

Readers keep no history; :class:`MetricStream` keeps only a bounded deque of recent
points. Events found by :meth:`MetricStream.poll` wait in a bounded queue that
:meth:`MetricStream.poll_events` drains (the last ones also stay in a bounded deque for
the stream cache). Where a stream stood (offsets, latest values, recent points) can be
saved and restored by :mod:`cockpit.runs.metrics.stream_cache`, so a restart reads only
what is new, and a one-shot command can start at a file's tail.

What the stream adds to the readers' points:

- **Canonical names** (:mod:`cockpit.common.metric_names`): a value read under an alias
  (``train/loss``, ``train_loss``, ``val_loss``...) or under a name the run's
  ``metric_names`` maps is also delivered under its canonical name (``loss``,
  ``eval_loss``...), so one rule, check and chart name one metric across frameworks.
- **NaN never hidden**: a training ``loss`` of exactly 0.0 while a ``grad_norm`` is
  non-finite at the same step (in one point, or in two: TensorBoard writes each scalar
  as its own event) marks the point's ``loss`` masked: the Hugging Face Trainer's
  ``logging_nan_inf_filter`` logs a NaN loss so, and a ``non_finite`` rule on the loss
  fires on it (:func:`cockpit.runs.rules.check_points`).
- **The current attempt only** (``since``: its start, :mod:`cockpit.runs.attempts`): a
  point or event whose own time ``t`` is older is dropped, and each reader leaves alone
  what a file not modified since that start holds (an earlier attempt's
  ``version_0/metrics.csv``, ``checkpoint-500/trainer_state.json``, event files): a line
  file is read from its end (appended lines count, a rewrite in place is read whole), a
  Trainer state or an event file older than the start is not read.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cockpit.common.metric_names import GRAD_NORM, LOSS, MetricNames
from cockpit.runs.metrics.reader_base import MetricReader
from cockpit.runs.metrics.readers import (
    CsvMetricsReader,
    JsonlMetricsReader,
    TrainerStateReader,
    open_reader,
)
from cockpit.runs.metrics.values import Clock, MetricPoint, ReadBatch, loads_tolerant, to_float

__all__ = [
    "CsvMetricsReader",
    "JsonlMetricsReader",
    "MetricPoint",
    "MetricReader",
    "MetricStream",
    "ReadBatch",
    "TrainerStateReader",
    "loads_tolerant",
    "open_reader",
    "to_float",
]


RECENT_POINTS = 1000
PENDING_EVENTS = 1000
REPORTED_EVENTS = 256  # the last events kept for a stream cache (checkpoint reports)


class HiddenNan:
    """Whether the training loss was logged as exactly 0.0 while a gradient norm was
    non-finite at the same step; the points that complete it get ``loss`` masked."""

    def __init__(self) -> None:
        self.step: int | None = None
        self.zero_loss = False
        self.bad_norm = False

    def mark(self, point: MetricPoint) -> MetricPoint:
        loss, norm = point.values.get(LOSS), point.values.get(GRAD_NORM)
        if loss is None and norm is None:
            return point
        if point.step is None or point.step != self.step:
            self.step, self.zero_loss, self.bad_norm = point.step, False, False
        if loss is not None:
            self.zero_loss = loss == 0.0
        if norm is not None:
            self.bad_norm = not math.isfinite(norm)
        if self.zero_loss and self.bad_norm:
            return replace(point, masked=point.masked | {LOSS})
        return point


class MetricStream:
    """All metric files of one run, polled together.

    :meth:`poll` reads every reader and returns the new points (canonical names added,
    a hidden NaN marked: see the module text); events found on the way wait in a bounded
    queue that :meth:`poll_events` drains (it does not read). ``names``: the run's own
    ``metric_names`` mapping (``{their_name: canonical}``).
    """

    def __init__(
        self,
        paths: Sequence[Path],
        clock: Clock = time.time,
        recent: int = RECENT_POINTS,
        names: Mapping[str, str] | None = None,
        since: float | None = None,
    ) -> None:
        self.readers: list[MetricReader] = [open_reader(Path(p), clock) for p in paths]
        self.since = since
        for reader in self.readers:
            reader.since = since
        self.names = MetricNames(names)
        self._hidden = HiddenNan()
        self.latest: dict[str, float] = {}
        self.latest_step: int | None = None
        self.recent: deque[MetricPoint] = deque(maxlen=recent)
        self._value_steps: dict[str, int | None] = {}
        self._events: deque[dict[str, Any]] = deque(maxlen=PENDING_EVENTS)
        # reader index -> file size when the latest values were seeded from its tail:
        # older points read on the way there do not overwrite the newer seeded values.
        self._seeded: dict[int, int] = {}
        # The last events seen (bounded): what a stream cache hands to the next process.
        self.reported: deque[dict[str, Any]] = deque(maxlen=REPORTED_EVENTS)
        # Each reader's position at the first poll (what a restart did not read again).
        self.start_offsets: list[int] | None = None

    @property
    def paths(self) -> list[Path]:
        return [reader.path for reader in self.readers]

    @property
    def garbage(self) -> int:
        return sum(reader.garbage for reader in self.readers)

    @property
    def last_record_at(self) -> float | None:
        times = [r.last_record_at for r in self.readers if r.last_record_at is not None]
        return max(times) if times else None

    def poll(self) -> list[MetricPoint]:
        """New points since the last poll, from all readers in order."""
        points: list[MetricPoint] = []
        if self.start_offsets is None:
            self.start_offsets = [reader.position or 0 for reader in self.readers]
        for index, reader in enumerate(self.readers):
            batch = reader.poll()
            read = [self._canonical(point, reader.not_aliases) for point in batch.points
                    if self._current(point.t)]
            points.extend(read)
            events = [e for e in batch.events if self._current(e.get("t"))]
            self._events.extend(events)
            self.reported.extend(events)
            if not self._behind_seed(index, reader):
                self._take_latest(read)
        self.recent.extend(points)
        return points

    def _current(self, t: Any) -> bool:
        """Whether a record of this time belongs to the current attempt (no time: its
        file's time decided, in the reader)."""
        return self.since is None or not isinstance(t, (int, float)) or t >= self.since

    def _canonical(self, point: MetricPoint, not_aliases: frozenset[str]) -> MetricPoint:
        """The point with its canonical names added and a hidden NaN marked (a reader's
        point holds a dict of its own, not yet seen by anyone: completed in place)."""
        if isinstance(point.values, dict):
            self.names.add_canonical(point.values, not_aliases)
        else:
            values = self.names.expand(point.values, not_aliases)
            if values is not point.values:
                point = MetricPoint(point.step, values, point.t, point.masked)
        return self._hidden.mark(point)

    def _take_latest(self, points: Sequence[MetricPoint]) -> None:
        for point in points:
            for name, value in point.values.items():
                self.latest[name] = value
                self._value_steps[name] = point.step
            if point.step is not None:
                self.latest_step = point.step

    def _behind_seed(self, index: int, reader: MetricReader) -> bool:
        """Whether the reader is still reading what lies before its seeded tail."""
        size = self._seeded.get(index)
        if size is None:
            return False
        position = reader.position
        if position is not None and position < size:
            try:
                if os.stat(reader.path).st_size >= size:
                    return True
            except OSError:
                pass  # gone or unreadable: the seed no longer describes the file
        del self._seeded[index]
        return False

    def seed(self, path: Path, size: int, values: dict[str, float], step: int | None) -> None:
        """Latest values and step from the tail of ``path`` (then ``size`` bytes), so a
        snapshot is right at once although the incremental reading (what the rules see)
        starts from the beginning and a huge file takes several polls to catch up."""
        for index, reader in enumerate(self.readers):
            if reader.path == Path(path) and reader.position is not None:
                self._seeded[index] = size
                for name, value in self.names.expand(values, reader.not_aliases).items():
                    self.latest[name] = value
                    self._value_steps[name] = step
                if step is not None:
                    self.latest_step = step

    def poll_events(self) -> list[dict[str, Any]]:
        """Events (``{"event": kind, ...}`` records) found by polls since the last call."""
        events = list(self._events)
        self._events.clear()
        return events

    def last_value_step(self, name: str) -> int | None:
        """The step of the last point that carried ``name`` (None: unknown or no step)."""
        return self._value_steps.get(name)

    def stale_seconds(self, now: float) -> float | None:
        """Seconds since any reader last found a new record (None: never)."""
        last = self.last_record_at
        return None if last is None else max(0.0, now - last)
