"""The campaign journal: the append-only event log that is the one source of truth.

This module owns the file ``.cockpit/journal.jsonl`` (the path is given to
:class:`Journal`): writing events atomically and durably, and reading them back
incrementally while tolerating damage. Folding events into campaign state is
:mod:`cockpit.journal.fold`'s job. Every writer is handed this file behind the one
writer interface, :class:`cockpit.journal.writer.JournalWriter`. The paths (this file,
its lock) are named in :mod:`cockpit.journal.paths`.

File format: one JSON object a line, UTF-8::

    {"seq": 3, "t": "2024-12-02T09:15:00.000000Z", "kind": "run_started", "run": "A1", ...}

- ``seq`` is 1 + the number of valid events before it, computed under the lock.
- ``t`` is ISO-8601 UTC with microseconds and a ``Z``, from an injected ``now``.
- Values are plain JSON, except that non-finite floats (a NaN loss) are written in
  Python's spelling (``NaN``, ``Infinity``) and read back as floats.

Durability and concurrency: every append takes an exclusive ``fcntl.flock`` on the
sibling file ``journal.jsonl.lock``, reads what other writers added, writes ONE
complete line with ONE ``os.write`` to an fd opened with ``O_APPEND`` and fsyncs it.
The lock lives on a sibling file rather than on the journal itself because the
journal may be missing (first append creates it), truncated or replaced by a new
inode; a lock on the journal's inode would then no longer exclude a writer that
opened the new file. The lock file is never replaced, so every cockpit process on
the campaign contends on the same inode. The lock file is opened anew for each
locked block (never inherited across fork, where a shared open file description
would silently share the lock).

Damage: a line that is not a JSON object with a string ``kind`` is garbage: it is
skipped and reported in :meth:`Journal.problems` (and logged once as a warning),
never fatal. Bytes after the last newline are a *torn* line (kill -9 or power loss
mid-write, or a writer caught mid-line): they are not an event, they are reported
via :attr:`Journal.torn`, and before the next append a ``"\\n"`` is written first so
the fragment becomes a separate garbage line instead of corrupting the new event.

Event kinds: the one table, :data:`cockpit.journal.events.EVENT_KINDS` (each kind's
fields, their types, who may write it, its human line); every line read is checked
against it (a field of the wrong type: the line is skipped, located, like garbage).

Times: ``t`` never goes back within one writer (one :class:`Journal` object): after a
wall-clock step back it stays at the last time written until the clock passes it; the
engine journals the step itself (``clock_jump``) and ``seq`` keeps the order.

Claiming: :meth:`Journal.transaction` holds the lock for a block, gives the complete
event list read under that lock and appends under it, so "no ``stage_started`` for
X yet, so start X" cannot be decided by two processes at once.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import json
import logging
import os
import stat
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from operator import itemgetter
from pathlib import Path
from typing import Any, cast

from cockpit.common.event_kinds import VERIFY_STARTED
from cockpit.journal.cache import pack_bytes, unpack_bytes
from cockpit.journal.fields import Event
from cockpit.journal.format import (
    JournalError,
    JournalProblem,
    format_time,
    journal_error,
    parse_time,
    sha256_file,
)
from cockpit.journal.lines import LongRead, SkippedLine, decoded_lines, event_of_line
from cockpit.journal.paths import journal_lock_of
from cockpit.journal.txn import RECENT_KEPT, JournalTxn
from cockpit.journal.writer import JournalFollower

__all__ = [
    "Journal",
    "JournalError",
    "JournalProblem",
    "JournalTxn",
    "format_time",
    "parse_time",
    "sha256_file",
]

log = logging.getLogger(__name__)

_RESERVED = frozenset({"seq", "t", "kind"})
# Bytes kept from the file's start (its first line, up to 4 KiB) and from just before
# the read offset, to notice a file rewritten in place to at least the same size (same
# inode, no shrink): two small preads, only when size or mtime changed.
_HEAD_CHECK = 4096
_TAIL_CHECK = 64
_READ_CHUNK = 65536  # a chunk's events are handed over together
PROBLEMS_KEPT = 100  # lines named one by one in Journal.problems(); the rest counted


class Journal:
    """Append-only JSON-lines event log with incremental, damage-tolerant reading.

    Thread-safe within a process; safe across processes through the sibling lock file.
    Commands that only read never create anything: :meth:`events` on a missing file
    returns ``[]``.
    """

    def __init__(self, path: Path, *, bounded: bool = False) -> None:
        self.path = Path(path)
        # Bounded (the engine's): no list of every event; the recent window, the count
        # and the once-only keys only (a follower takes each event as it is read).
        self.bounded = bounded
        self._follower: JournalFollower | None = None
        self.lock_path = journal_lock_of(self.path)
        self._mutex = threading.RLock()
        self._keep = True  # False: a scan's reader, which streams and keeps nothing
        self._streamed: list[Event] = []
        self._in_txn: threading.local = threading.local()
        self._last_written: datetime | None = None  # the latest ``t`` this writer wrote
        self._reset()

    # ------------------------------------------------------------------ reading
    def _reset(self, replaced: bool = False) -> None:
        if replaced and self._follower is not None:
            self._follower.replaced()  # what it folded is gone: start again
        self._events: list[Event] = []  # every event (unbounded journals only)
        self._count = 0  # valid events read
        self._recent: deque[Event] = deque(maxlen=RECENT_KEPT)
        self._keys: set[str] = set()
        self._kinds: set[str] = set()  # the kinds journaled (a kind written once)
        self._garbage: list[JournalProblem] = []  # the first PROBLEMS_KEPT, then counted
        self._more_problems = 0
        self._ino: int | None = None
        self._dev: int | None = None
        self._offset = 0  # bytes consumed: always the end of a complete line
        self._lines = 0  # complete lines consumed
        self._head = b""  # first bytes of the file, to detect in-place rewrites
        self._tail = b""  # last bytes before _offset, likewise
        self._partial = b""  # bytes after the last newline (a torn or in-flight line)
        self._torn_warned: tuple[int, int] | None = None
        self._signature: tuple[int, ...] | None = None  # (ino, size, mtime, ctime) last read

    def events(self) -> list[Event]:
        """All valid events so far (reads only bytes added since the last call; a
        bounded journal reads the whole file again: for one-shot readers only).

        The dicts are shared with the journal's cache: treat them as read-only.
        """
        with self._mutex:
            self._refresh()
            if self.bounded:
                return list(self.scan())
            return list(self._events)

    def scan(self) -> Iterator[Event]:
        """Every valid event from the file's start, read afresh and not kept (the export,
        REPORT.md, a history folded again)."""
        reader = Journal(self.path)
        reader._keep = False  # stream: hand each event over, hold none
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise journal_error(self.path, "read", exc) from exc
        try:
            for _ in reader._read_lines(fd):
                yield from reader._streamed
                reader._streamed.clear()
        finally:
            os.close(fd)

    def follow(self, follower: JournalFollower) -> None:
        """Hand every event read from now on to ``follower`` as it is read (the events
        read already too: an unbounded journal hands its list over, a bounded one reads
        its file again)."""
        with self._mutex:
            self._follower = follower
            if self.bounded and self._count:
                self._reset()
            if self._events:
                follower.read(list(self._events))

    def refresh(self) -> None:
        """Read what was appended (a follower takes it)."""
        with self._mutex:
            self._refresh()

    @property
    def count(self) -> int:  # valid events, as of the last read
        return self._count

    def position(self) -> dict[str, Any]:
        """Where reading stopped (JSON values), for the state cache to resume from."""
        with self._mutex:
            return {"offset": self._offset, "lines": self._lines, "count": self._count,
                    "head": pack_bytes(self._head), "tail": pack_bytes(self._tail),
                    "keys": sorted(self._keys), "kinds": sorted(self._kinds),
                    "recent": list(self._recent),
                    "problems": [[p.line, p.message] for p in self._garbage],
                    "more_problems": self._more_problems}

    def resume(self, pos: Mapping[str, Any]) -> None:
        """Go on reading after a cached :meth:`position` (the cache checked that the
        file still holds that prefix); the events before it are not read again."""
        with self._mutex:
            self._reset()
            self._offset, self._lines, self._count = (
                int(pos["offset"]), int(pos["lines"]), int(pos["count"]))
            self._head, self._tail = unpack_bytes(pos["head"]), unpack_bytes(pos["tail"])
            self._keys, self._kinds = set(pos["keys"]), set(pos["kinds"])
            self._recent.extend(cast(Event, ev) for ev in pos["recent"])
            self._garbage = [JournalProblem(int(n), str(m)) for n, m in pos["problems"]]
            self._more_problems = int(pos["more_problems"])

    def recent(self, n: int = RECENT_KEPT) -> list[Event]:
        """The newest ``n`` valid events (at most :data:`RECENT_KEPT`), oldest first."""
        with self._mutex:
            self._refresh()
            return list(self._recent)[-n:] if n > 0 else []

    def has_key(self, key: str) -> bool:
        """Whether an event with this once-only ``key`` was journaled (a verification
        claim's key is not kept: claims are looked up in the recent window)."""
        with self._mutex:
            self._refresh()
            return key in self._keys

    def event_at(self, seq: int) -> Event | None:
        """The event numbered ``seq``: from the recent window, else read from the file."""
        for ev in itertools.chain(reversed(self.recent()), self.scan()):
            if ev.get("seq") == seq:
                return cast(Event, ev)
        return None

    def problems(self) -> list[JournalProblem]:
        """Skipped garbage lines, then the torn last line if there is one."""
        with self._mutex:
            self._refresh()
            torn = self._torn_problem()
            more = [JournalProblem(self._lines, f"and {self._more_problems} more lines "
                                   "skipped or misnumbered")] if self._more_problems else []
            return [*self._garbage, *more, *([torn] if torn else [])]

    @property
    def torn(self) -> JournalProblem | None:
        """The final line if it has no newline yet (as of the last read)."""
        with self._mutex:
            return self._torn_problem()

    def _torn_problem(self) -> JournalProblem | None:
        if not self._partial:
            return None
        return JournalProblem(
            self._lines + 1,
            f"torn last line ({len(self._partial)} bytes without a newline): ignored",
        )

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._ino is not None or self._count or self._garbage:
                self._reset(replaced=True)  # removed: nothing happened, as far as we know
            return
        except OSError as exc:
            raise journal_error(self.path, "read", exc) from exc
        if stat.S_ISDIR(st.st_mode):
            raise JournalError(
                f"cannot read journal {self.path}: a folder is where the journal file should be"
            )
        if not stat.S_ISREG(st.st_mode):
            raise JournalError(f"cannot read journal {self.path}: not a regular file")
        replaced = self._ino is not None and (st.st_ino, st.st_dev) != (self._ino, self._dev)
        if replaced or st.st_size < self._offset:
            log.warning("journal %s was replaced or truncated: reading it again", self.path)
            self._reset(replaced=True)
        signature = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if signature == self._signature and self._ino is not None:
            return  # nothing new (the common tick): one stat, no open
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise journal_error(self.path, "read", exc) from exc
        try:
            if self._offset and (
                os.pread(fd, len(self._head), 0) != self._head
                or os.pread(fd, len(self._tail), self._offset - len(self._tail)) != self._tail
            ):
                log.warning("journal %s was rewritten in place: reading it again", self.path)
                self._reset(replaced=True)
            self._ino, self._dev = st.st_ino, st.st_dev
            self._read_from(fd)
            self._signature = signature
        except OSError as exc:
            raise journal_error(self.path, "read", exc) from exc
        finally:
            os.close(fd)

    def _read_from(self, fd: int) -> None:
        for _ in self._read_lines(fd):
            pass

    def _read_lines(self, fd: int) -> Iterator[None]:
        """Read the complete lines after the offset, a chunk at a time (a journal of a
        million events is never held as one bytes object); yields after each chunk,
        its events taken."""
        pos, pending = self._offset, b""
        long_read = LongRead()
        try:
            while chunk := os.pread(fd, _READ_CHUNK, pos):
                pos += len(chunk)
                data = pending + chunk
                end = data.rfind(b"\n")
                if end < 0:
                    pending = data
                    continue
                before, block = self._count, data[:end]
                self._take_lines(decoded_lines(block), long_read.active)
                long_read.took(block, self._count - before)
                self._offset = pos - (len(data) - end - 1)
                self._tail = data[max(0, end + 1 - _TAIL_CHECK): end + 1]
                pending = data[end + 1:]
                if not self._head:
                    first = os.pread(fd, _HEAD_CHECK, 0)
                    self._head = first[: first.find(b"\n") + 1 or _HEAD_CHECK]
                yield
        finally:
            if long_read.active and self._keep:
                self._recent.extend(long_read.newest())
        self._partial = pending
        torn = self._torn_problem()
        if torn is not None and self._torn_warned != (torn.line, len(self._partial)):
            self._torn_warned = (torn.line, len(self._partial))
            log.warning("journal %s line %d: %s", self.path, torn.line, torn.message)

    def _take_lines(self, lines: list[str | bytes], long_read: bool = False) -> None:
        """Check a chunk's lines (each numbered, a bad one located) and take its events
        (``long_read``: the recent window is filled at the read's end, not now)."""
        taken: list[Event] = []
        line_no, count = self._lines, self._count
        for line in lines:
            line_no += 1
            try:
                event = event_of_line(line)
            except SkippedLine as exc:
                self._problem(line_no, str(exc))
                continue
            if event is None:
                continue  # a blank line carries nothing and harms nothing
            count += 1
            if event.get("seq") != count:
                # Kept: the event itself is readable; the numbering is only a cross-check.
                self._problem(line_no, f"seq {event.get('seq')!r} where {count} was "
                              "expected: kept")
            taken.append(event)
        self._lines, self._count = line_no, count
        if taken:
            self._keep_events(taken, long_read)

    def _keep_events(self, taken: list[Event], long_read: bool = False) -> None:
        if not self._keep:
            self._streamed.extend(taken)
            return
        if not long_read:
            self._recent.extend(taken)
        self._kinds.update(map(itemgetter("kind"), taken))
        self._keys.update(key for ev in taken if "key" in ev and isinstance(key := ev["key"], str)
                          and ev["kind"] != VERIFY_STARTED)
        if not self.bounded:
            self._events.extend(taken)
        if self._follower is not None:
            self._follower.read(taken)

    def _problem(self, line_no: int, message: str) -> None:
        """A line skipped or misnumbered: kept and logged for the first
        :data:`PROBLEMS_KEPT`, counted after (a journal of a million bad lines stays small)."""
        if len(self._garbage) >= PROBLEMS_KEPT:
            self._more_problems += 1
            return
        self._garbage.append(JournalProblem(line_no, message))
        log.warning("journal %s line %d: %s", self.path, line_no, message)

    # ------------------------------------------------------------------ writing
    def append(self, kind: str, now: datetime | None = None, **fields: Any) -> Event:
        """Append one event durably and return it as written (with ``seq`` and ``t``)."""
        if getattr(self._in_txn, "active", False):
            # flock on a second fd from this process would wait for ourselves forever.
            raise JournalError("Journal.append inside a transaction: use txn.append")
        with self._locked() as fd_getter:
            return self._append_locked(fd_getter(), kind, now, fields)

    @contextmanager
    def transaction(self) -> Iterator[JournalTxn]:
        """Hold the exclusive lock for the block; ``txn.events`` is read under it."""
        if getattr(self._in_txn, "active", False):
            raise JournalError("journal transactions do not nest")
        with self._locked() as fd_getter:
            txn = JournalTxn(self, fd_getter)
            self._in_txn.active = True
            try:
                yield txn
            finally:
                self._in_txn.active = False
                txn._open = False

    @contextmanager
    def _locked(self) -> Iterator[Any]:
        """Thread mutex + flock on the lock file; yields a getter for the append fd."""
        with self._mutex:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if self.path.is_dir():
                    raise IsADirectoryError(errno.EISDIR, "is a directory", str(self.path))
                # O_NOFOLLOW: a journal or lock that is a symlink would be written through
                # into whatever it points at; refuse it instead.
                lock_fd = os.open(self.lock_path,
                                  os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            except OSError as exc:
                raise journal_error(self.path, "lock", exc) from exc
            write_fd: int | None = None

            def fd_getter() -> int:
                nonlocal write_fd
                if write_fd is None:
                    write_fd = self._open_for_append()
                return write_fd

            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX)
                self._refresh()
                yield fd_getter
            finally:
                if write_fd is not None:
                    os.close(write_fd)
                os.close(lock_fd)  # closing releases the flock

    def _open_for_append(self) -> int:
        created = not self.path.exists()
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
                         | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise journal_error(self.path, "open", exc) from exc
        if created:
            # Make the new directory entry durable too, not only the file's bytes.
            try:
                dir_fd = os.open(self.path.parent, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
            except OSError:
                pass  # some filesystems refuse fsync on a folder; the data fsync still holds
        return fd

    def _append_locked(
        self, fd: int, kind: str, now: datetime | None, fields: dict[str, Any]
    ) -> Event:
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"event kind must be a non-empty string, got {kind!r}")
        clash = _RESERVED.intersection(fields)
        if clash:
            raise ValueError(f"event fields may not be named {sorted(clash)}")
        when = datetime.now(timezone.utc) if now is None else now
        if self._last_written is not None and when < self._last_written:
            # Times never go back within one writer: after a wall-clock step back, ``t``
            # stays at the last time written until the clock passes it again (the engine
            # journals the step itself as ``clock_jump``; ``seq`` keeps the order).
            when = self._last_written
        stamp = format_time(when)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                # Seal a torn fragment as its own (garbage) line before our event.
                os.write(fd, b"\n")
            self._refresh()
            event = {"seq": self._count + 1, "t": stamp, "kind": kind, **fields}
            # default=str: Paths, Decimals and datetimes become strings rather than errors.
            line = (json.dumps(event, default=str, ensure_ascii=False) + "\n").encode("utf-8")
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(errno.EIO, f"short write ({written} of {len(line)} bytes)")
            os.fsync(fd)
        except OSError as exc:
            raise journal_error(self.path, "append to", exc) from exc
        before = self._count
        self._refresh()
        if self._count != before + 1:  # pragma: no cover - would mean a broken lock
            raise JournalError(f"journal {self.path}: appended event was not read back")
        self._last_written = when
        return cast(Event, dict(self._recent[-1]))
