"""The engine: ``tick(now) -> Snapshot`` and the actions, for both faces.

Reads the journal (folded into state), metric streams, process states and
telemetry; evaluates stop rules; in auto mode starts what is ready; and returns an
immutable Snapshot. Every action ends as journal events, claimed under the
journal lock so two cockpits on one campaign never act twice. A read-only engine
(``cockpit status``) computes the same snapshot and never writes or signals.

Where each behaviour lives:

- ``core``      the engine's fields and edges, the folded state, shared lookups
- ``ports``     the edges as Protocols (clock, journal, supervisor, samplers) + real ones
- ``clockwatch`` wall time anchored to monotonic time: clock jumps, the settle hold
- ``observe``   exits, metric streams, checkpoint scans and verification, telemetry
- ``guards``    stop rules, the SIGTERM/grace/SIGKILL sequence, auto-start, deadline, hooks
- ``actions``   start, mark, stop, decide, accept, note, cost, verify, export
- ``build``     the pure ``build_snapshot``
- ``readiness`` ready / waiting / blocked / needs-person (pure)
- ``events``    the catalogue of journal event kinds, ``describe_event`` and the
                ownership table (which machine may write each kind)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from cockpit.campaign.model import Campaign
from cockpit.common.errors import ActionRefused, InputError
from cockpit.engine.build import Observations, build_snapshot
from cockpit.engine.clockwatch import ClockJump
from cockpit.engine.core import ExitVerdict, params_hash
from cockpit.engine.guards import Guarding
from cockpit.engine.ports import Clock, SystemClock, utc_now
from cockpit.engine.snapshot import Snapshot
from cockpit.journal.events import EVENT_KINDS, describe_event
from cockpit.journal.log import format_time
from cockpit.telemetry import GpuSampler, HostSampler


class Engine(Guarding):
    """The facade the faces and the CLI use: ``tick`` plus the actions."""

    @classmethod
    def open(cls, path: str | Path, *, auto: bool = False, actor: str = "cockpit",
             simulate_gpus: int | None = None, read_only: bool = False,
             telemetry: bool = True, clock: Clock | Callable[[], datetime] | None = None,
             machine: int | None = None, fleet: bool = False, pull: str = "once",
             ) -> Engine:
        """Load the campaign file, start the default samplers, and make the engine.

        ``simulate_gpus`` is the ``--simulate-gpus`` value (None: COCKPIT_SIMULATE_GPUS
        or real NVML). ``telemetry=False`` samples nothing (a one-shot action needs no
        NVML start-up). ``machine`` is this cockpit's machine (None: COCKPIT_MACHINE, or
        1); ``fleet`` makes the read-only engine of `cockpit fleet` (every machine a peer,
        no journal of its own). With ``machines:`` in the campaign the other machines'
        journals are pulled: ``pull="background"`` in a thread (the faces), ``"once"``
        now, within a time limit (one-shot commands), ``"cache"`` not at all."""
        from cockpit.campaign import load_campaign
        from cockpit.fleet.peers import PeerSet
        from cockpit.journal.log import NullJournal
        from cockpit.telemetry import simulate_count_from_env

        campaign = load_campaign(path)
        own: int | None = None if fleet else (machine or machine_from_env())
        peers: PeerSet | None = None
        if campaign.machines and (fleet or set(campaign.machines) - {own}):
            peers = PeerSet(campaign, own)
            if pull == "background":
                peers.start()
            elif pull == "once":
                peers.pull_now()
        gpu: GpuSampler | None = None
        host: HostSampler | None = None
        if telemetry and not fleet:
            gpu, host = default_samplers(campaign, simulate_count_from_env(simulate_gpus))
        klass = cls
        if fleet:
            from cockpit.fleet.remote import FleetEngine

            klass = FleetEngine
        return klass(campaign, gpu_sampler=gpu, host_sampler=host, auto=auto and not fleet,
                   read_only=read_only or fleet, clock=clock, actor=actor, machine=own,
                   peers=peers, journal=NullJournal() if fleet else None)

    def tick(self, now: datetime | None = None) -> Snapshot:
        jump = None
        if now is None:
            now, jump = self._read_clock()  # the steady time while a clock jump holds
        state = self.state(now)
        if not self.read_only:
            if jump is not None:
                self._record_clock_jump(jump, now)
            self._record_plan_change(state, now)
            # Rules before exits: a run's last lines (a truncation count, a final NaN) are
            # judged while it still counts as running, even if it has just exited.
            self._reconcile_claims(state, now)  # launches whose record never landed
            state = self.state(now)
            self._apply_rules(state, now)
            self._record_exits(self.state(now), now)
            self._journal_blind(self.state(now), now)
            self._judge_runs(now)  # acceptance when a run ends (reloads in the background)
            self._auto_verify(self.state(now), now)
            self._advance_stops(self.state(now), now)
            if self.auto and not self.holding():
                self._auto_start(self.state(now), now)
            if not self.holding():  # a clock that just jumped decides nothing on the window
                self._deadline_guard(self.state(now), now)
            self._run_hooks(now)
            state = self.state(now)
        else:
            self._poll_streams(state, now)
        self._sample_telemetry(now)
        obs = Observations(
            streams=self._streams, checkpoints=self._ckpt_views, gpu=self._gpu,
            host=self._host, telemetry_warnings=self._telemetry_warnings + self._hold_warning(),
            gpu_memory=self._gpu_memory_by_run(state),
            journal_problems=tuple(self.journal.problems()), events=tuple(self._recent),
            rules_hash=self._rules_hash, auto=self.auto, new_events=tuple(self._fresh),
            decided_planned_s=self._decided_planned_s(state), machine=self.machine,
            machines=self._machine_views(now), export_bytes=self._export_bytes)
        self._fresh = []
        return build_snapshot(self.campaign, state, obs, now)


    def _record_clock_jump(self, jump: ClockJump, now: datetime) -> None:
        """Journal a wall-clock step once (from, to); the actions on time hold meanwhile.
        Two cockpits of one journal see the same step: its size and minute key it once."""
        key = f"clock_jump:{round(jump.seconds)}:{jump.actual.strftime('%Y%m%dT%H%M')}"
        self._journal_once("clock_jump", key, now, seconds=round(jump.seconds, 3),
                           settle_s=self._watch.settle_s, actor=self.actor,
                           **{"from": format_time(jump.expected), "to": format_time(jump.actual)})

    def _hold_warning(self) -> tuple[str, ...]:
        if not self.holding():
            return ()
        left = self._watch.hold_left(self.clock.monotonic())
        return (f"the wall clock jumped: rules on ages, the deadline guard and auto-start "
                f"wait until it has been steady for {left:.0f} s more",)


def machine_from_env() -> int:
    """COCKPIT_MACHINE (a number from 1), or 1."""
    raw = os.environ.get("COCKPIT_MACHINE", "").strip()
    if not raw:
        return 1
    if not raw.isdigit() or int(raw) < 1:
        raise InputError(f"COCKPIT_MACHINE={raw!r}: a machine is a number from 1")
    return int(raw)


def default_samplers(campaign: Campaign, simulate: int) -> tuple[GpuSampler, HostSampler]:
    from cockpit.telemetry.nvml.adapter import GpuSampler as _Gpu

    paths = [campaign.folder]
    for run in campaign.runs.values():
        if run.checkpoints is not None:
            paths.append(campaign.resolve(run.checkpoints))
    return (_Gpu(simulate=simulate),
            HostSampler([Path(p) for p in paths], campaign.settings.disk_warn_bytes))


__all__ = ["EVENT_KINDS", "ActionRefused", "Clock", "Engine", "ExitVerdict", "InputError",
           "SystemClock", "default_samplers", "describe_event", "params_hash", "utc_now"]
