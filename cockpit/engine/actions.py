"""What a person does to processes and stages: start (claims, launch, reconcile), mark,
stop, decide, verify, export. (Verdicts, notes, costs and the plan's record are
:mod:`cockpit.engine.records`'s.)

Each action checks what it may do against the journal folded under the journal
lock (so two cockpits never act twice), then writes its events in the same
transaction; a refusal raises ``ActionRefused`` with the reason, bad input raises
``InputError``. The stop request itself (journal, then SIGTERM to the recorded
group) is here too: the guards use it when a rule or the deadline stops a run.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from cockpit.campaign.model import Campaign, Stage
from cockpit.common.errors import ActionRefused, InputError
from cockpit.common.printable import printable
from cockpit.engine.affordances import (
    mark_refusal,
    no_command_refusal,
    start_refusal,
    stop_refusal,
)
from cockpit.engine.core import params_hash
from cockpit.engine.ports import JournalView
from cockpit.engine.records import Recording
from cockpit.journal.fold import (
    DONE,
    DROPPED,
    FAILED,
    PENDING,
    RUNNING,
    CampaignState,
    fold,
)
from cockpit.journal.log import JournalError
from cockpit.runs.checkpoints.discovery import CheckpointInfo
from cockpit.runs.checkpoints.verifier import (
    checkpoint_step,
    choose_checkpoint,
    report_fields,
    resume_equivalence,
    verify_run_checkpoint,
)
from cockpit.runs.env_record import record_environment
from cockpit.runs.supervisor import (
    MARKER_ENV,
    Launched,
    Marked,
    launch_base,
    launch_marker,
    report_path,
    stage_gpus,
    stage_marker_prefix,
)


class Acting(Recording):
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
        self.supervisor.signal_group(run.pid, run.pgid, run.create_time, signal.SIGTERM,
                                     run.marker)
        return event

    # ------------------------------------------------------------------ start & mark

    def start(self, stage_id: str, *, force: bool = False, now: datetime | None = None,
              auto: bool = False) -> list[dict[str, Any]]:
        """Launch a stage's command detached and journal it (claimed under the lock).

        Claim before you act: ``stage_claimed`` is journaled (fsynced) before the launch,
        and the launch carries the marker ``COCKPIT_LAUNCH=<campaign>:<stage>:<claim>``.
        When the ``stage_started`` that follows cannot be written (a full disk) or this
        cockpit dies in between, the next tick finds the process by its marker and
        records it (``_reconcile_claims``); a claim without a process becomes a failed
        launch, or, when its owner died before the launch began, expires and the stage is
        startable again (auto mode starts it). A live marked process of the stage refuses
        a second launch, record or not.
        """
        stage = self._stage(stage_id)
        if refusal := no_command_refusal(stage):
            raise ActionRefused(refusal)
        self._refuse_other_machine(stage, "start")
        now = now or self.clock.now()
        with self.journal.transaction() as txn:
            state = self._fold(txn.events, now)
            # (auto-start skips a stage not ready, and any refusal, alike)
            if auto and self.stage_status(state, stage) != "ready":
                return []
            if refusal := start_refusal(state, stage, self.campaign, force=force):
                raise ActionRefused(printable(refusal))
            holder = self._resource_holder(state, stage)  # journaled: forced over it
            p_hash = None
            if stage.run:
                p_hash = params_hash(self.campaign, stage.run)
                old = state.runs.get(stage.run)
                if old and old.params_hash and old.params_hash != p_hash:
                    raise ActionRefused(
                        f"run {stage.run!r} was started with other params "
                        f"({old.params_hash[:12]} != {p_hash[:12]}): a new configuration needs "
                        "a new run id (D15)")
            living = self.supervisor.find_marked(stage_marker_prefix(self.campaign, stage_id))
            if living:
                pids = ", ".join(str(m.pid) for m in living[:5])
                raise ActionRefused(
                    f"stage {stage_id!r} still has a live process the cockpit launched (pid "
                    f"{pids}, {MARKER_ENV}={living[0].marker}) although the journal does not "
                    "show it running: never a second copy; stop or wait for it first")
            written: list[dict[str, Any]] = []
            self._record_plan(txn, state, now)
            if stage.run:
                written.extend(record_environment(txn, now))
            if stage.run and state.rules_hash is None \
                    and not all(r.implicit for r in self.campaign.stop_rules):
                written.append(txn.append("rules_recorded", now=now,
                                          sha256=self._rules_hash))
            seq = len(txn.events) + 1  # the claim's own seq: the marker names it
            marker = launch_marker(self.campaign, stage_id, seq)
            claim = txn.append("stage_claimed", now=now, stage=stage_id, run=stage.run,
                               marker=marker, params_hash=p_hash,
                               forced=bool(holder and force), auto=auto, actor=self.actor,
                               owner_pid=self.owner[0], owner_start=self.owner[1],
                               out=f"{launch_base(self.campaign, stage_id, now)}.out")
            if claim["seq"] != seq:  # pragma: no cover - would mean a broken lock
                raise ActionRefused(f"stage {stage_id!r}: the journal moved under its lock")
            written.append(claim)
            _fault_pause()
            try:
                launched = self.supervisor.launch(self.campaign, stage, now, marker=marker)
            except OSError as exc:
                txn.append("stage_finished", now=now, stage=stage_id, outcome=FAILED,
                           claim=seq, reason=f"failed to launch: {exc}")
                raise ActionRefused(f"cannot start stage {stage_id!r}: {exc}") from None
            _fault_pause()
            try:
                written.extend(self._append_started(txn, stage, claim, launched, now))
            except (JournalError, OSError) as exc:
                raise ActionRefused(
                    f"stage {stage_id!r} was launched (pid {launched.pid}) but its start could "
                    f"not be journaled ({exc}); it carries {MARKER_ENV}={marker} and the next "
                    "tick records it from there") from None
            return written

    def _append_started(self, txn: JournalView, stage: Stage, claim: Mapping[str, Any],
                        launched: Launched, now: datetime,
                        reconciled: bool = False) -> list[dict[str, Any]]:
        """stage_started (+ run_started) for a claimed launch, in the claim's transaction
        or, when that one could not write them, at the tick that found the process."""
        started = txn.append(
            "stage_started", now=now, stage=stage.id, run=stage.run, pid=launched.pid,
            pgid=launched.pgid, create_time=launched.create_time, command=launched.command,
            exit_file=launched.exit_file, stdout=launched.stdout, stderr=launched.stderr,
            gpus=list(stage_gpus(stage, self.campaign.package.offer.gpus)),
            forced=bool(claim.get("forced")), auto=bool(claim.get("auto")),
            actor=claim.get("actor", self.actor), warning=self._window_warning(now),
            claim=claim.get("seq"), marker=launched.marker,
            **({"reconciled": True} if reconciled else {}))
        written = [started]
        if stage.run:
            written.append(txn.append(
                "run_started", now=now, run=stage.run, stage=stage.id, pid=launched.pid,
                pgid=launched.pgid, create_time=launched.create_time,
                command=launched.command, params_hash=claim.get("params_hash"),
                attempt=started["seq"], gpus=started["gpus"], exit_file=launched.exit_file,
                report=launched.report, marker=launched.marker))
        return written

    def _reconcile_claims(self, state: CampaignState, now: datetime) -> None:
        """A claim whose start was never journaled (a failed append, a cockpit killed
        between claim and record): its marked process found means running (recorded now
        with that pid). None found: when the claim's owner is gone and the launch never
        began (no ``.out`` file of it), the claim expires and the stage is as before it
        (``claim_expired``: startable again); otherwise, once ``claim_grace_s`` has passed
        (monotonic), the launch failed (recorded). Claimed under the lock, so two
        cockpits record it once."""
        for st in state.stages.values():
            if st.claim is None or st.state != RUNNING or not self._mine(st.id):
                continue
            stage = self.campaign.stage(st.id)
            marker = st.marker or launch_marker(self.campaign, st.id, st.claim)
            found = self.supervisor.find_marked(marker)
            with self.journal.transaction() as txn:
                events = txn.events
                current = fold(self.campaign, events, now, self.machine).stages[st.id]
                if current.claim != st.claim:
                    continue  # another cockpit reconciled it first
                claim: Mapping[str, Any] = next(
                    (ev for ev in reversed(events) if ev.get("seq") == st.claim), {})
                if found:
                    self._append_started(txn, stage, claim, _relaunched(found, marker,
                                                                       self.campaign, stage),
                                         now, reconciled=True)
                    continue
                owner_gone = "owner_pid" in claim and not self._owner_alive(claim, ours=True)
                out = claim.get("out")
                if owner_gone and isinstance(out, str) and not os.path.exists(out):
                    txn.append("claim_expired", now=now, stage=st.id, run=stage.run,
                               claim=st.claim, owner_pid=claim.get("owner_pid"),
                               reason=f"its owner (pid {claim.get('owner_pid')}) is gone and "
                                      "the launch never began: the stage can start again")
                    continue
                age = self._age_s(st.claim, current.started_at, now)
                if not owner_gone and age < self.claim_grace_s:
                    continue  # the launch may still be on its way
                txn.append("stage_finished", now=now, stage=st.id, outcome=FAILED,
                           claim=st.claim, code=None,
                           reason=f"failed to launch: claim #{st.claim} has no process "
                                  f"carrying {MARKER_ENV}={marker}")

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
        self._refuse_other_machine(stage, "mark")
        with self.journal.transaction() as txn:
            state = self._fold(txn.events, now)
            st = state.stages[stage_id]
            self._record_plan(txn, state, now)
            written: list[dict[str, Any]] = []
            if refusal := mark_refusal(state, stage, what):
                raise ActionRefused(refusal)
            if what == "started":
                written.append(txn.append("stage_started", now=now, stage=stage_id, manual=True,
                                          run=stage.run, actor=self.actor))
            elif what == "done":
                if st.state != RUNNING:
                    written.append(txn.append("stage_started", now=now, stage=stage_id,
                                              manual=True, run=stage.run, actor=self.actor))
                written.append(txn.append("stage_finished", now=now, stage=stage_id,
                                          outcome=DONE, manual=True, actor=self.actor))
            else:
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
        owner = self.campaign.stage_of_run(run_id)
        if owner is not None:
            self._refuse_other_machine(owner, "stop")
        with self.journal.transaction() as txn:
            state = self._fold(txn.events, now)
            run = state.runs.get(run_id)
            if refusal := stop_refusal(run_id, run):
                raise ActionRefused(refusal)
            assert run is not None
            why = self.supervisor.unproven(run.pid, run.pgid, run.create_time, run.marker)
            if why is not None and self.supervisor.alive(run.pid, None):
                # Something lives under that pid, but nothing proves it is the run: a
                # signal could hit an unrelated process group. (Nothing alive: the stop is
                # journaled and the next tick records the exit.)
                raise ActionRefused(f"run {run_id!r}: not signalling pid {run.pid} "
                                    f"(group {run.pgid}): {why}")
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
            state = self._fold(txn.events, now)
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
            # Made where its stage runs (the ownership table): elsewhere never folded.
            self._refuse_other_machine(self._stage(stage), "decide")
            for d in drops:
                if state.stages[d].state != PENDING:
                    raise ActionRefused(f"stage {d!r} is {state.stages[d].state}: only stages "
                                        "not yet started can be dropped")
            self._refuse_last_variant(state, drops)
            self._record_plan(txn, state, now)
            written = [txn.append("decision", now=now, stage=stage, outcome=outcome,
                                  drops=list(drops), note=note, actor=self.actor)]
            for d in drops:
                written.append(txn.append("stage_dropped", now=now, stage=d,
                                          reason=f"limit decision at {stage}: {note}"))
            return written

    def _refuse_last_variant(self, state: CampaignState, drops: tuple[str, ...]) -> None:
        """A limit that would drop the question's last variant is a revise (D4): the
        conclusion could no longer be answered. Bad input, located at the file."""
        from cockpit.close.conclusion import question_variants

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

    def verify(self, run_id: str, which: str = "newest",
               now: datetime | None = None) -> dict[str, Any]:
        """Reload a run's checkpoint in a fresh process now and journal the result."""
        run = self.campaign.runs.get(run_id) or self.campaign.runs.get(self._run_of(run_id))
        if run is None:
            raise InputError(f"{self.campaign.path}: no run {run_id!r}")
        self._refuse_other_run(run.id, "verify")
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
        self._refuse_other_run(run.id, "verify")
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
            result = export_campaign(self.campaign, self.state(now), now=now,
                                     history=self.history(now))
        except ExportError as exc:
            raise ActionRefused(str(exc)) from None
        if result.event is None:
            raise ActionRefused(f"export written to {result.bag_dir} but not journaled")
        return result.event


def _fault_pause() -> None:
    """Fault injection for the kill -9 tests: ``COCKPIT_FAULT_PAUSE=SECONDS`` widens the
    moments between claim, launch and record so a random kill lands in them too."""
    pause = os.environ.get("COCKPIT_FAULT_PAUSE")
    if pause:
        time.sleep(float(pause))


def _relaunched(found: list[Marked], marker: str, campaign: Campaign, stage: Stage) -> Launched:
    """A :class:`Launched` for a marked process found without its record. The wrapper
    leads the group (pid == pgid); when it is gone, the group id stands for the leader
    (the kernel keeps that number while the group has members) and the marker proves it."""
    leader = found[0]
    exit_file = leader.exit_file
    base = exit_file[:-len(".exit")] if exit_file and exit_file.endswith(".exit") else None
    report = str(report_path(campaign, stage.run)) if stage.run else None
    if leader.pid == leader.pgid:
        return Launched(leader.pid, leader.pgid, leader.create_time, list(leader.cmdline),
                        f"{base}.out" if base else "", f"{base}.err" if base else "",
                        exit_file or "", report, marker)
    return Launched(leader.pgid, leader.pgid, 0.0, list(leader.cmdline), "", "", "", report,
                    marker)
