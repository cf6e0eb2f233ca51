"""The readers of metric files, one per format, each reading only what is new.

This module owns ``MetricReader`` and its formats: JSON lines (``JsonlMetricsReader``,
what :mod:`cockpit.report` writes), Lightning ``metrics.csv`` (``CsvMetricsReader``)
Hugging Face ``trainer_state.json`` (``TrainerStateReader``) and TensorBoard event
files (``TensorBoardReader``, through the optional ``tensorboard`` package:
``cockpit[tensorboard]``), and ``open_reader`` that picks one by the file's name. The
guarantees they share are listed in :mod:`cockpit.runs.metrics.stream`.
"""

from __future__ import annotations

import csv
import math
import os
import re
import stat
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cockpit.runs.metrics.values import (
    Clock,
    MetricPoint,
    ReadBatch,
    loads_tolerant,
    new_point,
    signature,
    to_float,
    to_step,
    to_time,
)

_READ_LIMIT = 16 * 1024 * 1024  # per poll: a huge backlog is read over several ticks


_MAX_LINE = 1024 * 1024  # a "line" longer than this without a newline is garbage


_TAIL_CHECK = 64


_LINE_SUFFIXES = frozenset({".jsonl", ".ndjson", ".json", ".log", ".txt"})


class MetricReader(ABC):
    """One metrics file; :meth:`poll` returns what is new since the last poll."""

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

    @abstractmethod
    def poll(self) -> ReadBatch: ...

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


