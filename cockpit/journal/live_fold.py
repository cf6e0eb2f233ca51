"""A history folded as it grows: this machine's journal and its peers' events, merged
by the documented rule (time, then machine) and folded incrementally, with the state
cache (:mod:`cockpit.journal.cache`) to start from.

:class:`FoldedHistory` follows the journal (``journal.follow``): each event is handed
over as the journal reads it, whoever made it read (a tick, an action under the lock),
and applied to one :class:`~cockpit.journal.fold.IncrementalFold` at once: O(new
events), never O(history), and no list of every event held. With peers, this machine's
new events wait for :meth:`FoldedHistory.catch_up`, which merges them with the peers'
new events and applies them. It folds again from the start only when the result would
otherwise differ from a full fold: the journal was replaced or rewritten, a peer's copy
shrank or a peer came or went, or a peer's new event sorts before the newest event
already folded (each counted in :attr:`FoldedHistory.refolds`).

:meth:`FoldedHistory.start` opens from the cache when it fits (never trusted: see
:mod:`cockpit.journal.cache`), else from the journal's first line; the engine and the
one-shot commands (``status``, ``budget``, ``next``, ``export``) both start here, and
only a writing engine saves the cache (:meth:`FoldedHistory.save`).
"""

from __future__ import annotations

import bisect
import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.common.units import Money
from cockpit.journal import cache
from cockpit.journal.fields import Event
from cockpit.journal.fold import (
    CampaignState,
    CostEntry,
    Decision,
    FiredRule,
    IncrementalFold,
    RefusedEvents,
    fold_history,
)
from cockpit.journal.fold_draft import Folding
from cockpit.journal.merge import Events, merge_events, merge_key
from cockpit.journal.writer import JournalWriter

log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)  # the fold is timeless
PENDING_MAX = 10_000  # own events waiting for the peers' before they are merged early
PEER_WINDOW = 4096  # a peer's events taken into memory at once by a merge


