"""A peer's history, read from its pulled copy: every event, none of them held whole.

This module owns reading ``.cockpit/peers/<N>/journal.jsonl`` (written only by
:mod:`cockpit.fleet.pull`) into the events this cockpit folds. The copy on disk is the
full record, and the fold sees every event of it, in order. Memory holds, per peer:

- where each event's line lies in the copy (an offset and a length: 12 bytes an event,
  12 MB for a million), and
- the newest :data:`PARSED_KEPT` events parsed (what the fold takes next),

so a peer's history of any length costs a bounded few MB beyond its index. An older
event asked for (a refold, ``export``, a binary search by time) is read again from the
copy and parsed; :class:`PeerEvents` makes that a plain sequence.

The copy is read in bounded chunks; a line over :data:`~cockpit.fleet.pull.MAX_LINE_BYTES`
(a hand-edited copy) is discarded while it streams past, never held whole. Each line is
checked as the own journal's lines are (:mod:`cockpit.journal.lines`).
"""

from __future__ import annotations

import logging
import os
import threading
from array import array
from collections.abc import Iterator, Sequence
from typing import IO, overload

from cockpit.fleet.pull import MAX_LINE_BYTES
from cockpit.journal.fields import Event
from cockpit.journal.format import JournalProblem
from cockpit.journal.lines import SkippedLine, event_of_line

log = logging.getLogger(__name__)

READ_CHUNK = 1024 * 1024
PROBLEMS_KEPT = 100
PARSED_KEPT = 4096  # newest events kept parsed per peer (older ones are read again)


class _Generation:
    """One copy of the peer's journal (a new one when the pull replaced it): the open
    file, the index of its events' lines and the newest events parsed. Only appended
    to, so a :class:`PeerEvents` taken earlier stays valid for its length."""

    def __init__(self, path: str, machine: int) -> None:
        self.machine = machine
        self.file: IO[bytes] | None = None
        try:
            self.file = open(path, "rb", buffering=0)  # noqa: SIM115 - lives with the copy
        except OSError:
            pass
        self.starts = array("q")  # each event's line: its byte offset ...
        self.lengths = array("l")  # ... and its length (newline excluded)
        self.parsed: tuple[int, list[Event]] = (0, [])  # (index of the first, events)

    def keep(self, offset: int, length: int, event: Event) -> None:
        self.starts.append(offset)
        self.lengths.append(length)
        first, events = self.parsed
        events.append(event)
        if len(events) >= 2 * PARSED_KEPT:  # replaced whole: a reader holds the old one
            self.parsed = (first + len(events) - PARSED_KEPT, events[-PARSED_KEPT:])

    def read(self, start: int, stop: int) -> list[Event]:
        """Events ``start`` to ``stop`` (indexes): the parsed ones from memory, the
        others read again from the copy, a bounded chunk at a time."""
        first, events = self.parsed
        if start >= first:
            return events[start - first:stop - first]
        out: list[Event] = []
        i = start
        disk_stop = min(stop, first)
        while i < disk_stop:
            j, base = i, self.starts[i]
            while j < disk_stop and self.starts[j] + self.lengths[j] - base <= READ_CHUNK:
                j += 1
            j = max(j, i + 1)
            end = self.starts[j - 1] + self.lengths[j - 1]
            block = os.pread(self.fileno(), end - base, base)
            for k in range(i, j):
                at = self.starts[k] - base
                out.append(self._event(block[at:at + self.lengths[k]]))
            i = j
        if stop > first:
            out.extend(events[:stop - first])
        return out

    def fileno(self) -> int:
        if self.file is None:
            raise OSError(f"machine {self.machine}: its copy could not be opened")
        return self.file.fileno()

    def _event(self, raw: bytes) -> Event:
        try:
            event = event_of_line(raw)
        except SkippedLine:
            event = None
        if event is None:  # checked when first read: the copy changed under us
            raise OSError(f"machine {self.machine}: its copy changed while it was read")
        event["machine"] = self.machine
        return event