class _LineReader(MetricReader):
    """Shared incremental line reading: offsets, restarts, partial lines, dedup."""

    _head_check = 4096  # bytes of the first line compared to notice in-place rewrites

    def __init__(self, path: Path, clock: Clock = time.time) -> None:
        super().__init__(path, clock)
        self._file_id: tuple[int, int] | None = None
        self._stat_sig: tuple[int, int, int] | None = None
        self._offset = 0
        self._line_no = 0
        self._head = b""
        self._tail = b""
        self._discarding = False  # inside an over-long line: drop bytes up to its newline
        # Records delivered from the current content, and the first one's signature.
        self._delivered = 0
        self._first_sig: str | None = None
        # After a restart: how many records may repeat what was delivered before.
        self._skip = 0
        self._skip_first_sig: str | None = None

    def _restart(self) -> None:
        self.resets += 1
        if self._delivered:
            self._skip, self._skip_first_sig = self._delivered, self._first_sig
        self._delivered, self._first_sig = 0, None
        self._file_id = None
        self._stat_sig = None
        self._offset = 0
        self._line_no = 0
        self._head = b""
        self._tail = b""
        self._discarding = False
        self._reset_format()

    @property
    def position(self) -> int | None:
        return self._offset

    @property
    def caught_up(self) -> bool:  # an unreadable file is not a backlog: its error says why
        return not self.exists or self.error is not None or self._stat_sig is not None

    def _reset_format(self) -> None:
        """Forget what the format learned from the file (e.g. a CSV header)."""

    @abstractmethod
    def _parse(self, line_no: int, raw: bytes) -> MetricPoint | dict[str, Any] | None:
        """One complete line (without newline): a point, an event, None; ValueError: garbage."""

    def poll(self) -> ReadBatch:
        now = self._clock()
        self.last_read_at = now
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.exists, self.error = False, None
            if self._file_id is not None:
                self._restart()  # gone: when it comes back, read it from the start
            return ReadBatch()
        except OSError as exc:
            self.error = f"cannot read {self.path}: {exc.strerror or exc}"
            return ReadBatch()
        if not stat.S_ISREG(st.st_mode):
            self.exists, self.error = True, f"{self.path} is not a regular file"
            return ReadBatch()
        self.exists, self.error = True, None
        stat_sig = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        file_id = (st.st_dev, st.st_ino)
        if file_id == self._file_id and stat_sig == self._stat_sig:
            return ReadBatch()  # the common tick: one stat, nothing else
        self.last_change_at = now
        if self._file_id is not None and (file_id != self._file_id or st.st_size < self._offset):
            self._restart()
        try:
            with open(self.path, "rb") as handle:
                if self._offset and self._rewritten(handle):
                    self._restart()
                self._file_id = file_id
                handle.seek(self._offset)
                data = handle.read(_READ_LIMIT)
                complete = len(data) < _READ_LIMIT
                if self._offset == 0 and not self._head:
                    self._head = self._first_line(data)
        except OSError as exc:
            self.error = f"cannot read {self.path}: {exc.strerror or exc}"
            return ReadBatch()
        batch = self._consume(data)
        # Only a read to the end makes the stat signature current; else continue next tick.
        self._stat_sig = stat_sig if complete else None
        return self._finish(batch, now)

    def _first_line(self, data: bytes) -> bytes:
        end = data.find(b"\n", 0, self._head_check)
        return b"" if end < 0 else data[: end + 1]

    def _rewritten(self, handle: Any) -> bool:
        if self._head:
            handle.seek(0)
            if handle.read(len(self._head)) != self._head:
                return True
        if self._tail:
            handle.seek(self._offset - len(self._tail))
            if handle.read(len(self._tail)) != self._tail:
                return True
        return False

    def _consume(self, data: bytes) -> ReadBatch:
        batch = ReadBatch()
        start = 0
        if self._discarding:
            end = data.find(b"\n")
            if end < 0:
                self._offset += len(data)
                return batch
            self._discarding = False
            self._line_no += 1
            start = end + 1
        end = data.rfind(b"\n")
        if end >= start:
            for raw in data[start:end].split(b"\n"):
                self._line_no += 1
                self._take(self._line_no, raw, batch)
        consumed = max(end + 1, start)
        if len(data) - consumed > _MAX_LINE:
            # No newline in sight: not a metrics line; skip to the next newline.
            self._count_garbage(self._line_no + 1, f"line longer than {_MAX_LINE} bytes")
            self._discarding = True
            consumed = len(data)
        if consumed:
            self._tail = data[max(0, consumed - _TAIL_CHECK) : consumed]  # bytes ending at offset
        self._offset += consumed
        return batch

    def _take(self, line_no: int, raw: bytes, batch: ReadBatch) -> None:
        skipping = self._skip > self._delivered
        try:
            item = self._parse(line_no, raw)
        except ValueError as exc:
            if not skipping:  # garbage already counted in the first reading
                self._count_garbage(line_no, str(exc) or exc.__class__.__name__)
            return
        if item is None:
            return
        index = self._delivered
        self._delivered += 1
        if index == 0:
            self._first_sig = signature(item)
            if skipping and self._first_sig != self._skip_first_sig:
                self._skip = 0  # new content, not a rewrite of what we delivered
                skipping = False
        if skipping:
            return
        if isinstance(item, MetricPoint):
            batch.points.append(item)
        else:
            batch.events.append(item)


class JsonlMetricsReader(_LineReader):
    """JSON lines as written by :mod:`cockpit.report` (and most custom loggers)."""

    def _parse(self, line_no: int, raw: bytes) -> MetricPoint | dict[str, Any] | None:
        text = raw.decode("utf-8").strip()  # UnicodeDecodeError is a ValueError: garbage
        if not text:
            return None
        record = loads_tolerant(text)
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        if "event" in record:
            return dict(record)
        values: dict[str, float] = {}
        for name, value in record.items():
            if name in ("t", "step"):
                continue
            # JSON cannot spell NaN: pandas and JavaScript write it as null. A metric
            # that is null is therefore NaN (a non_finite rule on it fires).
            number = math.nan if value is None else to_float(value)
            if number is not None:
                values[name] = number
        step = to_step(record.get("step"))
        if not values and step is None:
            return None
        return new_point(step, values, to_time(record.get("t")))


