"""The campaign's history as this engine holds it: the own journal, the peers' events
(from a :class:`~cockpit.engine.ports.PeerSource` it is given), and their fold.

The fold is :class:`~cockpit.journal.live_fold.FoldedHistory`'s: incremental (each event
applied once, as the journal reads it; the peers' merged in by the documented rule),
started from the state cache when it fits, and saved to it by a writing engine every
:data:`CACHE_EVERY_S` seconds and at close. The history holds no list of every event:
the one-shot readers (``budget``, ``export``, ``next``) stream it through
:meth:`History.events`.

Each own event is indexed once, when first read (the monotonic time it appeared); the
events journaled before this engine opened are history, and only the newest of them are
announced. Announcing events to the faces (the recent list, the
events new since the last snapshot) is :meth:`History.announce`, which only the tick
calls.

The history is also the engine's one way to write: every part journals through
``history.journal`` (under its lock, in a transaction), reads the state under the lock
with :meth:`History.fold_locked`, and writes a once-only event with
:meth:`History.journal_once`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.common.printable import printable
from cockpit.engine.outbox import Outbox
from cockpit.engine.ports import EventJournal, PeerSource
from cockpit.engine.snapshot import EventLine, MachineView
from cockpit.engine.timebase import Timebase, parse_t
from cockpit.journal.cache import CacheMismatch
from cockpit.journal.events import describe_event
from cockpit.journal.fields import Event
from cockpit.journal.fold import CampaignState
from cockpit.journal.live_fold import FoldedHistory
from cockpit.journal.merge import Events
from cockpit.journal.paths import CampaignFiles

RECENT_EVENTS = 50
UNANNOUNCED_KEPT = 1000  # own events read and not yet announced (a burst keeps its newest)
CACHE_EVERY_S = 60.0  # a writing engine saves the state cache this often (and at close)


class OnceKeys:
    """The once-only keys journaled (``key in history.keys``), as the journal holds them."""

    def __init__(self, journal: EventJournal) -> None:
        self._journal = journal

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._journal.has_key(key)


class History:
    """Journal + peers + incremental fold (see the module text)."""

    def __init__(self, campaign: Campaign, journal: EventJournal, timebase: Timebase, *,
                 machine: int | None, peers: PeerSource | None = None,
                 cache: bool = True, outbox: Outbox | None = None) -> None:
        self.campaign = campaign
        self.journal = journal
        self.time = timebase
        self.machine = machine
        self.peers = peers
        self.keys = OnceKeys(journal)  # "key" fields of journaled once-only events
        # What the journal says is owed to each alert target (issue 43), fed as the own
        # events are read and kept in the state cache with the fold.
        self.outbox = outbox if outbox is not None else Outbox(campaign)
        self.folded = FoldedHistory(
            campaign, journal, machine, on_own=self._index,
            peer_source=self.peer_events if peers is not None else None,
            cache_path=CampaignFiles.of(campaign).state_cache if cache else None,
            on_restore=self._restore_outbox)
        self._opening = True  # the first read: every event is history
        self._saved_at: float | None = None  # monotonic time of the last cache save
        # Announced to the faces: own events read and not announced yet, and each peer's
        # events up to here.
        self._unannounced: deque[Event] = deque(maxlen=UNANNOUNCED_KEPT)
        self._peer_announced: dict[int, int] = {}
        self._peers_opened = False
        self.recent: deque[EventLine] = deque(maxlen=RECENT_EVENTS)
        self._fresh: list[EventLine] = []

    def open(self) -> None:
        """Read the history (from the cache when it fits) and mark where this engine
        began to watch: events up to here are history."""
        if self._opening:
            self.time.read_history(self.time.mono(), self.time.steady_now())
            self.folded.catch_up(self.peer_events())
            self._opening = False
            if self.folded.from_cache:  # nothing to save until something new comes
                self._saved_at = self.time.mono()
            # The history's newest events are shown (the rest were not kept).
            self._unannounced.extend(self.journal.recent(RECENT_EVENTS))
            last = self.journal.recent(1)
            self.time.opened_seq = int(last[-1].get("seq", 0)) if last else 0

    # ------------------------------------------------------------------ reading
    def peer_events(self) -> Sequence[Events]:
        return self.peers.events() if self.peers is not None else []

    def state(self, now: datetime | None = None) -> CampaignState:
        """The folded state, brought up to date with what was appended since."""
        if self._opening:
            self.open()
        self._now = now
        return self.folded.catch_up(self.peer_events())

    _now: datetime | None = None  # the time of the read that indexes new events

    def _restore_outbox(self, extra: Mapping[str, Any]) -> None:
        """The cache's outbox (a cache without one is not used: its events are not
        read again)."""
        try:
            self.outbox.restore(extra["outbox"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CacheMismatch(f"no outbox of its alerts ({exc.__class__.__name__})") \
                from exc

    def _index(self, events: list[Event]) -> None:
        """What later steps need of own events, when first read."""
        self.outbox.feed(events)  # history too: what it owes is owed whoever reads it
        if self._opening:
            return  # history: open() announces the newest few, from the journal's window
        mono, now = self.time.mono(), self._now or self.time.steady_now()
        for ev in events:
            self.time.saw(ev, mono, now)
        self._unannounced.extend(events)

    def events(self, now: datetime | None = None) -> list[Event]:
        """The events the state was folded from: this machine's and its peers', merged
        and filtered (what ``budget``, ``export`` and ``next`` read): the journal is read
        again for them (one-shot readers only; the tick never calls it)."""
        self.state(now)
        return self.folded.events(self.peer_events())

    def fold_locked(self, now: datetime) -> CampaignState:
        """The state under the journal lock (the lock's read brought the journal up to
        date: what was read under it is folded)."""
        return self.state(now)

    def journal_once(self, kind: str, key: str, now: datetime, **fields: Any) -> bool:
        """Append an event unless one with that ``key`` exists; True when written."""
        if key in self.keys:
            return False  # cheap check first: no lock taken on every tick
        with self.journal.transaction() as txn:
            if txn.has_key(key):
                return False
            txn.append(kind, now=now, key=key, **fields)
        return True

    @property
    def refolds(self) -> int:
        return self.folded.refolds

    def save_cache(self, force: bool = False) -> None:
        """Save the state cache when :data:`CACHE_EVERY_S` passed (``force``: now)."""
        mono = self.time.mono()
        if self._saved_at is None and not force:
            # Opened without a cache: the first snapshot goes out first, the cache on the
            # next tick.
            self._saved_at = mono - CACHE_EVERY_S
        elif force or mono - (self._saved_at or 0.0) >= CACHE_EVERY_S:
            self._saved_at = mono
            self.folded.save(self.peer_events(),
                             extra=lambda: {"outbox": self.outbox.encode()})

    # ------------------------------------------------------------------ announcing
    def announce(self, now: datetime | None = None) -> None:
        """Put the events read since the last call into the recent list and the events
        new for the next snapshot (a peer's event not folded says so, with why). At the
        first call only the newest :data:`RECENT_EVENTS` of each history are lines."""
        state = self.state(now)
        refused = {id(d.event): d.reason for d in state.not_folded}
        for i, events in enumerate(self.peer_events()):
            start = self._peer_announced.get(i, max(0, len(events) - RECENT_EVENTS))
            for ev in events[start:]:
                self._add(self._peer_line(ev, refused.get(id(ev))))
            self._peer_announced[i] = len(events)
        self._peers_opened = True
        while self._unannounced:
            ev = self._unannounced.popleft()
            seq = int(ev.get("seq", 0))
            if seq <= self.time.opened_seq and len(self._unannounced) >= RECENT_EVENTS:
                continue  # history before this engine opened: only the newest are shown
            self._add(EventLine(seq, parse_t(ev), ev["kind"], describe_event(ev),
                                fields=MappingProxyType(dict(ev)),
                                earlier=seq <= self.time.opened_seq))

    def _peer_line(self, ev: Mapping[str, Any], refused: str | None) -> EventLine:
        seq = int(ev.get("seq", 0))
        machine = printable(ev.get("machine"), 40)
        text = f"[machine {machine}] {describe_event(ev)}"
        if refused is not None:
            text = (f"[machine {machine}] NOT FOLDED, event #{seq} "
                    f"({printable(refused)}): {describe_event(ev)}")
        return EventLine(seq, parse_t(ev), ev["kind"], text, fields=MappingProxyType(dict(ev)),
                         earlier=not self._peers_opened)

    def _add(self, line: EventLine) -> None:
        self.recent.append(line)
        self._fresh.append(line)

    @property
    def fresh(self) -> tuple[EventLine, ...]:
        """The events announced since the last snapshot (what it reports as new)."""
        return tuple(self._fresh)

    def take_fresh(self) -> tuple[EventLine, ...]:
        """The new events, handed to the snapshot once."""
        out, self._fresh = tuple(self._fresh), []
        return out

    # ------------------------------------------------------------------ machines (D12)
    def machine_views(self) -> tuple[MachineView, ...]:
        if self.peers is None:
            return ()
        wall = time.time()
        out = []
        for v in self.peers.views():
            status = v.status or {}
            gpus = status.get("gpus")
            out.append(MachineView(
                v.machine, v.ssh, v.reachable, v.age_s(wall), v.error, v.held_bytes,
                tuple(g for g in gpus if isinstance(g, dict)) if isinstance(gpus, list) else (),
                str(status["t"]) if "t" in status else None, v.notices))
        return tuple(out)

    def close(self, save: bool = False) -> None:
        if save and not self._opening:
            self.save_cache(force=True)
        if self.peers is not None:
            self.peers.close()