class PeerEvents(Sequence[Event]):
    """A peer's events as of one read: a sequence of a fixed length (each event
    tagged ``machine: N``); the newest are in memory, older ones are read again."""

    def __init__(self, generation: _Generation | None, length: int) -> None:
        self._generation = generation
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if step != 1:
                return self[start:stop][::step]
            if stop <= start or self._generation is None:
                return []
            return self._generation.read(start, stop)
        if index < 0:
            index += self._length
        if not 0 <= index < self._length or self._generation is None:
            raise IndexError("peer event index out of range")
        return self._generation.read(index, index + 1)[0]

    def __iter__(self) -> Iterator[Event]:
        for start in range(0, self._length, PARSED_KEPT):
            yield from self[start:start + PARSED_KEPT]


class PeerHistory:
    """The events of one peer's copy, tagged ``machine: N`` (see the module text).

    :meth:`refresh` reads what the copy gained (the pull thread calls it after each
    pull); :meth:`events` returns the last :class:`PeerEvents` published, replaced,
    never changed, so a reader in another thread always sees a consistent history."""

    def __init__(self, path: os.PathLike[str] | str, machine: int) -> None:
        self.path = os.fspath(path)
        self.machine = machine
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._generation: _Generation | None = None
        self._problems: list[JournalProblem] = []
        self._dropped = 0  # problems not kept (past PROBLEMS_KEPT)
        self._ident: tuple[int, int] | None = None
        self._sig: tuple[int, int, int] | None = None
        self._offset = 0  # bytes read: always the end of a whole line
        self._lines = 0
        self._partial = b""
        self._discarding = False  # inside a line over the maximum
        self._published = PeerEvents(None, 0)

    def events(self) -> PeerEvents:
        """The events published by the last refresh."""
        return self._published

    def problems(self) -> list[JournalProblem]:
        return list(self._problems)

    def refresh(self, wait: bool = True) -> bool:
        """Read what the copy gained; False when another thread is reading it now and
        ``wait`` is False (the caller keeps the published events)."""
        if not self._lock.acquire(blocking=wait):
            return False
        try:
            self._refresh()
        finally:
            self._lock.release()
        return True

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except OSError:
            if self._ident is not None:
                self._reset()
            return
        ident = (st.st_dev, st.st_ino)
        if self._ident is not None and (ident != self._ident or st.st_size < self._offset):
            self._reset()  # the pull replaced the copy (the peer's journal changed)
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        if sig == self._sig:
            return
        if self._generation is None:
            self._generation = _Generation(self.path, self.machine)
        generation = self._generation
        if generation.file is None:
            return
        before = len(generation.starts)
        self._ident = ident
        end = st.st_size
        pos = self._offset + len(self._partial)
        while pos < end:
            chunk = os.pread(generation.fileno(), min(READ_CHUNK, end - pos), pos)
            if not chunk:
                break
            pos += len(chunk)
            self._take(chunk)
        self._sig = sig
        if len(generation.starts) != before:
            self._published = PeerEvents(generation, len(generation.starts))

    def _take(self, chunk: bytes) -> None:
        start = 0
        while True:
            cut = chunk.find(b"\n", start)
            if cut < 0:
                rest = chunk[start:]
                if not self._discarding and len(self._partial) + len(rest) >= MAX_LINE_BYTES:
                    self._discarding = True
                    self._partial = b""
                if self._discarding:
                    self._offset += len(rest)
                else:
                    self._partial += rest
                return
            piece = chunk[start:cut]
            start = cut + 1
            self._lines += 1
            if self._discarding:
                self._offset += len(piece) + 1
                self._discarding = False
                self._problem(f"over {MAX_LINE_BYTES} bytes: skipped")
                continue
            raw = self._partial + piece
            self._partial = b""
            at = self._offset
            self._offset += len(raw) + 1
            if len(raw) >= MAX_LINE_BYTES:
                self._problem(f"over {MAX_LINE_BYTES} bytes: skipped")
                continue
            self._line(at, raw)

    def _line(self, at: int, raw: bytes) -> None:
        try:
            event = event_of_line(raw)
        except SkippedLine as exc:
            self._problem(str(exc))
            return
        if event is None or self._generation is None:
            return  # a blank line
        event["machine"] = self.machine
        self._generation.keep(at, len(raw), event)

    def _problem(self, message: str) -> None:
        if len(self._problems) >= PROBLEMS_KEPT:
            self._dropped += 1
            return
        self._problems.append(JournalProblem(self._lines, message))
        log.warning("machine %d: pulled journal line %d: %s", self.machine, self._lines,
                    message)
