"""The actions that only write the journal: the plan as decided and its later
versions (D24), verdicts on results (accept, reject, overrides; D15, D21), notes (D24)
and other costs (D20). :mod:`cockpit.engine.actions` builds on these with the actions
that start, stop and check processes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cockpit.campaign.model import Run
from cockpit.common.errors import ActionRefused, InputError
from cockpit.common.units import other_cost, plain_amount
from cockpit.engine.affordances import judge_refusal, no_result_refusal
from cockpit.engine.observe import Observing
from cockpit.engine.ports import JournalView
from cockpit.journal.fold import CampaignState, RunState
from cockpit.journal.plan_record import decided_campaign, pack


class Recording(Observing):
    def _record_plan(self, txn: JournalView, state: CampaignState, now: datetime) -> None:
        """The plan as decided: its hash and full text, once (D24)."""
        if state.plan_hash is None:
            txn.append("plan_recorded", now=now, sha256=self.campaign.sha256,
                       path=str(self.campaign.path), text_z=pack(self.campaign.text))

    def _decided_planned_s(self, state: CampaignState) -> dict[str, float]:
        """Planned seconds per stage as decided, when the file changed since (cached)."""
        if not state.plan_changed:
            return {}
        if self._decided_for != state.plan_hash:
            # The plan as decided is this machine's own record (a local kind; the fleet
            # view, with no journal of its own, reads every machine's).
            decided = decided_campaign(self.campaign, self.history())
            self._decided_cache = {s.id: s.seconds for s in decided.stages}
            self._decided_for = state.plan_hash
        return self._decided_cache

    def _record_plan_change(self, state: CampaignState, now: datetime) -> None:
        """A campaign file edited after the plan was decided: keep each version (D24)."""
        if state.latest_plan_hash is None or state.latest_plan_hash == self.campaign.sha256:
            return
        with self.journal.transaction() as txn:
            current = self._fold(txn.events, now)
            if current.latest_plan_hash not in (None, self.campaign.sha256):
                txn.append("plan_changed", now=now, sha256=self.campaign.sha256,
                           path=str(self.campaign.path), text_z=pack(self.campaign.text))

    def accept(self, run_id: str, note: str | None = None, now: datetime | None = None,
               *, override: bool = False) -> dict[str, Any] | None:
        """Accept a run's result. Refused when its acceptance checks fail, unless
        ``override`` with a note (journaled as an override); None when already accepted."""
        now = now or self.clock.now()
        spec = self._result_run(run_id)
        self._refuse_other_run(run_id, "accept")
        run = self.state(now).runs[run_id]
        self._judgeable(run_id, run)
        if run.verdict == "accepted":
            return None
        from cockpit.close.acceptance import accept_problems, evaluate_acceptance

        failed: list[str] = []
        if spec.acceptance:
            ok, reasons = evaluate_acceptance(self.campaign, self.state(now), run_id)
            failed = [] if ok else reasons
        else:  # no checks: still never a run blind to a stop rule or with a NaN loss
            failed = accept_problems(self.campaign, self.state(now), run_id)
        if failed and not override:
            what = "fails its acceptance checks" if spec.acceptance else \
                "is not evidence as it stands"
            raise ActionRefused(f"run {run_id!r} {what} (" + "; ".join(failed)
                                + "): --override with a --note to accept it anyway "
                                f"(`cockpit accept FILE {run_id} --override --note \"why\"`, "
                                "recorded as an override)")
        if failed and not (note or "").strip():
            raise InputError("accept --override needs a --note saying why")
        with self.journal.transaction() as txn:
            current = self._fold(txn.events, now).runs[run_id]
            self._judgeable(run_id, current)
            if current.verdict == "accepted":
                return None
            fields: dict[str, Any] = {"override": True, "checks": failed} if failed else {}
            return txn.append("result_accepted", now=now, run=run_id, reason=note or "accepted",
                              result=spec.result_id, actor=self.actor, **fields)

    def reject(self, run_id: str, note: str, now: datetime | None = None
               ) -> dict[str, Any] | None:
        """Reject a run's result (a later verdict replaces an earlier one); None when
        it is already rejected."""
        now = now or self.clock.now()
        spec = self._result_run(run_id)
        self._refuse_other_run(run_id, "reject")
        if not note.strip():
            raise InputError("reject needs a --note saying why")
        with self.journal.transaction() as txn:
            current = self._fold(txn.events, now).runs[run_id]
            self._judgeable(run_id, current, rejecting=True)
            if current.verdict == "rejected":
                return None
            return txn.append("result_rejected", now=now, run=run_id, reason=note,
                              result=spec.result_id, actor=self.actor)

    def _result_run(self, run_id: str) -> Run:
        spec = self.campaign.runs.get(run_id)
        if spec is None:
            raise InputError(f"{self.campaign.path}: no run {run_id!r}")
        refusal = no_result_refusal(self.campaign, run_id)
        if refusal:
            raise ActionRefused(refusal)
        return spec

    def _refuse_other_run(self, run_id: str, what: str) -> None:
        """A verdict or a verification is written by the run's own machine (the
        ownership table): elsewhere it would never be folded."""
        owner = self.campaign.stage_of_run(run_id)
        if owner is not None:
            self._refuse_other_machine(owner, what)

    @staticmethod
    def _judgeable(run_id: str, run: RunState, *, rejecting: bool = False) -> None:
        refusal = judge_refusal(run_id, run, rejecting=rejecting)
        if refusal:
            raise ActionRefused(refusal)

    def note(self, stage_id: str, text: str, now: datetime | None = None) -> dict[str, Any]:
        self._stage(stage_id)
        if not text.strip():
            raise InputError("note: the text is empty")
        return self.journal.append("note", now=now or self.clock.now(), stage=stage_id,
                                   text=text, actor=self.actor)

    def cost(self, label: str, amount: str, currency: str = "USD",
             now: datetime | None = None) -> dict[str, Any]:
        try:
            money = other_cost(label, amount, currency)  # the same check as the fold's
        except ValueError as exc:
            raise InputError(f"cost: {exc}") from None
        # The exact text of the Decimal: no float on the way to the journal.
        return self.journal.append("cost", now=now or self.clock.now(), label=label,
                                   amount=plain_amount(money.amount), currency=money.currency,
                                   actor=self.actor)

    # ------------------------------------------------------------------ verify & export