class FoldedHistory:
    """Journal + peers, folded incrementally (see the module text). ``on_own`` sees
    each own event once, when it is first read (the engine indexes them), a chunk's
    events at a time."""

    def __init__(self, campaign: Campaign, journal: JournalWriter, machine: int | None, *,
                 peers: bool = False, cache_path: Path | None = None,
                 peer_source: Callable[[], Sequence[Events]] | None = None,
                 on_own: Callable[[list[Event]], None] | None = None,
                 on_restore: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.campaign = campaign
        self.journal = journal
        self.machine = machine
        self.cache_path = cache_path
        self.on_own = on_own
        # Takes the cache's ``extra`` (what ``on_own`` had made of the events it holds);
        # raises cache.CacheMismatch to refuse the cache.
        self.on_restore = on_restore
        self.refolds = 0
        self.from_cache = False  # started from a cache that fit
        self.cache_problem: str | None = None  # why a cache present was not used
        self.fold = IncrementalFold(campaign, machine)
        self.own_folded = 0  # own events folded
        self.peer_seen: list[int] = []  # each peer's events folded
        self.last_key: tuple[str, int] | None = None  # merge key of the newest folded
        self._with_peers = peers or peer_source is not None
        self._peer_source = peer_source  # the peers' events now (a long read merges early)
        self._pending: list[Event] = []  # own events read, waiting to merge (with peers)
        self._replaced = False
        self._lock = threading.RLock()
        self._started = False
        journal.follow(self)  # reads nothing: from now on each event read comes here

    # ------------------------------------------------------------------ following
    def read(self, events: list[Event]) -> None:
        """The journal read more own events."""
        with self._lock:
            if self.on_own is not None:
                self.on_own(events)
            if not self._with_peers:
                apply = self.fold.apply
                for ev in events:
                    apply(ev)
                self.own_folded += len(events)
                return
            self._pending.extend(events)
            if len(self._pending) >= PENDING_MAX and self._peer_source is not None:
                # A long read (a cold open): merge what the peers hold up to here now,
                # so no list of the whole journal builds up.
                self._merge_peers(self._peer_source(),
                                  upto=merge_key(self._pending[-1], self._own))

    def replaced(self) -> None:
        """The journal was replaced: its events come again, from the first."""
        with self._lock:
            self.refolds += 1
            self.fold = IncrementalFold(self.campaign, self.machine)
            self.own_folded, self.last_key, self._pending = 0, None, []
            self._replaced = True

    # ------------------------------------------------------------------ folding
    def state(self) -> CampaignState:
        with self._lock:
            return self.fold.state()

    def catch_up(self, peers: Sequence[Events] = ()) -> CampaignState:
        """Read what is new and fold it (merged with the peers' new events)."""
        if not self._started:
            self.start(peers)
        self.journal.refresh()
        with self._lock:
            if self._with_peers:
                self._merge_peers(peers)
            self._replaced = False
            return self.fold.state()

    def _merge_peers(self, peers: Sequence[Events],
                     upto: tuple[str, int] | None = None) -> None:
        """Fold the pending own events with the peers' new ones (``upto``: only the
        peers' events that sort at or before it; the rest wait for the next call)."""
        own, self._pending = self._pending, []
        if not self._replaced and self.own_folded == 0 and not any(self.peer_seen):
            self.peer_seen = [0] * len(peers)  # nothing folded yet: a plain start
        if self._replaced or len(peers) != len(self.peer_seen) or any(
                len(p) < seen for p, seen in zip(peers, self.peer_seen, strict=True)):
            self._refold(own if self._replaced else self._own_so_far(own), peers, upto)
            return
        ends = self._ends(peers, self.peer_seen, upto)
        if not self._fold_merged(iter(own), peers, list(self.peer_seen), ends,
                                 check_late=True):
            self._refold(self._own_so_far(own), peers, upto)  # a late event: the order

    @property
    def _own(self) -> int:
        return self.machine or 0

    def _key(self, ev: Event) -> tuple[str, int]:
        return merge_key(ev, self._own)

    def _own_so_far(self, new: list[Event]) -> Iterator[Event]:
        """Every own event folded so far, read again from the file, and the new ones."""
        return itertools.chain(itertools.islice(self.journal.scan(), self.own_folded), new)

    def _ends(self, peers: Sequence[Events], starts: Sequence[int],
              upto: tuple[str, int] | None) -> list[int]:
        """Where each peer's events to fold now end: all of them, or those up to ``upto``."""
        return [len(p) if upto is None else bisect.bisect_right(p, upto, lo=start, key=self._key)
                for p, start in zip(peers, starts, strict=True)]

    def _refold(self, own: Iterable[Event], peers: Sequence[Events],
                upto: tuple[str, int] | None = None) -> None:
        self.refolds += (self.own_folded > 0 or any(self.peer_seen)) and not self._replaced
        self.fold = IncrementalFold(self.campaign, self.machine)
        self.last_key, self.own_folded = None, 0
        self.peer_seen = [0] * len(peers)
        self._fold_merged(iter(own), peers, list(self.peer_seen),
                          self._ends(peers, self.peer_seen, upto), check_late=False)

    def _fold_merged(self, own: Iterator[Event], peers: Sequence[Events],
                     starts: list[int], ends: list[int], check_late: bool) -> bool:
        """Fold ``own`` (in its order) merged with each peer's events ``starts`` to
        ``ends``, :data:`PEER_WINDOW` of each peer at a time (a peer's million events
        are never one list). False, folding nothing: the first of them sorts before the
        newest event already folded (``check_late``; the caller folds again)."""
        ahead: list[Event] = []  # own events read and not folded yet (sorting later)
        while True:
            windows = [p[s:min(e, s + PEER_WINDOW)]
                       for p, s, e in zip(peers, starts, ends, strict=True)]
            # The newest key every peer with more to come has reached: what sorts after
            # it waits for the next windows.
            open_keys = [self._key(w[-1]) for w, s, e in zip(windows, starts, ends, strict=True)
                         if s + len(w) < e]
            frontier = min(open_keys) if open_keys else None
            if frontier is not None:
                windows = [w[:bisect.bisect_right(w, frontier, key=self._key)] for w in windows]
            mine = _take_upto(ahead, own, frontier, self._key)
            batch = merge_events(mine, windows, self._own)
            if check_late and batch and self.last_key is not None \
                    and self._key(batch[0]) < self.last_key:
                return False
            check_late = False
            apply = self.fold.apply
            for ev in batch:
                apply(ev)
            if batch:
                self.last_key = self._key(batch[-1])
            self.own_folded += len(mine)
            starts = [s + len(w) for s, w in zip(starts, windows, strict=True)]
            self.peer_seen = starts
            if frontier is None:
                return True

    def events(self, peers: Sequence[Events] = ()) -> list[Event]:
        """The events folded so far, merged and filtered (``export``'s and ``next``'s
        history): the journal is read again for them, once per call."""
        own = list(itertools.islice(self.journal.scan(), self.own_folded))
        seen = [p[:n] for p, n in zip(peers, self.peer_seen, strict=False)]
        merged = merge_events(own, seen, self._own) if seen else own
        return fold_history(self.campaign, merged, _EPOCH, self.machine)[1]

    # ------------------------------------------------------------------ the cache
    def start(self, peers: Sequence[Events] = ()) -> None:
        """Begin: from the cache when it fits (the journal then reads only its tail),
        else from the journal's first line. Called once, before the first read."""
        self._started = True
        if self.cache_path is not None:
            try:
                self._restore(cache.load(self.cache_path, self.campaign.sha256,
                                         self.machine), peers)
                self.from_cache = True
            except cache.CacheMismatch as exc:
                self._not_used(str(exc))
            except (KeyError, TypeError, ValueError, AttributeError, IndexError,
                    ArithmeticError, RecursionError) as exc:  # a forged value of any shape
                self._not_used(f"unreadable ({exc.__class__.__name__})")

    def _not_used(self, why: str) -> None:
        if why != "no cache yet":
            self.cache_problem = why
            log.info("state cache %s not used (%s): folding the journal", self.cache_path, why)

    def _restore(self, body: dict[str, Any], peers: Sequence[Events]) -> None:
        """Take the cache's fold (everything is checked before anything is taken)."""
        pos = body["journal"]
        path = getattr(self.journal, "path", None)
        if path is None or not hasattr(self.journal, "resume"):
            raise cache.CacheMismatch("this journal cannot resume")
        if cache.prefix_key(path, int(pos["offset"])) != body["prefix"]:
            raise cache.CacheMismatch("the journal is not the one the cache was folded from")
        marks = body["peers"]
        if len(marks) != len(peers) or any(
                len(p) < n or (n and cache.event_digest(p[n - 1]) != digest)
                for p, (n, digest) in zip(peers, marks, strict=True)):
            raise cache.CacheMismatch("a peer's copy is not the one the cache folded")
        fold = _decode_fold(self.campaign, self.machine, body["fold"])
        own_folded, last = int(body["own_folded"]), body["last_key"]
        if own_folded != int(pos["count"]) or "more_problems" not in pos:
            raise cache.CacheMismatch("its fold and its journal position disagree")
        if self.on_restore is not None:
            self.on_restore(dict(body.get("extra") or {}))
        self.journal.resume(pos)  # what was read before: read again after the prefix
        with self._lock:
            self.fold, self.own_folded, self._pending = fold, own_folded, []
        self.peer_seen = [int(n) for n, _ in marks]
        self.last_key = (str(last[0]), int(last[1])) if last else None

    def save(self, peers: Sequence[Events],
             extra: Callable[[], dict[str, Any]] | None = None) -> bool:
        """Write the cache for what is folded now (False: this journal cannot be cached);
        ``extra()``, asked under the fold's lock, is what ``on_own`` made of the same
        events."""
        position = getattr(self.journal, "position", None)
        path = getattr(self.journal, "path", None)
        if self.cache_path is None or position is None or path is None:
            return False
        pos = position()  # not under the fold's lock: the journal takes its own first
        with self._lock:
            if not pos["count"] or pos["count"] != self.own_folded or self._pending:
                return False  # nothing yet, or read but not folded yet: the next save
            fold = _encode_fold(self.fold)
            seen, last = list(self.peer_seen), self.last_key
            more = extra() if extra is not None else {}
        try:
            prefix = cache.prefix_key(path, int(pos["offset"]))
        except cache.CacheMismatch:
            return False  # the journal went away meanwhile
        body = {
            "journal": pos, "prefix": prefix,
            "fold": fold, "own_folded": pos["count"],
            "peers": [[n, cache.event_digest(p[n - 1]) if n else ""]
                      for p, n in zip(peers, seen, strict=False)],
            "last_key": list(last) if last else None, "extra": more}
        cache.save(self.cache_path, self.campaign.sha256, self.machine, body)
        return True


_FOLDING_FIELDS = ("stages", "runs", "notes", "verified", "fired", "decisions", "costs",
                   "cost_totals", "costs_count", "notes_count", "warnings", "plan_hash",
                   "latest_plan", "rules_hash", "export")


def _dict_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, dict) and all(
        isinstance(k, str) and check(x) for k, x in v.items())