class CsvMetricsReader(_LineReader):
    """PyTorch Lightning ``CSVLogger`` ``metrics.csv``: a header, then sparse rows."""

    _head_check = 1024 * 1024  # the header is the first line; compare all of it

    def __init__(self, path: Path, clock: Clock = time.time) -> None:
        super().__init__(path, clock)
        self.header: list[str] | None = None

    def _reset_format(self) -> None:
        self.header = None

    def _parse(self, line_no: int, raw: bytes) -> MetricPoint | None:
        text = raw.decode("utf-8").rstrip("\r")
        if not text.strip():
            return None
        try:
            cells = next(csv.reader([text]))
        except csv.Error as exc:
            raise ValueError(f"bad CSV row: {exc}") from exc
        if self.header is None:
            self.header = [cell.strip() for cell in cells]
            return None
        if len(cells) > len(self.header):
            raise ValueError(f"{len(cells)} cells for {len(self.header)} columns")
        values: dict[str, float] = {}
        step: int | None = None
        moment: float | None = None
        for name, cell in zip(self.header, cells, strict=False):  # short rows: padded
            if not cell.strip():
                continue  # sparse: an empty cell means "not logged in this row"
            if name == "step":
                step = to_step(cell)
            elif name == "t":
                moment = to_time(cell)
            else:
                number = to_float(cell)
                if number is not None:
                    values[name] = number
        if not values and step is None:
            return None
        return new_point(step, values, moment)


_CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")


