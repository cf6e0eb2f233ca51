"""Alerts during a campaign (issue 26): what the tick's new events say to a person away
from the screen, sent by a background thread so a dead target never slows the tick.

Delivery is journaled: each (event, target) pair has a key (``alert:NAME:SEQ:LABEL``),
and an ``alert_sent`` or a final ``alert_failed`` with that key means it is settled
(a restarted cockpit does not send it again). A failed send is retried with backoff
(:data:`RETRY_S`) and journaled each time, with its words: a restarted cockpit tries
an unsettled one again. After the last try it is given up (``final``). The send itself
can repeat only when the cockpit dies in the seconds between a target taking the
message and the journal line that says so. A target gets at most :data:`RATE_LIMIT`
warnings an hour one by one (:class:`RateLimit`); the rest go out as one digest.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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
    alert_of,
    closed_alert,
    peer_alert,
    stale_alert,
    wait_alerts,
)
from cockpit.engine.history import History
from cockpit.engine.hooks import HOOK_MAX_AGE_S
from cockpit.engine.snapshot import EventLine
from cockpit.engine.timebase import parse_t
from cockpit.journal.state import CampaignState

RETRY_S = (30.0, 120.0, 600.0, 1800.0)  # waits between tries: five tries in ~42 min
CLAIM = "claim:"  # the once-only key of a delivery's claim: CLAIM + its key
RATE_LIMIT = 10  # warnings and infos a target gets one by one per RATE_WINDOW_S
RATE_WINDOW_S = 3600.0
PEER_ALERT_S = 300.0  # a peer unreachable this long is worth a phone (not one failed pull)
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
        why = self._send(job.target, title_text, body_text, job.alert.level)
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
        self.held: dict[str, list[str]] = {}  # label -> what each held alert said

    def admit(self, label: str, alert: Alert, at: float) -> bool:
        sent = self._recent(label, at)
        if alert.level != "critical" and (len(sent) >= self.limit or self.held.get(label)):
            self.held.setdefault(label, []).append(alert.what)
            return False
        sent.append(at)
        return True

    def digests(self, at: float) -> list[tuple[str, list[str]]]:
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
    """Turns a tick's new own events into alerts for each target that takes their level;
    each (event, target) once, whoever restarts (the journal's keys)."""

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
        self._deciders = {s.id for s in campaign.stages if s.decision_point}
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
        with self.history.journal.transaction() as txn:
            if txn.has_key(job.key) or txn.has_key(CLAIM + job.key):
                return False
            txn.append(ALERT_CLAIMED, key=CLAIM + job.key, alert=job.key,
                       target=job.target.shown, level=job.alert.level,
                       what=job.alert.what[:200], title=head, body=text, for_seq=job.seq)
        return True

    def _resume_unsettled(self, now: datetime) -> None:
        """What an earlier conductor left owed (its newest journal lines): a send it
        failed and had not given up on, tried again from the attempt after its last; a
        send it claimed and never settled (it died mid-send), sent once more, said as
        such (it may have arrived: at most one repeat, never a loss); an alert of a
        recent event that nobody claimed (it died before, or this face watched as a
        viewer then), sent now."""
        assert self.sender is not None
        by_label = {t.label: t for t in self.targets}
        last: dict[str, Mapping[str, Any]] = {}
        recent = self.history.journal.recent()
        for event in recent:
            ev: Mapping[str, Any] = event  # as read: any field may hold anything
            if ev.get("kind") in (ALERT_FAILED, ALERT_CLAIMED) \
                    and isinstance(ev.get("alert"), str):
                last[ev["alert"]] = ev
        for key, ev in last.items():  # the newest line of each key
            label = key.rsplit(":", 1)[-1]
            target = by_label.get(label)
            if target is None or key in self.history.keys or key in self._queued:
                continue  # settled, or a target no longer configured
            name = key[len("alert:"):].rsplit(":", 1)[0]
            alert = Alert(name, str(ev.get("level")), str(ev.get("what")), "", "",
                          kind=name.split(":", 1)[0])
            attempt = ev.get("attempt")
            body_text = str(ev.get("body", ""))
            if ev.get("kind") == ALERT_CLAIMED:
                body_text += (f"\n(sent again: the cockpit that sent it stopped mid-send; "
                              f"it may have arrived already. Alert id {key})")
            self._queued.add(key)
            self.sender.put(_Job(alert, target, key, ev.get("for_seq"),
                                 attempt=(attempt if isinstance(attempt, int) else 0) + 1,
                                 claimed=True),
                            str(ev.get("title", "")), body_text)
        for event in recent:  # recent events whose alert nobody claimed
            if "machine" in event:
                continue
            owed = alert_of(event, self.campaign, self._deciders)
            if owed is not None and self.history.time.age_s(
                    event.get("seq"), parse_t(event), now) <= HOOK_MAX_AGE_S:
                self.notify(owed, now, event.get("seq"))

    def run(self, fresh: tuple[EventLine, ...], now: datetime) -> None:
        if self.sender is None:
            return
        if not self._resumed:
            self._resumed = True
            self._resume_unsettled(now)
        closing = False
        for line in fresh:
            event = dict(line.fields)
            closing = closing or (not line.earlier and line.kind in CLOSING_KINDS)
            if "machine" in event:
                continue  # another machine's event: its own cockpit alerts
            self._note_end(line, event)
            alert = alert_of(event, self.campaign, self._deciders)
            if alert is None:
                continue
            if self.history.time.age_s(event.get("seq"), parse_t(event), now) > HOOK_MAX_AGE_S:
                continue  # history from before this cockpit watched: no burst of old news
            self.notify(alert, now, event.get("seq"))
        self._without_events(closing, now)
        self._send_digests(now)

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
        assert self.sender is not None
        by_label = {t.label: t for t in self.targets}
        for label, held in self.limit.digests(time.monotonic()):
            if not self.routed("digest", label):
                continue  # the campaign sends digests elsewhere: held alerts dropped here
            shown = "; ".join(held[:3]) + (f"; and {len(held) - 3} more" if len(held) > 3 else "")
            alert = Alert(f"digest:{now.timestamp():.0f}:{len(held)}", "warn",
                          f"{len(held)} more alert{'s' if len(held) > 1 else ''} in the last "
                          f"{format_duration(self.limit.window_s)}, held back: {shown}",
                          f"held them back (at most {self.limit.limit} one by one)",
                          f"cockpit status {self.campaign.path.name}", kind="digest")
            key = f"alert:{alert.key}:{label}"
            self._queued.add(key)
            self.sender.put(_Job(alert, by_label[label], key, None),
                            title(alert, self.campaign.id, self.machine),
                            body(alert, self.campaign.package.end, now))

    def routed(self, kind: str, label: str) -> bool:
        """Whether the campaign's ``alerts.send`` lets a kind go to a label (a kind it
        does not name goes to every target)."""
        labels = self.campaign.alerts.send.get(kind)
        return labels is None or label in labels

    def notify(self, alert: Alert, now: datetime, seq: Any = None) -> None:
        """Queue ``alert`` for every target that takes its level, that the campaign
        routes its kind to, and that has not had it."""
        assert self.sender is not None
        head = title(alert, self.campaign.id, self.machine)
        text = body(alert, self.campaign.package.end, now)
        for target in self.targets:
            key = f"alert:{alert.key}:{target.label}"
            if not target.takes(alert.level) or not self.routed(alert.kind, target.label) \
                    or key in self._queued or key in self.history.keys \
                    or CLAIM + key in self.history.keys:
                continue
            self._queued.add(key)
            if not self.limit.admit(target.label, alert, time.monotonic()):
                continue  # counted: it goes out in the target's next digest
            self.sender.put(_Job(alert, target, key, seq), head, text)

    def _journal(self, job: _Job, why: str | None, final: bool) -> None:
        common = {"alert": job.key, "target": job.target.shown, "level": job.alert.level,
                  "attempt": job.attempt, "what": job.alert.what[:200], "for_seq": job.seq}
        journal = self.history.journal
        if why is None:
            journal.append(ALERT_SENT, key=job.key, **common)
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
