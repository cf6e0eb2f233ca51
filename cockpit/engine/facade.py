"""The engine's face: :class:`Engine`, a thin facade over the parts it holds.

Each part has its dependencies given in its constructor and none inherits another:

- ``past``         :class:`~cockpit.engine.history.History`: journal + peers, folded and
                   cached; the one way every part writes the journal
- ``time``         :class:`~cockpit.engine.timebase.Timebase`: the clock, jumps, ages
- ``observer``     :class:`~cockpit.engine.observer.Observer`: metric streams, checkpoint
                   scans, telemetry (the only part that polls)
- ``exits``        :class:`~cockpit.engine.exits.ExitRecorder`: the stages that ended
- ``verification`` :class:`~cockpit.engine.verification.Verification`: background reloads
                   and acceptance verdicts
- ``launcher``     :class:`~cockpit.engine.launcher.Launcher`: start, stop, the guards'
                   intents carried out
- ``recorder``     :class:`~cockpit.engine.journal_actions.Recorder`: verdicts, notes, costs,
                   marks, decisions, the plan's record
- ``evidence``     :class:`~cockpit.engine.evidence.Evidence`: verify, verify --resume,
                   export
- ``hooks``        :class:`~cockpit.engine.hooks.HookDispatcher`
- ``landing``      :class:`~cockpit.engine.landing.Landing`: at the point of no return
                   (``on_deadline: land``), save, verify, stop, export, fetch command
- ``alerting``     :class:`~cockpit.engine.alerting.AlertDispatcher`: alerts to the
                   person's phone, sent and journaled by a background thread
- ``flight``       :class:`~cockpit.telemetry.flight.FlightRecorder`: each tick's
                   telemetry kept on disk (a writing engine that samples; else None)
- ``hours``        :class:`~cockpit.engine.hours.HoursCache`: what the GPU-hours
                   bought, read from the recording at most once a minute
- ``actions``      what start/stop/mark/decide/accept/reject/note/cost go to: this
                   machine's own (:class:`LocalActions`), or another's (the fleet hands
                   its remote actions in)

``tick(now)`` polls and folds on every face; a conducting engine then runs the steps of
:data:`Engine.TICK_STEPS` in order (record changes, reconcile claims, judge rules, record
exits, judge blind, verify, escalate stops, start next, guard the window, land, record
telemetry, announce), then builds the snapshot. The guards (:mod:`cockpit.engine.guards`)
are pure functions from the state and what was observed to intents. Each step reads the
state folded now: it is refolded only after an act wrote the journal (the history's
cache). The constructor reads no journal and starts no sampler:
:meth:`Engine.open` does (every entry point calls it first; it runs once).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import cockpit.engine.guards as guards
from cockpit.alerts.targets import Target
from cockpit.campaign.model import Campaign
from cockpit.common.errors import ActionRefused, InputError
from cockpit.common.lease import AutoRequest, ConductorLease, auto_requested
from cockpit.engine.alert_kinds import alert_of
from cockpit.engine.alerting import AlertDispatcher
from cockpit.engine.build import Observations, build_snapshot
from cockpit.engine.clockwatch import ClockJump
from cockpit.engine.conductor import PlanWatch, conductor_view
from cockpit.engine.evidence import Evidence
from cockpit.engine.exits import ExitRecorder
from cockpit.engine.guards import ExitVerdict, ExportFacts, RunSeen
from cockpit.engine.history import History
from cockpit.engine.hooks import HookDispatcher
from cockpit.engine.hours import HoursCache
from cockpit.engine.journal_actions import Recorder
from cockpit.engine.landing import Landing, landing_now
from cockpit.engine.launcher import Launcher
from cockpit.engine.observer import Observer
from cockpit.engine.outbox import Outbox, owed_counts
from cockpit.engine.ports import (
    Clock,
    EventJournal,
    GpuSource,
    HostSource,
    PeerSource,
    ProcessSupervisor,
    Supervisor,
    as_clock,
)
from cockpit.engine.scope import Scope
from cockpit.engine.snapshot import ConductorView, Snapshot
from cockpit.engine.telemetry_history import Recorded, read_recorded
from cockpit.engine.timebase import Timebase
from cockpit.engine.verification import Verification
from cockpit.journal.fields import Event
from cockpit.journal.fold import RUNNING, CampaignState
from cockpit.journal.log import Journal
from cockpit.journal.paths import CampaignFiles
from cockpit.planning.deadline import expected_export_bytes, export_size
from cockpit.runs.metrics.progress import progress_of
from cockpit.telemetry import GpuSampler, HostSampler
from cockpit.telemetry.flight import FlightRecorder


class Actions(Protocol):
    """The actions a person takes on stages and runs (here, or on another machine)."""

    def start(self, stage_id: str, *, force: bool = False, now: datetime | None = None,
              auto: bool = False) -> list[Event]: ...

    def stop(self, target: str, reason: str, now: datetime | None = None,
             rule: str = "manual") -> Event: ...

    def mark(self, stage_id: str, what: str, note: str | None = None,
             now: datetime | None = None) -> list[Event]: ...

    def decide(self, outcome: str, *, stage: str | None = None, drops: Iterable[str] = (),
               note: str, now: datetime | None = None) -> list[Event]: ...

    def accept(self, run_id: str, note: str | None = None, now: datetime | None = None,
               *, override: bool = False) -> Event | None: ...

    def reject(self, run_id: str, note: str, now: datetime | None = None
               ) -> Event | None: ...

    def note(self, stage_id: str, text: str, now: datetime | None = None
             ) -> Event: ...

    def cost(self, label: str, amount: str, currency: str = "USD",
             now: datetime | None = None) -> Event: ...


class LocalActions:
    """This machine's actions: starts and stops by the launcher, the rest recorded."""

    def __init__(self, launcher: Launcher, recorder: Recorder) -> None:
        self.start = launcher.start
        self.stop = launcher.stop
        self.mark = recorder.mark
        self.decide = recorder.decide
        self.accept = recorder.accept
        self.reject = recorder.reject
        self.note = recorder.note
        self.cost = recorder.cost


