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

from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from cockpit.journal.fields import Event
from cockpit.journal.format import JournalProblem


class JournalView(Protocol):
    """Inside a journal transaction (the lock held)."""

    @property
    def events(self) -> list[Event]:
        """Every valid event, read under the lock (the ones appended in this block too)."""
        ...

    def append(self, kind: str, now: datetime | None = None, **fields: Any) -> Event:
        """Append one event durably; return it as written (with ``seq`` and ``t``)."""
        ...


class JournalWriter(Protocol):
    """A campaign's journal, to read and to write."""

    def events(self) -> list[Event]:
        """Every valid event so far (treat them as read-only)."""
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


__all__ = ["Event", "JournalView", "JournalWriter"]
