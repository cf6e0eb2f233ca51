"""Inside :meth:`cockpit.journal.log.Journal.transaction`: the view a writer gets while
the journal's lock is held (read under it, append under it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cockpit.journal.fields import Event
from cockpit.journal.format import JournalError

RECENT_KEPT = 4096  # the newest events every journal holds (claims are looked up there)


class JournalTxn:
    """The view of the journal inside :meth:`Journal.transaction` (lock held)."""

    def __init__(self, journal: Any, fd_getter: Any) -> None:  # a Journal (no cycle)
        self._journal = journal
        self._fd_getter = fd_getter
        self._open = True

    @property
    def events(self) -> list[Event]:
        """All valid events, read under the lock (including ones appended in this block;
        a bounded journal reads its file again for them: prefer the calls below)."""
        self._check_open()
        j = self._journal
        return list(j.scan()) if j.bounded else list(j._events)

    @property
    def count(self) -> int:
        """How many valid events there are (the next one is numbered ``count + 1``)."""
        count: int = self._journal._count
        return count

    def recent(self, n: int = RECENT_KEPT) -> list[Event]:
        """The newest ``n`` events, read under the lock."""
        self._check_open()
        return list(self._journal._recent)[-n:] if n > 0 else []

    def has_key(self, key: str) -> bool:
        """Whether an event with this once-only ``key`` exists (read under the lock)."""
        self._check_open()
        return key in self._journal._keys

    def has_kind(self, kind: str) -> bool:
        """Whether an event of this kind exists (read under the lock)."""
        self._check_open()
        return kind in self._journal._kinds

    def append(self, kind: str, now: datetime | None = None, **fields: Any) -> Event:
        self._check_open()
        event: Event = self._journal._append_locked(self._fd_getter(), kind, now, fields)
        return event

    def _check_open(self) -> None:
        if not self._open:
            raise JournalError("journal transaction used after its block ended")
