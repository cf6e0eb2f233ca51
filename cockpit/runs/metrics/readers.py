"""The readers of metric files, one per format, each reading only what is new.

This module owns the formats: JSON lines (``JsonlMetricsReader``, what
:mod:`cockpit.report` writes), Lightning ``metrics.csv`` (``CsvMetricsReader``), Hugging
Face ``trainer_state.json`` (``TrainerStateReader``), a folder that becomes one or the
other (``FolderReader``), and ``open_reader`` that picks one by the file's name. Their
base is :class:`~cockpit.runs.metrics.reader_base.MetricReader`; TensorBoard event files
are read in :mod:`cockpit.runs.metrics.tensorboard`. The guarantees they share are
listed in :mod:`cockpit.runs.metrics.stream`.
"""

from __future__ import annotations

import csv
import math
import os
import re
import stat
import time
from abc import abstractmethod
from pathlib import Path
from typing import Any

from cockpit.common.metric_names import HF_RUN_MEAN
from cockpit.runs.attempts import older_than
from cockpit.runs.metrics.reader_base import MetricReader
from cockpit.runs.metrics.tensorboard import TensorBoardReader, is_tensorboard_path
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
        # False after a start at the file's tail (the lines before it were not counted):
        # garbage then has no line number. ``skipped``: the bytes left unread there.
        self._lines_known = True
        self.skipped = 0

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
        self._lines_known = True
        self.skipped = 0
        self._reset_format()

    def _count_garbage(self, line: int | None, why: str) -> None:
        super()._count_garbage(line if self._lines_known else None, why)

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
                if self._file_id is None and older_than(st.st_mtime, self.since):
                    self.start_at_end(handle, st)  # an earlier attempt's file: from its end
                    return self._finish(ReadBatch(), now)
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

    def start_at_end(self, handle: Any, st: os.stat_result) -> None:
        """Start a fresh reader at the end of its file: what it holds now is not read (an
        earlier attempt's records); what is appended is, and a rewrite in place (a new
        inode, a truncation, another first line) is read whole. The format still learns
        the first line (a CSV header)."""
        head = self._first_line(handle.read(self._head_check))
        self._reset_format()
        if head:
            try:
                self._parse(1, head[:-1])  # a CSV header; a JSON line is just parsed
            except ValueError:
                pass
        handle.seek(max(0, st.st_size - _TAIL_CHECK))
        self._tail = handle.read(_TAIL_CHECK)
        self._file_id, self._stat_sig = (st.st_dev, st.st_ino), None
        self._offset, self._head = st.st_size, head
        self._line_no, self._lines_known, self.skipped = 0, False, st.st_size

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
    :func:`cockpit.report.progress` uses) at ``global_step``. Its end-of-training
    ``train_loss`` is the mean over the run, not a step's loss: never aliased to ``loss``.
    """

    NOT_ALIASES = HF_RUN_MEAN

    def __init__(self, path: Path, clock: Clock = time.time) -> None:
        super().__init__(path, clock)
        self.source: Path | None = None  # the trainer_state.json actually read
        self._sig: tuple[str, int, int, int, int] | None = None
        self._delivered = 0
        self._last_entry_sig: str | None = None
        self._last_step: int | None = None
        self._max_steps: int | None = None
        self._earlier = False  # the last look found only an earlier attempt's states

    def _locate(self) -> Path | None:
        self._earlier = False
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
                    if (best is None or int(match.group(1)) > best[0]) \
                            and self._current(candidate):
                        best = (int(match.group(1)), candidate)
        own = self.path / "trainer_state.json"
        if self._current(own) and (best is None
                                   or own.stat().st_mtime >= best[1].stat().st_mtime):
            return own
        return None if best is None else best[1]

    def _current(self, candidate: Path) -> bool:
        """A trainer state file written during the current attempt (an earlier attempt's
        ``checkpoint-500`` left in the output folder is not)."""
        try:
            st = candidate.stat()
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode):
            return False
        if older_than(st.st_mtime, self.since):
            self._earlier = True  # there, but an earlier attempt's
            return False
        return True

    def poll(self) -> ReadBatch:
        now = self._clock()
        self.last_read_at = now
        try:
            source = self._locate()
            if source is None:  # none yet, or only an earlier attempt's
                self.exists, self.error = self._earlier, None
                return ReadBatch()
            st = source.stat()
            if older_than(st.st_mtime, self.since):
                self.exists, self.error = True, None  # an earlier attempt's: not read
                return ReadBatch()
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

    @property
    def not_aliases(self) -> frozenset[str]:
        return self.NOT_ALIASES if self.tensorboard is None else frozenset()

    def poll(self) -> ReadBatch:
        if self.tensorboard is None and is_tensorboard_path(self.path):
            self.tensorboard = TensorBoardReader(self.path, self._clock)
            self.tensorboard.since = self.since
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
