"""The recorder: the actions that only write the journal. The plan as decided and its
later versions (D24), verdicts on results (accept, reject, overrides; D15, D21), a
stage marked by hand, decisions (D4), notes (D24) and other costs (D20), and the
wall-clock jumps the tick saw.

Each checks what it may do against the journal folded under the journal lock, then
writes its events in the same transaction; a refusal raises ``ActionRefused`` with
the reason, bad input raises ``InputError``. Who may judge a run is said by the small
named checks (``_result_run``, ``_judgeable``) the faces' affordances share.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from cockpit.campaign.model import Campaign, Run
from cockpit.common.errors import ActionRefused, InputError
from cockpit.common.event_kinds import (
    CLOCK_JUMP,
    COST,
    DECISION,
    NOTE,
    PLAN_CHANGED,
    PLAN_RECORDED,
    RESULT_ACCEPTED,
    RESULT_REJECTED,
    STAGE_DROPPED,
    STAGE_FINISHED,
    STAGE_SKIPPED,
    STAGE_STARTED,
)
from cockpit.common.units import other_cost, plain_amount
from cockpit.engine.affordances import judge_refusal, mark_refusal, no_result_refusal
from cockpit.engine.clockwatch import ClockJump
from cockpit.engine.history import History
from cockpit.engine.ports import JournalView
from cockpit.engine.scope import Scope
from cockpit.journal.fields import Event
from cockpit.journal.fold import (
    DONE,
    DROPPED,
    PENDING,
    RUNNING,
    CampaignState,
    RunState,
)
from cockpit.journal.log import format_time
from cockpit.journal.plan_record import decided_campaign, pack


def record_plan(txn: JournalView, campaign: Campaign, state: CampaignState,
                now: datetime) -> None:
    """The plan as decided: its hash and full text, once (D24)."""
    if state.plan_hash is None:
        txn.append(PLAN_RECORDED, now=now, sha256=campaign.sha256,
                   path=str(campaign.path), text_z=pack(campaign.text))


class Recorder:
    """Journal-only actions (see the module text)."""

    def __init__(self, scope: Scope, history: History, *, actor: str) -> None:
        self.scope = scope
        self.campaign = scope.campaign
        self.history = history
        self.clock = history.time.clock
        self.actor = actor
        self._decided_for: str | None = None  # the plan hash _decided_cache belongs to
        self._decided_cache: dict[str, float] = {}

    # ------------------------------------------------------------------ the plan (D24)
    def decided_planned_s(self, state: CampaignState) -> dict[str, float]:
        """Planned seconds per stage as decided, when the file changed since (cached)."""
        if not state.plan_changed:
            return {}
        if self._decided_for != state.plan_hash:
            # The plan as decided is this machine's own record (a local kind; the fleet
            # view, with no journal of its own, reads every machine's).
            decided = decided_campaign(self.campaign, self.history.events())
            self._decided_cache = {s.id: s.seconds for s in decided.stages}
            self._decided_for = state.plan_hash
        return self._decided_cache

    def record_plan_change(self, state: CampaignState, now: datetime,
                           version: Campaign | None = None) -> None:
        """A campaign file edited after the plan was decided: keep each version once
        (D24). ``version``: the file's new version (the engine's own plan when None)."""
        plan = version or self.campaign
        if state.latest_plan_hash is None or state.latest_plan_hash == plan.sha256:
            return
        with self.history.journal.transaction() as txn:
            current = self.history.fold_locked(now)
            if current.latest_plan_hash not in (None, plan.sha256):
                txn.append(PLAN_CHANGED, now=now, sha256=plan.sha256,
                           path=str(plan.path), text_z=pack(plan.text))

    def record_clock_jump(self, jump: ClockJump, settle_s: float, now: datetime) -> None:
        """Journal a wall-clock step once (from, to); the actions on time hold meanwhile.
        Two cockpits of one journal see the same step: its size and minute key it once."""
        key = f"clock_jump:{round(jump.seconds)}:{jump.actual.strftime('%Y%m%dT%H%M')}"
        self.history.journal_once(
            CLOCK_JUMP, key, now, seconds=round(jump.seconds, 3), settle_s=settle_s,
            actor=self.actor,
            **{"from": format_time(jump.expected), "to": format_time(jump.actual)})

    # ------------------------------------------------------------------ verdicts
    def check_acceptance(self, run_id: str, now: datetime | None = None
                         ) -> tuple[bool, list[str]]:
        """(passes, reasons in words): the run's acceptance checks evaluated now (each
        check's reason, passed or not); a run without checks: whether it is evidence as
        it stands (never blind to a stop rule, never a NaN loss), with the problems."""
        from cockpit.close.acceptance import accept_problems, evaluate_acceptance

        spec = self.campaign.runs.get(run_id)
        if spec is None:
            raise InputError(f"{self.campaign.path}: no run {run_id!r}")
        state = self.history.state(now)
        if spec.acceptance:
            return evaluate_acceptance(self.campaign, state, run_id)
        problems = accept_problems(self.campaign, state, run_id)
        return not problems, list(problems)

    def accept(self, run_id: str, note: str | None = None, now: datetime | None = None,
               *, override: bool = False) -> Event | None:
        """Accept a run's result. Refused when its acceptance checks fail, unless
        ``override`` with a note (journaled as an override); None when already accepted."""
        now = now or self.clock.now()
        spec = self._result_run(run_id)
        self.scope.refuse_other_run(run_id, "accept")
        run = self.history.state(now).runs[run_id]
        self._judgeable(run_id, run)
        if run.verdict == "accepted":
            return None
        ok, reasons = self.check_acceptance(run_id, now)
        failed = [] if ok else reasons
        if failed and not override:
            what = "fails its acceptance checks" if spec.acceptance else \
                "is not evidence as it stands"
            raise ActionRefused(f"run {run_id!r} {what} (" + "; ".join(failed)
                                + "): --override with a --note to accept it anyway "
                                f"(`cockpit accept FILE {run_id} --override --note \"why\"`, "
                                "recorded as an override)")
        if failed and not (note or "").strip():
            raise InputError("accept --override needs a --note saying why")
        with self.history.journal.transaction() as txn:
            current = self.history.fold_locked(now).runs[run_id]
            self._judgeable(run_id, current)
            if current.verdict == "accepted":
                return None
            fields: dict[str, Any] = {"override": True, "checks": failed} if failed else {}
            return txn.append(RESULT_ACCEPTED, now=now, run=run_id, reason=note or "accepted",
                              result=spec.result_id, actor=self.actor, **fields)

    def reject(self, run_id: str, note: str, now: datetime | None = None
               ) -> Event | None:
        """Reject a run's result (a later verdict replaces an earlier one); None when
        it is already rejected."""
        now = now or self.clock.now()
        spec = self._result_run(run_id)
        self.scope.refuse_other_run(run_id, "reject")
        if not note.strip():
            raise InputError("reject needs a --note saying why")
        with self.history.journal.transaction() as txn:
            current = self.history.fold_locked(now).runs[run_id]
            self._judgeable(run_id, current, rejecting=True)
            if current.verdict == "rejected":
                return None
            return txn.append(RESULT_REJECTED, now=now, run=run_id, reason=note,
                              result=spec.result_id, actor=self.actor)

    def _result_run(self, run_id: str) -> Run:
        spec = self.campaign.runs.get(run_id)
        if spec is None:
            raise InputError(f"{self.campaign.path}: no run {run_id!r}")
        if refusal := no_result_refusal(self.campaign, run_id):
            raise ActionRefused(refusal)
        return spec

    @staticmethod
    def _judgeable(run_id: str, run: RunState, *, rejecting: bool = False) -> None:
        if refusal := judge_refusal(run_id, run, rejecting=rejecting):
            raise ActionRefused(refusal)

    # ------------------------------------------------------------------ notes & costs
    def note(self, stage_id: str, text: str, now: datetime | None = None) -> Event:
        self.scope.stage(stage_id)
        if not text.strip():
            raise InputError("note: the text is empty")
        return self.history.journal.append(NOTE, now=now or self.clock.now(),
                                           stage=stage_id, text=text, actor=self.actor)

    def cost(self, label: str, amount: str, currency: str = "USD",
             now: datetime | None = None) -> Event:
        try:
            money = other_cost(label, amount, currency)  # the same check as the fold's
        except ValueError as exc:
            raise InputError(f"cost: {exc}") from None
        # The exact text of the Decimal: no float on the way to the journal.
        return self.history.journal.append(
            COST, now=now or self.clock.now(), label=label,
            amount=plain_amount(money.amount), currency=money.currency, actor=self.actor)

    # ------------------------------------------------------------------ mark
    def mark(self, stage_id: str, what: str, note: str | None = None,
             now: datetime | None = None) -> list[Event]:
        """A stage without a command (or run elsewhere) marked started, done or skipped."""
        stage = self.scope.stage(stage_id)
        now = now or self.clock.now()
        if what not in ("started", "done", "skipped"):
            raise InputError(f"mark: {what!r} is not one of started, done, skipped")
        self.scope.refuse_other_machine(stage, "mark")
        with self.history.journal.transaction() as txn:
            state = self.history.fold_locked(now)
            st = state.stages[stage_id]
            record_plan(txn, self.campaign, state, now)
            if refusal := mark_refusal(state, stage, what):
                raise ActionRefused(refusal)
            fields = {"stage": stage_id, "actor": self.actor}
            written: list[Event] = []
            for kind, extra in self._mark_events(stage_id, st.state, what, note):
                written.append(txn.append(kind, now=now, **fields, **extra))
            if note and what != "skipped":
                written.append(txn.append(NOTE, now=now, text=note, **fields))
            return written

    def _mark_events(self, stage_id: str, now_state: str, what: str, note: str | None
                     ) -> list[tuple[str, dict[str, Any]]]:
        """The events a mark writes (:func:`mark_refusal` said it may)."""
        stage = self.campaign.stage(stage_id)
        start = (STAGE_STARTED, {"manual": True, "run": stage.run})
        if what == "started":
            return [start]
        if what == "done":
            finish = (STAGE_FINISHED, {"outcome": DONE, "manual": True})
            return [finish] if now_state == RUNNING else [start, finish]
        return [(STAGE_SKIPPED, {"note": note})]

    # ------------------------------------------------------------------ decisions (D4)
    def decide(self, outcome: str, *, stage: str | None = None, drops: Iterable[str] = (),
               note: str, now: datetime | None = None) -> list[Event]:
        now = now or self.clock.now()
        drops = tuple(drops)
        self._check_decision(outcome, drops, note)
        with self.history.journal.transaction() as txn:
            state = self.history.fold_locked(now)
            stage = self._pending_at(state, stage)
            # Made where its stage runs (the ownership table): elsewhere never folded.
            self.scope.refuse_other_machine(self.scope.stage(stage), "decide")
            for d in drops:
                if state.stages[d].state != PENDING:
                    raise ActionRefused(f"stage {d!r} is {state.stages[d].state}: only stages "
                                        "not yet started can be dropped")
            self._refuse_last_variant(state, drops)
            record_plan(txn, self.campaign, state, now)
            written = [txn.append(DECISION, now=now, stage=stage, outcome=outcome,
                                  drops=list(drops), note=note, actor=self.actor)]
            for d in drops:
                written.append(txn.append(STAGE_DROPPED, now=now, stage=d,
                                          reason=f"limit decision at {stage}: {note}"))
            return written

    def _check_decision(self, outcome: str, drops: tuple[str, ...], note: str) -> None:
        if outcome not in ("continue", "limit", "revise"):
            raise InputError(f"decide: {outcome!r} is not continue, limit or revise")
        if not note.strip():
            raise InputError("decide: --note is required: say why (D4)")
        for d in drops:
            self.scope.stage(d)
        if outcome == "limit" and not drops:
            raise InputError("decide limit: name the optional stages to drop with --drop")
        if outcome != "limit" and drops:
            raise InputError(f"decide {outcome}: --drop only goes with limit")
        for d in drops:
            if self.campaign.stage(d).category == "essential":
                raise ActionRefused(f"stage {d!r} is essential: limit drops only useful or "
                                    "exploratory stages (D3)")

    def _pending_at(self, state: CampaignState, stage: str | None) -> str:
        """The decision point decided: the one named, or the only one pending."""
        pending = state.pending_decisions
        if stage is None:
            if not pending:
                raise ActionRefused("no decision is pending (a decision point stage must "
                                    "finish first)")
            if len(pending) > 1:
                raise ActionRefused(f"several decisions are pending ({', '.join(pending)}): "
                                    "name one with --stage")
            return pending[0]
        if stage not in pending:
            self.scope.stage(stage)
            raise ActionRefused(f"no decision is pending at {stage!r}")
        return stage

    def _refuse_last_variant(self, state: CampaignState, drops: tuple[str, ...]) -> None:
        """A limit that would drop the question's last variant is a revise (D4): the
        conclusion could no longer be answered. Bad input, located at the file."""
        from cockpit.campaign.model import question_variants

        spec = self.campaign.conclusion
        variants = question_variants(self.campaign)
        if spec is None or not drops or not variants:
            return

        def left(ids: tuple[str, ...]) -> list[str]:
            return [v for v in variants if any(
                s.run == v and s.id not in ids and state.stages[s.id].state != DROPPED
                for s in self.campaign.stages)]

        before = left(())
        if before and not left(drops):
            what = (f"the question's last variant {before[0]}" if len(before) == 1
                    else f"every variant left ({', '.join(before)})")
            raise InputError(
                f"{self.campaign.path}: decide limit --drop {' '.join(drops)}: it drops "
                f"{what}, and the conclusion ({spec.rule} on {spec.metric}) could no longer "
                "be answered: that is a revise, not a limit (D4): cockpit decide revise "
                "--note '...'")
