"""A peer's history in memory, read from its pulled copy, within a bound.

This module owns reading ``.cockpit/peers/<N>/journal.jsonl`` (written only by
:mod:`cockpit.fleet.pull`) into the events this cockpit folds. The copy on disk is the
full record; memory holds, per peer:

- every event of the kinds that make the campaign's state (stages, runs, stops,
  decisions, verdicts, costs, the plan, rules fired, verified checkpoints:
  :data:`STATE_KINDS`) up to :data:`STATE_BYTES` of their lines, and
- the other kinds (notes, warnings, verification claims, hooks, unknown kinds) up to
  :data:`OTHER_BYTES`,

so a peer that keeps writing notes or warnings cannot crowd out the events that decide
what runs, and no peer journal grows this process without end. Past a bound, later
events of that class are not held (nor folded), with one warning naming the peer and the
line; the fold itself is unchanged: within the bounds it sees every event, in order.
Why not a recent window: what the fold computes from a peer (its stages' states, costs,
verdicts, notes) depends on the whole history, and the engine reads each peer's events
as a list that only grows; dropping old events would change both silently.

The copy is read in bounded chunks; a line over :data:`~cockpit.fleet.pull.MAX_LINE_BYTES`
(a hand-edited copy) is discarded while it streams past, never held whole. Each line is
checked as the own journal's lines are (bounded JSON, field types).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import cast

from cockpit.common.safe_json import TooDeep, loads_bounded
from cockpit.fleet.pull import MAX_LINE_BYTES
from cockpit.journal.events import event_problem
from cockpit.journal.fields import Event
from cockpit.journal.format import JournalProblem

log = logging.getLogger(__name__)

STATE_KINDS = frozenset({
    "plan_recorded", "plan_changed", "rules_recorded", "stage_claimed", "stage_started",
    "stage_finished", "stage_skipped", "stage_dropped", "run_started", "run_exited",
    "stop_requested", "stop_done", "decision", "result_accepted", "result_rejected", "cost",
    "rule_fired", "checkpoint_verified",
})
STATE_BYTES = 16 * 1024 * 1024  # lines of STATE_KINDS held per peer
OTHER_BYTES = 8 * 1024 * 1024  # lines of every other kind held per peer
READ_CHUNK = 1024 * 1024
PROBLEMS_KEPT = 100


class PeerHistory:
    """The events of one peer's copy, tagged ``machine: N``, within the bounds above.

    :meth:`refresh` reads what the copy gained (the pull thread calls it after each
    pull); :meth:`events` returns the last list published, which is replaced, never
    changed in place, so a reader in another thread always sees a consistent list."""

    def __init__(self, path: os.PathLike[str] | str, machine: int) -> None:
        self.path = os.fspath(path)
        self.machine = machine
        self._lock = threading.Lock()
        self._published: list[Event] = []
        self._reset()

    def _reset(self) -> None:
        self._events: list[Event] = []
        self._problems: list[JournalProblem] = []
        self._dropped = 0  # problems not kept (past PROBLEMS_KEPT)
        self._ident: tuple[int, int] | None = None
        self._sig: tuple[int, int, int] | None = None
        self._offset = 0  # bytes read: always the end of a whole line
        self._lines = 0
        self._partial = b""
        self._discarding = False  # inside a line over the maximum
        self._held = {"state": 0, "other": 0}
        self._full: set[str] = set()  # classes whose bound was reached (warned once)
        self._published = []

    def events(self) -> list[Event]:
        """The events published by the last refresh (treat as read-only)."""
        return self._published

    def problems(self) -> list[JournalProblem]:
        return list(self._problems)

    def refresh(self, wait: bool = True) -> bool:
        """Read what the copy gained; False when another thread is reading it now and
        ``wait`` is False (the caller keeps the published list)."""
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
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return
        before = len(self._events)
        try:
            self._ident = ident
            end = st.st_size
            pos = self._offset + len(self._partial)
            while pos < end:
                chunk = os.pread(fd, min(READ_CHUNK, end - pos), pos)
                if not chunk:
                    break
                pos += len(chunk)
                self._take(chunk)
            self._sig = sig
        finally:
            os.close(fd)
        if len(self._events) != before:
            self._published = list(self._events)

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
            piece = chunk[start:cut + 1]
            start = cut + 1
            self._lines += 1
            if self._discarding:
                self._offset += len(piece)
                self._discarding = False
                self._problem(f"over {MAX_LINE_BYTES} bytes: skipped")
                continue
            raw = self._partial + piece
            self._partial = b""
            self._offset += len(raw)
            if len(raw) > MAX_LINE_BYTES:
                self._problem(f"over {MAX_LINE_BYTES} bytes: skipped")
                continue
            self._line(raw)

    def _line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            event = loads_bounded(raw.decode("utf-8"))
        except TooDeep as exc:
            self._problem(f"not an event ({exc}): skipped")
            return
        except (UnicodeDecodeError, ValueError) as exc:
            self._problem(f"not valid JSON ({exc.__class__.__name__}): skipped")
            return
        if not isinstance(event, dict) or not isinstance(event.get("kind"), str):
            self._problem("not an event (a JSON object with a string 'kind'): skipped")
            return
        wrong = event_problem(event)
        if wrong is not None:
            self._problem(f"{event['kind']} event with a bad field ({wrong}): skipped")
            return
        group = "state" if event["kind"] in STATE_KINDS else "other"
        bound = STATE_BYTES if group == "state" else OTHER_BYTES
        if self._held[group] + len(raw) > bound:
            if group not in self._full:
                self._full.add(group)
                what = "state events" if group == "state" else "notes, warnings and the like"
                self._problem(f"more than {bound // (1024 * 1024)} MiB of {what}: this and "
                              "later ones are not held in memory (the copy keeps them)")
            return
        self._held[group] += len(raw)
        event["machine"] = self.machine
        self._events.append(cast(Event, event))

    def _problem(self, message: str) -> None:
        if len(self._problems) >= PROBLEMS_KEPT:
            self._dropped += 1
            return
        self._problems.append(JournalProblem(self._lines, message))
        log.warning("machine %d: pulled journal line %d: %s", self.machine, self._lines,
                    message)