def _list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(check(x) for x in v)


def _text_or_none(v: Any) -> bool:
    return v is None or isinstance(v, str)


# What each decoded field must look like (a forged cache of another shape is not used).
_FOLDING_SHAPES: dict[str, Callable[[Any], bool]] = {
    "stages": _dict_of(lambda d: isinstance(d, dict)),
    "runs": _dict_of(lambda d: isinstance(d, dict)),
    "notes": _dict_of(_list_of(lambda n: isinstance(n, str))),
    "verified": _dict_of(_list_of(lambda e: isinstance(e, dict))),
    "fired": _list_of(lambda x: isinstance(x, FiredRule)),
    "decisions": _dict_of(lambda x: isinstance(x, Decision)),
    "costs": _list_of(lambda x: isinstance(x, CostEntry)),
    "cost_totals": _dict_of(lambda x: isinstance(x, Money)),
    "costs_count": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "notes_count": _dict_of(lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "warnings": _list_of(lambda w: isinstance(w, str)),
    "plan_hash": _text_or_none, "latest_plan": _text_or_none, "rules_hash": _text_or_none,
    "export": lambda v: v is None or isinstance(v, dict),
}


def _take_upto(ahead: list[Event], own: Iterator[Event], frontier: tuple[str, int] | None,
               key: Callable[[Event], tuple[str, int]]) -> list[Event]:
    """The own events, in their order, up to the first that sorts after ``frontier``
    (None: all of them); that one and the rest stay (``ahead`` holds the one read)."""
    if frontier is None:
        taken = [*ahead, *own]
        ahead.clear()
        return taken
    taken = []
    for ev in itertools.chain(list(ahead), own):
        if key(ev) > frontier:
            ahead[:] = [ev]
            return taken
        taken.append(ev)
    ahead.clear()
    return taken


def _encode_fold(f: IncrementalFold) -> dict[str, Any]:
    r = f.refused
    return {"folding": {name: cache.raw(f.folding.verified) if name == "verified"
                        else cache.encode(getattr(f.folding, name))
                        for name in _FOLDING_FIELDS},
            "last_seq": f.last_seq, "applied": f.applied,
            "dropped_by": cache.encode(f.dropped_by),
            "refused": cache.encode({"first": r.first, "newest": list(r.newest),
                                     "more": r.more, "more_machines": r.more_machines})}


def _decode_fold(campaign: Campaign, machine: int | None,
                 body: dict[str, Any]) -> IncrementalFold:
    f = IncrementalFold(campaign, machine)
    values = {name: cache.decode(body["folding"][name]) for name in _FOLDING_FIELDS}
    if set(values["stages"]) != {s.id for s in campaign.stages}:
        raise cache.CacheMismatch("its stages are not the plan's")
    wrong = [name for name, fits in _FOLDING_SHAPES.items() if not fits(values[name])]
    if wrong:
        raise cache.CacheMismatch(f"values of the wrong shape: {', '.join(wrong)}")
    f.folding = Folding(campaign, **values)
    f.last_seq, f.applied = int(body["last_seq"]), int(body["applied"])
    f.dropped_by = cache.decode(body["dropped_by"])
    refused = cache.decode(body["refused"])
    f.refused = RefusedEvents()
    f.refused.first = list(refused["first"])
    f.refused.newest.extend(refused["newest"])
    f.refused.more, f.refused.more_machines = int(refused["more"]), set(refused["more_machines"])
    return f
