"""The base of every metric file reader: what a poll reports and how a reader keeps count.

Each format (:mod:`cockpit.runs.metrics.readers`, :mod:`cockpit.runs.metrics.tensorboard`)
subclasses :class:`MetricReader`; the guarantees they share are listed in
:mod:`cockpit.runs.metrics.stream`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from pathlib import Path

from cockpit.runs.metrics.values import Clock, ReadBatch


class MetricReader(ABC):
    """One metrics file; :meth:`poll` returns what is new since the last poll."""

    # Names this format uses for something else than their alias in the canonical table
    # (cockpit.common.metric_names): the stream adds no canonical name beside them.
    NOT_ALIASES: frozenset[str] = frozenset()

    def __init__(self, path: Path, clock: Clock = time.time) -> None:
        self.path = Path(path)
        self._clock = clock
        self.exists = False
        self.last_read_at: float | None = None  # last poll
        self.last_change_at: float | None = None  # last poll that found the file changed
        self.last_record_at: float | None = None  # last poll that found a new point/event
        self.garbage = 0
        self.last_garbage_line: int | None = None
        self.last_garbage: str | None = None  # why the last garbage was garbage
        self.resets = 0  # times the file was read again from the start
        self.error: str | None = None  # why the file cannot be read right now
        # The run's current attempt's start (epoch seconds), set by the stream: a file
        # not modified since (:func:`cockpit.runs.attempts.older_than`) is an earlier
        # attempt's, and what it held then is not read.
        self.since: float | None = None

    @abstractmethod
    def poll(self) -> ReadBatch: ...

    @property
    def not_aliases(self) -> frozenset[str]:
        return self.NOT_ALIASES

    @property
    def position(self) -> int | None:
        """Bytes of the file read so far (None: a format read whole on each change)."""
        return None

    @property
    def caught_up(self) -> bool:
        """Whether the last poll read to the end (False: a backlog is read over ticks)."""
        return True

    def _count_garbage(self, line: int | None, why: str) -> None:
        self.garbage += 1
        self.last_garbage_line = line
        self.last_garbage = why

    def _finish(self, batch: ReadBatch, now: float) -> ReadBatch:
        if batch.points or batch.events:
            self.last_record_at = now
        return batch
