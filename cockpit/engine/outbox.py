"""The alert outbox (issue 43): what the journal says is owed to each alert target,
folded incrementally from this machine's own journal events (pure: events in, the
owed deliveries out; no clock, no file).

Every event worth an alert (:func:`cockpit.engine.alert_kinds.alert_of`) is *owed* to
each target in force that takes its level and that the campaign routes its kind to,
until that delivery is settled: an ``alert_sent`` or a final ``alert_failed`` for its
key (``alert:KEY:LABEL``), or a digest's line that ``covers`` it. Whoever conducts and
whenever it starts, including events journaled while no cockpit ran or by a cockpit
that died before sending.

The horizon: the targets in force are the newest ``alert_targets`` line's (a conductor
with targets journals one when it begins to conduct). A label is owed the events
journaled after the line that brought it into force, and those of the
:data:`GRACE_S` before it (a takeover still sends what the dead conductor had just
seen): a phone added on day 3 is not sent the news of days 1 and 2. A conductor with no
target journals no line: the targets stay in force and what is owed stays counted.

A delivery begun and not settled (``alert_claimed``, or a failed try not given up) is
kept with its words (:attr:`Outbox.begun`): the next conductor sends it once more with
the same id. The engine feeds the outbox as the journal is read and keeps it in the
state cache, so a restart reads only the journal's tail.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cockpit.alerts.message import Alert
from cockpit.alerts.targets import LEVELS
from cockpit.campaign.model import Campaign
from cockpit.common.event_kinds import ALERT_CLAIMED, ALERT_FAILED, ALERT_SENT, ALERT_TARGETS
from cockpit.engine.timebase import parse_t

# An event -> the alert it is (None: none): cockpit.engine.alert_kinds.alert_of.
AlertOf = Callable[[Mapping[str, Any], Campaign, set[str]], Alert | None]
GRACE_S = 600.0  # a target brought into force is owed the events of this long before
PENDING_KEPT = 5000  # owed events kept at most (the oldest dropped first, counted)
BEGUN_KEPT = 1000  # begun deliveries kept at most
UNOWNED_KEPT = 200  # events worth an alert kept while no target is in force
DELIVERY_KINDS = frozenset({ALERT_CLAIMED, ALERT_SENT, ALERT_FAILED})


@dataclass(frozen=True)
class InForce:
    """A target as the journal names it: label, ``label (scheme)``, its levels, and
    the line (seq, time) that brought it into force."""

    label: str
    shown: str
    levels: frozenset[str]
    since: int
    since_t: datetime


@dataclass(frozen=True)
class Owed:
    """An event worth an alert, its time, and whether a cockpit conducted when it was
    journaled (True / False; None: the journal does not say)."""

    alert: Alert
    seq: int
    at: datetime
    watched: bool | None
    event: Mapping[str, Any]


@dataclass(frozen=True)
class Begun:
    """A delivery begun and not settled: its newest line's kind and words."""

    kind: str  # alert_claimed / alert_failed
    attempt: int
    level: str
    what: str
    title: str
    body: str
    for_seq: Any
    covers: tuple[str, ...] = ()


def delivery_key(alert_key: str, label: str) -> str:
    return f"alert:{alert_key}:{label}"


def split_key(key: str) -> tuple[str, str]:
    """``alert:KEY:LABEL`` -> (KEY, LABEL)."""
    head, _, label = key.removeprefix("alert:").rpartition(":")
    return head, label


