"""The launcher and stopper: it starts stages, stops runs and carries out the guards'
intents, each journaled under the journal lock (so two cockpits never act twice).

Claim before you act: ``stage_claimed`` is journaled (fsynced) before a launch, and the
launch carries the marker ``COCKPIT_LAUNCH=<campaign>:<stage>:<claim>``. When the
``stage_started`` that follows cannot be written (a full disk) or this cockpit dies in
between, the next tick finds the process by its marker and records it
(:meth:`Launcher.reconcile_claims`); a claim without a process becomes a failed
launch, or, when its owner died before the launch began, expires and the stage is
startable again. A live marked process of the stage refuses a second launch.

A start whose run's checkpoint folder or metric sources already hold files (an earlier
attempt's, which the new attempt ignores: :mod:`cockpit.runs.attempts`) says so, per
folder with a count, in its ``stage_started`` warning.

A stop is journaled (``stop_requested``), then SIGTERM goes to the run's recorded
group; once the grace has passed the guards ask for SIGKILL of what is left.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from cockpit.campaign.model import Campaign, Stage
from cockpit.common.errors import ActionRefused, InputError
from cockpit.common.event_kinds import (
    CLAIM_EXPIRED,
    RULE_BLIND,
    RULE_FIRED,
    RULES_RECORDED,
    RUN_STARTED,
    STAGE_CLAIMED,
    STAGE_FINISHED,
    STAGE_STARTED,
    STOP_REQUESTED,
)
from cockpit.common.printable import printable
from cockpit.engine.affordances import no_command_refusal, start_refusal, stop_refusal
from cockpit.engine.history import History
from cockpit.engine.intents import (
    EscalateStop,
    FireRule,
    Intent,
    RecordOnce,
    StartStage,
    StopRun,
)
from cockpit.engine.journal_actions import record_plan
from cockpit.engine.ports import JournalView, Supervisor
from cockpit.engine.readiness import resource_holder, stage_status
from cockpit.engine.scope import Scope
from cockpit.journal.fields import Event
from cockpit.journal.fold import FAILED, RUNNING, CampaignState
from cockpit.journal.log import JournalError
from cockpit.runs.attempts import earlier_files
from cockpit.runs.env_record import record_environment
from cockpit.runs.rules import Firing, rules_hash
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

# How long a launch claim may wait for its process before it counts as failed to launch
# (the process shows up in milliseconds; the margin is for a machine under load).
CLAIM_GRACE_S = 10.0


def params_hash(campaign: Campaign, run_id: str) -> str:
    """What makes this configuration: its params dict, or its params file's bytes."""
    run = campaign.runs.get(run_id)
    if run is None:
        return hashlib.sha256(b"{}").hexdigest()
    if run.params_file is not None:
        path = campaign.resolve(run.params_file)
        try:
            return hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise InputError(f"{campaign.path}: run {run_id}: cannot read params file "
                             f"{path}: {exc.strerror}") from None
    text = json.dumps(run.params, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class Launcher:
    """Starts and stops this machine's stages; carries out the guards' intents."""

    def __init__(self, scope: Scope, history: History, supervisor: Supervisor, *,
                 actor: str) -> None:
        self.scope = scope
        self.campaign = scope.campaign
        self.history = history
        self.time = history.time
        self.supervisor = supervisor
        self.actor = actor
        self.claim_grace_s = CLAIM_GRACE_S
        self.rules_hash = rules_hash(self.campaign.stop_rules)  # the plan is frozen: once

    # ------------------------------------------------------------------ intents
    def carry_out(self, intents: Iterable[Intent], now: datetime) -> None:
        """Each intent, checked again under the lock; a refused start or stop is skipped
        (the guards ask again on the next tick if it still holds)."""
        for intent in intents:
            if isinstance(intent, FireRule):
                self.fire(intent.run, intent.firing, now)
            elif isinstance(intent, RecordOnce):
                self.history.journal_once(intent.kind, intent.key, now, **intent.fields,
                                          **({"actor": self.actor}
                                             if intent.kind == RULE_BLIND else {}))
            elif isinstance(intent, EscalateStop):
                self.escalate(intent.run)
            elif isinstance(intent, StartStage):
                with contextlib.suppress(ActionRefused):
                    self.start(intent.stage, force=intent.force, now=now, auto=intent.auto)
            elif isinstance(intent, StopRun):
                with contextlib.suppress(ActionRefused):
                    self.stop(intent.run, intent.reason, now=now, rule=intent.rule)

    def fire(self, run_id: str, firing: Firing, now: datetime) -> None:
        with self.history.journal.transaction() as txn:
            state = self.history.fold_locked(now)
            run = state.runs[run_id]
            if firing.rule in state.fired_for(run_id, run.attempt) or run.state != RUNNING:
                return  # fired once per run, whichever cockpit saw it first
            txn.append(RULE_FIRED, now=now, run=run_id, stage=run.stage, rule=firing.rule,
                       reason=firing.reason, value=firing.value, threshold=firing.threshold,
                       step=firing.step, action=firing.action, attempt=run.attempt,
                       actor=self.actor)
            if firing.action == "stop":
                self.request_stop(txn, state, run_id, firing.rule, firing.reason, now,
                                  value=firing.value, step=firing.step)

    def escalate(self, run_id: str) -> None:
        """SIGKILL what is left of a stopped run's group (its grace has passed)."""
        run = self.history.state().runs[run_id]
        if not self.supervisor.group_alive(run.pgid, run.marker):
            return
        self.supervisor.signal_group(run.pid, run.pgid, run.create_time, signal.SIGKILL,
                                     run.marker)
        if run.pgid:
            self.supervisor.kill_leftovers(run.pgid, run.pid, run.create_time, run.marker)

    # ------------------------------------------------------------------ start
    def start(self, stage_id: str, *, force: bool = False, now: datetime | None = None,
              auto: bool = False) -> list[Event]:
        """Launch a stage's command detached and journal it (claimed under the lock; see
        the module text). ``auto``: only when the stage is still ready."""
        stage = self.scope.stage(stage_id)
        if refusal := no_command_refusal(stage):
            raise ActionRefused(refusal)
        self.scope.refuse_other_machine(stage, "start")
        now = now or self.time.clock.now()
        with self.history.journal.transaction() as txn:
            state = self.history.fold_locked(now)
            if auto and state.stages[stage_id].state != RUNNING \
                    and stage_status(self.campaign, state, stage) != "ready":
                return []
            forced = self._refuse_start(state, stage, force)
            p_hash = self._params_hash(state, stage)
            self._refuse_living(stage_id)
            written = self._records_before_start(txn, state, stage, now)
            return written + self._claim_and_launch(txn, stage, p_hash, forced, auto, now,
                                                    self._earlier_files(stage))

    def _refuse_start(self, state: CampaignState, stage: Stage, force: bool) -> bool:
        """Why the stage may not start now (raised); True when ``force`` overrides a
        resource held by another stage (journaled as forced)."""
        if refusal := start_refusal(state, stage, self.campaign, force=force):
            raise ActionRefused(printable(refusal))
        holder = resource_holder(self.campaign, state, stage)  # journaled: forced over it
        return bool(holder and force)

    def _params_hash(self, state: CampaignState, stage: Stage) -> str | None:
        """The run's configuration; a run id started with other params is refused (D15)."""
        if not stage.run:
            return None
        p_hash = params_hash(self.campaign, stage.run)
        old = state.runs.get(stage.run)
        if old and old.params_hash and old.params_hash != p_hash:
            raise ActionRefused(
                f"run {stage.run!r} was started with other params "
                f"({old.params_hash[:12]} != {p_hash[:12]}): a new configuration needs "
                "a new run id (D15)")
        return p_hash

    def _refuse_living(self, stage_id: str) -> None:
        living = self.supervisor.find_marked(stage_marker_prefix(self.campaign, stage_id))
        if living:
            pids = ", ".join(str(m.pid) for m in living[:5])
            raise ActionRefused(
                f"stage {stage_id!r} still has a live process the cockpit launched (pid "
                f"{pids}, {MARKER_ENV}={living[0].marker}) although the journal does not "
                "show it running: never a second copy; stop or wait for it first")

    def _records_before_start(self, txn: JournalView, state: CampaignState, stage: Stage,
                              now: datetime) -> list[Event]:
        """The plan, the environment and the rules, each recorded once before a start."""
        written: list[Event] = []
        record_plan(txn, self.campaign, state, now)
        if stage.run:
            written.extend(record_environment(txn, now))
        if stage.run and state.rules_hash is None \
                and not all(r.implicit for r in self.campaign.stop_rules):
            written.append(txn.append(RULES_RECORDED, now=now, sha256=self.rules_hash))
        return written

    def _earlier_files(self, stage: Stage) -> str | None:
        """What an earlier attempt left in the run's checkpoint folder and metric
        sources, per folder with a count (this attempt ignores it: runs/attempts.py)."""
        found = earlier_files(self.campaign, stage.run) if stage.run else []
        return "; ".join(printable(f.words()) for f in found) or None

    def _claim_and_launch(self, txn: JournalView, stage: Stage, p_hash: str | None,
                          forced: bool, auto: bool, now: datetime,
                          earlier: str | None = None) -> list[Event]:
        seq = txn.count + 1  # the claim's own seq: the marker names it
        marker = launch_marker(self.campaign, stage.id, seq)
        owner = self.time.owner
        claim = txn.append(STAGE_CLAIMED, now=now, stage=stage.id, run=stage.run,
                           marker=marker, params_hash=p_hash, forced=forced, auto=auto,
                           actor=self.actor, owner_pid=owner[0], owner_start=owner[1],
                           out=f"{launch_base(self.campaign, stage.id, now)}.out")
        if claim["seq"] != seq:  # pragma: no cover - would mean a broken lock
            raise ActionRefused(f"stage {stage.id!r}: the journal moved under its lock")
        try:
            launched = self.supervisor.launch(self.campaign, stage, now, marker=marker)
        except OSError as exc:
            txn.append(STAGE_FINISHED, now=now, stage=stage.id, outcome=FAILED,
                       claim=seq, reason=f"failed to launch: {exc}")
            raise ActionRefused(f"cannot start stage {stage.id!r}: {exc}") from None
        try:
            return [claim, *self._append_started(txn, stage, claim, launched, now,
                                                 earlier=earlier)]
        except (JournalError, OSError) as exc:
            raise ActionRefused(
                f"stage {stage.id!r} was launched (pid {launched.pid}) but its start could "
                f"not be journaled ({exc}); it carries {MARKER_ENV}={marker} and the next "
                "tick records it from there") from None

    def _append_started(self, txn: JournalView, stage: Stage, claim: Mapping[str, Any],
                        launched: Launched, now: datetime,
                        reconciled: bool = False, earlier: str | None = None) -> list[Event]:
        """stage_started (+ run_started) for a claimed launch, in the claim's transaction
        or, when that one could not write them, at the tick that found the process."""
        started = txn.append(
            STAGE_STARTED, now=now, stage=stage.id, run=stage.run, pid=launched.pid,
            pgid=launched.pgid, create_time=launched.create_time, command=launched.command,
            exit_file=launched.exit_file, stdout=launched.stdout, stderr=launched.stderr,
            gpus=list(stage_gpus(stage, self.campaign.package.offer.gpus)),
            forced=bool(claim.get("forced")), auto=bool(claim.get("auto")),
            actor=claim.get("actor", self.actor),
            warning="; ".join(w for w in (self._window_warning(now), earlier) if w) or None,
            claim=claim.get("seq"), marker=launched.marker,
            **({"reconciled": True} if reconciled else {}))
        written = [started]
        if stage.run:
            written.append(txn.append(
                RUN_STARTED, now=now, run=stage.run, stage=stage.id, pid=launched.pid,
                pgid=launched.pgid, create_time=launched.create_time,
                command=launched.command, params_hash=claim.get("params_hash"),
                attempt=started["seq"], gpus=started["gpus"], exit_file=launched.exit_file,
                report=launched.report, marker=launched.marker))
        return written

    def _window_warning(self, now: datetime) -> str | None:
        pkg = self.campaign.package
        if now < pkg.start:
            return "started before the rental window opens"
        if now > pkg.end:
            return "started after the rental window ended"
        return None

    # ------------------------------------------------------------------ reconcile
    def reconcile_claims(self, state: CampaignState, now: datetime) -> None:
        """A claim whose start was never journaled (a failed append, a cockpit killed
        between claim and record): its marked process found means running (recorded now
        with that pid). None found: when the claim's owner is gone and the launch never
        began (no ``.out`` file of it), the claim expires and the stage is as before it
        (``claim_expired``: startable again); otherwise, once ``claim_grace_s`` has passed
        (monotonic), the launch failed (recorded). Claimed under the lock, so two
        cockpits record it once."""
        for st in state.stages.values():
            if st.claim is None or st.state != RUNNING or not self.scope.mine(st.id):
                continue
            marker = st.marker or launch_marker(self.campaign, st.id, st.claim)
            found = self.supervisor.find_marked(marker)
            with self.history.journal.transaction() as txn:
                self._reconcile_one(txn, st.id, st.claim, marker, found, now)

    def _reconcile_one(self, txn: JournalView, stage_id: str, claim_seq: int, marker: str,
                       found: list[Marked], now: datetime) -> None:
        stage = self.campaign.stage(stage_id)
        current = self.history.fold_locked(now).stages[stage_id]
        if current.claim != claim_seq:
            return  # another cockpit reconciled it first
        claim: Mapping[str, Any] = self.history.journal.event_at(claim_seq) or {}
        if found:
            self._append_started(txn, stage, claim, _relaunched(found, marker, self.campaign,
                                                                stage), now, reconciled=True)
            return
        owner_gone = "owner_pid" in claim and not self.time.owner_alive(claim, ours=True)
        out = claim.get("out")
        if owner_gone and isinstance(out, str) and not os.path.exists(out):
            txn.append(CLAIM_EXPIRED, now=now, stage=stage_id, run=stage.run,
                       claim=claim_seq, owner_pid=claim.get("owner_pid"),
                       reason=f"its owner (pid {claim.get('owner_pid')}) is gone and "
                              "the launch never began: the stage can start again")
            return
        age = self.time.age_s(claim_seq, current.started_at, now)
        if not owner_gone and age < self.claim_grace_s:
            return  # the launch may still be on its way
        txn.append(STAGE_FINISHED, now=now, stage=stage_id, outcome=FAILED,
                   claim=claim_seq, code=None,
                   reason=f"failed to launch: claim #{claim_seq} has no process "
                          f"carrying {MARKER_ENV}={marker}")

    # ------------------------------------------------------------------ stop
    def stop(self, target: str, reason: str, now: datetime | None = None,
             rule: str = "manual") -> Event:
        """Request a stop of a run (or the run of a stage): SIGTERM now, SIGKILL after grace."""
        now = now or self.time.clock.now()
        if not reason.strip():
            raise InputError("stop: a reason is required (D15: keep the reason)")
        run_id = self.scope.run_of(target)
        self.scope.refuse_other_run(run_id, "stop")
        with self.history.journal.transaction() as txn:
            state = self.history.fold_locked(now)
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
            event = self.request_stop(txn, state, run_id, rule, reason, now)
            assert event is not None
            return event

    def request_stop(self, txn: JournalView, state: CampaignState, run_id: str, rule: str,
                     reason: str, now: datetime, value: Any = None,
                     step: int | None = None) -> Event | None:
        """Journal the stop request, then SIGTERM the run's recorded group."""
        run = state.runs[run_id]
        if run.stop is not None and run.attempt is not None:
            return None  # already being stopped
        event = txn.append(STOP_REQUESTED, now=now, run=run_id, stage=run.stage, rule=rule,
                           reason=reason, value=value, step=step, attempt=run.attempt,
                           actor=self.actor)
        self.supervisor.signal_group(run.pid, run.pgid, run.create_time, signal.SIGTERM,
                                     run.marker)
        return event


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