@dataclass
class TickSteps:
    """What one tick's acting steps share: its time, the clock's jump it saw, and what
    the observation step saw of each run (the rule steps read it)."""

    now: datetime
    jump: ClockJump | None
    seen: dict[str, RunSeen] | None = None


class Engine:
    """The facade the faces and the CLI use: ``tick`` plus the actions."""

    def __init__(self, campaign: Campaign, *, gpu_sampler: GpuSource | None = None,
                 host_sampler: HostSource | None = None, auto: bool = False,
                 read_only: bool = False, clock: Clock | Callable[[], datetime] | None = None,
                 actor: str = "cockpit", journal: EventJournal | None = None,
                 supervisor: Supervisor | None = None, machine: int | None = 1,
                 peers: PeerSource | None = None, actions: Actions | None = None,
                 alerts: Sequence[Target] = (), record: bool = True,
                 lease: ConductorLease | None = None,
                 alert_send: Callable[..., str | None] | None = None) -> None:
        self.campaign = campaign
        # Which machine this cockpit is (D12): it launches, stops and supervises only the
        # stages of this machine. None: `cockpit fleet`, every machine is a peer.
        self.machine = machine
        self.auto = auto
        self.read_only = read_only
        # Why this face may not act (``cockpit tui --read-only``: a colleague's view);
        # None: it may. The fleet's read-only engine acts over SSH and leaves it None.
        self.writes_refused: str | None = None
        self.actor = actor
        self.clock: Clock = as_clock(clock)
        self.journal: EventJournal = journal if journal is not None else Journal(
            CampaignFiles.of(campaign).journal, bounded=True)
        self.supervisor: Supervisor = supervisor or ProcessSupervisor()
        self.time = Timebase(self.clock)
        scope = self.scope = Scope(campaign, machine)
        past = self.past = History(campaign, self.journal, self.time, machine=machine,
                                   peers=peers, outbox=Outbox(campaign, alert_of))
        self.observer = Observer(scope, self.time, self.supervisor, gpu=gpu_sampler,
                                 host=host_sampler)
        self.exits = ExitRecorder(scope, past, self.supervisor)
        self.verification = Verification(scope, past, self.observer, actor=actor)
        self.launcher = Launcher(scope, past, self.supervisor, actor=actor)
        self.recorder = Recorder(scope, past, actor=actor)
        self.evidence = Evidence(scope, past, actor=actor)
        self.hooks = HookDispatcher(campaign, past)
        self.landing = Landing(scope, past, self.observer, self.launcher, self.evidence,
                               actor=actor)
        # ``alert_send``: how an alert goes out (a test's inbox); None: the real delivery.
        self.alerting = AlertDispatcher(campaign, past, () if read_only else alerts, machine,
                                        **({"sender": alert_send} if alert_send else {}),
                                        export_state=self.evidence.export_state)
        self.actions: Actions = actions or LocalActions(self.launcher, self.recorder)
        self.hours = HoursCache(campaign, machine, lambda: self.observer.streams)
        sampled = gpu_sampler is not None or host_sampler is not None
        # The conductor's lease (issue 39): a face holds one and conducts while it holds
        # it, else it is a viewer that takes it when it comes free. No lease (an engine
        # made directly, as the engine tests do): this engine conducts alone.
        self.lease = lease
        # This face's --auto, said to whoever conducts (a lease-less engine acts alone).
        self.auto_request = (AutoRequest(lease.state_dir, machine)
                             if lease is not None and auto and not read_only else None)
        # The flight recorder's one writer is the conductor: opened when this engine
        # begins to conduct (a takeover continues the same file).
        self._records = record and sampled and not read_only
        self.flight: FlightRecorder | None = None
        self.plan_watch = PlanWatch(campaign)
        # Ready stages --auto holds back because the landing would cut them (a person's).
        self.held_back: frozenset[str] = frozenset()
        # A valid new version of the campaign file that this face should now load (its
        # face reopens the engine: :func:`cockpit.fleet.open.reopen_engine`).
        self.reload_wanted: Campaign | None = None
        self.opened_with: dict[str, Any] = {}  # open_engine's options (reopen_engine)
        self._opened = False

    def open(self) -> Engine:
        """Begin to watch: events journaled so far are history (a face announces only
        what happens after), and the GPU sampler starts. Runs once; every entry point
        calls it."""
        if not self._opened:
            self._opened = True
            self.past.open()
            self.observer.start()
            self._conduct_now()  # the first face to open conducts
        return self

    # ------------------------------------------------------------------ conducting
    @property
    def conducting(self) -> bool:
        """Whether this engine does the conductor's effects now (:mod:`conductor`)."""
        if self.read_only:
            return False
        return self.lease is None or self.lease.held

    @property
    def you_conduct(self) -> bool:
        """Whether this face conducts: an acting engine that does, or the fleet's view
        (read-only, it writes no journal) that holds the fleet's lease."""
        return self.conducting or (self.lease is not None and self.lease.held)

    def _conduct_now(self) -> bool:
        """Conduct if this engine may: a viewer takes a lease that came free (its holder
        exited or died) and carries on from the journal."""
        if self.auto_request is not None and not self.auto_request.held:
            self.auto_request.take()  # said to the conductor (a conductor's probe: next tick)
        if self.read_only and self.lease is None:
            return False
        if self.lease is not None and not self.lease.held:
            self.lease.auto = self.auto
            if not self.lease.take():
                return False
            previous = self.lease.previous
            if previous is not None and previous.auto and not self.auto:
                # A takeover carries the campaign on as it was conducted: the stages the
                # --auto conductor would have started still start.
                self.auto = self.lease.auto = True
                self.lease.describe()
        if self.read_only:
            return False  # the fleet's view: it holds its lease, it acts on no journal
        if self.flight is None and self._records:
            self.flight = FlightRecorder(CampaignFiles.of(self.campaign).recorder).open()
        return True

    def auto_now(self) -> bool:
        """Whether stages start by themselves: this face's --auto, or (conducting) any
        live face's (a viewer opened with --auto holds an :class:`AutoRequest`)."""
        if self.auto:
            return True
        return self.lease is not None and self.lease.held and auto_requested(
            self.lease.state_dir, self.machine)

    def conductor(self) -> ConductorView:
        """Who conducts this campaign on this machine, as the faces say it."""
        if self.you_conduct:
            since = (datetime.fromtimestamp(self.lease.since, timezone.utc)
                     if self.lease is not None and self.lease.since is not None else None)
            return ConductorView(you=True, conducted=True,
                                 face=self.lease.face if self.lease else self.actor,
                                 pid=os.getpid(), since=since)
        return conductor_view(CampaignFiles.of(self.campaign).root, self.machine,
                              self.lease.problem if self.lease is not None else None)

    @property
    def peers(self) -> PeerSource | None:
        return self.past.peers

    @property
    def claim_grace_s(self) -> float:
        """How long a launch claim waits for its process (monotonic seconds)."""
        return self.launcher.claim_grace_s

    @claim_grace_s.setter
    def claim_grace_s(self, value: float) -> None:
        self.launcher.claim_grace_s = value

    # ------------------------------------------------------------------ the tick
    def tick(self, now: datetime | None = None) -> Snapshot:
        """One step: observe → fold → guards → act → snapshot."""
        self.open()
        jump = None
        if now is None:
            now, jump = self.time.read_clock()  # the steady time while a clock jump holds
        state = self.past.state(now)
        if self._conduct_now():
            state = self._step(state, jump, now)
        else:  # a viewer (or a read-only face): sees everything, writes nothing
            self.observer.poll(state, now)
            self.observer.sample_telemetry(state, now, None)
        self._watch_plan(self.past.state(now), now)
        self.past.announce(now)
        return self._snapshot(self.past.state(now), now)

    def _step(self, state: CampaignState, jump: ClockJump | None,
              now: datetime) -> CampaignState:
        """The tick's acting half: the steps of :data:`TICK_STEPS`, in order. Each acts on
        the state folded now (the fold refolds only after a write: a step that wrote
        nothing costs no refold) and journals only through the part that owns it."""
        tick = TickSteps(now, jump)
        for step in Engine.TICK_STEPS:
            step(self, tick)
        return self.past.state(now)

    def _record_changes(self, tick: TickSteps) -> None:
        """A wall-clock step, and an edited plan, journaled once."""
        if tick.jump is not None:
            self.recorder.record_clock_jump(tick.jump, self.time.watch.settle_s, tick.now)
        if self.plan_watch.current(self.clock.monotonic()) == self.campaign.sha256:
            # Only the version the file holds now: a face whose plan the file has left
            # behind reloads (PlanWatch) and never journals its older version.
            self.recorder.record_plan_change(self.past.state(tick.now), tick.now)

    def _reconcile_claims(self, tick: TickSteps) -> None:
        """Launches whose record never landed (a cockpit killed mid-start)."""
        self.launcher.reconcile_claims(self.past.state(tick.now), tick.now)

    def _judge_rules(self, tick: TickSteps) -> None:
        """The stop rules, before the exits: a run's last lines (a truncation count, a
        final NaN) are judged while it still counts as running, even if it just exited."""
        state = self.past.state(tick.now)
        tick.seen = self.observer.observe(state, tick.now, self.verification.verifying)
        self.launcher.carry_out(guards.rule_firings(self.campaign, state, tick.seen,
                                                    holding=self.holding()), tick.now)

    def _record_exits(self, tick: TickSteps) -> None:
        self.exits.record(self.past.state(tick.now), tick.now)

    def _judge_blind(self, tick: TickSteps) -> None:
        self.launcher.carry_out(guards.blind_rules(self.campaign, self.past.state(tick.now),
                                                   tick.seen or {}, self.past.keys), tick.now)

    def _verify(self, tick: TickSteps) -> None:
        """Acceptance when a run ends, and the checkpoints' reloads (in the background)."""
        self.verification.judge_runs(tick.now)
        self.verification.auto_verify(self.past.state(tick.now), tick.now)

    def _escalate_stops(self, tick: TickSteps) -> None:
        state = self.past.state(tick.now)
        self.launcher.carry_out(guards.stops_to_escalate(
            state, self.observer.stop_ages(state, tick.now),
            self.campaign.settings.stop_grace_s), tick.now)

    def _start_next(self, tick: TickSteps) -> None:
        """--auto: the next stages (none the landing would cut; nothing while the clock's
        jump settles or the landing runs)."""
        if not (self.auto_now() and not self.holding() and not self.landing.began):
            return
        state = self.past.state(tick.now)
        starts = guards.auto_starts(self.campaign, state, self.machine,
                                    self.evidence.export_state(state))
        if starts and self.campaign.on_deadline == "land":
            starts, self.held_back = guards.landing_cuts(
                self.campaign, starts, tick.now, self._point_of_no_return(tick.now))
        else:
            self.held_back = frozenset()
        self.launcher.carry_out(starts, tick.now)

    def _guard_window(self, tick: TickSteps) -> None:
        """The deadline guard and the landing's warning (never while a clock jump holds:
        a clock that just jumped decides nothing on the window)."""
        if self.holding():
            return
        now, state = tick.now, self.past.state(tick.now)
        self.launcher.carry_out(guards.deadline_guard(
            self.campaign, state, now, machine=self.machine,
            progress=progress_of(self.campaign, self.observer.streams)[0],
            export=self._export_facts(state)), now)
        self.launcher.carry_out(guards.landing_near(
            self.campaign, now, self._point_of_no_return(now), began=self.landing.began), now)

    def _land(self, tick: TickSteps) -> None:
        self.landing.step(self.past.state(tick.now), tick.now, holding=self.holding())

    def _record_telemetry(self, tick: TickSteps) -> None:
        """GPU warnings journaled; the flight recorder's second."""
        self.observer.sample_telemetry(self.past.state(tick.now), tick.now,
                                       self.past.journal_once)
        if self.flight is not None:
            self.flight.record(tick.now.timestamp(), self.observer.gpu.gpus,
                               self.observer.host)

    def _announce(self, tick: TickSteps) -> None:
        """What this tick saw first: its hooks run, its alerts queued (a dead target never
        slows the tick), and the state cache kept (a restart folds only the tail)."""
        self.past.announce(tick.now)
        self.hooks.run(self.past.fresh, tick.now)
        self.alerting.run(self.past.fresh, tick.now)
        self.past.save_cache()

    # The acting half of a tick, in order: each step (engine, TickSteps) -> None.
    TICK_STEPS: tuple[Callable[[Engine, TickSteps], None], ...] = (
        _record_changes, _reconcile_claims, _judge_rules, _record_exits, _judge_blind,
        _verify, _escalate_stops, _start_next, _guard_window, _land, _record_telemetry,
        _announce)

    def _point_of_no_return(self, now: datetime) -> datetime:
        return landing_now(self.campaign, self.past.state(now), self.observer.checkpoints,
                           self.machine).point

    def _watch_plan(self, state: CampaignState, now: datetime) -> None:
        """An edited campaign file: the conductor journals a valid new version once; a
        face reloads it once the journal holds it (or holds no plan yet). A viewer never
        journals; an invalid edit is only said (``plan_watch.refused``)."""
        self.plan_watch.current(self.clock.monotonic())
        version = self.plan_watch.candidate
        if version is None or self.reload_wanted is version:
            return
        if self.conducting:
            self.recorder.record_plan_change(state, now, version)
            state = self.past.state(now)
        if state.latest_plan_hash in (None, version.sha256):
            self.reload_wanted = version

    def _snapshot(self, state: CampaignState, now: datetime) -> Snapshot:
        obs = self.observer
        return build_snapshot(self.campaign, state, Observations(
            streams=obs.streams, checkpoints=obs.checkpoints, gpu=obs.gpu, host=obs.host,
            telemetry_warnings=obs.warnings + self.time.hold_warning()
            + (self.flight.warnings if self.flight is not None else ()),
            gpu_memory=obs.gpu_memory_by_run(state),
            journal_problems=tuple(self.journal.problems()), events=tuple(self.past.recent),
            rules_hash=self.launcher.rules_hash, auto=self.auto_now(),
            new_events=self.past.take_fresh(),
            decided_planned_s=self.recorder.decided_planned_s(state), machine=self.machine,
            machines=self.past.machine_views(), landing=self.landing.timeline(),
            hours=self.hours.get(state, now), underfed=obs.underfed.looks(),
            conductor=self.conductor(), plan_refused=self.plan_watch.refused,
            export=self.evidence.export_state(state),
            alerts_owed=owed_counts(self.past.outbox, self.past.keys.__contains__),
            run_ages={run.id: self.time.age_s(run.attempt, run.started_at, now)
                      for run in state.runs.values() if run.state == RUNNING}), now)

    def _export_facts(self, state: CampaignState) -> ExportFacts:
        export = state.export  # the newest export written, as folded (cache included)
        exported = bool(export and export.get("verified"))
        # The size an export would have now (the newest checkpoints and the rest).
        expected = expected_export_bytes(self.campaign, self.observer.newest_sizes())
        return ExportFacts(exported, expected, export_size(export) if export else None)

    # ------------------------------------------------------------------ reading
    def state(self, now: datetime | None = None) -> CampaignState:
        """The folded state (folded again only when a journal changed)."""
        self.open()
        return self.past.state(now)

    def history(self, now: datetime | None = None) -> list[Event]:
        """The events the state was folded from: this machine's and its peers', merged
        and filtered (what ``budget``, ``export`` and ``next`` read)."""
        self.open()
        return self.past.events(now)

    def fold_locked(self, now: datetime) -> CampaignState:
        """The state under the journal lock: what was read under it folded, with the
        peers' events."""
        return self.past.fold_locked(now)

    def telemetry_history(self, t0: float, t1: float, *, gpu: Sequence[str] = ("util",),
                          host: Sequence[str] = (), raw: bool = False,
                          width: int | None = None, gpus: Iterable[int] = ()) -> Recorded:
        """What the flight recording holds between ``t0`` and ``t1`` (epoch seconds),
        read-only (:mod:`cockpit.engine.telemetry_history`): what the faces show of the time
        before they opened. Safe beside the tick (its own read-only connection)."""
        return read_recorded(CampaignFiles.of(self.campaign).recorder, t0, t1, gpu=gpu,
                             host=host, raw=raw, width=width, gpus=gpus)

    def holding(self) -> bool:
        """Whether time-based actions wait for the clock to settle after a jump."""
        return self.time.holding()

    def until_done(self, state: CampaignState) -> ExitVerdict:
        """What ``headless --until-done`` does now (:func:`guards.until_done`); 5 once
        the landing is done (its runs stopped before the window's end)."""
        if self.landing.landed:
            return ExitVerdict(5, "landed before the window's end: " + (
                self.landing.timeline() or ("",))[-1])
        return guards.until_done(self.campaign, state, auto=self.auto_now(),
                                 judging=bool(self.verification.judging),
                                 held=self.held_back, machine=self.machine,
                                 export=self.evidence.export_state(state))

    def check_acceptance(self, run_id: str) -> tuple[bool, list[str]]:
        """(passes, reasons): the run's acceptance checks evaluated now."""
        self.open()
        return self.recorder.check_acceptance(run_id)

    # ------------------------------------------------------------------ actions
    def _acting(self) -> None:
        """Every action's first step: a face that may not write (``writes_refused``)
        refuses here, whatever key or command asked."""
        if self.writes_refused is not None:
            raise ActionRefused(self.writes_refused)
        self.open()

    def start(self, stage_id: str, *, force: bool = False, now: datetime | None = None,
              auto: bool = False) -> list[Event]:
        self._acting()
        return self.actions.start(stage_id, force=force, now=now, auto=auto)

    def stop(self, target: str, reason: str, now: datetime | None = None,
             rule: str = "manual") -> Event:
        self._acting()
        return self.actions.stop(target, reason, now=now, rule=rule)

    def mark(self, stage_id: str, what: str, note: str | None = None,
             now: datetime | None = None) -> list[Event]:
        self._acting()
        return self.actions.mark(stage_id, what, note, now=now)

    def decide(self, outcome: str, *, stage: str | None = None, drops: Iterable[str] = (),
               note: str, now: datetime | None = None) -> list[Event]:
        self._acting()
        return self.actions.decide(outcome, stage=stage, drops=drops, note=note, now=now)

    def accept(self, run_id: str, note: str | None = None, now: datetime | None = None,
               *, override: bool = False) -> Event | None:
        self._acting()
        return self.actions.accept(run_id, note, now=now, override=override)

    def reject(self, run_id: str, note: str, now: datetime | None = None
               ) -> Event | None:
        self._acting()
        return self.actions.reject(run_id, note, now=now)

    def note(self, stage_id: str, text: str, now: datetime | None = None) -> Event:
        self._acting()
        return self.actions.note(stage_id, text, now=now)

    def cost(self, label: str, amount: str, currency: str = "USD",
             now: datetime | None = None) -> Event:
        self._acting()
        return self.actions.cost(label, amount, currency, now=now)

    def verify(self, run_id: str, which: str = "newest",
               now: datetime | None = None) -> Event:
        self._acting()
        return self.evidence.verify(run_id, which, now=now)

    def verify_resume(self, run_id: str, which: str = "first",
                      now: datetime | None = None) -> Event:
        self._acting()
        return self.evidence.verify_resume(run_id, which, now=now)

    def export(self, now: datetime | None = None) -> Event:
        self._acting()
        if self.flight is not None:
            self.flight.flush(5.0)  # the minutes closed so far, into the export's minutes.csv
        return self.evidence.export(now=now)

    def wait_stopped(self, run_id: str, timeout: float, poll: float = 0.1) -> bool:
        """Drive a stop to its end (grace, SIGKILL, journal) from a one-shot command."""
        self.open()
        deadline = self.clock.monotonic() + timeout
        while self.clock.monotonic() < deadline:
            now = self.clock.now()
            self.exits.record(self.past.state(), now)
            state = self.past.state()
            self.launcher.carry_out(guards.stops_to_escalate(
                state, self.observer.stop_ages(state, now),
                self.campaign.settings.stop_grace_s), now)
            run = self.past.state().runs.get(run_id)
            if run is None or run.state != RUNNING:
                return True
            self.clock.sleep(poll)
        return False

    def close(self, *, keep_lease: bool = False) -> None:
        """Stop watching; the lease is given back last (after the recording and the
        state cache are written), unless ``keep_lease`` hands it to a new engine."""
        self.alerting.close()
        if self.flight is not None:
            self.flight.close()
        self.observer.close()
        self.past.close(save=self.conducting)
        if self.lease is not None and not keep_lease:
            self.lease.release()
        if self.auto_request is not None:
            self.auto_request.release()  # a reopened engine takes its own


def machine_from_env() -> int:
    """COCKPIT_MACHINE (a number from 1), or 1."""
    raw = os.environ.get("COCKPIT_MACHINE", "").strip()
    if not raw:
        return 1
    if not raw.isdigit() or int(raw) < 1:
        raise InputError(f"COCKPIT_MACHINE={raw!r}: a machine is a number from 1")
    return int(raw)


def default_samplers(campaign: Campaign, simulate: int) -> tuple[GpuSampler, HostSampler]:
    """The real GPU sampler (NVML, or ``simulate`` simulated GPUs) and the host's."""
    from cockpit.telemetry.nvml.adapter import GpuSampler as _Gpu

    paths = [campaign.folder]
    for run in campaign.runs.values():
        if run.checkpoints is not None:
            paths.append(campaign.resolve(run.checkpoints))
    return (_Gpu(simulate=simulate),
            HostSampler([Path(p) for p in paths], campaign.settings.disk_warn_bytes))
