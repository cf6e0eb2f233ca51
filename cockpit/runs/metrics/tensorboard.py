"""TensorBoard event files as a metrics source, through the optional ``tensorboard``
package (``cockpit[tensorboard]``): each event's scalars become metric points."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cockpit.runs.attempts import older_than
from cockpit.runs.metrics.reader_base import MetricReader
from cockpit.runs.metrics.values import Clock, MetricPoint, ReadBatch, new_point

_TB_PREFIX = "events.out.tfevents."
_TB_EVENTS_PER_POLL = 50_000  # a huge backlog is read over several ticks
TENSORBOARD_INSTALL = "python3 -m pip install 'cockpit[tensorboard]'"
TENSORBOARD_MISSING = ("reading TensorBoard event files needs the tensorboard package, "
                       f"not installed: {TENSORBOARD_INSTALL}")


def is_tensorboard_path(path: Path) -> bool:
    """An ``events.out.tfevents.*`` file, or a folder holding some (Lightning's
    ``lightning_logs/version_N``, the Hugging Face Trainer's ``runs/...``)."""
    if path.name.startswith(_TB_PREFIX):
        return True
    try:
        with os.scandir(path) as children:
            return any(c.name.startswith(_TB_PREFIX) and c.is_file() for c in children)
    except OSError:
        return False


class TensorBoardReader(MetricReader):
    """TensorBoard event files: the scalars of each event become metric points at the
    event's step and wall time (the tag is the metric's name: ``train/loss``).

    ``path`` is one ``events.out.tfevents.*`` file or a folder whose event files (a
    restarted writer adds one) are read in name order. Reading is incremental: the
    ``tensorboard`` package's ``EventFileLoader`` keeps its offset and resumes a record
    written half-way; at most ``_TB_EVENTS_PER_POLL`` events per poll. Without the
    package, :attr:`error` says how to install it and nothing is read.
    """

    def __init__(self, path: Path, clock: Clock = time.time) -> None:
        super().__init__(path, clock)
        self._loaders: dict[str, Any] = {}  # file -> its EventFileLoader
        self._pending: dict[str, Any] = {}  # file -> a Load() generator not yet drained
        self._ids: dict[str, tuple[int, int]] = {}  # file -> (dev, inode) when opened
        self._sizes: dict[str, int] = {}  # file -> size at its last read
        self._last_steps: dict[str, int] = {}  # tag -> last step delivered (restarts)
        self._modules: Any = None

    def _load_modules(self) -> Any:
        if self._modules is None:
            try:
                from tensorboard.backend.event_processing.event_file_loader import (
                    EventFileLoader,
                )
                from tensorboard.util import tensor_util
            except ImportError:
                return None
            self._modules = (EventFileLoader, tensor_util)
        return self._modules

    @property
    def caught_up(self) -> bool:
        return not self._pending

    def _files(self) -> list[str]:
        if self.path.name.startswith(_TB_PREFIX):
            return [str(self.path)] if self.path.is_file() else []
        if not self.path.is_dir():
            return []
        with os.scandir(self.path) as children:
            return sorted(c.path for c in children
                          if c.name.startswith(_TB_PREFIX) and c.is_file())

    def poll(self) -> ReadBatch:
        now = self._clock()
        self.last_read_at = now
        modules = self._load_modules()
        if modules is None:
            self.exists = self.path.exists()
            if self.error != TENSORBOARD_MISSING:
                self._count_garbage(None, TENSORBOARD_MISSING)
            self.error = TENSORBOARD_MISSING
            return ReadBatch()
        loader_cls, tensor_util = modules
        try:
            files = self._files()
        except OSError as exc:
            self.error = f"cannot read {self.path}: {exc.strerror or exc}"
            return ReadBatch()
        self.exists, self.error = bool(files), None
        batch = ReadBatch()
        budget = _TB_EVENTS_PER_POLL
        for name in files:
            if budget <= 0:
                break
            try:
                st = os.stat(name)
            except OSError:
                continue  # gone between listing and stat
            ident = (st.st_dev, st.st_ino)
            if name not in self._loaders and older_than(st.st_mtime, self.since):
                continue  # an earlier attempt's writer's file (a new writer starts its own)
            if name in self._loaders and (self._ids.get(name) != ident
                                          or st.st_size < self._sizes.get(name, 0)):
                # Replaced or truncated: read it again; steps already delivered are skipped.
                self.resets += 1
                self._loaders.pop(name, None)
                self._pending.pop(name, None)
            if name not in self._loaders:
                try:
                    self._loaders[name] = loader_cls(name)
                except Exception as exc:  # noqa: BLE001 - a file the package cannot open
                    self._count_garbage(None, f"{name}: {exc}")
                    continue
                self._ids[name] = ident
            elif name not in self._pending and st.st_size == self._sizes.get(name):
                continue  # unchanged since its last read
            self._sizes[name] = st.st_size
            self.last_change_at = now
            events = self._pending.pop(name, None) or self._loaders[name].Load()
            try:
                for event in events:
                    self._take_event(event, tensor_util, batch)
                    budget -= 1
                    if budget <= 0:
                        self._pending[name] = events  # go on from here next poll
                        break
            except Exception as exc:  # noqa: BLE001 - a damaged record: counted, skipped
                self._count_garbage(None, f"{name}: {exc}")
        return self._finish(batch, now)

    def read_all(self) -> Iterator[MetricPoint]:
        """Every point the files hold now, poll after poll until nothing is left pending
        (the export's full read of a copy that no longer grows)."""
        while True:
            yield from self.poll().points
            if not self._pending:
                return

    def _take_event(self, event: Any, tensor_util: Any, batch: ReadBatch) -> None:
        if not event.HasField("summary"):
            return
        step = int(event.step)
        values: dict[str, float] = {}
        for value in event.summary.value:
            number: float | None = None
            if value.HasField("simple_value"):
                number = float(value.simple_value)
            elif value.HasField("tensor"):
                array = tensor_util.make_ndarray(value.tensor)
                if array.size == 1 and array.dtype.kind in "fiub":
                    number = float(array.reshape(()).item())
            if number is None:
                continue  # images, histograms, text: not a metric
            last = self._last_steps.get(value.tag)
            if self.resets and last is not None and step <= last:
                continue  # delivered before the file was read again
            values[value.tag] = number
            self._last_steps[value.tag] = step if last is None else max(last, step)
        if values:
            batch.points.append(new_point(step, values, float(event.wall_time) or None))