class Outbox:
    """The fold (see the module text). Thread-safe: the journal's reader feeds it, the
    tick and the faces ask it."""

    def __init__(self, campaign: Campaign, alert_of: AlertOf = lambda *_: None) -> None:
        """``alert_of``: :func:`cockpit.engine.alert_kinds.alert_of` (given: that module
        reads the hooks, whose history holds this outbox); the default owes nothing."""
        self.campaign = campaign
        self._alert_of = alert_of
        self._deciders = {s.id for s in campaign.stages if s.decision_point}
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self.last_seq = 0
        self.in_force: dict[str, InForce] = {}
        self.conducting: bool | None = None  # after an open line: True; a closed: False
        self.pending: dict[str, Owed] = {}  # alert key -> the event that owes it
        self.settled: set[str] = set()  # delivery keys settled, of pending alerts
        self.begun: dict[str, Begun] = {}  # delivery key -> its newest unsettled line
        self.dropped = 0  # owed events dropped past PENDING_KEPT

    # ------------------------------------------------------------------ folding
    def feed(self, events: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:
            for ev in events:
                self._take(ev)
            self._prune()

    def _take(self, ev: Mapping[str, Any]) -> None:
        seq = ev.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            return
        if seq <= self.last_seq:
            if seq != 1:
                return  # read already (a cache's tail read again)
            self._clear()  # the journal was replaced: its events come again
        self.last_seq = seq
        if "machine" in ev:
            return  # another machine's: its own cockpit alerts
        at = parse_t(ev)
        kind = ev.get("kind")
        if kind == ALERT_TARGETS:
            self._targets(ev, seq, at)
        elif kind in DELIVERY_KINDS:
            self._delivery(ev)
        else:
            alert = self._alert_of(ev, self.campaign, self._deciders)
            if alert is not None and alert.key not in self.pending:
                self.pending[alert.key] = Owed(alert, seq, at, self.conducting, dict(ev))
                if len(self.pending) > PENDING_KEPT:
                    self.pending.pop(next(iter(self.pending)))
                    self.dropped += 1

    def _targets(self, ev: Mapping[str, Any], seq: int, at: datetime) -> None:
        if ev.get("phase") == "closed":
            self.conducting = False
            return
        self.conducting = True
        targets = ev.get("targets")
        now: dict[str, InForce] = {}
        for item in targets if isinstance(targets, list) else []:
            label = item.get("label") if isinstance(item, dict) else None
            if not isinstance(label, str) or not label:
                continue
            levels = item.get("levels")
            levels = frozenset(lv for lv in levels if lv in LEVELS) \
                if isinstance(levels, list) else frozenset(LEVELS)
            before = self.in_force.get(label)
            now[label] = InForce(label, str(item.get("target") or label), levels,
                                 before.since if before else seq,
                                 before.since_t if before else at)
        self.in_force = now

    def _delivery(self, ev: Mapping[str, Any]) -> None:
        key = ev.get("alert")
        if not isinstance(key, str):
            return
        covers = tuple(c for c in ev.get("covers") or () if isinstance(c, str)) \
            if isinstance(ev.get("covers"), list) else ()
        for covered in covers:  # a digest's alerts: settled once the digest is begun
            self._settle(covered)
        kind = ev.get("kind")
        if kind == ALERT_SENT or (kind == ALERT_FAILED and ev.get("final") is True):
            self._settle(key)
            return
        attempt = ev.get("attempt")
        self.begun[key] = Begun(
            str(kind), attempt if isinstance(attempt, int) and not isinstance(attempt, bool)
            else 0, str(ev.get("level")), str(ev.get("what") or ""),
            str(ev.get("title") or ""), str(ev.get("body") or ""), ev.get("for_seq"), covers)
        if len(self.begun) > BEGUN_KEPT:
            self.begun.pop(next(iter(self.begun)))

    def _settle(self, key: str) -> None:
        self.begun.pop(key, None)
        if split_key(key)[0] in self.pending:
            self.settled.add(key)

    def _prune(self) -> None:
        """Drop the owed events no target in force is owed any more (each settled, or
        none takes it); with no target in force, keep the newest :data:`UNOWNED_KEPT`
        (a target brought into force is owed those of its grace)."""
        if not self.in_force:
            while len(self.pending) > UNOWNED_KEPT:
                self.pending.pop(next(iter(self.pending)))
            return
        for key in [k for k, owed in self.pending.items() if not self._labels(owed)]:
            owed = self.pending.pop(key)
            self.settled -= {delivery_key(owed.alert.key, lb) for lb in self.in_force}

    # ------------------------------------------------------------------ asking
    def owes(self, owed: Owed, target: InForce) -> bool:
        """Whether ``owed`` is owed to ``target`` at all (its horizon, level, routing)."""
        in_time = owed.seq > target.since or \
            owed.at >= target.since_t - timedelta(seconds=GRACE_S)
        routed = self.campaign.alerts.send.get(owed.alert.kind)
        return in_time and owed.alert.level in target.levels and (
            routed is None or target.label in routed)

    def _labels(self, owed: Owed) -> list[str]:
        return [t.label for t in self.in_force.values() if self.owes(owed, t)
                and delivery_key(owed.alert.key, t.label) not in self.settled]

    def owed(self, settled: Callable[[str], bool] = lambda key: False,
             ) -> list[tuple[Owed, InForce]]:
        """Every (event, target) owed now, oldest first (``settled``: the journal's
        once-only keys, which also settle a delivery)."""
        with self._lock:
            out = [(owed, self.in_force[label]) for owed in self.pending.values()
                   for label in self._labels(owed)]
        # Asked outside the lock: the journal's reader holds its own lock and then this.
        return [(owed, t) for owed, t in out
                if not settled(delivery_key(owed.alert.key, t.label))]

    def begun_now(self) -> dict[str, Begun]:
        with self._lock:
            return dict(self.begun)

    def counts(self, settled: Callable[[str], bool] = lambda key: False) -> dict[str, int]:
        """How many alerts each target in force is owed (its label and scheme)."""
        out: dict[str, int] = {}
        for _, target in self.owed(settled):
            out[target.shown] = out.get(target.shown, 0) + 1
        return out

    # ------------------------------------------------------------------ the cache
    def encode(self) -> dict[str, Any]:
        with self._lock:
            return {
                "last_seq": self.last_seq,
                "in_force": [[t.label, t.shown, sorted(t.levels), t.since, t.since_t.isoformat()]
                             for t in self.in_force.values()],
                "conducting": self.conducting,
                "pending": [[o.seq, o.at.isoformat(), o.watched, dict(o.event)]
                            for o in self.pending.values()],
                "settled": sorted(self.settled),
                "begun": {k: [b.kind, b.attempt, b.level, b.what, b.title, b.body, b.for_seq,
                              list(b.covers)] for k, b in self.begun.items()},
                "dropped": self.dropped}

    def restore(self, body: Mapping[str, Any]) -> None:
        """Take an :meth:`encode`'s body (ValueError, KeyError, TypeError: a body of
        another shape; nothing is taken then)."""
        other = Outbox(self.campaign, self._alert_of)
        other.last_seq = int(body["last_seq"])
        for label, shown, levels, since, since_t in body["in_force"]:
            other.in_force[str(label)] = InForce(str(label), str(shown), frozenset(
                str(lv) for lv in levels), int(since), datetime.fromisoformat(str(since_t)))
        conducting = body["conducting"]
        other.conducting = None if conducting is None else bool(conducting)
        for seq, at, watched, event in body["pending"]:
            alert = self._alert_of(dict(event), self.campaign, self._deciders)
            if alert is None:
                raise ValueError("an owed event that is no alert")
            other.pending[alert.key] = Owed(alert, int(seq), datetime.fromisoformat(str(at)),
                                            None if watched is None else bool(watched),
                                            dict(event))
        other.settled = {str(k) for k in body["settled"]}
        for key, (kind, attempt, level, what, title, text, for_seq, covers) \
                in dict(body["begun"]).items():
            other.begun[str(key)] = Begun(str(kind), int(attempt), str(level), str(what),
                                          str(title), str(text), for_seq,
                                          tuple(str(c) for c in covers))
        other.dropped = int(body["dropped"])
        with self._lock:
            for name in ("last_seq", "in_force", "conducting", "pending",
                         "settled", "begun", "dropped"):
                setattr(self, name, getattr(other, name))


def owed_counts(outbox: Outbox, settled: Callable[[str], bool]) -> tuple[tuple[str, int], ...]:
    """What the faces show: (``label (scheme)``, alerts owed), by target."""
    return tuple(sorted(outbox.counts(settled).items()))


def owed_words(counts: Iterable[tuple[str, int]]) -> str | None:
    """``alerts owed: 5 (phone (ntfy))`` for the faces; None when nothing is owed."""
    parts = [f"{n} ({shown})" for shown, n in counts if n]
    return "alerts owed: " + ", ".join(parts) if parts else None


def outbox_of(campaign: Campaign, events: Iterable[Mapping[str, Any]],
              alert_of: AlertOf) -> Outbox:
    """The outbox of a list of events (tests, one-shot readers)."""
    box = Outbox(campaign, alert_of)
    box.feed(events)
    return box


__all__ = ["Begun", "InForce", "Outbox", "Owed", "delivery_key", "outbox_of", "owed_counts",
           "owed_words", "split_key"]
