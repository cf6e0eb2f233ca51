"""The other machines of a campaign, as this cockpit knows them: their pulled copies,
the background pulls that feed them, and the merge of their events with one's own.

The pull itself (one bounded round trip over SSH into ``.cockpit/peers/<N>/``) is
:mod:`cockpit.fleet.pull`; the bounded in-memory history read from each copy is
:mod:`cockpit.fleet.history`. Every event read from a copy is tagged ``machine: N``.

Pulls run in a background thread per peer, with backoff while a peer is unreachable,
and back to back while a peer has more whole lines to send; the thread also reads
what the pull added, so the tick only takes the last published list and never waits for
the network or for parsing. What a face shows of a peer is what is known: reachable
only after an answer, the age of the last answer (whoever on this box got it), and a
pull held by another process named as such, never counted as a success.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.common.safe_json import loads_bounded
from cockpit.fleet.history import PeerEvents, PeerHistory
from cockpit.fleet.pull import (
    MAX_LINE_BYTES,
    PULL_TIMEOUT_S,
    PeerCache,
    PeerState,
    PullHeld,
    PullResult,
    remote_pull_command,
)
from cockpit.fleet.ssh import SshError
from cockpit.journal.log import JournalProblem

__all__ = [
    "MAX_LINE_BYTES", "PULL_TIMEOUT_S", "PeerCache", "PeerLink", "PeerSet",
    "PeerState", "PeerView", "PullHeld", "PullResult", "remote_pull_command",
]

MAX_BACKOFF_S = 30.0
DEFAULT_INTERVAL_S = 2.0
MIN_PULL_S = 3.0  # a one-shot pull loop stops when less than this is left of its time


def status_line(cache: PeerCache) -> dict[str, Any] | None:
    """The peer's last headless status line (its GPUs, its window), as pulled."""
    try:
        raw = cache.status_path.read_text(encoding="utf-8")
        value = loads_bounded(raw)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


@dataclass
class PeerView:
    """One peer as a face shows it."""

    machine: int
    ssh: str
    reachable: bool | None  # None: not tried yet, or no answer known (a pull held elsewhere)
    last_ok: float | None  # wall time of the last good pull
    error: str | None
    held_bytes: int
    status: Mapping[str, Any] | None = None
    pulls: int = 0
    received: int = 0
    notices: tuple[str, ...] = ()  # lines skipped, history bounds reached

    def age_s(self, now: float) -> float | None:
        return None if self.last_ok is None else max(0.0, now - self.last_ok)


