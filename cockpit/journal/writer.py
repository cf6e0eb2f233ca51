"""The one writer interface: what every module that journals is handed.

The engine, the export (``export_done``), the acceptance verdicts
(:mod:`cockpit.close.acceptance`) and the environment record
(:mod:`cockpit.runs.env_record`) write through a :class:`JournalWriter`, never by
opening a journal file of their own: :class:`cockpit.journal.log.Journal` is the real
one, :class:`cockpit.journal.log.NullJournal` the fleet's (it writes nothing), and tests
hand in their own (a journal whose appends fail on cue). Inside
:meth:`JournalWriter.transaction` a writer gets a :class:`JournalView`: the events read
under the lock, and ``append`` under it (claim before you act).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from cockpit.common.errors import ActionRefused
from cockpit.journal.fields import Event
from cockpit.journal.format import JournalProblem


class JournalFollower(Protocol):
    """Takes a journal's events as they are read (the incremental fold)."""

    def read(self, events: list[Event]) -> None:
        """More valid events (a chunk's), in the file's order."""
        ...

    def replaced(self) -> None:
        """The file was replaced, truncated or rewritten: its events come again."""
        ...


class JournalView(Protocol):
    """Inside a journal transaction (the lock held)."""

    @property
    def events(self) -> list[Event]:
        """Every valid event, read under the lock (the ones appended in this block too)."""
        ...

    @property
    def count(self) -> int:
        """How many valid events there are (the next is numbered ``count + 1``)."""
        ...

    def recent(self, n: int = ...) -> list[Event]:
        """The newest ``n`` events (a bounded window), oldest first."""
        ...

    def has_key(self, key: str) -> bool:
        """Whether an event with this once-only ``key`` exists."""
        ...

    def has_kind(self, kind: str) -> bool:
        """Whether an event of this kind exists."""
        ...

    def append(self, kind: str, now: datetime | None = None, **fields: Any) -> Event:
        """Append one event durably; return it as written (with ``seq`` and ``t``)."""
        ...


class JournalWriter(Protocol):
    """A campaign's journal, to read and to write."""

    def events(self) -> list[Event]:
        """Every valid event so far (treat them as read-only)."""
        ...

    def scan(self) -> Iterator[Event]:
        """Every valid event from the start, read afresh and not kept (one-shot readers)."""
        ...

    def follow(self, follower: JournalFollower) -> None:
        """Hand every event to ``follower`` as it is read (the ones read already too)."""
        ...

    def refresh(self) -> None:
        """Read what was appended (a follower takes it)."""
        ...

    def recent(self, n: int = ...) -> list[Event]:
        """The newest ``n`` events (a bounded window), oldest first."""
        ...

    def has_key(self, key: str) -> bool:
        """Whether an event with this once-only ``key`` was journaled."""
        ...

    def event_at(self, seq: int) -> Event | None:
        """The event numbered ``seq`` (the recent window first, then the file)."""
        ...

    def problems(self) -> list[JournalProblem]:
        """The lines skipped, each located."""
        ...

    def append(self, kind: str, now: datetime | None = None, **fields: Any) -> Event:
        """Append one event durably; return it as written (with ``seq`` and ``t``)."""
        ...

    def transaction(self) -> AbstractContextManager[JournalView]:
        """Hold the lock for a block: read under it, append under it."""
        ...


__all__ = ["Event", "JournalFollower", "JournalView", "JournalWriter", "NullJournal"]


class NullJournal:
    """`cockpit fleet` has no journal of its own: nothing to read, nothing written."""

    def events(self) -> list[Event]:
        return []

    def scan(self) -> Iterator[Event]:
        return iter(())

    def follow(self, follower: JournalFollower) -> None:
        pass

    def refresh(self) -> None:
        pass

    def recent(self, n: int = 0) -> list[Event]:
        return []

    def has_key(self, key: str) -> bool:
        return False

    def event_at(self, seq: int) -> Event | None:
        return None

    def problems(self) -> list[JournalProblem]:
        return []

    def append(self, kind: str, now: datetime | None = None, **fields: Any) -> Event:
        raise ActionRefused("cockpit fleet writes no journal: actions run on the machine "
                            "that owns the stage")

    def transaction(self) -> AbstractContextManager[JournalView]:
        raise ActionRefused("cockpit fleet writes no journal: actions run on the machine "
                            "that owns the stage")
