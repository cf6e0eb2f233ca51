"""One journal line to one event, or the words for why it is skipped: the one check
every reader of a journal applies (this machine's :class:`~cockpit.journal.log.Journal`
and a peer's pulled copy, :mod:`cockpit.fleet.history`).

A line is an event when it is bounded JSON (:func:`~cockpit.common.safe_json.loads_bounded`)
holding an object with a string ``kind`` whose fields fit the table
(:func:`~cockpit.journal.events.event_problem`). Anything else is skipped with a
located problem by the caller; one bad line never stops a reader.
"""

from __future__ import annotations

from collections import deque
from typing import cast

from cockpit.common.safe_json import MAX_DEPTH, RAW_DECODE, TooDeep, loads_bounded
from cockpit.journal.events import event_problem
from cockpit.journal.fields import Event
from cockpit.journal.txn import RECENT_KEPT

# What bytes.strip() strips: a line of only these is blank (skipped, not a problem).
ASCII_SPACE = " \t\n\r\x0b\x0c"


class SkippedLine(ValueError):
    """A line that is not an event; the message says why, ending in ": skipped"."""


def decoded_lines(data: bytes) -> list[str | bytes]:
    """The lines of ``data`` (whole lines, no newlines), decoded in one call; when the
    block is not valid UTF-8, the lines as bytes (each then decoded alone: the bad one
    is a problem, its neighbours are read)."""
    lines: list[str | bytes] = []
    try:
        lines.extend(data.decode("utf-8").split("\n"))
    except UnicodeDecodeError:
        lines.extend(data.split(b"\n"))
    return lines


def event_of_line(line: str | bytes) -> Event | None:
    """The event a line from :func:`decoded_lines` holds (None: a blank line), or
    :class:`SkippedLine`."""
    # The common line first, in one frame (a cold open reads a million): one JSON object
    # with too few brackets to nest too deep, a string kind, every field fitting.
    if type(line) is str and line[:1] == "{" and \
            line.count("[") + line.count("{") <= MAX_DEPTH:
        try:
            event, end = RAW_DECODE(line)
        except ValueError:
            pass
        else:
            if end == len(line) and type(event) is dict and \
                    type(event.get("kind")) is str and event_problem(event) is None:
                return cast(Event, event)
    return _odd_line(line)


def _odd_line(line: str | bytes) -> Event | None:
    """Any other line: blank, not UTF-8, not JSON, too deep, not an event, a field that
    does not fit (each skipped with its reason), or JSON with space around it."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError:
            if not line.strip():
                return None
            raise SkippedLine("not valid JSON (UnicodeDecodeError): skipped") from None
    if line[:1] != "{" and not line.strip(ASCII_SPACE):
        return None
    try:
        event = loads_bounded(line)
    except TooDeep as exc:
        raise SkippedLine(f"not an event ({exc}): skipped") from None
    except ValueError as exc:
        raise SkippedLine(f"not valid JSON ({exc.__class__.__name__}): skipped") from None
    if type(event) is not dict or not isinstance(event.get("kind"), str):
        raise SkippedLine("not an event (a JSON object with a string 'kind'): skipped")
    wrong = event_problem(event)
    if wrong is not None:
        raise SkippedLine(f"{event['kind']} event with a bad field ({wrong}): skipped")
    return cast(Event, event)


class LongRead:
    """A read of more events than the recent window holds (a cold open): past the
    first :data:`RECENT_KEPT` events, the window is not filled event by event (every
    event would be held until 4,096 later ones pushed it out: a million dicts passing
    through memory that is no longer in the CPU's cache); the last chunks' bytes are
    kept instead, and their events parsed again at the read's end."""

    def __init__(self) -> None:
        self._taken = 0  # events this read took
        self._chunks: deque[tuple[bytes, int]] = deque()  # the newest chunks, their events
        self._in_chunks = 0
        self.active = False

    def took(self, lines: bytes, events: int) -> None:
        self._taken += events
        if not self.active:
            self.active = self._taken >= RECENT_KEPT
            return
        self._chunks.append((lines, events))
        self._in_chunks += events
        while self._chunks and self._in_chunks - self._chunks[0][1] >= RECENT_KEPT:
            self._in_chunks -= self._chunks.popleft()[1]

    def newest(self) -> list[Event]:
        """The newest :data:`RECENT_KEPT` events of the kept chunks (checked again; a
        line skipped the first time is skipped again, its problem already recorded)."""
        events: list[Event] = []
        for lines, _ in self._chunks:
            for line in decoded_lines(lines):
                try:
                    event = event_of_line(line)
                except SkippedLine:
                    continue
                if event is not None:
                    events.append(event)
        return events[-RECENT_KEPT:]
