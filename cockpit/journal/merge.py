"""One history from several journals: this machine's events and its peers' copies,
merged by time, then machine (each journal keeps its own order)."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Any

from cockpit.journal.fields import Event

# One journal's events in its order: a list, or a peer's history that reads its older
# events again from its copy (:class:`cockpit.fleet.history.PeerEvents`).
Events = Sequence[Event]


def merge_events(own: list[Event], peers: Sequence[Events],
                 own_machine: int = 0) -> list[Event]:
    """One history: events ordered by time, then machine (the own events are untagged:
    they count as ``own_machine``); each journal keeps its own order."""
    if not any(peers):
        return own
    return list(heapq.merge(own, *peers, key=lambda ev: merge_key(ev, own_machine)))


def merge_key(event: Mapping[str, Any], own_machine: int = 0) -> tuple[str, int]:
    """Where an event sorts in the merged history: its time, then its machine."""
    return str(event.get("t")), _machine_of(event, own_machine)


def _machine_of(event: Mapping[str, Any], own_machine: int) -> int:
    """The machine an event came from (events of one's own journal carry none)."""
    value = event.get("machine", own_machine)
    return value if isinstance(value, int) and not isinstance(value, bool) else own_machine