class TrainerStateReader(MetricReader):
    """Hugging Face Trainer ``trainer_state.json``, rewritten whole at each save.

    ``path`` is the file itself or an output folder; for a folder, the newest
    ``checkpoint-N/trainer_state.json`` by N is read (or the folder's own
    ``trainer_state.json`` when it is newer, as at the end of training). A
    ``max_steps`` above 0 is delivered as the metric ``max_steps`` (the name
    :func:`cockpit.report.progress` uses) at ``global_step``.
    """

    def __init__(self, path: Path, clock: Clock = time.time) -> None:
        super().__init__(path, clock)
        self.source: Path | None = None  # the trainer_state.json actually read
        self._sig: tuple[str, int, int, int, int] | None = None
        self._delivered = 0
        self._last_entry_sig: str | None = None
        self._last_step: int | None = None
        self._max_steps: int | None = None

    def _locate(self) -> Path | None:
        if self.path.name == "trainer_state.json" or self.path.is_file():
            return self.path if self.path.exists() else None
        if not self.path.is_dir():
            return None
        best: tuple[int, Path] | None = None
        with os.scandir(self.path) as children:
            for child in children:
                match = _CHECKPOINT_DIR.match(child.name)
                if match and child.is_dir():
                    candidate = Path(child.path) / "trainer_state.json"
                    if (best is None or int(match.group(1)) > best[0]) and candidate.is_file():
                        best = (int(match.group(1)), candidate)
        own = self.path / "trainer_state.json"
        if own.is_file() and (best is None or own.stat().st_mtime >= best[1].stat().st_mtime):
            return own
        return None if best is None else best[1]

    def poll(self) -> ReadBatch:
        now = self._clock()
        self.last_read_at = now
        try:
            source = self._locate()
            if source is None:
                self.exists, self.error = False, None
                return ReadBatch()
            st = source.stat()
        except FileNotFoundError:
            self.exists = False  # vanished between listing and stat: next tick
            return ReadBatch()
        except OSError as exc:
            self.error = f"cannot read {self.path}: {exc.strerror or exc}"
            return ReadBatch()
        self.exists, self.error = True, None
        sig = (str(source), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if sig == self._sig:
            return ReadBatch()
        self.last_change_at = now
        self._sig = sig  # a broken state is counted once, retried when the file changes
        try:
            text = source.read_bytes().decode("utf-8")
            state = loads_tolerant(text)
            if not isinstance(state, dict) or not isinstance(state.get("log_history", []), list):
                raise ValueError("not a trainer state (no log_history list)")
        except FileNotFoundError:
            self._sig = None
            return ReadBatch()
        except OSError as exc:
            self.error = f"cannot read {source}: {exc.strerror or exc}"
            self._sig = None
            return ReadBatch()
        except ValueError as exc:
            # Half-written (the Trainer rewrites it whole): keep what we had.
            self._count_garbage(None, f"{source}: {exc}")
            return ReadBatch()
        self.source = source
        return self._finish(self._deliver(state), now)

    def _deliver(self, state: dict[str, Any]) -> ReadBatch:
        history = [entry for entry in state.get("log_history", []) if isinstance(entry, dict)]
        known = self._delivered
        if (
            known
            and len(history) >= known
            and signature(history[known - 1]) == (self._last_entry_sig)
        ):
            new = history[known:]
        elif known == 0:
            new = history
        else:
            # Another line of history (resumed from an earlier checkpoint, another
            # folder): deliver only steps beyond what was already delivered.
            last = self._last_step if self._last_step is not None else -1
            new = [e for e in history if (to_step(e.get("step")) or 0) > last]
        batch = ReadBatch()
        for entry in new:
            values = {
                name: number
                for name, value in entry.items()
                if name != "step" and (number := to_float(value)) is not None
            }
            step = to_step(entry.get("step"))
            if values:
                batch.points.append(new_point(step, values, None))
            if step is not None and (self._last_step is None or step > self._last_step):
                self._last_step = step
        self._delivered = len(history)
        self._last_entry_sig = signature(history[-1]) if history else None
        max_steps = to_step(state.get("max_steps"))
        if max_steps and max_steps > 0 and max_steps != self._max_steps:
            self._max_steps = max_steps
            step = to_step(state.get("global_step"))
            batch.points.append(new_point(step, {"max_steps": float(max_steps)}, None))
        return batch


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


class FolderReader(TrainerStateReader):
    """A folder that may not exist yet when the run starts: read as TensorBoard once
    event files appear directly in it (Lightning's ``version_N``), else as a Hugging
    Face Trainer output folder."""

    def __init__(self, path: Path, clock: Clock = time.time) -> None:
        super().__init__(path, clock)
        self.tensorboard: TensorBoardReader | None = None

    @property
    def caught_up(self) -> bool:
        return self.tensorboard is None or self.tensorboard.caught_up

    def poll(self) -> ReadBatch:
        if self.tensorboard is None and is_tensorboard_path(self.path):
            self.tensorboard = TensorBoardReader(self.path, self._clock)
        if self.tensorboard is None:
            return super().poll()
        batch = self.tensorboard.poll()
        for name in ("exists", "last_read_at", "last_change_at", "last_record_at", "garbage",
                     "last_garbage_line", "last_garbage", "resets", "error"):
            setattr(self, name, getattr(self.tensorboard, name))
        return batch


def open_reader(path: Path, clock: Clock = time.time) -> MetricReader:
    """The reader for ``path``, chosen by its name.

    ``trainer_state.json``: Hugging Face Trainer state; ``*.csv``: Lightning CSVLogger;
    ``.jsonl``, ``.ndjson``, ``.json``, ``.log``, ``.txt``: JSON lines;
    ``events.out.tfevents.*`` or a folder holding such files: TensorBoard (the
    ``tensorboard`` extra); otherwise a folder (existing, or a name without suffix): a
    Trainer output folder. Anything else is a ValueError.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if is_tensorboard_path(path):
        return TensorBoardReader(path, clock)
    if path.name == "trainer_state.json":
        return TrainerStateReader(path, clock)
    if suffix == ".csv":
        return CsvMetricsReader(path, clock)
    if suffix in _LINE_SUFFIXES:
        return JsonlMetricsReader(path, clock)
    if path.is_dir() or (not suffix and not path.exists()):
        return FolderReader(path, clock)
    raise ValueError(
        f"no metrics reader for {path}: expected JSON lines (.jsonl, .json, ...), a "
        "Lightning metrics .csv, a Hugging Face trainer_state.json / output folder, or "
        "TensorBoard events.out.tfevents.* files (or their folder)"
    )