@dataclass
class PeerLink:
    """A peer's cache plus its pull loop (a daemon thread) and what it last learned."""

    cache: PeerCache
    interval: float
    reachable: bool | None = None
    last_ok: float | None = None
    error: str | None = None
    held: bool = False  # the last pull found another process of this box pulling
    pulls: int = 0
    received: int = 0
    rereads: int = 0
    backoff: float = 0.0
    more: bool = False  # the last pull left whole lines to fetch
    history: PeerHistory = field(init=False)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _notice_sig: tuple[int, int, int] | None = None
    _notices: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.history = PeerHistory(self.cache.journal_path, self.cache.machine.number)

    def pull_now(self, timeout: float = PULL_TIMEOUT_S) -> None:
        """Pull until the copy holds every whole line or ``timeout`` is spent (each pull
        is one chunk within the time left); then read what the copy gained."""
        deadline = time.monotonic() + timeout
        while True:
            self.pull_once(min(timeout, deadline - time.monotonic()))
            if not self.more or deadline - time.monotonic() < MIN_PULL_S:
                break
        self.history.refresh()

    def pull_once(self, timeout: float = PULL_TIMEOUT_S) -> None:
        """One pull (one chunk); records how it ended."""
        try:
            result = self.cache.pull(max(1.0, timeout))
        except PullHeld as exc:
            self._held_elsewhere(exc)
            return
        except (SshError, OSError) as exc:
            self.reachable, self.error, self.held, self.more = False, str(exc), False, False
            # Doubling, up to 15 intervals (30 s at the default 2 s), never past 30 s.
            cap = min(MAX_BACKOFF_S, self.interval * 15)
            self.backoff = min(cap, max(self.interval, self.backoff * 2 or 1.0))
            return
        self.reachable, self.error, self.held, self.backoff = True, None, False, 0.0
        self.last_ok = time.time()
        self.more = result.more
        self.pulls += 1
        self.received += result.received
        self.rereads += int(result.reread)

    def _held_elsewhere(self, exc: PullHeld) -> None:
        """Another process pulls this peer now: say so, and show what the last finished
        pull of this box recorded (its answer's time, or its error), nothing better."""
        recorded = self.cache.load_state()
        self.held, self.more = True, False
        self.last_ok = recorded.last_ok or self.last_ok
        if recorded.last_error:
            self.reachable = False
        elif recorded.last_ok:
            self.reachable = True
        elif not self.last_ok:
            self.reachable = None  # nobody on this box has had an answer yet
        last = f"; its last pull: {recorded.last_error}" if recorded.last_error else ""
        self.error = f"{exc}{last}"

    def start(self) -> None:
        if self._thread is None:
            # The copy held so far, read now (at open, not in a tick): the first tick
            # sees the history it would have seen before, as history.
            self.history.refresh()
            self._thread = threading.Thread(target=self._loop, daemon=True,
                                            name=f"cockpit-peer-{self.cache.machine.number}")
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.pull_once()
            self.history.refresh()  # here, not in the tick (a big pull parses here)
            if not self.more:
                self._stop.wait(self.interval + self.backoff)

    def stop(self) -> None:
        self._stop.set()

    def events(self) -> PeerEvents:
        """The copy's events, each tagged with the peer's machine (the same object
        until the copy changes). With the pull thread running, the tick only takes what
        the thread published; without it, the copy is read now."""
        if self._thread is None:
            self.history.refresh()
        return self.history.events()

    def problems(self) -> list[JournalProblem]:
        return self.history.problems()

    def view(self) -> PeerView:
        held = 0
        with contextlib.suppress(OSError):
            held = self.cache.journal_path.stat().st_size
        notices = self._skip_notices()
        return PeerView(self.cache.machine.number, self.cache.machine.ssh, self.reachable,
                        self.last_ok, self.error, held, status_line(self.cache),
                        self.pulls, self.received, tuple(notices))

    def _skip_notices(self) -> list[str]:
        """The last lines skipped (whoever on this box pulled them), from ``state.json``;
        parsed again only when that file changed (a view is made every tick)."""
        try:
            st = os.stat(self.cache.state_path)
        except OSError:
            return []
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        if sig != self._notice_sig:
            self._notice_sig = sig
            self._notices = [
                f"machine {self.cache.machine.number}: journal line at byte {off} "
                f"({length} bytes) is over the {MAX_LINE_BYTES} byte maximum: skipped"
                for off, length in self.cache.load_state().skipped[-3:]]
        return self._notices


class PeerSet:
    """Every other machine of the campaign (all of them for ``cockpit fleet``)."""

    def __init__(self, campaign: Campaign, own: int | None, interval: float | None = None
                 ) -> None:
        if interval is None:
            interval = pull_interval_from_env()
        self.links = {n: PeerLink(PeerCache(campaign, m), interval)
                      for n, m in sorted(campaign.machines.items()) if n != own}

    def start(self) -> None:
        for link in self.links.values():
            link.start()

    def pull_now(self, timeout: float = PULL_TIMEOUT_S) -> None:
        """Pull every peer, in parallel, within ``timeout`` (one-shot commands)."""
        threads = [threading.Thread(target=link.pull_now, args=(timeout,), daemon=True)
                   for link in self.links.values()]
        for t in threads:
            t.start()
        deadline = time.monotonic() + timeout + 1.0
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        for link in self.links.values():
            link.stop()

    def events(self) -> Sequence[PeerEvents]:
        return [link.events() for link in self.links.values()]

    def version(self) -> tuple[int, ...]:
        return tuple(len(link.events()) for link in self.links.values())

    def views(self) -> tuple[PeerView, ...]:
        return tuple(link.view() for link in self.links.values())


def pull_interval_from_env() -> float:
    """Seconds between two pulls of a peer: COCKPIT_PULL_INTERVAL, default 2."""
    try:
        value = float(os.environ.get("COCKPIT_PULL_INTERVAL", "") or DEFAULT_INTERVAL_S)
    except ValueError:
        return DEFAULT_INTERVAL_S
    return min(max(value, 0.1), 300.0)


