"""The flight recorder's writer: samples handed by the tick, written in batches by
a thread of its own; a bad store moved aside, a full disk paused on (see the
package text)."""

from __future__ import annotations

import errno
import math
import os
import queue
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cockpit.common.fsutil import open_no_follow
from cockpit.telemetry.flight.store import (
    _INSERT_DISK,
    _INSERT_GPU,
    _INSERT_HOST,
    _RAW_TABLES,
    _SCHEMA,
    BACKSTEP_S,
    BATCH_S,
    BUSY_MS,
    CLOSE_WAIT_S,
    FORMAT,
    HANDOFF_WAIT_S,
    KEEP_ASIDE,
    LEAP_S,
    MAX_BUFFER,
    NOTE_S,
    QUEUE_BATCHES,
    RAW_KEEP_S,
    RETRY_S,
    VERSION,
    WAL_LIMIT,
    SeriesKey,
    _aggregate,
    _Batch,
    _check_recording,
    _int_or_none,
    _kind,
    _prune,
    _refuse_links,
    _Refused,
    _rows,
    _Sample,
    _series_id,
    _siblings,
)
from cockpit.telemetry.model import GpuInfo, HostInfo


class FlightRecorder:
    """The writer of one campaign's recording (see the module text).

    Two sides: :meth:`record`, called by the tick, only checks the time and keeps a
    reference to the (frozen) readings; every ``batch_s`` it hands the batch to a writer
    thread, which builds the rows and writes them in one transaction, away from the
    tick (a WAL checkpoint's fsync never stalls it). The hand-off waits at most
    :data:`HANDOFF_WAIT_S` for room when the writer is :data:`QUEUE_BATCHES` batches
    behind (a writer at accelerated time is held back; a hung disk costs a tick at most
    that once, then batches are dropped until the writer catches up). :meth:`flush`
    waits until everything handed off is written.
    """

    def __init__(self, path: Path, *, raw_keep_s: int = RAW_KEEP_S,
                 batch_s: float = BATCH_S, max_buffer: int = MAX_BUFFER,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self.raw_keep_s = int(raw_keep_s)
        self.batch_s = batch_s
        self.max_buffer = max(1, max_buffer)
        self._clock = clock  # wall time: names of stores moved aside, how long notes show
        self._monotonic = monotonic  # tells a clock step from time that passed
        # The tick's side (under _lock): the samples waiting, the newest second taken.
        self._lock = threading.Lock()
        self._opened = False
        self._closed = False
        self._buffer: list[_Sample] = []
        self._flush_at = 0.0
        self._last_s: int | None = None
        self._slow = False  # the last hand-off found the queue full
        self._mono_last: float | None = None  # the monotonic time of the last sample
        self._leap: tuple[int, int] | None = None  # the last clock step forward (at, by)
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=QUEUE_BATCHES)
        self._thread: threading.Thread | None = None
        # The writer's side (its thread, once started): the store and where it stands.
        self._db: sqlite3.Connection | None = None
        self._agg_next: int | None = None  # the first minute not aggregated yet
        self._ids: dict[SeriesKey, int] = {}
        self._pending: list[_Sample] = []  # a batch that waited for another writer
        self._busy = 0  # batches in a row that waited for another writer
        self._ident: tuple[int, int] | None = None  # (device, inode) of the store open
        # Read by both: what the screen says, and when recording may go on.
        self._problem: str | None = None  # while recording is paused or refused
        self._retry_at: float | None = None  # a pause: samples before it are dropped
        self._notes: list[tuple[str, float]] = []  # (warning, shown until: wall time)
        self.committed_s: int | None = None  # the newest second committed to disk
        self.transactions = 0
        self.samples = 0  # samples taken (not counting folded or dropped ones)
        self._dropped_tick = 0
        self._dropped_writer = 0
        self.busy_s = 0.0  # the writer thread's CPU time writing (what recording costs)

    @property
    def dropped(self) -> int:
        """Samples lost to a pause, a refused or busy store, a writer behind."""
        return self._dropped_tick + self._dropped_writer

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> FlightRecorder:
        """Open (or create) the store and start the writer; a problem becomes a
        warning, never an error."""
        with self._lock:
            if not self._opened and not self._closed:
                self._opened = True
                newest = self._try_open(None)
                if newest is not None:
                    self._last_s = newest
                self._thread = threading.Thread(target=self._run, name="flight-recorder",
                                                daemon=True)
                self._thread.start()
        return self

    def close(self) -> None:
        """Write what waits (the open minute aggregated too) and close; the recorder
        records nothing after. Waits at most :data:`CLOSE_WAIT_S` for the writer."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._hand_off(final=True, wait=CLOSE_WAIT_S)
                self._put(("stop", None), CLOSE_WAIT_S)
        if thread is not None:
            thread.join(CLOSE_WAIT_S)
            if thread.is_alive():
                return  # a writer stuck on a hung disk: left to die with the process
        self._disconnect()

    def __enter__(self) -> FlightRecorder:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the screen should say about the recording now."""
        notes = self._notes
        if notes:
            now = self._clock()
            notes = self._notes = [(text, until) for text, until in notes if until > now]
        problem = self._problem
        said = tuple(text for text, _ in notes)
        return said + (problem,) if problem else said

    @property
    def recording(self) -> bool:
        """Whether samples go to disk now (open, not paused, not refused)."""
        return self._db is not None and self._retry_at is None and self._problem is None

    # ------------------------------------------------------------------ the tick's side
    def record(self, t: float, gpus: Sequence[GpuInfo], host: HostInfo | None) -> None:
        """One tick's readings at sample time ``t`` (seconds since the epoch). Cheap:
        a reference to the readings is kept; the writer thread does the rest."""
        if not self._opened:
            self.open()
        if self._closed or not (isinstance(t, (int, float)) and math.isfinite(t)) or t < 0:
            return
        sec = int(t)
        mono = self._monotonic()
        with self._lock:
            last = self._last_s
            if last is not None and sec <= last:
                if last - sec <= BACKSTEP_S:
                    return  # the same second, or a small step back: wait for the clock
                self._hand_off()  # a clock set back: what waits is written, time restarts
                self._put(("clock", sec // 60), HANDOFF_WAIT_S)
                self._leap = None
            elif last is not None and self._mono_last is not None:
                ahead = (sec - last) - max(0.0, mono - self._mono_last)
                if ahead > LEAP_S:  # a clock stepped forward: the raw window waits
                    self._leap = (sec, int(ahead))
            self._last_s, self._mono_last = sec, mono
            retry = self._retry_at
            if retry is not None and sec < retry:
                self._dropped_tick += 1  # paused: tried again at `retry`
                return
            self.samples += 1
            if not self._buffer:
                self._flush_at = sec + self.batch_s
            self._buffer.append(_Sample(sec, tuple(gpus), host))
            if sec >= self._flush_at or len(self._buffer) >= self.max_buffer:
                self._hand_off()

    def flush(self, timeout: float = 60.0) -> None:
        """Hand off what waits and wait until the writer has written everything."""
        with self._lock:
            if self._thread is None or self._closed:
                return
            self._hand_off(wait=timeout)
            done = threading.Event()
            if not self._put(("barrier", done), timeout):
                return
        done.wait(timeout)

    def _hand_off(self, final: bool = False, wait: float = HANDOFF_WAIT_S) -> None:
        batch, self._buffer = self._buffer, []
        if batch or final:
            if not self._put(("batch", _Batch(batch, final, self._last_s, self._leap)), wait):
                self._dropped_tick += len(batch)

    def _put(self, item: tuple[str, Any], wait: float) -> bool:
        """Queue for the writer, waiting at most ``wait`` for room (none after a
        hand-off that found no room, until one does)."""
        try:
            if self._slow and item[0] == "batch":
                self._queue.put_nowait(item)
            else:
                self._queue.put(item, timeout=wait)
        except queue.Full:
            self._slow = True
            self._problem = (f"flight recorder: writing {self.path} is too slow; "
                             "telemetry history is being dropped")
            return False
        self._slow = False
        return True

    # ------------------------------------------------------------------ the writer
    def _run(self) -> None:
        while True:
            kind, arg = self._queue.get()
            try:
                if kind == "stop":
                    return
                if kind == "clock":
                    self._agg_next = int(arg)
                elif kind == "batch":
                    began = time.thread_time()
                    self._write_batch(arg)
                    self.busy_s += time.thread_time() - began
            except Exception as exc:  # never let the writer die: a bug is a warning
                self._problem = f"flight recorder: {type(exc).__name__}: {exc}"
            finally:
                if kind == "barrier":
                    arg.set()

    def _write_batch(self, batch: _Batch) -> None:
        samples = self._pending + batch.samples
        self._pending = []
        newest = samples[-1].sec if samples else batch.newest
        if newest is None:
            return
        retry = self._retry_at
        if retry is not None and newest < retry:
            # Paused (a full disk): a batch handed off before the pause is dropped too,
            # not tried against the full disk (a small one may fit and end the pause
            # only to meet the full disk again with the next).
            self._dropped_writer += len(samples)
            return
        if self._db is not None and not self._still_ours():
            retry = None  # deleted: a new one at once; replaced by a link: refused, said
        if self._db is None:
            if retry is None or newest >= retry:
                self._try_open(newest)
            if self._db is None:
                self._dropped_writer += len(samples)
                return
        try:
            self._write(self._db, samples, newest, batch.final, batch.leap)
        except (sqlite3.Error, OSError) as exc:
            self._failed(exc, samples, newest)
            return
        self._busy = 0
        self.transactions += 1
        self.committed_s = newest
        self._problem = None
        self._retry_at = None

    def _write(self, db: sqlite3.Connection, batch: list[_Sample], newest: int,
               final: bool, leap: tuple[int, int] | None = None) -> None:
        """One transaction: the batch's raw rows; the minutes that closed aggregated;
        old raw rows deleted. Nothing of ``self`` changes unless it commits."""
        ids = dict(self._ids)
        agg_next = self._agg_next if self._agg_next is not None else (
            batch[0].sec if batch else newest) // 60
        gpus, hosts, disks = _rows(batch)
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(_INSERT_GPU, gpus)
            db.executemany(_INSERT_HOST, hosts)
            db.executemany(_INSERT_DISK, [
                (sec, _series_id(db, ids, SeriesKey("disk", path, "free")), free)
                for sec, path, free in disks])
            minute = newest // 60
            end = minute + 1 if final else minute
            if end > agg_next:
                _aggregate(db, ids, agg_next, end)
                agg_next = minute
                db.execute("INSERT OR REPLACE INTO meta VALUES ('aggregated_to', ?)",
                           (str(agg_next),))
                _prune(db, min((newest - self._raw_window(newest, leap)) // 60 * 60,
                               agg_next * 60))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            raise
        self._ids = ids
        self._agg_next = agg_next

    def _raw_window(self, newest: int, leap: tuple[int, int] | None) -> int:
        """How far back from ``newest`` raw rows are kept: the window, and for a
        window's time after a clock stepped forward, the step too (the rows from before
        it are as old as the time that passed, not as the clock says)."""
        if leap is not None and 0 <= newest - leap[0] < self.raw_keep_s:
            return self.raw_keep_s + leap[1]
        return self.raw_keep_s

    def _failed(self, exc: BaseException, samples: list[_Sample], sec: int) -> None:
        """A batch that did not commit: a corrupt store is moved aside and a new one
        started; a busy one keeps (part of) the batch for the next; anything else
        pauses."""
        kind = _kind(exc)
        if kind == "busy":
            self._busy += 1
            keep = samples[-(self.max_buffer // 2):] if self.max_buffer > 1 else []
            self._dropped_writer += len(samples) - len(keep)
            self._pending = keep
            if self._busy >= 3:
                self._problem = (f"flight recorder: another process holds {self.path}; "
                                 "telemetry history is being dropped")
            return
        self._dropped_writer += len(samples)
        if kind == "corrupt":
            self._disconnect()
            self._replace(f"{exc}", sec)
            return
        self._pause(kind, exc, sec)

    def _pause(self, kind: str, exc: BaseException, sec: int | None) -> None:
        """Recording stops until ``RETRY_S`` after ``sec`` (None: the next sample)."""
        if kind == "full":
            self._problem = (f"flight recorder paused: the disk of {self.path} is full; "
                             "telemetry history is not kept (tried again every "
                             f"{RETRY_S:g} s)")
        elif isinstance(exc, _Refused):
            self._problem = (f"flight recorder off: {exc.filename}: {exc.strerror}; "
                             "telemetry history is not kept")
        else:
            what = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            self._problem = (f"flight recorder paused: cannot write {self.path}: {what} "
                             f"(tried again every {RETRY_S:g} s)")
        self._retry_at = None if sec is None else sec + RETRY_S

    # ------------------------------------------------------------------ opening
    def _try_open(self, sec: int | None) -> int | None:
        """Open the store (a corrupt one replaced); the newest second it holds."""
        try:
            self._db, newest = self._connect()
        except (sqlite3.Error, OSError) as exc:
            if _kind(exc) == "corrupt":
                self._replace(f"{exc}", sec)
            else:
                self._pause(_kind(exc), exc, sec)
            return None
        self._problem = None
        self._retry_at = None
        return newest

    def _replace(self, reason: str, sec: int | None) -> None:
        """Move the unreadable store aside and start a new one."""
        try:
            aside = self._move_aside()
        except OSError as exc:
            self._pause(_kind(exc), exc, sec)
            return
        self._notes = [*self._notes, (
            f"flight recorder: {self.path.name} was unreadable ({reason}); moved aside "
            f"to {aside.name}, a new recording started", self._clock() + NOTE_S)]
        self._ids = {}
        self._agg_next = None
        try:
            self._db, _ = self._connect()
        except (sqlite3.Error, OSError) as exc:
            self._pause(_kind(exc), exc, sec)  # a second unreadable one: not in a loop
            return
        self._problem = None
        self._retry_at = None

    def _move_aside(self) -> Path:
        stamp = datetime.fromtimestamp(self._clock(), timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        aside = self.path.with_name(f"{self.path.name}.unreadable-{stamp}")
        n = 1
        while os.path.lexists(aside):
            aside = self.path.with_name(f"{self.path.name}.unreadable-{stamp}-{n}")
            n += 1
        for source, target in zip(_siblings(self.path), _siblings(aside), strict=True):
            if os.path.lexists(source):
                os.rename(source, target)  # a rename moves the entry, never what it names
        self._keep_newest("unreadable")
        return aside

    def _keep_newest(self, why: str) -> None:
        """Only the newest :data:`KEEP_ASIDE` stores set aside for ``why``."""
        asides = sorted(p for p in self.path.parent.glob(f"{self.path.name}.{why}-*")
                        if not p.name.endswith(("-wal", "-shm")))
        for old in asides[:-KEEP_ASIDE]:
            for file in _siblings(old):
                try:
                    os.unlink(file)
                except OSError:
                    pass

    def _still_ours(self) -> bool:
        """Whether the store's name still names the file open. A store deleted under
        the writer (its history would go nowhere) is left, the loss said, and a new one
        started; one replaced (by a link, another file) is left too, its history copied
        aside first: never written through the link."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            info = None
        except OSError:
            return True  # cannot tell: the write says what is wrong
        if info is not None and (info.st_dev, info.st_ino) == self._ident:
            return True
        orphan, self._db = self._db, None
        since = "" if self.committed_s is None else (
            " up to " + datetime.fromtimestamp(self.committed_s, timezone.utc)
            .strftime("%Y-%m-%d %H:%M:%SZ"))
        if info is None:
            note = (f"flight recorder: {self.path.name} was deleted while recording: the "
                    f"telemetry history it held{since} is lost; a new recording started")
        else:
            kept = self._keep_orphan(orphan)
            note = (f"flight recorder: {self.path.name} was replaced while recording; "
                    + (f"the history it held{since} was kept in {kept.name}" if kept else
                       f"the history it held{since} could not be kept"))
        if orphan is not None:
            try:
                orphan.close()
            except sqlite3.Error:
                pass
        if info is None:  # its WAL files, left by whoever deleted it, would replay into
            for file in _siblings(self.path)[1:]:  # the new store: they go with it
                if os.path.lexists(file) and not os.path.lexists(self.path):
                    try:
                        os.unlink(file)  # an unlink removes a link, never what it names
                    except OSError:
                        pass
        self._notes = [*self._notes, (note, self._clock() + NOTE_S)]
        self._ids = {}
        self._agg_next = None
        return False

    def _keep_orphan(self, orphan: sqlite3.Connection | None) -> Path | None:
        """The history of a store whose name was taken from it, copied (SQLite's
        backup) into a new file of its own beside it; None when it could not be."""
        if orphan is None:
            return None
        stamp = datetime.fromtimestamp(self._clock(), timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        kept = self.path.with_name(f"{self.path.name}.replaced-{stamp}")
        n = 1
        while os.path.lexists(kept):
            kept = self.path.with_name(f"{self.path.name}.replaced-{stamp}-{n}")
            n += 1
        try:
            os.close(open_no_follow(kept, os.O_RDWR | os.O_CREAT | os.O_EXCL))
            target = sqlite3.connect(kept)
            try:
                orphan.backup(target)
            finally:
                target.close()
        except (sqlite3.Error, OSError):
            for file in _siblings(kept):
                try:
                    os.unlink(file)
                except OSError:
                    pass
            return None
        self._keep_newest("replaced")
        return kept

    def _disconnect(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None

    def _connect(self) -> tuple[sqlite3.Connection, int | None]:
        """Open the store for writing: never through a link, never a file that is not
        the cockpit's own (regular, one link); create the schema; read where it stood
        (the newest second it holds)."""
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        _refuse_links(path)
        fd = open_no_follow(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK)
        try:
            held = os.fstat(fd)
            self._ident = (held.st_dev, held.st_ino)
            if not stat.S_ISREG(held.st_mode) or held.st_nlink != 1:
                raise _Refused(errno.EPERM, "it is not a regular file of its own (a hard "
                               "link or a device), and the cockpit writes only into its "
                               "own file", str(path))  # checked again: the same file
            # The writer thread uses the connection once open() has returned.
            db = sqlite3.connect(path, timeout=BUSY_MS / 1000, isolation_level=None,
                                 check_same_thread=False)
            try:
                now = os.lstat(path)  # the file SQLite opened is the one checked
                if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
                    raise _Refused(errno.ELOOP, "it was replaced while being opened",
                                   str(path))
                _refuse_links(path)
                newest = self._setup(db)
            except BaseException:
                db.close()
                raise
        finally:
            os.close(fd)
        return db, newest

    def _setup(self, db: sqlite3.Connection) -> int | None:
        db.execute("PRAGMA journal_mode=WAL").fetchone()
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT}")
        db.execute("PRAGMA cache_size=-2048")  # KiB: constant memory
        db.execute("BEGIN IMMEDIATE")
        try:
            tables = {str(r[0]) for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
            if tables:
                _check_recording(db, tables)
            else:
                for statement in _SCHEMA:
                    db.execute(statement)
                db.executemany("INSERT INTO meta VALUES (?, ?)", [
                    ("format", FORMAT), ("version", str(VERSION)),
                    ("created", datetime.fromtimestamp(self._clock(), timezone.utc)
                     .strftime("%Y-%m-%dT%H:%M:%SZ"))])
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        row = db.execute("SELECT value FROM meta WHERE key='aggregated_to'").fetchone()
        agg = _int_or_none(row[0]) if row else None
        newest = [r[0] for table in _RAW_TABLES for r in
                  db.execute(f"SELECT t FROM {table} ORDER BY t DESC LIMIT 1")
                  if isinstance(r[0], int)]
        self._agg_next = agg if agg is not None and 0 <= agg < 2**40 else None
        if self._agg_next is None and newest:
            # Raw rows of minutes never aggregated: from the oldest raw row.
            oldest = [r[0] for table in _RAW_TABLES for r in
                      db.execute(f"SELECT t FROM {table} ORDER BY t LIMIT 1")
                      if isinstance(r[0], int)]
            self._agg_next = min(oldest) // 60 if oldest else None
        self._ids = {SeriesKey(str(s), str(k), str(m)): int(i) for i, s, k, m in
                     db.execute("SELECT id, source, key, metric FROM series")}
        return max(newest) if newest else None
