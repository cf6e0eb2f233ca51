"""Alerts during a campaign (issue 26): what the journal owes a person away from the
screen, sent by a background thread so a dead target never slows the tick.

What is owed is the outbox's (:mod:`cockpit.engine.outbox`, issue 43): every event worth
an alert with no settled delivery to a target in force, whoever conducts and whenever it
starts. Each (event, target) pair has a key (``alert:NAME:SEQ:LABEL``), its stable id:
it is in every message's body (``alert id …``) and, for a generic webhook, in an
``X-Cockpit-Alert-Id`` header. The delivery is claimed in the journal (``alert_claimed``)
before its send; an ``alert_sent`` or a final ``alert_failed`` settles it. A failed send
is retried with backoff (:data:`RETRY_S`) and journaled each time, with its words; after
the last try it is given up (``final``). A crash before the claim or after the settling
line loses and repeats nothing; a crash during the send (between the target taking it and
the journal line) repeats it once, with the same id, never loses it. An alert that goes
out late says how late. A target gets at most :data:`RATE_LIMIT` warnings an hour one by
one (:class:`RateLimit`); the rest go out as one digest, whose lines name the alerts it
covers (settled with it). A backlog (late warnings and infos, more than
:data:`BACKLOG_ONE_BY_ONE` for a target) goes as one digest at once; criticals always go
one by one.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from cockpit.alerts.deliver import send
from cockpit.alerts.message import Alert, body, title
from cockpit.alerts.targets import Target
from cockpit.campaign.model import Campaign
from cockpit.close.export_state import ExportState
from cockpit.common.durations import format_duration
from cockpit.common.event_kinds import (
    ALERT_CLAIMED,
    ALERT_FAILED,
    ALERT_SENT,
    ALERT_TARGETS,
    EXPORT_DONE,
    RESULT_ACCEPTED,
    RESULT_REJECTED,
    RUN_EXITED,
    STAGE_DROPPED,
    STAGE_FINISHED,
    STAGE_SKIPPED,
    STOP_DONE,
)
from cockpit.engine.alert_kinds import (
    closed_alert,
    peer_alert,
    stale_alert,
    wait_alerts,
)
from cockpit.engine.history import History
from cockpit.engine.outbox import Begun, Owed, delivery_key, split_key
from cockpit.engine.snapshot import EventLine
from cockpit.journal.format import JournalError
from cockpit.journal.state import CampaignState

RETRY_S = (30.0, 120.0, 600.0, 1800.0)  # waits between tries: five tries in ~42 min
CLAIM = "claim:"  # the once-only key of a delivery's claim: CLAIM + its key
RATE_LIMIT = 10  # warnings and infos a target gets one by one per RATE_WINDOW_S
RATE_WINDOW_S = 3600.0
PEER_ALERT_S = 300.0  # a peer unreachable this long is worth a phone (not one failed pull)
LATE_S = 60.0  # an alert that goes out this long after its event says how late
BACKLOG_ONE_BY_ONE = 3  # late warnings a target gets one by one; more: one digest
PEER_CHECK_S = 15.0  # how often the peers' views are read for it (each reads files)
# Events that may close the campaign: the "closed" alert is looked for after one of them.
# (An export made again after one went stale closes it: EXPORT_DONE.)
CLOSING_KINDS = frozenset({RESULT_ACCEPTED, RESULT_REJECTED, STAGE_FINISHED,
                           STAGE_SKIPPED, STAGE_DROPPED, "decision", EXPORT_DONE})
@dataclass
class _Job:
    alert: Alert
    target: Target
    key: str
    seq: Any
    attempt: int = 1
    due: float = 0.0  # monotonic time of the next try
    claimed: bool = False  # its delivery is claimed in the journal (issue 39)
    covers: tuple[str, ...] = ()  # a digest: the delivery keys of the alerts it holds


class AlertSender:
    """A background thread that sends and journals (through ``record``); never blocks
    the caller. ``send`` is replaceable for tests at the edge (the default: apprise)."""

    def __init__(self, record: Callable[[_Job, str | None, bool], None],
                 sender: Callable[..., str | None] = send,
                 claim: Callable[[_Job], bool] = lambda job: True) -> None:
        self._record = record
        self._send = sender
        self._claim = claim
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._waiting: list[_Job] = []
        self._thread = threading.Thread(target=self._loop, name="cockpit-alerts", daemon=True)
        self._thread.start()
        self.texts: dict[str, tuple[str, str]] = {}  # key -> (title, body)

    def put(self, job: _Job, title_text: str, body_text: str) -> None:
        self.texts[job.key] = (title_text, body_text)
        self._jobs.put(job)

    def close(self, wait_s: float = 5.0) -> None:
        self._jobs.put(None)
        self._thread.join(wait_s)

    def _loop(self) -> None:
        while True:
            wait = min((j.due for j in self._waiting), default=None)
            timeout = None if wait is None else max(0.0, wait - time.monotonic())
            try:
                job = self._jobs.get(timeout=timeout)
            except queue.Empty:
                job = _NO_JOB
            if job is None:
                return
            if job is not _NO_JOB:
                self._waiting.append(job)
            now = time.monotonic()
            for due in [j for j in self._waiting if j.due <= now]:
                self._waiting.remove(due)
                self._try(due)

    def _try(self, job: _Job) -> None:
        if not job.claimed:
            # Claimed in the journal before the send: whoever conducts next sees that
            # this delivery was begun, and never begins it a second time.
            try:
                taken = self._claim(job)
            except Exception:  # noqa: BLE001 - a journal that cannot be written: later
                job.due = time.monotonic() + RETRY_S[0]
                self._waiting.append(job)
                return
            if not taken:  # settled or claimed already (another cockpit, earlier)
                self.texts.pop(job.key, None)
                return
            job.claimed = True
        title_text, body_text = self.texts[job.key]
        # The real delivery also puts the id in a header (a test's inbox takes 4 words).
        ids = {"alert_id": job.key} if self._send is send else {}
        why = self._send(job.target, title_text, body_text, job.alert.level, **ids)
        final = why is None or job.attempt > len(RETRY_S)
        try:
            self._record(job, why, final)
        except Exception:  # noqa: BLE001 - a journal that cannot be written: try later
            final = False
        if not final:
            job.due = time.monotonic() + RETRY_S[min(job.attempt - 1, len(RETRY_S) - 1)]
            job.attempt += 1
            self._waiting.append(job)
        else:
            self.texts.pop(job.key, None)


_NO_JOB = _Job(Alert("", "info", "", "", ""), Target("none", "none://"), "", None)


class RateLimit:
    """Per target: at most ``limit`` warnings and infos one by one in ``window_s``; the
    rest are held and go out as one digest when the window has room again. A critical
    alert always goes at once (it also counts against the window)."""

    def __init__(self, limit: int = RATE_LIMIT, window_s: float = RATE_WINDOW_S) -> None:
        self.limit = limit
        self.window_s = window_s
        self._sent: dict[str, deque[float]] = {}
        # label -> (delivery key, what it said) of each held alert
        self.held: dict[str, list[tuple[str, str]]] = {}

    def admit(self, label: str, alert: Alert, at: float, key: str = "") -> bool:
        sent = self._recent(label, at)
        if alert.level != "critical" and (len(sent) >= self.limit or self.held.get(label)):
            self.held.setdefault(label, []).append((key, alert.what))
            return False
        sent.append(at)
        return True

    def digests(self, at: float) -> list[tuple[str, list[tuple[str, str]]]]:
        """The held alerts of each target whose window has room again (taken)."""
        out = []
        for label in [lb for lb, held in self.held.items() if held]:
            sent = self._recent(label, at)
            if len(sent) < self.limit:
                sent.append(at)
                out.append((label, self.held.pop(label)))
        return out

    def _recent(self, label: str, at: float) -> deque[float]:
        sent = self._sent.setdefault(label, deque())
        while sent and sent[0] <= at - self.window_s:
            sent.popleft()
        return sent


class AlertDispatcher:
    """Sends what the outbox owes each target (the events worth an alert) and the alerts
    no event carries (the waits, a peer, the export stale, the campaign closed); each
    (event, target) once, whoever restarts (the journal's keys)."""

    def __init__(self, campaign: Campaign, history: History, targets: Sequence[Target],
                 machine: int | None = None,
                 sender: Callable[..., str | None] = send,
                 export_state: Callable[[CampaignState], ExportState] | None = None) -> None:
        self.campaign = campaign
        self.history = history
        # The newest export against the facts now (the engine's, worked out once a state).
        self.export_state = export_state
        self.targets = tuple(targets)
        self.machine = machine
        self._queued: set[str] = set()
        self._resumed = False
        self.limit = RateLimit()
        # The seq of each own stage's newest end and each run attempt's end seen appear
        # while this cockpit watched: their ages are monotonic (the waits' alerts).
        self._ends: dict[tuple[Any, ...], int] = {}
        self._peers_at: float | None = None  # monotonic time of the last look at the peers
        self._unreached: dict[int, float] = {}  # machine -> monotonic time first seen so
        self.sender = (AlertSender(self._journal, sender, self._claim)
                       if self.targets else None)

    def _claim(self, job: _Job) -> bool:
        """Claim a delivery in the journal before its send (the sender thread); False:
        settled or claimed already, nothing to send."""
        assert self.sender is not None
        head, text = self.sender.texts.get(job.key, ("", ""))
        covers: dict[str, Any] = {"covers": list(job.covers)} if job.covers else {}
        with self.history.journal.transaction() as txn:
            if txn.has_key(job.key) or txn.has_key(CLAIM + job.key):
                return False
            txn.append(ALERT_CLAIMED, key=CLAIM + job.key, alert=job.key,
                       target=job.target.shown, level=job.alert.level,
                       what=job.alert.what[:200], title=head, body=text, for_seq=job.seq,
                       **covers)
        return True

    def _write_targets(self, phase: str, now: datetime | None = None) -> None:
        """The targets this conductor sends to, journaled (by label and scheme, never a
        URL): at its open the outbox's horizon, at its clean close ``closed``."""
        self.history.journal.append(
            ALERT_TARGETS, now=now, phase=phase, pid=os.getpid(),
            targets=[{"label": t.label, "target": t.shown, "levels": sorted(t.levels)}
                     for t in self.targets])

    def run(self, fresh: tuple[EventLine, ...], now: datetime) -> None:
        if self.sender is None:
            return
        if not self._resumed:  # the first tick this cockpit conducts
            self._resumed = True
            self._write_targets("open", now)
            self.history.state(now)  # read back: the outbox holds them in force
        closing = False
        for line in fresh:
            closing = closing or (not line.earlier and line.kind in CLOSING_KINDS)
            if "machine" not in line.fields:  # another machine's: its own cockpit's
                self._note_end(line, line.fields)
        self._send_owed(now)
        self._resume_begun()
        self._without_events(closing, now)
        self._send_digests(now)

    def _send_owed(self, now: datetime) -> None:
        """What the outbox owes each target and nobody here has queued: a delivery begun
        by an earlier conductor and never settled, sent once more with its words; the
        rest sent now, late ones saying how late (a backlog of late warnings: one
        digest)."""
        by_label = {t.label: t for t in self.targets}
        begun = self.history.outbox.begun_now()
        keys = self.history.keys
        backlog: dict[str, list[tuple[str, Alert]]] = {}
        for owed, force in self.history.outbox.owed(keys.__contains__):
            key = delivery_key(owed.alert.key, force.label)
            target = by_label.get(force.label)
            if target is None or key in self._queued:
                continue
            if key in begun:
                self._resume(key, target, begun[key])
                continue
            alert = self._late(owed, now)
            if alert.late and alert.level != "critical":
                backlog.setdefault(force.label, []).append((key, alert))
                continue
            self._put(alert, target, key, owed.seq, now, again=CLAIM + key in keys)
        for label, items in backlog.items():
            if len(items) > BACKLOG_ONE_BY_ONE:
                self._backlog_digest(by_label[label], items, now)
                continue
            for key, alert in items:
                self._put(alert, by_label[label], key, None, now)

    def _resume_begun(self) -> None:
        """Deliveries of alerts no event carries (a wait, a digest, the campaign closed)
        that an earlier conductor began and never settled: sent once more."""
        by_label = {t.label: t for t in self.targets}
        pending = self.history.outbox.pending
        for key, begun in self.history.outbox.begun_now().items():
            name, label = split_key(key)
            target = by_label.get(label)
            if target is None or key in self._queued or name in pending \
                    or key in self.history.keys:
                continue  # not ours, queued, owed through its event, or settled
            self._resume(key, target, begun)

    def _resume(self, key: str, target: Target, begun: Begun) -> None:
        """A delivery begun and not settled: a failed one tried again from the attempt
        after its last; a claimed one (its cockpit died mid-send) sent once more, said as
        such (it may have arrived: at most one repeat, never a loss), with its id."""
        assert self.sender is not None
        name = split_key(key)[0]
        alert = Alert(name, begun.level, begun.what, "", "", kind=name.split(":", 1)[0])
        text = begun.body
        if begun.kind == ALERT_CLAIMED:
            text += AGAIN
        if f"alert id {key}" not in text:
            text += f"\nalert id {key}"
        self._queued.add(key)
        self.sender.put(_Job(alert, target, key, begun.for_seq, attempt=begun.attempt + 1,
                             claimed=True, covers=begun.covers), begun.title, text)

    def _late(self, owed: Owed, now: datetime) -> Alert:
        """The alert, saying how late it goes out when it is (the journal's timebase:
        monotonic for what this cockpit saw appear, its wall age otherwise)."""
        age = self.history.time.age_s(owed.seq, owed.at, now)
        if age < LATE_S:
            return owed.alert
        why = "" if owed.watched is None else \
            ": the cockpit that saw it stopped before sending" if owed.watched else \
            ", while no cockpit ran"
        return replace(owed.alert, late=f"from {format_duration(age)} ago{why}")

    def _note_end(self, line: EventLine, event: Mapping[str, Any]) -> None:
        if line.earlier:
            return  # journaled before this cockpit opened: its wall age stands in
        if line.kind == STAGE_FINISHED:
            self._ends[("stage", event.get("stage"))] = line.seq
        elif line.kind in (RUN_EXITED, STOP_DONE):
            self._ends.setdefault(("run", event.get("run"), event.get("attempt")), line.seq)

    def _without_events(self, closing: bool, now: datetime) -> None:
        """The alerts no new journal event carries: the waits, an unreachable peer, the
        export gone stale, the campaign closed (after an event that may close it;
        machine 1 says it)."""
        if self.history.time.holding():
            return  # the clock just jumped: no age is trusted until it settles
        state = self.history.state(now)

        def age_of(what: str, ident: str, ended_at: datetime) -> float:
            attempt = () if what == "stage" else (state.runs[ident].attempt,)
            seq = self._ends.get((what, ident, *attempt))
            return self.history.time.age_s(seq, ended_at, now)

        for alert in wait_alerts(self.campaign, state, age_of, self.machine):
            self.notify(alert, now)
        self._peer_alerts(now)
        export = None if self.export_state is None else self.export_state(state)
        if export is not None and (stale := stale_alert(export)) is not None:
            self.notify(stale, now, export.seq)  # once per export
        closed = closed_alert(self.campaign, state, now, export) \
            if closing and self.machine in (None, 1) else None
        if closed is not None:
            self.notify(closed, now)

    def _peer_alerts(self, now: datetime) -> None:
        mono = self.history.time.mono()
        if self.history.peers is None or (
                self._peers_at is not None and mono - self._peers_at < PEER_CHECK_S):
            return
        self._peers_at = mono
        wall = time.time()  # the views' ages are on the wall clock of their pulls
        for view in self.history.machine_views():
            if view.reachable is not False:
                self._unreached.pop(view.machine, None)
                continue
            first = self._unreached.setdefault(view.machine, mono)
            age = view.data_age_s
            if (age if age is not None else mono - first) >= PEER_ALERT_S:
                last_ok = None if age is None else round(wall - age)
                self.notify(peer_alert(view, last_ok, self.campaign.path.name), now)

    def _send_digests(self, now: datetime) -> None:
        by_label = {t.label: t for t in self.targets}
        for label, held in self.limit.digests(time.monotonic()):
            if not self.routed("digest", label):
                continue  # the campaign sends digests elsewhere: held alerts dropped here
            alert = Alert(f"digest:{now.timestamp():.0f}:{len(held)}", "warn",
                          f"{len(held)} more alert{'s' if len(held) > 1 else ''} in the last "
                          f"{format_duration(self.limit.window_s)}, held back: "
                          f"{_listed(held)}",
                          f"held them back (at most {self.limit.limit} one by one)",
                          f"cockpit status {self.campaign.path.name}", kind="digest")
            self._queue_digest(alert, by_label[label], held, now)

    def _backlog_digest(self, target: Target, items: list[tuple[str, Alert]],
                        now: datetime) -> None:
        """Late warnings and infos owed to a target, more than it gets one by one: one
        digest, as late as the oldest (each critical goes alone)."""
        alert = Alert(f"backlog:{items[0][0].removeprefix('alert:')}:{len(items)}", "warn",
                      f"{len(items)} alerts owed, sent as one: "
                      f"{_listed([(k, a.what) for k, a in items])}",
                      "kept them owed in the journal until a cockpit could send them",
                      f"cockpit status {self.campaign.path.name}", kind="digest",
                      late=items[0][1].late)
        self._queue_digest(alert, target, [(k, a.what) for k, a in items], now)

    def _queue_digest(self, alert: Alert, target: Target, held: list[tuple[str, str]],
                      now: datetime) -> None:
        assert self.sender is not None
        key = delivery_key(alert.key, target.label)
        self._queued.add(key)
        self.sender.put(_Job(alert, target, key, None,
                             covers=tuple(k for k, _ in held if k)),
                        title(alert, self.campaign.id, self.machine),
                        body(alert, self.campaign.package.end, now, key))

    def routed(self, kind: str, label: str) -> bool:
        """Whether the campaign's ``alerts.send`` lets a kind go to a label (a kind it
        does not name goes to every target)."""
        labels = self.campaign.alerts.send.get(kind)
        return labels is None or label in labels

    def notify(self, alert: Alert, now: datetime, seq: Any = None) -> None:
        """Queue ``alert`` for every target that takes its level, that the campaign
        routes its kind to, and that has not had it."""
        assert self.sender is not None
        for target in self.targets:
            key = delivery_key(alert.key, target.label)
            if not target.takes(alert.level) or not self.routed(alert.kind, target.label) \
                    or key in self._queued or key in self.history.keys \
                    or CLAIM + key in self.history.keys:
                continue
            self._put(alert, target, key, seq, now)

    def _put(self, alert: Alert, target: Target, key: str, seq: Any, now: datetime,
             again: bool = False) -> None:
        """Queue one delivery (``again``: claimed by a cockpit that died mid-send and
        whose words are gone: sent once more, said as such)."""
        assert self.sender is not None
        self._queued.add(key)
        if not again and not self.limit.admit(target.label, alert, time.monotonic(), key):
            return  # counted: it goes out in the target's next digest
        text = body(alert, self.campaign.package.end, now, key)
        self.sender.put(_Job(alert, target, key, seq, claimed=again),
                        title(alert, self.campaign.id, self.machine),
                        text + AGAIN if again else text)

    def _journal(self, job: _Job, why: str | None, final: bool) -> None:
        common = {"alert": job.key, "target": job.target.shown, "level": job.alert.level,
                  "attempt": job.attempt, "what": job.alert.what[:200], "for_seq": job.seq}
        journal = self.history.journal
        if why is None:
            covers: dict[str, Any] = {"covers": list(job.covers)} if job.covers else {}
            journal.append(ALERT_SENT, key=job.key, **common, **covers)
        elif final:  # given up: the key settles it
            journal.append(ALERT_FAILED, key=job.key, error=why, final=True, **common)
        else:  # the words kept, so a restarted cockpit can try again (no URL in them)
            assert self.sender is not None
            head, text = self.sender.texts.get(job.key, ("", ""))
            journal.append(ALERT_FAILED, error=why, final=False, title=head, body=text,
                           **common)

    def close(self) -> None:
        if self.sender is not None:
            self.sender.close()
            if self._resumed:  # it conducted: the journal says when it stopped
                try:
                    self._write_targets("closed")
                except (OSError, JournalError):
                    pass  # a journal that cannot be written: the next open says it


AGAIN = ("\n(sent again: the cockpit that sent it stopped mid-send; it may have arrived "
         "already, with the same alert id)")


def _listed(held: Sequence[tuple[str, str]]) -> str:
    whats = [what for _, what in held]
    return "; ".join(whats[:3]) + (f"; and {len(whats) - 3} more" if len(whats) > 3 else "")
