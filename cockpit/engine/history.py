"""The campaign's history as this engine holds it: the own journal, the peers' events
(from a :class:`~cockpit.engine.ports.PeerSource` it is given), and their fold.

:meth:`History.state` folds the merged, ownership-filtered events into a
``CampaignState`` and caches it: it folds again only when the own journal or a
peer's copy changed (the fold is timeless: ``now`` changes nothing in it). Reading
the state only indexes what later steps need of each new event (its once-only key,
the monotonic time it was first read, an export's size); announcing events to the
faces (the recent list, the events new since the last snapshot) is
:meth:`History.announce`, which only the tick calls.

The history is also the engine's one way to write: every part journals through
``history.journal`` (under its lock, in a transaction), folds what it read under the
lock with :meth:`History.fold_locked`, and writes a once-only event with
:meth:`History.journal_once`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.common.printable import printable
from cockpit.engine.ports import EventJournal, PeerSource
from cockpit.engine.snapshot import EventLine, MachineView
from cockpit.engine.timebase import Timebase, parse_t
from cockpit.journal.events import describe_event
from cockpit.journal.fields import Event
from cockpit.journal.fold import CampaignState, fold
from cockpit.journal.merge import merge_events
from cockpit.journal.read import history_of
from cockpit.planning.deadline import export_size

RECENT_EVENTS = 50


class History:
    """Journal + peers + fold, cached (see the module text)."""

    def __init__(self, campaign: Campaign, journal: EventJournal, timebase: Timebase, *,
                 machine: int | None, peers: PeerSource | None = None) -> None:
        self.campaign = campaign
        self.journal = journal
        self.time = timebase
        self.machine = machine
        self.peers = peers
        self._state: CampaignState | None = None
        self._events: list[Event] = []
        self._folded_at: tuple[int, int, tuple[int, ...]] | None = None  # (seq, count, peers)
        self._indexed = 0  # own events indexed (keys, monotonic times, export sizes)
        self.keys: set[str] = set()  # "key" fields of journaled once-only events
        # The real size of the newest export written (D19: retrieval at the transfer rate).
        self.export_bytes: int | None = None
        # Announced to the faces: own events and each peer's, up to here.
        self._announced = 0
        self._peer_announced: dict[int, int] = {}
        self._peers_opened = False
        self.recent: deque[EventLine] = deque(maxlen=RECENT_EVENTS)
        self._fresh: list[EventLine] = []

    def open(self) -> None:
        """Mark where this engine began to watch: events up to here are history."""
        self.time.opened_seq = max((int(ev.get("seq", 0)) for ev in self.journal.events()),
                                   default=0)

    # ------------------------------------------------------------------ reading
    def peer_events(self) -> list[list[Event]]:
        return self.peers.events() if self.peers is not None else []

    def state(self, now: datetime | None = None) -> CampaignState:
        """The folded state; folded again only when the journal or a peer's copy changed."""
        own = self.journal.events()
        peers = self.peer_events()
        mark = (own[-1]["seq"] if own else 0, len(own), tuple(len(p) for p in peers))
        if self._state is None or mark != self._folded_at:
            self._state, self._events = history_of(self.campaign, own, peers, self.machine,
                                                   now or self.time.clock.now())
            self._folded_at = mark
            self._index(own, now)
        return self._state

    def events(self, now: datetime | None = None) -> list[Event]:
        """The events the state was folded from: this machine's and its peers', merged
        and filtered (what ``budget``, ``export`` and ``next`` read)."""
        self.state(now)
        return self._events

    def _index(self, own: list[Event], now: datetime | None) -> None:
        """What later steps need of each own event read for the first time."""
        mono, steady = self.time.mono(), now or self.time.steady_now()
        for ev in own[self._indexed:]:
            if "key" in ev:
                self.keys.add(str(ev["key"]))
            if (size := export_size(ev)) is not None:
                self.export_bytes = size
            self.time.saw(ev, mono, steady)
        self._indexed = len(own)

    def fold_locked(self, own: list[Event], now: datetime) -> CampaignState:
        """``fold`` over the own events (read under the lock) and the peers' copies."""
        peers = self.peer_events()
        merged = merge_events(own, peers, self.machine or 0) if peers else own
        return fold(self.campaign, merged, now, self.machine)

    def journal_once(self, kind: str, key: str, now: datetime, **fields: Any) -> bool:
        """Append an event unless one with that ``key`` exists; True when written."""
        if key in self.keys:
            return False  # cheap check first: no lock taken on every tick
        with self.journal.transaction() as txn:
            if any(ev.get("key") == key for ev in txn.events):
                return False
            txn.append(kind, now=now, key=key, **fields)
        return True

    def changed(self) -> bool:
        """Whether the journal (or a peer's copy) moved since the last fold."""
        own = self.journal.events()
        peers = self.peer_events()
        return (own[-1]["seq"] if own else 0, len(own),
                tuple(len(p) for p in peers)) != self._folded_at

    # ------------------------------------------------------------------ announcing
    def announce(self, now: datetime | None = None) -> None:
        """Put the events read since the last call into the recent list and the events
        new for the next snapshot (a peer's event not folded says so, with why)."""
        state = self.state(now)
        refused = {id(d.event): d.reason for d in state.not_folded}
        for i, events in enumerate(self.peer_events()):
            for ev in events[self._peer_announced.get(i, 0):]:
                self._add(self._peer_line(ev, refused.get(id(ev))))
            self._peer_announced[i] = len(events)
        self._peers_opened = True
        own = self.journal.events()
        for ev in own[self._announced:]:
            seq = int(ev.get("seq", 0))
            self._add(EventLine(seq, parse_t(ev), ev["kind"], describe_event(ev),
                                fields=MappingProxyType(dict(ev)),
                                earlier=seq <= self.time.opened_seq))
        self._announced = len(own)

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

    def close(self) -> None:
        if self.peers is not None:
            self.peers.close()
