"""What a person does: start, mark, stop, decide, accept, reject, note, cost, verify, export.

Each action checks what it may do against the journal folded under the journal
lock (so two cockpits never act twice), then writes its events in the same
transaction; a refusal raises ``ActionRefused`` with the reason, bad input raises
``InputError``. The stop request itself (journal, then SIGTERM to the recorded
group) is here too: the guards use it when a rule or the deadline stops a run.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable
from datetime import datetime
from decimal import InvalidOperation
from typing import Any

from cockpit.engine.core import params_hash
from cockpit.engine.observe import Observing
from cockpit.engine.ports import JournalView
from cockpit.errors import ActionRefused, InputError
from cockpit.runs.checkpoint_verifier import (
    checkpoint_step,
    choose_checkpoint,
    report_fields,
    resume_equivalence,
    verify_run_checkpoint,
)
from cockpit.runs.checkpoints import CheckpointInfo
from cockpit.runs.supervisor import stage_gpus
from cockpit.state import (
    DONE,
    DROPPED,
    FAILED,
    PENDING,
    RUNNING,
    SKIPPED,
    STOPPED,
    SUCCEEDED,
    CampaignState,
    fold,
)
from cockpit.units import Money, plain_amount


class Acting(Observing):
    def _record_plan(self, txn: JournalView, state: CampaignState, now: datetime) -> None:
        if state.plan_hash is None:
            txn.append("plan_recorded", now=now, sha256=self.campaign.sha256,
                       path=str(self.campaign.path))

    def _request_stop(self, txn: JournalView, state: CampaignState, run_id: str, rule: str,
                      reason: str, now: datetime, value: Any = None,
                      step: int | None = None) -> dict[str, Any] | None:
        """Journal the stop request, then SIGTERM the run's recorded group."""
        run = state.runs[run_id]
        if run.stop is not None and run.attempt is not None:
            return None  # already being stopped
        event = txn.append("stop_requested", now=now, run=run_id, stage=run.stage, rule=rule,
                           reason=reason, value=value, step=step, attempt=run.attempt,
                           actor=self.actor)
        self.supervisor.signal_group(run.pid, run.pgid, run.create_time, signal.SIGTERM)
        return event

    # ------------------------------------------------------------------ start & mark
    def start(self, stage_id: str, *, force: bool = False, now: datetime | None = None,
              auto: bool = False) -> list[dict[str, Any]]:
        """Launch a stage's command detached and journal it (claimed under the lock)."""
        stage = self._stage(stage_id)
        if stage.command is None:
            raise ActionRefused(f"stage {stage_id!r} has no command: mark it with "
                                f"`cockpit mark FILE {stage_id} started|done`")
        now = now or self.clock.now()
        with self.journal.transaction() as txn:
            state = fold(self.campaign, txn.events, now)
            st = state.stages[stage_id]
            if st.state == RUNNING:
                raise ActionRefused(f"stage {stage_id!r} is already running (pid {st.pid})")
            if auto and self.stage_status(state, stage) != "ready":
                return []
            if st.state in (DROPPED, SKIPPED):
                raise ActionRefused(f"stage {stage_id!r} was {st.state}")
            waits_for = self.unmet_after(state, stage)
            if waits_for and not force:
                raise ActionRefused(f"stage {stage_id!r} waits for {', '.join(waits_for)}; "
                                    "--force starts it anyway")
            holder = self._gpu_conflict(state, stage)
            if holder and not force:
                raise ActionRefused(f"stage {stage_id!r} needs the GPU that stage {holder!r} "
                                    "holds (D6); --force overrides")
            p_hash = None
            if stage.run:
                p_hash = params_hash(self.campaign, stage.run)
                old = state.runs.get(stage.run)
                if old and old.params_hash and old.params_hash != p_hash:
                    raise ActionRefused(
                        f"run {stage.run!r} was started with other params "
                        f"({old.params_hash[:12]} != {p_hash[:12]}): a new configuration needs "
                        "a new run id (D15)")
            written: list[dict[str, Any]] = []
            self._record_plan(txn, state, now)
            if stage.run and state.rules_hash is None and self.campaign.stop_rules:
                written.append(txn.append("rules_recorded", now=now,
                                          sha256=self._rules_hash))
            try:
                launched = self.supervisor.launch(self.campaign, stage, now)
            except OSError as exc:
                raise ActionRefused(f"cannot start stage {stage_id!r}: {exc}") from None
            warn = self._window_warning(now)
            started = txn.append(
                "stage_started", now=now, stage=stage_id, run=stage.run, pid=launched.pid,
                pgid=launched.pgid, create_time=launched.create_time, command=launched.command,
                exit_file=launched.exit_file, stdout=launched.stdout, stderr=launched.stderr,
                gpus=list(stage_gpus(stage, self.campaign.package.offer.gpus)),
                forced=bool(holder and force), auto=auto, actor=self.actor, warning=warn)
            written.append(started)
            if stage.run:
                written.append(txn.append(
                    "run_started", now=now, run=stage.run, stage=stage_id, pid=launched.pid,
                    pgid=launched.pgid, create_time=launched.create_time,
                    command=launched.command, params_hash=p_hash, attempt=started["seq"],
                    gpus=started["gpus"], exit_file=launched.exit_file,
                    report=launched.report))
            return written

    def _window_warning(self, now: datetime) -> str | None:
        pkg = self.campaign.package
        if now < pkg.start:
            return "started before the rental window opens"
        if now > pkg.end:
            return "started after the rental window ended"
        return None

    def mark(self, stage_id: str, what: str, note: str | None = None,
             now: datetime | None = None) -> list[dict[str, Any]]:
        stage = self._stage(stage_id)
        now = now or self.clock.now()
        if what not in ("started", "done", "skipped"):
            raise InputError(f"mark: {what!r} is not one of started, done, skipped")
        with self.journal.transaction() as txn:
            state = fold(self.campaign, txn.events, now)
            st = state.stages[stage_id]
            self._record_plan(txn, state, now)
            written: list[dict[str, Any]] = []
            if st.state == RUNNING and not st.manual:
                raise ActionRefused(f"stage {stage_id!r} runs under the cockpit (pid {st.pid}): "
                                    "it finishes by itself, or `cockpit stop` it")
            if what == "started":
                if st.state == RUNNING:
                    raise ActionRefused(f"stage {stage_id!r} is already started")
                written.append(txn.append("stage_started", now=now, stage=stage_id, manual=True,
                                          run=stage.run, actor=self.actor))
            elif what == "done":
                if st.state in (DONE, SKIPPED, DROPPED):
                    raise ActionRefused(f"stage {stage_id!r} is already {st.state}")
                if st.state != RUNNING:
                    written.append(txn.append("stage_started", now=now, stage=stage_id,
                                              manual=True, run=stage.run, actor=self.actor))
                written.append(txn.append("stage_finished", now=now, stage=stage_id,
                                          outcome=DONE, manual=True, actor=self.actor))
            else:
                if stage.category == "essential":
                    raise ActionRefused(f"stage {stage_id!r} is essential and cannot be skipped "
                                        "(D3); record a `revise` decision instead")
                if st.state not in (PENDING,):
                    raise ActionRefused(f"stage {stage_id!r} is {st.state}, not pending")
                written.append(txn.append("stage_skipped", now=now, stage=stage_id, note=note,
                                          actor=self.actor))
            if note and what != "skipped":
                written.append(txn.append("note", now=now, stage=stage_id, text=note,
                                          actor=self.actor))
            return written

    # ------------------------------------------------------------------ stop
    def stop(self, target: str, reason: str, now: datetime | None = None,
             rule: str = "manual") -> dict[str, Any]:
        """Request a stop of a run (or the run of a stage): SIGTERM now, SIGKILL after grace."""
        now = now or self.clock.now()
        if not reason.strip():
            raise InputError("stop: a reason is required (D15: keep the reason)")
        run_id = self._run_of(target)
        with self.journal.transaction() as txn:
            state = fold(self.campaign, txn.events, now)
            run = state.runs.get(run_id)
            if run is None or run.state != RUNNING:
                raise ActionRefused(f"run {run_id!r} is not running")
            if run.stop is not None:
                raise ActionRefused(f"run {run_id!r} is already being stopped "
                                    f"({run.stop.reason})")
            event = self._request_stop(txn, state, run_id, rule, reason, now)
            assert event is not None
            return event

    # ------------------------------------------------------------------ decisions & records
    def decide(self, outcome: str, *, stage: str | None = None, drops: Iterable[str] = (),
               note: str, now: datetime | None = None) -> list[dict[str, Any]]:
        now = now or self.clock.now()
        drops = tuple(drops)
        if outcome not in ("continue", "limit", "revise"):
            raise InputError(f"decide: {outcome!r} is not continue, limit or revise")
        if not note.strip():
            raise InputError("decide: --note is required: say why (D4)")
        for d in drops:
            self._stage(d)
        if outcome == "limit" and not drops:
            raise InputError("decide limit: name the optional stages to drop with --drop")
        if outcome != "limit" and drops:
            raise InputError(f"decide {outcome}: --drop only goes with limit")
        for d in drops:
            if self.campaign.stage(d).category == "essential":
                raise ActionRefused(f"stage {d!r} is essential: limit drops only useful or "
                                    "exploratory stages (D3)")
        with self.journal.transaction() as txn:
            state = fold(self.campaign, txn.events, now)
            pending = state.pending_decisions
            if stage is None:
                if not pending:
                    raise ActionRefused("no decision is pending (a decision point stage must "
                                        "finish first)")
                if len(pending) > 1:
                    raise ActionRefused(f"several decisions are pending ({', '.join(pending)}): "
                                        "name one with --stage")
                stage = pending[0]
            elif stage not in pending:
                self._stage(stage)
                raise ActionRefused(f"no decision is pending at {stage!r}")
            for d in drops:
                if state.stages[d].state != PENDING:
                    raise ActionRefused(f"stage {d!r} is {state.stages[d].state}: only stages "
                                        "not yet started can be dropped")
            self._record_plan(txn, state, now)
            written = [txn.append("decision", now=now, stage=stage, outcome=outcome,
                                  drops=list(drops), note=note, actor=self.actor)]
            for d in drops:
                written.append(txn.append("stage_dropped", now=now, stage=d,
                                          reason=f"limit decision at {stage}: {note}"))
            return written

    def accept(self, run_id: str, note: str | None = None,
               now: datetime | None = None) -> dict[str, Any]:
        now = now or self.clock.now()
        if run_id not in self.campaign.runs:
            raise InputError(f"{self.campaign.path}: no run {run_id!r}")
        with self.journal.transaction() as txn:
            run = fold(self.campaign, txn.events, now).runs[run_id]
            if run.state == STOPPED or run.stop is not None:
                why = run.stop.reason if run.stop else "stopped"
                raise ActionRefused(f"run {run_id!r} was stopped ({why}): a stopped run is "
                                    "never an accepted result (D15)")
            if run.state == RUNNING:
                raise ActionRefused(f"run {run_id!r} is still running")
            if run.state == FAILED:
                raise ActionRefused(f"run {run_id!r} failed (exit code {run.exit_code})")
            if run.state != SUCCEEDED:
                raise ActionRefused(f"run {run_id!r} has not run")
            return txn.append("result_accepted", now=now, run=run_id, reason=note or "accepted",
                              result=self.campaign.runs[run_id].result_id, actor=self.actor)

    def reject(self, run_id: str, note: str, now: datetime | None = None) -> dict[str, Any]:
        """A person's rejection of an ended run's result, with why (D15); it replaces an
        earlier verdict, as ``accept`` does."""
        now = now or self.clock.now()
        if run_id not in self.campaign.runs:
            raise InputError(f"{self.campaign.path}: no run {run_id!r}")
        if not note.strip():
            raise InputError("reject: --note is required: say why")
        with self.journal.transaction() as txn:
            run = fold(self.campaign, txn.events, now).runs[run_id]
            if run.state == RUNNING:
                raise ActionRefused(f"run {run_id!r} is still running: stop it first")
            if run.state not in (SUCCEEDED, FAILED, STOPPED):
                raise ActionRefused(f"run {run_id!r} has not run")
            return txn.append("result_rejected", now=now, run=run_id, stage=run.stage,
                              reason=note, result=self.campaign.runs[run_id].result_id,
                              attempt=run.attempt, actor=self.actor)

    def note(self, stage_id: str, text: str, now: datetime | None = None) -> dict[str, Any]:
        self._stage(stage_id)
        if not text.strip():
            raise InputError("note: the text is empty")
        return self.journal.append("note", now=now or self.clock.now(), stage=stage_id,
                                   text=text, actor=self.actor)

    def cost(self, label: str, amount: str, currency: str = "USD",
             now: datetime | None = None) -> dict[str, Any]:
        try:
            money = Money.parse(amount, currency)
        except (ValueError, InvalidOperation) as exc:
            raise InputError(f"cost: {exc}") from None
        if not label.strip():
            raise InputError("cost: the label is empty")
        # The exact text of the Decimal: no float on the way to the journal.
        return self.journal.append("cost", now=now or self.clock.now(), label=label,
                                   amount=plain_amount(money.amount), currency=money.currency,
                                   actor=self.actor)

    # ------------------------------------------------------------------ verify & export
    def verify(self, run_id: str, which: str = "newest",
               now: datetime | None = None) -> dict[str, Any]:
        """Reload a run's checkpoint in a fresh process now and journal the result."""
        run = self.campaign.runs.get(run_id) or self.campaign.runs.get(self._run_of(run_id))
        if run is None:
            raise InputError(f"{self.campaign.path}: no run {run_id!r}")
        chosen = choose_checkpoint(self.campaign, run, which,
                                   (now or self.clock.now()).timestamp())
        path = chosen.path if isinstance(chosen, CheckpointInfo) else chosen
        report = verify_run_checkpoint(self.campaign, run, path)
        attempt = self.state().runs[run.id].attempt
        # Stamped when the reload has finished (it can take minutes).
        return self.journal.append("checkpoint_verified", now=now or self.clock.now(),
                                   run=run.id, attempt=attempt, auto=False, actor=self.actor,
                                   **report_fields(report))

    def verify_resume(self, run_id: str, which: str = "first",
                      now: datetime | None = None) -> dict[str, Any]:
        """Resume equivalence (D17): restart from a checkpoint, compare the metric."""
        run = self.campaign.runs.get(run_id) or self.campaign.runs.get(self._run_of(run_id))
        if run is None:
            raise InputError(f"{self.campaign.path}: no run {run_id!r}")
        now = now or self.clock.now()
        chosen = choose_checkpoint(self.campaign, run, which, now.timestamp())
        path = chosen.path if isinstance(chosen, CheckpointInfo) else chosen
        result = resume_equivalence(self.campaign, run, path, checkpoint_step(chosen), now)
        return self.journal.append(
            "resume_verified", now=self.clock.now(), run=run.id, ok=result.ok,
            path=result.checkpoint, from_step=result.from_step, compared=result.compared,
            diverged_step=result.diverged_step, message=result.message,
            seconds=round(result.seconds, 3), actor=self.actor)

    def export(self, now: datetime | None = None) -> dict[str, Any]:
        """Write and verify the export now (the TUI's `e`); returns its export_done event."""
        from cockpit.export import ExportError, export_campaign

        now = now or self.clock.now()
        try:
            result = export_campaign(self.campaign, self.state(now), now=now)
        except ExportError as exc:
            raise ActionRefused(str(exc)) from None
        if result.event is None:
            raise ActionRefused(f"export written to {result.bag_dir} but not journaled")
        return result.event
