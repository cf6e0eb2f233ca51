"""Checking runs in the background: new checkpoints reloaded in a fresh process (D17)
and acceptance verdicts for ended runs (D20; a stopped run never, D15). A tick never
waits for a process: the slow work runs in
:class:`~cockpit.runs.checkpoints.verifier.BackgroundVerifier` and its result is
journaled on a later tick.

A background verification is claimed in the journal (``verify_started``) with its
owner (pid and start time of the cockpit) and a time limit; a claim whose owner is
gone (a cockpit killed -9) or whose limit passed is claimed again, so a checkpoint is
never left unverified for good.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from cockpit.close.acceptance import (
    Judgement,
    awaiting_verdict,
    has_slow_checks,
    judge_run,
    record_verdict,
)
from cockpit.common.event_kinds import CHECKPOINT_VERIFIED, VERIFY_STARTED
from cockpit.engine.history import History
from cockpit.engine.observer import Observer
from cockpit.engine.scope import Scope
from cockpit.engine.timebase import parse_t
from cockpit.journal.fields import Event
from cockpit.journal.fold import RUNNING, CampaignState, RunState
from cockpit.runs.checkpoints.verifier import BackgroundVerifier, report_fields

# How long past the reload's own time limit a verification claim still holds.
VERIFY_CLAIM_MARGIN_S = 60.0
# How far back the cheap checks look for a claim (the lock-held check reads everything).
VERIFY_CLAIM_LOOKBACK = 2000


def verify_claims(events: list[Event], run_id: str, attempt: Any,
                  path: str) -> list[Event]:
    """The ``verify_started`` claims of one checkpoint of one attempt."""
    return [ev for ev in events if ev.get("kind") == VERIFY_STARTED
            and ev.get("run") == run_id and ev.get("attempt") == attempt
            and ev.get("path") == path]


class Verification:
    """Background checkpoint reloads and acceptance checks (see the module text)."""

    def __init__(self, scope: Scope, history: History, observer: Observer, *,
                 actor: str) -> None:
        self.scope = scope
        self.campaign = scope.campaign
        self.history = history
        self.observer = observer
        self.actor = actor
        self.verifier = BackgroundVerifier()
        self.judging: set[tuple[str, int | None]] = set()  # acceptance in the background
        self._verifying_run: tuple[str, int | None] | None = None

    # ------------------------------------------------------------------ checkpoints
    def auto_verify(self, state: CampaignState, now: datetime) -> None:
        """Verify new checkpoints by reloading them in a fresh process (D17), in the
        background, one at a time; the first checkpoint of a run at once, then at most
        every ``verify_every``. Claimed in the journal so two cockpits verify once."""
        results = self.verifier.results()
        for run_id, attempt, report in results:
            self.history.journal.append(CHECKPOINT_VERIFIED, now=now, run=run_id,
                                        attempt=attempt, auto=True, actor=self.actor,
                                        **report_fields(report))
        if results:
            state = self.history.state(now)  # what was just verified is not claimed again
        if self.verifier.busy:
            return
        for run in state.runs.values():
            path = self._due(run, now)
            if path is not None and self._claim(run, path, now):
                spec = self.campaign.runs[run.id]
                self._verifying_run = (run.id, run.attempt)
                self.verifier.submit(self.campaign, spec, Path(path), run.attempt)
                return

    def _due(self, run: RunState, now: datetime) -> str | None:
        """The run's newest checkpoint, when it is due for a verification."""
        view = self.observer.checkpoints.get(run.id)
        if run.state != RUNNING or view is None or view.newest is None \
                or run.id not in self.campaign.runs or not self.scope.mine_run(run.id):
            return None
        path = str(view.newest.path)
        mine = [v for v in run.verified if v.get("attempt") == run.attempt]
        if any(v.get("path") == path for v in mine):
            return None
        every = self.campaign.settings.verify_every_s
        if mine and self.history.time.age_s(mine[-1].get("seq"), parse_t(mine[-1]),
                                            now) < every:
            return None
        if self._claimed(run.id, run.attempt, path, now):
            return None  # another cockpit, alive and within its limit, verifies it
        return path

    def _claim(self, run: RunState, path: str, now: datetime) -> bool:
        """Claim the verification under the lock (False: someone holds it)."""
        owner = self.history.time.owner
        with self.history.journal.transaction() as txn:
            claims = verify_claims(txn.recent(VERIFY_CLAIM_LOOKBACK), run.id, run.attempt, path)
            if claims and self.claim_holds(claims[-1], now):
                return False
            key = f"verify:{run.id}:{run.attempt}:{path}"
            if claims:  # the earlier claim's owner is gone or its limit passed: again
                key += f":retry{claims[-1].get('seq')}"
            txn.append(VERIFY_STARTED, now=now, key=key, run=run.id, path=path,
                       attempt=run.attempt, owner_pid=owner[0], owner_start=owner[1],
                       limit_s=self.limit_s(),
                       **({"retry": claims[-1].get("seq")} if claims else {}))
        return True

    def limit_s(self) -> float:
        """How long a verification claim holds: the reload's own time limit and a margin."""
        return float(self.campaign.settings.verify_timeout_s) + VERIFY_CLAIM_MARGIN_S

    def claim_holds(self, claim: Event, now: datetime) -> bool:
        """A verification claim still stands: its owner lives and its limit has not passed
        (measured on the monotonic clock from when this cockpit first read it)."""
        limit = claim.get("limit_s")
        if not isinstance(limit, (int, float)) or isinstance(limit, bool):
            limit = self.limit_s()
        age = self.history.time.age_s(claim.get("seq"), parse_t(claim), now)
        return age < float(limit) and self.history.time.owner_alive(claim)

    def _recent_claims(self, run_id: str, attempt: Any, path: str) -> list[Event]:
        events = self.history.journal.recent(VERIFY_CLAIM_LOOKBACK)
        return verify_claims(events, run_id, attempt, path)

    def _claimed(self, run_id: str, attempt: Any, path: str, now: datetime) -> bool:
        """The cheap check before the lock: a claim of that checkpoint that still stands."""
        claims = self._recent_claims(run_id, attempt, path)
        return bool(claims) and self.claim_holds(claims[-1], now)

    def verifying(self, run: RunState) -> bool:
        """The run's newest checkpoint is claimed for verification and has no verdict yet
        (verified here, by a live cockpit, or about to be claimed again because its owner
        died): the ``restart`` rule waits for that verdict rather than stopping a run
        whose restart is being proven. A verdict (pass or fail) always comes: the claim's
        owner or its time limit ends it."""
        if self.verifier.busy and self._verifying_run == (run.id, run.attempt):
            return True
        view = self.observer.checkpoints.get(run.id)
        if view is None or view.newest is None:
            return False
        path = str(view.newest.path)
        if any(v.get("path") == path for v in run.verified if v.get("attempt") == run.attempt):
            return False
        return bool(self._recent_claims(run.id, run.attempt, path))

    # ------------------------------------------------------------------ acceptance
    def judge_runs(self, now: datetime) -> None:
        """Acceptance verdicts for ended runs (D20). Checks that only read files run here;
        a run with a reload check is judged by the background verifier and its verdict
        journaled on the tick after it finished: a tick never waits for a process."""
        for key, value in self.verifier.check_results():
            self.judging.discard(key)
            judged: Judgement = value
            record_verdict(self.history.journal, self.history.fold_locked, self.campaign,
                           str(key[0]), key[1], judged.ok, judged.reasons, now, judged.failed)
        state = self.history.state(now)
        for run_id in awaiting_verdict(self.campaign, state):
            run = state.runs[run_id]
            key = (run_id, run.attempt)
            if not self.scope.mine_run(run_id) or key in self.judging:
                continue  # judged on its own machine, or being judged
            if not has_slow_checks(self.campaign.runs[run_id]):
                judged = judge_run(self.campaign, state, run_id, now=now)
                record_verdict(self.history.journal, self.history.fold_locked, self.campaign,
                               run_id, run.attempt, judged.ok, judged.reasons, now, judged.failed)
                continue
            if self.verifier.submit_check(key, self._checker(state, run_id, now),
                                          _check_failed):
                self.judging.add(key)

    def _checker(self, state: CampaignState, run_id: str, now: datetime) -> Any:
        def check() -> Judgement:
            return judge_run(self.campaign, state, run_id, now=now)
        return check


def _check_failed(exc: Exception) -> Judgement:
    return Judgement(False, [f"the acceptance checks could not run: {exc}"], ("checks",))
