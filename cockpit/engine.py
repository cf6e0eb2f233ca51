"""The engine: ``tick(now) -> Snapshot`` and the actions, for both faces.

Reads the journal (folded into state), metric streams, process states and
telemetry; evaluates stop rules; in auto mode starts what is ready; and returns an
immutable Snapshot. Every action ends as journal events, claimed under the
journal lock so two cockpits on one campaign never act twice. A read-only engine
(``cockpit status``) computes the same snapshot and never writes or signals.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import InvalidOperation
from pathlib import Path
from typing import Any

import psutil

from cockpit.acceptance import auto_accept
from cockpit.budget import budget
from cockpit.campaign.model import OPTIONAL_CATEGORIES, Campaign, Stage
from cockpit.conclusion import deadline_check, on_deadline
from cockpit.errors import ActionRefused, InputError
from cockpit.hooks import HookRunner, hook_event_name
from cockpit.journal import Journal, JournalTxn, parse_time
from cockpit.planning.advice import downstream
from cockpit.planning.forecast import forecast
from cockpit.runs import supervisor
from cockpit.runs.checkpoint_verifier import (
    BackgroundVerifier,
    checkpoint_step,
    choose_checkpoint,
    feed_checkpoint_reports,
    report_fields,
    resume_equivalence,
    run_stream,
    scanner_for,
    verify_run_checkpoint,
)
from cockpit.runs.checkpoints import (
    CheckpointInfo,
    CheckpointScan,
    CheckpointScanner,
    interval_advice,
)
from cockpit.runs.metrics import MetricStream
from cockpit.runs.rules import Firing, check_points, check_restart, rules_hash
from cockpit.snapshot import (
    CheckpointView,
    EventLine,
    RuleView,
    RunView,
    Snapshot,
    StageView,
    WindowView,
)
from cockpit.state import (
    DONE,
    DROPPED,
    ENDED,
    FAILED,
    NOT_STARTED,
    PENDING,
    RUNNING,
    SKIPPED,
    STOPPED,
    SUCCEEDED,
    CampaignState,
    fold,
)
from cockpit.telemetry import GpuReading, GpuSampler, HostInfo, HostSampler, IdleDetector
from cockpit.units import Money, format_duration, plain_amount

Clock = Callable[[], datetime]
RECENT_EVENTS = 50
HOOK_MAX_AGE_S = 600.0


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class ExitVerdict:
    """What ``headless --until-done`` should do now: keep going (None) or exit with code."""

    code: int | None
    reason: str


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


class Engine:
    def __init__(
        self,
        campaign: Campaign,
        *,
        gpu_sampler: GpuSampler | None = None,
        host_sampler: HostSampler | None = None,
        auto: bool = False,
        read_only: bool = False,
        clock: Clock = utc_now,
        actor: str = "cockpit",
    ) -> None:
        self.campaign = campaign
        self.journal = Journal(campaign.state_dir / "journal.jsonl")
        self.gpu_sampler = gpu_sampler
        self.host_sampler = host_sampler
        self.auto = auto
        self.read_only = read_only
        self.clock = clock
        self.actor = actor
        self._streams: dict[str, MetricStream] = {}
        self._stream_attempt: dict[str, Any] = {}
        self._state: CampaignState | None = None
        self._state_seq = -1
        self._events_seen = 0
        self._recent: deque[EventLine] = deque(maxlen=RECENT_EVENTS)
        self._gpu: GpuReading = GpuReading("unavailable", "not sampled", (), (), (), None)
        self._host: HostInfo | None = None
        self._telemetry_warnings: tuple[str, ...] = ()
        self.new_events: list[dict[str, Any]] = []  # journal events first seen during the last tick
        self._hook_runner = HookRunner(campaign.folder)
        self._keys: set[str] = set()  # "key" fields of journaled once-only events
        self._scanners: dict[str, CheckpointScanner | None] = {}
        self._ckpt_views: dict[str, CheckpointScan] = {}
        self._verifier = BackgroundVerifier()
        self._rules_hash = rules_hash(campaign.stop_rules)  # the plan is frozen: once
        settings = campaign.settings
        self._idle: dict[int, IdleDetector] = {}
        self._idle_args = (settings.idle_util_pct, settings.idle_grace_s)
        if gpu_sampler is not None:
            gpu_sampler.start()

    # ------------------------------------------------------------------ reading
    def state(self, now: datetime | None = None) -> CampaignState:
        """The folded state; refolded only when the journal grew."""
        events = self.journal.events()
        last = events[-1]["seq"] if events else 0
        if self._state is None or last != self._state_seq or len(events) != self._events_seen:
            fresh = events[self._events_seen:]
            self.new_events.extend(fresh)
            for ev in fresh:
                if "key" in ev:
                    self._keys.add(str(ev["key"]))
                self._recent.append(EventLine(int(ev.get("seq", 0)), _parse_t(ev), ev["kind"],
                                              describe_event(ev)))
            self._events_seen = len(events)
            self._state = fold(self.campaign, events, now or self.clock())
            self._state_seq = last
        return self._state

    def close(self) -> None:
        if self.gpu_sampler is not None:
            self.gpu_sampler.close()

    # ------------------------------------------------------------------ the tick
    def tick(self, now: datetime | None = None) -> Snapshot:
        now = now or self.clock()
        self.new_events = []
        state = self.state(now)
        if not self.read_only:
            # Rules before exits: a run's last lines (a truncation count, a final NaN) are
            # judged while it still counts as running, even if it has just exited.
            self._apply_rules(state, now)
            self._record_exits(self.state(now), now)
            auto_accept(self, now)  # acceptance checks when a run ends, before what follows
            self._auto_verify(self.state(now), now)
            self._advance_stops(self.state(now), now)
            if self.auto:
                self._auto_start(self.state(now), now)
            self._deadline_guard(self.state(now), now)
            self._run_hooks(now)
            state = self.state(now)
        else:
            self._poll_streams(state)
        self._sample_telemetry(now)
        return self._snapshot(state, now)

    # ------------------------------------------------------------------ exits
    def _record_exits(self, state: CampaignState, now: datetime) -> None:
        for st in state.stages.values():
            if st.state != RUNNING or st.manual or not st.pid:
                continue
            if supervisor.alive(st.pid, st.create_time):
                continue
            info = supervisor.read_exit(st.exit_file) or {}
            code = info.get("code")
            with self.journal.transaction() as txn:
                current = fold(self.campaign, txn.events, now).stages[st.id]
                if current.state != RUNNING or current.attempt != st.attempt:
                    continue  # another cockpit recorded it first
                run = current.run and fold(self.campaign, txn.events, now).runs.get(current.run)
                stopped = bool(run and run.stop is not None and run.attempt == st.attempt)
                outcome = STOPPED if stopped else (DONE if code == 0 else FAILED)
                reason = None
                if outcome == FAILED:
                    reason = (f"exit code {code}" if code is not None
                              else "process vanished without an exit code (killed?)")
                if current.run:
                    txn.append("run_exited", now=now, run=current.run, stage=st.id, code=code,
                               attempt=st.attempt, signal=info.get("signal"))
                    if stopped and run is not None and run.stop is not None and not run.stop.done:
                        txn.append("stop_done", now=now, run=current.run, stage=st.id,
                                   attempt=st.attempt, rule=run.stop.rule)
                txn.append("stage_finished", now=now, stage=st.id, outcome=outcome, code=code,
                           reason=reason)

    # ------------------------------------------------------------------ metrics & rules
    def _stream(self, run_id: str, attempt: Any) -> MetricStream:
        if run_id not in self._streams or self._stream_attempt.get(run_id) != attempt:
            self._streams[run_id] = run_stream(self.campaign, run_id)
            self._stream_attempt[run_id] = attempt
        return self._streams[run_id]

    def _poll_streams(self, state: CampaignState) -> dict[str, list[Any]]:
        """New metric points per run of the current attempt (points of older attempts skipped)."""
        fresh: dict[str, list[Any]] = {}
        for run in state.runs.values():
            if run.state == NOT_STARTED:
                continue
            stream = self._stream(run.id, run.attempt)
            points = stream.poll()
            started = run.started_at.timestamp() - 1.0 if run.started_at else None
            fresh[run.id] = [p for p in points
                             if started is None or p.t is None or p.t >= started]
            scanner = self._scanner(run.id)
            events = stream.poll_events()
            if scanner is not None:
                feed_checkpoint_reports(self.campaign, scanner, events)
        self._scan_checkpoints(state)
        return fresh

    # ------------------------------------------------------------------ checkpoints
    def _scanner(self, run_id: str) -> CheckpointScanner | None:
        if run_id not in self._scanners:
            run = self.campaign.runs.get(run_id)
            self._scanners[run_id] = scanner_for(self.campaign, run) if run else None
        return self._scanners[run_id]

    def _scan_checkpoints(self, state: CampaignState) -> None:
        now_ts = time.time()
        for run in state.runs.values():
            scanner = self._scanner(run.id)
            if scanner is not None and run.state != NOT_STARTED:
                self._ckpt_views[run.id] = scanner.scan(now_ts)

    def _auto_verify(self, state: CampaignState, now: datetime) -> None:
        """Verify new checkpoints by reloading them in a fresh process (D17), in the
        background, one at a time; the first checkpoint of a run at once, then at most
        every ``verify_every``. Claimed in the journal so two cockpits verify once."""
        for run_id, attempt, report in self._verifier.results():
            self.journal.append("checkpoint_verified", now=now, run=run_id, attempt=attempt,
                                auto=True, actor=self.actor, **report_fields(report))
        if self._verifier.busy:
            return
        every = self.campaign.settings.verify_every_s
        for run in state.runs.values():
            view = self._ckpt_views.get(run.id)
            spec = self.campaign.runs.get(run.id)
            if run.state != RUNNING or view is None or view.newest is None or spec is None:
                continue
            path = str(view.newest.path)
            mine = [v for v in run.verified if v.get("attempt") == run.attempt]
            if any(v.get("path") == path for v in mine):
                continue
            if mine and (now - _parse_t(mine[-1])).total_seconds() < every:
                continue
            key = f"verify:{run.id}:{run.attempt}:{path}"
            if key in self._keys:
                continue
            with self.journal.transaction() as txn:
                if any(ev.get("key") == key for ev in txn.events):
                    continue
                txn.append("verify_started", now=now, key=key, run=run.id, path=path,
                           attempt=run.attempt)
            self._verifier.submit(self.campaign, spec, Path(path), run.attempt)
            return

    def verify(self, run_id: str, which: str = "newest",
               now: datetime | None = None) -> dict[str, Any]:
        """Reload a run's checkpoint in a fresh process now and journal the result."""
        run = self.campaign.runs.get(run_id) or self.campaign.runs.get(self._run_of(run_id))
        if run is None:
            raise InputError(f"{self.campaign.path}: no run {run_id!r}")
        chosen = choose_checkpoint(self.campaign, run, which)
        path = chosen.path if isinstance(chosen, CheckpointInfo) else chosen
        report = verify_run_checkpoint(self.campaign, run, path)
        attempt = self.state().runs[run.id].attempt
        return self.journal.append("checkpoint_verified", now=now or self.clock(), run=run.id,
                                   attempt=attempt, auto=False, actor=self.actor,
                                   **report_fields(report))

    def verify_resume(self, run_id: str, which: str = "first",
                      now: datetime | None = None) -> dict[str, Any]:
        """Resume equivalence (D17): restart from a checkpoint, compare the metric."""
        run = self.campaign.runs.get(run_id) or self.campaign.runs.get(self._run_of(run_id))
        if run is None:
            raise InputError(f"{self.campaign.path}: no run {run_id!r}")
        now = now or self.clock()
        chosen = choose_checkpoint(self.campaign, run, which)
        path = chosen.path if isinstance(chosen, CheckpointInfo) else chosen
        result = resume_equivalence(self.campaign, run, path, checkpoint_step(chosen), now)
        return self.journal.append(
            "resume_verified", now=self.clock(), run=run.id, ok=result.ok, path=result.checkpoint,
            from_step=result.from_step, compared=result.compared,
            diverged_step=result.diverged_step, message=result.message,
            seconds=round(result.seconds, 3), actor=self.actor)

    def export(self, now: datetime | None = None) -> dict[str, Any]:
        """Write and verify the export now (the TUI's `e`); returns its export_done event."""
        from cockpit.export import ExportError, export_campaign

        now = now or self.clock()
        try:
            result = export_campaign(self.campaign, self.state(now), now=now)
        except ExportError as exc:
            raise ActionRefused(str(exc)) from None
        if result.event is None:
            raise ActionRefused(f"export written to {result.bag_dir} but not journaled")
        return result.event

    def _checkpoint_view(self, run: Any, now: datetime) -> CheckpointView | None:
        view = self._ckpt_views.get(run.id)
        if view is None:
            return None
        newest = view.newest
        verified = None
        verified_age = None
        if run.verified:
            last = run.verified[-1]
            why = last.get("summary") or last.get("error")
            verified = "ok" if last.get("ok") else f"failed: {why}"
            verified_age = (now - _parse_t(last)).total_seconds()
        save = view.typical_save_seconds
        advice = None
        interval = _typical_interval(view)
        spec = self.campaign.runs.get(run.id)
        if save and interval:
            tolerable = (spec.tolerable_loss_s if spec and spec.tolerable_loss_s
                         else self.campaign.settings.tolerable_loss_s)
            advice = interval_advice(save, interval, tolerable,
                                     self.campaign.settings.mtbi_s).message
        return CheckpointView(
            path=str(newest.path) if newest else None, step=newest.step if newest else None,
            age_s=newest.age_seconds if newest else None,
            size=newest.size_bytes if newest else None, total_size=view.total_bytes,
            count=view.complete_count, free_disk=view.free_bytes, save_cost_s=save,
            verified=verified, verified_age_s=verified_age, advice=advice,
            in_progress=len(view.in_progress))

    def _apply_rules(self, state: CampaignState, now: datetime) -> None:
        fresh = self._poll_streams(state)
        rules = self.campaign.stop_rules
        for run in state.runs.values():
            if run.state != RUNNING:
                continue
            fired = state.fired_for(run.id, run.attempt)
            for rule in rules:
                if not rule.applies_to(run.id) or rule.id in fired:
                    continue
                firing = check_points(rule, fresh.get(run.id, ()))
                if firing is None and rule.kind == "restart":
                    firing = check_restart(rule, seconds_without_restart=self._since_restart(
                        run, now), step=self._streams[run.id].latest_step)
                if firing is not None:
                    self._fire(run.id, firing, now)

    def _since_restart(self, run: Any, now: datetime) -> float | None:
        """Seconds since the run last had a usable restart (a passing verification)."""
        if run.started_at is None:
            return None
        passing = [_parse_t(v) for v in run.verified
                   if v.get("ok") and v.get("attempt") in (None, run.attempt)]
        since = max([run.started_at, *passing])
        return (now - since).total_seconds()

    def _fire(self, run_id: str, firing: Firing, now: datetime) -> None:
        with self.journal.transaction() as txn:
            state = fold(self.campaign, txn.events, now)
            run = state.runs[run_id]
            if firing.rule in state.fired_for(run_id, run.attempt) or run.state != RUNNING:
                return  # fired once per run, whichever cockpit saw it first
            txn.append("rule_fired", now=now, run=run_id, stage=run.stage, rule=firing.rule,
                       reason=firing.reason, value=firing.value, threshold=firing.threshold,
                       step=firing.step, action=firing.action, attempt=run.attempt,
                       actor=self.actor)
            if firing.action == "stop":
                self._request_stop(txn, state, run_id, firing.rule, firing.reason, now,
                                   value=firing.value, step=firing.step)

    # ------------------------------------------------------------------ stops
    def _request_stop(self, txn: JournalTxn, state: CampaignState, run_id: str, rule: str,
                      reason: str, now: datetime, value: Any = None,
                      step: int | None = None) -> dict[str, Any] | None:
        run = state.runs[run_id]
        if run.stop is not None and run.attempt is not None:
            return None  # already being stopped
        event = txn.append("stop_requested", now=now, run=run_id, stage=run.stage, rule=rule,
                           reason=reason, value=value, step=step, attempt=run.attempt,
                           actor=self.actor)
        supervisor.signal_group(run.pid, run.pgid, run.create_time, signal.SIGTERM)
        return event

    def _advance_stops(self, state: CampaignState, now: datetime) -> None:
        """SIGKILL what is left of a stopped run's group once the grace has passed. The
        exit itself (run_exited, stop_done, stage_finished) is recorded by _record_exits
        when the wrapper is gone, so the three always land together."""
        grace = self.campaign.settings.stop_grace_s
        for run in state.runs.values():
            stop = run.stop
            if stop is None or stop.done or run.state != RUNNING or stop.at is None:
                continue
            if (now - stop.at).total_seconds() < grace or not supervisor.group_alive(run.pgid):
                continue
            supervisor.signal_group(run.pid, run.pgid, run.create_time, signal.SIGKILL)
            if run.pgid:
                _killpg_recorded(run.pgid, run.pid, run.create_time)

    # ------------------------------------------------------------------ stage readiness
    def stage_status(self, state: CampaignState, stage: Stage) -> str:
        """pending stages refined: ready / needs-person / waiting / blocked."""
        st = state.stages[stage.id]
        if st.state != PENDING:
            return st.state
        if state.revised:
            return "blocked"
        if self.unmet_after(state, stage):
            return "waiting"
        for decider in state.pending_decisions:
            if stage.id in downstream(self.campaign, decider):
                return "blocked"
        if self._gpu_conflict(state, stage):
            return "waiting"
        return "ready" if stage.command is not None else "needs-person"

    def unmet_after(self, state: CampaignState, stage: Stage) -> list[str]:
        """The stages in ``stage.after`` that have not ended (in plan order)."""
        unmet: list[str] = []
        for dep in stage.after:
            dep_state = state.stages[dep].state
            if dep_state in ENDED:
                continue
            dep_stage = self.campaign.stage(dep)
            if dep_state in (FAILED, STOPPED) and dep_stage.category in OPTIONAL_CATEGORIES:
                continue  # an optional stage that failed is information, not a blocker (D15)
            unmet.append(f"{dep} ({dep_state})")
        return unmet

    def _gpu_conflict(self, state: CampaignState, stage: Stage) -> str | None:
        mine = set(supervisor.stage_gpus(stage, self.campaign.package.offer.gpus))
        if not mine:
            return None
        for other in self.campaign.stages:
            if other.id == stage.id or other.machine != stage.machine:
                continue
            if state.stages[other.id].state != RUNNING:
                continue
            shared = mine & set(supervisor.stage_gpus(other, self.campaign.package.offer.gpus))
            if shared:
                return other.id
        return None

    # ------------------------------------------------------------------ actions
    def _stage(self, stage_id: str) -> Stage:
        try:
            return self.campaign.stage(stage_id)
        except KeyError:
            known = ", ".join(s.id for s in self.campaign.stages)
            raise InputError(f"{self.campaign.path}: no stage {stage_id!r} (stages: {known})") \
                from None

    def _record_plan(self, txn: JournalTxn, state: CampaignState, now: datetime) -> None:
        if state.plan_hash is None:
            txn.append("plan_recorded", now=now, sha256=self.campaign.sha256,
                       path=str(self.campaign.path))

    def start(self, stage_id: str, *, force: bool = False, now: datetime | None = None,
              auto: bool = False) -> list[dict[str, Any]]:
        """Launch a stage's command detached and journal it (claimed under the lock)."""
        stage = self._stage(stage_id)
        if stage.command is None:
            raise ActionRefused(f"stage {stage_id!r} has no command: mark it with "
                                f"`cockpit mark FILE {stage_id} started|done`")
        now = now or self.clock()
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
                launched = supervisor.launch(self.campaign, stage, now)
            except OSError as exc:
                raise ActionRefused(f"cannot start stage {stage_id!r}: {exc}") from None
            warn = self._window_warning(now)
            started = txn.append(
                "stage_started", now=now, stage=stage_id, run=stage.run, pid=launched.pid,
                pgid=launched.pgid, create_time=launched.create_time, command=launched.command,
                exit_file=launched.exit_file, stdout=launched.stdout, stderr=launched.stderr,
                gpus=list(supervisor.stage_gpus(stage, self.campaign.package.offer.gpus)),
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
        now = now or self.clock()
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

    def stop(self, target: str, reason: str, now: datetime | None = None,
             rule: str = "manual") -> dict[str, Any]:
        """Request a stop of a run (or the run of a stage): SIGTERM now, SIGKILL after grace."""
        now = now or self.clock()
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

    def wait_stopped(self, run_id: str, timeout: float, poll: float = 0.1) -> bool:
        """Drive a stop to its end (grace, SIGKILL, journal) from a one-shot command."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state()
            self._record_exits(state, self.clock())
            self._advance_stops(self.state(), self.clock())
            run = self.state().runs.get(run_id)
            if run is None or run.state != RUNNING:
                return True
            time.sleep(poll)
        return False

    def _run_of(self, target: str) -> str:
        if target in self.campaign.runs:
            return target
        try:
            stage = self.campaign.stage(target)
        except KeyError:
            raise InputError(f"{self.campaign.path}: no run or stage {target!r}") from None
        if stage.run:
            return stage.run
        # A stage without a run id is supervised under its own name.
        raise InputError(f"{self.campaign.path}: stage {target!r} has no run; "
                         "give it `run: ID` to supervise and stop it")

    def decide(self, outcome: str, *, stage: str | None = None, drops: Iterable[str] = (),
               note: str, now: datetime | None = None) -> list[dict[str, Any]]:
        now = now or self.clock()
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
        now = now or self.clock()
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

    def note(self, stage_id: str, text: str, now: datetime | None = None) -> dict[str, Any]:
        self._stage(stage_id)
        if not text.strip():
            raise InputError("note: the text is empty")
        return self.journal.append("note", now=now or self.clock(), stage=stage_id, text=text,
                                   actor=self.actor)

    def cost(self, label: str, amount: str, currency: str = "USD",
             now: datetime | None = None) -> dict[str, Any]:
        try:
            money = Money.parse(amount, currency)
        except (ValueError, InvalidOperation) as exc:
            raise InputError(f"cost: {exc}") from None
        if not label.strip():
            raise InputError("cost: the label is empty")
        # The exact text of the Decimal: no float on the way to the journal.
        return self.journal.append("cost", now=now or self.clock(), label=label,
                                   amount=plain_amount(money.amount), currency=money.currency,
                                   actor=self.actor)

    # ------------------------------------------------------------------ auto mode
    def _auto_start(self, state: CampaignState, now: datetime) -> None:
        if state.revised:
            return
        for stage in self.campaign.stages:
            if stage.command is None:
                continue
            current = self.state(now)
            if self.stage_status(current, stage) != "ready":
                continue
            try:
                self.start(stage.id, now=now, auto=True)
            except ActionRefused:
                continue

    def until_done(self, state: CampaignState) -> ExitVerdict:
        """0: every essential stage done; 1: an essential stage stopped/failed; 3: a person."""
        statuses = {s.id: self.stage_status(state, s) for s in self.campaign.stages}
        if any(v == RUNNING for v in statuses.values()):
            return ExitVerdict(None, "running")
        if any(r.stop is not None and not r.stop.done and r.state == RUNNING
               for r in state.runs.values()):
            return ExitVerdict(None, "stopping")
        if self.auto and not state.revised and any(v == "ready" for v in statuses.values()):
            return ExitVerdict(None, "starting")
        essential = [s for s in self.campaign.stages if s.category == "essential"]
        broken = [s.id for s in essential if statuses[s.id] in (FAILED, STOPPED)]
        if broken:
            return ExitVerdict(1, f"essential stage {', '.join(broken)} "
                                  f"{statuses[broken[0]]}")
        if all(statuses[s.id] == DONE for s in essential):
            return ExitVerdict(0, "every essential stage is done")
        if state.pending_decisions:
            return ExitVerdict(3, f"waiting for a decision at {', '.join(state.pending_decisions)}")
        if state.revised:
            return ExitVerdict(3, "the question is under revision")
        waiting = [sid for sid, v in statuses.items() if v in ("needs-person", "ready")]
        return ExitVerdict(3, f"waiting for a person: {', '.join(waiting) or 'nothing startable'}")

    # ------------------------------------------------------------------ hooks & deadline
    def _verified_export(self) -> bool:
        return any(ev.get("kind") == "export_done" and ev.get("verified")
                   for ev in self.journal.events()[-200:])

    def _deadline_guard(self, state: CampaignState, now: datetime) -> None:
        """D19: results must leave the box before the window ends. Warn once when the end
        is near without a verified export; when the forecast no longer leaves time for
        export and retrieval, warn loudly and, with ``on_deadline: stop-optional``, stop
        the optional runs and start the export."""
        left = (self.campaign.package.end - now).total_seconds()
        exported = self._verified_export()
        if 0 < left <= self.campaign.settings.deadline_warn_s and not exported:
            self._journal_once("warning", "deadline_near", now, source="window",
                               message=f"{format_duration(left)} left in the rental window "
                                       "and no verified export: export and fetch (D19)")
        if self.campaign.package.start > now:
            return
        fc = forecast(self.campaign, state, now, self._progress()[0])
        text = deadline_check(self.campaign, now, fc.end, exported)
        if text is None:
            return
        day = now.strftime("%Y%m%d%H")  # the loud warning repeats at most hourly
        self._journal_once("warning", f"deadline:{day}", now, source="deadline", message=text)
        if on_deadline(self.campaign) != "stop-optional":
            return
        for run in state.runs.values():
            stage = self.campaign.stage_of_run(run.id)
            if run.state == RUNNING and run.stop is None and stage is not None \
                    and stage.category in OPTIONAL_CATEGORIES:
                with contextlib.suppress(ActionRefused):
                    self.stop(run.id, "window deadline: export and retrieval need the time "
                                      "left (D19)", now=now, rule="deadline")
        export = next((s for s in self.campaign.stages if (s.role or s.id) == "export"), None)
        if export is not None and export.command is not None \
                and state.stages[export.id].state == PENDING:
            with contextlib.suppress(ActionRefused):
                self.start(export.id, force=True, now=now)

    def _run_hooks(self, now: datetime) -> None:
        hooks = self.campaign.hooks
        if not hooks:
            return
        for failure in self._hook_runner.poll():
            self.journal.append("warning", now=now, source="hook", message=failure)
        deciders = {s.id for s in self.campaign.stages if s.decision_point}
        for event in list(self.new_events):
            name = hook_event_name(event, deciders)
            if name is None or name not in hooks:
                continue
            if (now - _parse_t(event)).total_seconds() > HOOK_MAX_AGE_S:
                continue  # history from before this cockpit watched: no burst of old alerts
            key = f"hook:{name}:{event.get('seq')}"
            with self.journal.transaction() as txn:
                if any(ev.get("key") == key for ev in txn.events):
                    continue
                try:
                    pid = self._hook_runner.launch(hooks[name], event, name)
                except OSError as exc:
                    txn.append("warning", now=now, key=key, source="hook",
                               message=f"hook {name} could not start: {exc}")
                    continue
                txn.append("hook_started", now=now, key=key, hook=name, pid=pid,
                           for_seq=event.get("seq"))

    # ------------------------------------------------------------------ telemetry
    def _sample_telemetry(self, now: datetime) -> None:
        warnings: list[str] = []
        if self.gpu_sampler is not None:
            self._gpu = self.gpu_sampler.sample()
            warnings.extend(self._idle_warnings(now))
            if not self.read_only:
                for event in self._gpu.events:
                    # A lost GPU is one event; each Xid / ECC increase is its own.
                    key = f"gpu:{event.kind}:{event.gpu}" + (
                        "" if event.kind == "gpu_lost" else f":{event.code}:{event.at}")
                    self._journal_once("warning", key, now,
                                       message=event.message, source="gpu", gpu=event.gpu,
                                       event=event.kind)
        if self.host_sampler is not None:
            self._host = self.host_sampler.sample()
            warnings.extend(self._host.warnings)
        self._telemetry_warnings = tuple(warnings)

    def _idle_warnings(self, now: datetime) -> list[str]:
        """"GPU idle while a GPU stage runs": the most common waste on a rented box."""
        state = self.state(now)
        held: set[int] = set()
        for stage in self.campaign.stages:
            if stage.machine == 1 and state.stages[stage.id].state == RUNNING:
                held |= set(supervisor.stage_gpus(stage, self.campaign.package.offer.gpus))
        out = []
        for gpu in self._gpu.gpus:
            detector = self._idle.setdefault(gpu.index, IdleDetector(*self._idle_args))
            warning = detector.update(now.timestamp(), None if gpu.lost else gpu.util,
                                      gpu.index in held)
            if warning:
                out.append(f"GPU {gpu.index}: {warning}")
        return out

    def _journal_once(self, kind: str, key: str, now: datetime, **fields: Any) -> None:
        if key in self._keys:
            return  # cheap check first: no lock taken on every tick
        with self.journal.transaction() as txn:
            if any(ev.get("key") == key for ev in txn.events):
                return
            txn.append(kind, now=now, key=key, **fields)

    # ------------------------------------------------------------------ snapshot
    def _progress(self) -> tuple[dict[str, float], dict[str, int]]:
        """Fraction done per running stage and max_steps per run, from the runs' reports."""
        progress: dict[str, float] = {}
        max_steps: dict[str, int] = {}
        for run_id, stream in self._streams.items():
            ms = stream.latest.get("max_steps")
            stage = self.campaign.stage_of_run(run_id)
            if ms and stream.latest_step is not None and stage is not None:
                max_steps[run_id] = int(ms)
                progress[stage.id] = min(max(stream.latest_step / ms, 0.0), 1.0)
        return progress, max_steps

    def _snapshot(self, state: CampaignState, now: datetime) -> Snapshot:
        campaign = self.campaign
        pkg = campaign.package
        progress, max_steps = self._progress()
        fc = forecast(campaign, state, now, progress)
        window_s = (pkg.end - pkg.start).total_seconds()
        used = min(max((now - pkg.start).total_seconds() / window_s * 100, 0.0), 100.0)
        closing = [s for s in campaign.stages if (s.role or s.id) in ("export", "retrieval")]
        deadline = pkg.end - timedelta(seconds=sum(s.seconds for s in closing))
        window = WindowView(
            start=pkg.start, end=pkg.end, remaining_s=(pkg.end - now).total_seconds(),
            used_pct=used, forecast_end=fc.end, forecast_slack_s=fc.slack_s,
            verdict=fc.verdict, retrieval_deadline=deadline,
            options=tuple(o.describe() for o in fc.options), pilot_ratio=fc.pilot_ratio)

        stages = []
        for stage in campaign.stages:
            st = state.stages[stage.id]
            status = self.stage_status(state, stage)
            prog = progress.get(stage.id) if status == RUNNING else None
            eta = fc.stage_end.get(stage.id) if status == RUNNING else None
            decision = None
            if stage.decision_point:
                made = state.decisions.get(stage.id)
                decision = made.outcome if made else ("pending" if st.state == DONE else None)
            stages.append(StageView(
                id=stage.id, state=status, category=stage.category,
                resource=stage.resource_label, planned_s=stage.seconds,
                elapsed_s=st.elapsed_s(now), decision_point=stage.decision_point,
                started_at=st.started_at, ended_at=st.ended_at, run=stage.run,
                has_command=stage.command is not None, progress=prog, eta=eta,
                forecast_end=fc.stage_end.get(stage.id), decision=decision, reason=st.reason,
                notes=st.notes, exit_code=st.exit_code))

        gpu_mem = self._gpu_memory_by_run(state)
        runs = []
        for run_id, run in state.runs.items():
            stream = self._streams.get(run_id)
            spec = campaign.runs.get(run_id)
            stale = stream.stale_seconds(time.time()) if stream else None
            runs.append(RunView(
                id=run_id, stage=run.stage or (spec and campaign.stage_of_run(run_id) and
                                               campaign.stage_of_run(run_id).id),  # type: ignore[union-attr]
                state=run.state, step=stream.latest_step if stream else None,
                max_steps=max_steps.get(run_id),
                metrics=dict(stream.latest) if stream else {}, pid=run.pid, gpus=run.gpus,
                gpu_memory=gpu_mem.get(run_id), exit_code=run.exit_code,
                stop_rule=run.stop.rule if run.stop else None,
                stop_reason=run.stop.reason if run.stop else None, verdict=run.verdict,
                verdict_reason=run.verdict_reason, stale_s=stale,
                garbage=stream.garbage if stream else 0,
                result=spec.result_id if spec else run_id, kind=spec.kind if spec else "train",
                checkpoint=self._checkpoint_view(run, now)))

        rules = []
        for rule in campaign.stop_rules:
            for run_id, run in state.runs.items():
                if not rule.applies_to(run_id):
                    continue
                hit = next((f for f in state.fired if f.run == run_id and f.rule == rule.id
                            and f.attempt == run.attempt), None)
                stream = self._streams.get(run_id)
                value = stream.latest.get(rule.metric) if stream and rule.metric else None
                if hit:
                    rules.append(RuleView(rule.id, run_id, rule.kind,
                                          "fired" if hit.action == "stop" else "warn",
                                          hit.reason, rule.action, rule.metric, hit.value))
                else:
                    rules.append(RuleView(rule.id, run_id, rule.kind, "ok", None, rule.action,
                                          rule.metric, value))

        warnings = list(self._warnings(state, fc.verdict))
        warnings.extend(self._gpu.warnings)
        warnings.extend(self._telemetry_warnings)
        return Snapshot(
            taken_at=now, campaign=campaign.id, question=campaign.question, offer=pkg.offer.id,
            count=pkg.count, window=window, stages=tuple(stages), runs=tuple(runs),
            rules=tuple(rules), pending_decisions=state.pending_decisions,
            revised=state.revised, gpus=self._gpu, host=self._host, warnings=tuple(warnings),
            events=tuple(self._recent), auto=self.auto,
            budget=budget(campaign, state, now))

    def _gpu_memory_by_run(self, state: CampaignState) -> dict[str, int]:
        """Where NVML shows a run's pid (or its children) on a GPU, its memory."""
        out: dict[str, int] = {}
        pids = {run.pid: run.id for run in state.runs.values()
                if run.state == RUNNING and run.pid}
        if not pids:
            return out
        for gpu in self._gpu.gpus:
            for proc in gpu.processes:
                run_id = pids.get(proc.pid)
                if run_id is None and proc.visible:
                    run_id = _ancestor_run(proc.pid, pids)
                if run_id and proc.used_memory:
                    out[run_id] = out.get(run_id, 0) + proc.used_memory
        return out

    def _warnings(self, state: CampaignState, verdict: str) -> Iterable[str]:
        if state.plan_changed:
            yield ("the campaign file changed after the plan was recorded: the plan is never "
                   "rewritten (D24); explain deviations with notes")
        if state.rules_hash and self.campaign.stop_rules \
                and state.rules_hash != self._rules_hash:
            yield "the stop rules changed after the first run started (D14: fixed before the test)"
        for problem in self.journal.problems():
            yield f"journal line {problem.line}: {problem.message}"
        yield from state.journal_warnings
        if verdict == "exceeds":
            yield "the forecast exceeds the rental window (D11): see the options"


def _typical_interval(view: CheckpointScan) -> float | None:
    """Median time between successive complete checkpoints (the save interval in use)."""
    times = sorted(c.mtime for c in view.complete)
    gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False) if b > a)
    return gaps[len(gaps) // 2] if gaps else None


def _ancestor_run(pid: int, runs: Mapping[int, str]) -> str | None:
    try:
        for parent in psutil.Process(pid).parents():
            if parent.pid in runs:
                return runs[parent.pid]
    except psutil.Error:
        return None
    return None


def _killpg_recorded(pgid: int, pid: int | None, create_time: float | None) -> None:
    """SIGKILL a group whose leader (the wrapper) is gone but whose members linger."""
    if pid and supervisor.alive(pid, create_time):
        return  # signal_group already handled it
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _parse_t(event: Mapping[str, Any]) -> datetime:
    return parse_time(str(event.get("t")))


def describe_event(ev: Mapping[str, Any]) -> str:
    """One human line per journal event (headless output, the TUI's event list)."""
    kind = ev.get("kind")
    stage, run = ev.get("stage"), ev.get("run")
    if kind == "stage_started":
        how = "marked started" if ev.get("manual") else f"started (pid {ev.get('pid')})"
        return f"stage {stage} {how}" + (f" — {ev['warning']}" if ev.get("warning") else "")
    if kind == "stage_finished":
        extra = f": {ev['reason']}" if ev.get("reason") else ""
        return f"stage {stage} {ev.get('outcome')}{extra}"
    if kind == "stage_skipped":
        return f"stage {stage} skipped" + (f": {ev['note']}" if ev.get("note") else "")
    if kind == "stage_dropped":
        return f"stage {stage} dropped ({ev.get('reason')})"
    if kind == "run_started":
        return f"run {run} started (params {str(ev.get('params_hash'))[:12]})"
    if kind == "run_exited":
        return f"run {run} exited with code {ev.get('code')}"
    if kind == "rule_fired":
        return f"rule {ev.get('rule')} fired on run {run}: {ev.get('reason')}"
    if kind == "stop_requested":
        return f"stop of run {run} requested ({ev.get('rule')}): {ev.get('reason')}"
    if kind == "stop_done":
        return f"run {run} stopped"
    if kind == "decision":
        drops = f", dropping {', '.join(ev.get('drops') or [])}" if ev.get("drops") else ""
        return f"decision at {stage}: {ev.get('outcome')}{drops} — {ev.get('note')}"
    if kind == "note":
        return f"note on {stage}: {ev.get('text')}"
    if kind == "cost":
        return f"cost {ev.get('label')}: {ev.get('amount')} {ev.get('currency')}"
    if kind == "result_accepted":
        return f"result of run {run} accepted: {ev.get('reason')}"
    if kind == "result_rejected":
        return f"result of run {run} rejected: {ev.get('reason')}"
    if kind == "plan_recorded":
        return f"plan recorded (sha256 {str(ev.get('sha256'))[:12]})"
    if kind == "rules_recorded":
        return f"stop rules recorded (sha256 {str(ev.get('sha256'))[:12]})"
    if kind == "resume_verified":
        verdict = "PASS" if ev.get("ok") else "FAIL"
        return f"resume check of run {run}: {verdict} — {ev.get('message')}"
    if kind == "verify_started":
        return f"verifying checkpoint of run {run} ({ev.get('path')})"
    if kind == "checkpoint_verified":
        verdict = "reloads" if ev.get("ok") else f"does NOT reload: {ev.get('error')}"
        return f"checkpoint of run {run} {verdict} ({ev.get('path')})"
    if kind == "warning":
        return f"warning: {ev.get('message')}"
    if kind == "export_done":
        verdict = "verified" if ev.get("verified") else "NOT verified"
        return f"export written and {verdict}: {ev.get('path')} (tar sha256 " \
               f"{str(ev.get('sha256'))[:12]})"
    if kind == "hook_started":
        return f"hook {ev.get('hook')} started for event #{ev.get('for_seq')} (pid {ev.get('pid')})"
    return f"{kind}: " + ", ".join(f"{k}={v}" for k, v in ev.items()
                                   if k not in ("seq", "t", "kind"))


def default_samplers(campaign: Campaign, simulate: int) -> tuple[GpuSampler, HostSampler]:
    from cockpit.telemetry.gpu import GpuSampler as _Gpu

    paths = [campaign.folder]
    for run in campaign.runs.values():
        if run.checkpoints is not None:
            paths.append(campaign.resolve(run.checkpoints))
    return (_Gpu(simulate=simulate),
            HostSampler([Path(p) for p in paths], campaign.settings.disk_warn_bytes))
