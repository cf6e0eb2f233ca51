"""The engine's shared core: its edges and fields, the folded state, the common lookups.

:class:`EngineCore` holds what every part of the engine reads: the campaign, the
injected edges (clock, journal, supervisor, samplers), the folded state (refolded
only when the journal grew), the events first seen in this tick, and the small
helpers all parts use (a stage by id, the run of a target, readiness, journaling an
event once). The parts themselves live beside it: ``observe``, ``guards``,
``actions`` and the pure ``build``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from cockpit.campaign.model import Campaign, Stage
from cockpit.common.errors import ActionRefused, InputError
from cockpit.common.printable import printable
from cockpit.engine.affordances import machine_refusal
from cockpit.engine.clockwatch import ClockJump, ClockWatch
from cockpit.engine.hooks import HookRunner
from cockpit.engine.ports import (
    Clock,
    EventJournal,
    GpuSource,
    HostSource,
    ProcessSupervisor,
    Supervisor,
    as_clock,
)
from cockpit.engine.readiness import resource_holder, stage_status, unmet_after
from cockpit.engine.snapshot import EventLine, MachineView
from cockpit.fleet.peers import PeerSet
from cockpit.journal.events import describe_event
from cockpit.journal.fold import CampaignState, fold
from cockpit.journal.log import Journal, parse_time
from cockpit.journal.merge import merge_events
from cockpit.journal.read import history_of
from cockpit.planning.deadline import export_size
from cockpit.runs.checkpoints.discovery import CheckpointScan, CheckpointScanner
from cockpit.runs.checkpoints.verifier import BackgroundVerifier
from cockpit.runs.metrics.stream import MetricStream
from cockpit.runs.rules import rules_hash
from cockpit.runs.supervisor import alive as process_alive
from cockpit.telemetry import GpuReading, HostInfo, IdleDetector

RECENT_EVENTS = 50
# How long a launch claim may wait for its process before it counts as failed to launch
# (the process shows up in milliseconds; the margin is for a machine under load).
CLAIM_GRACE_S = 10.0


def own_identity() -> tuple[int, float]:
    """This process as a claim's owner: its pid and its start time (a reused pid differs)."""
    import psutil

    try:
        return os.getpid(), psutil.Process().create_time()
    except psutil.Error:  # pragma: no cover - the own process is always readable
        return os.getpid(), 0.0


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


def parse_t(event: Mapping[str, Any]) -> datetime:
    return parse_time(str(event.get("t")))


class EngineCore:
    def __init__(
        self,
        campaign: Campaign,
        *,
        gpu_sampler: GpuSource | None = None,
        host_sampler: HostSource | None = None,
        auto: bool = False,
        read_only: bool = False,
        clock: Clock | Callable[[], datetime] | None = None,
        actor: str = "cockpit",
        journal: EventJournal | None = None,
        supervisor: Supervisor | None = None,
        machine: int | None = 1,
        peers: PeerSet | None = None,
    ) -> None:
        self.campaign = campaign
        # Which machine this cockpit is (D12): it launches, stops and supervises only the
        # stages of this machine. None: `cockpit fleet`, every machine is a peer.
        self.machine = machine
        self.peers = peers
        self._peer_seen: dict[int, int] = {}
        self.journal: EventJournal = (journal if journal is not None
                                      else Journal(campaign.state_dir / "journal.jsonl"))
        self.supervisor: Supervisor = supervisor if supervisor is not None \
            else ProcessSupervisor()
        self.gpu_sampler = gpu_sampler
        self.host_sampler = host_sampler
        self.auto = auto
        self.read_only = read_only
        self.clock: Clock = as_clock(clock)
        self.actor = actor
        self.claim_grace_s = CLAIM_GRACE_S
        # Time that cannot jump: the wall clock anchored to the monotonic one each tick
        # (clockwatch). Only a clock that pairs the two can be watched; a bare
        # ``() -> datetime`` (tests, older callers) is its own monotonic clock.
        self._paired = getattr(self.clock, "wall_is_paired", True)
        self._watch = ClockWatch()
        self.owner = own_identity()
        # The monotonic time of each own journal event: when it was written, for the events
        # that appeared while this engine watched; for older ones, their wall age when first
        # read. Ages, graces and windows are measured on it, never on the wall clock.
        self._mono_at: dict[int, float] = {}
        self._streams: dict[str, MetricStream] = {}
        self._stream_attempt: dict[str, Any] = {}
        # run -> (attempt, last step seen, monotonic time it was first seen): stalled rules.
        self._step_seen: dict[str, tuple[Any, int | None, float]] = {}
        self._state: CampaignState | None = None
        self._history: list[Mapping[str, Any]] = []
        # The real size of the newest export written (D19: retrieval at the transfer rate).
        self._export_bytes: int | None = None
        self._state_seq = -1
        self._events_seen = 0
        self._recent: deque[EventLine] = deque(maxlen=RECENT_EVENTS)
        self._gpu: GpuReading = GpuReading("unavailable", "not sampled", (), (), (), None)
        self._host: HostInfo | None = None
        self._telemetry_warnings: tuple[str, ...] = ()
        # Journal events first seen since the last snapshot was built (they go into it).
        self._fresh: list[EventLine] = []
        self._decided_for: str | None = None  # the plan hash _decided_cache belongs to
        self._decided_cache: dict[str, float] = {}
        self._hook_runner = HookRunner(campaign.folder)
        self._keys: set[str] = set()  # "key" fields of journaled once-only events
        self._scanners: dict[str, CheckpointScanner | None] = {}
        self._ckpt_views: dict[str, CheckpointScan] = {}
        self._verifier = BackgroundVerifier()
        self._judging: set[tuple[str, int | None]] = set()  # acceptance in the background
        self._rules_hash = rules_hash(campaign.stop_rules)  # the plan is frozen: once
        settings = campaign.settings
        self._idle: dict[int, IdleDetector] = {}
        self._idle_args = (settings.idle_util_pct, settings.idle_grace_s)
        # Events up to here are history: a face announces only what happens after.
        self._peers_opened = False
        self._opened_seq = max((int(ev.get("seq", 0)) for ev in self.journal.events()),
                               default=0)
        if gpu_sampler is not None:
            gpu_sampler.start()

    # ------------------------------------------------------------------ reading
    def state(self, now: datetime | None = None) -> CampaignState:
        """The folded state; refolded only when the journal (or a peer's copy) grew."""
        events = self.journal.events()
        last = events[-1]["seq"] if events else 0
        peers = self._peer_events()
        grown = any(len(p) != self._peer_seen.get(i, 0) for i, p in enumerate(peers))
        if self._state is None or last != self._state_seq or len(events) != self._events_seen \
                or grown:
            self._state, self._history = history_of(self.campaign, events, peers,
                                                    self.machine, now or self.clock.now())
            # A peer's event that was not folded is shown as such, once, with the reason.
            refused = {id(d.event): d.reason for d in self._state.not_folded}
            fresh = [ev for i, p in enumerate(peers) for ev in p[self._peer_seen.get(i, 0):]]
            self._peer_seen = {i: len(p) for i, p in enumerate(peers)}
            for ev in fresh:
                seq = int(ev.get("seq", 0))
                machine = printable(ev.get("machine"), 40)
                text = f"[machine {machine}] {describe_event(ev)}"
                if id(ev) in refused:
                    text = (f"[machine {machine}] NOT FOLDED, event #{seq} "
                            f"({printable(refused[id(ev)])}): {describe_event(ev)}")
                line = EventLine(seq, parse_t(ev), ev["kind"], text,
                                 fields=MappingProxyType(dict(ev)),
                                 earlier=self._peers_opened is False)
                self._recent.append(line)
                self._fresh.append(line)
            self._peers_opened = True
            mono, steady = self._mono(), now or self._steady_now()
            for ev in events[self._events_seen:]:
                if "key" in ev:
                    self._keys.add(str(ev["key"]))
                if (size := export_size(ev)) is not None:
                    self._export_bytes = size
                seq = int(ev.get("seq", 0))
                self._mono_at.setdefault(seq, mono if seq > self._opened_seq else
                                         mono - max(0.0, (steady - parse_t(ev)).total_seconds()))
                line = EventLine(seq, parse_t(ev), ev["kind"], describe_event(ev),
                                 fields=MappingProxyType(dict(ev)),
                                 earlier=seq <= self._opened_seq)
                self._recent.append(line)
                self._fresh.append(line)
            self._events_seen = len(events)
            self._state_seq = last
        return self._state

    # ------------------------------------------------------------------ time
    def _mono(self) -> float:
        """Monotonic seconds (a wall-only clock: its own wall time, which is all it has)."""
        return self.clock.monotonic() if self._paired else self.clock.now().timestamp()

    def _steady_now(self) -> datetime:
        """The time to act on: the wall clock, or the steady time while a jump holds."""
        wall = self.clock.now()
        return self._watch.now(wall, self._mono()) if self._paired else wall

    def _read_clock(self) -> tuple[datetime, ClockJump | None]:
        """One tick's reading: the time to act on, and a clock jump seen since the last."""
        wall = self.clock.now()
        if not self._paired:
            return wall, None
        mono = self.clock.monotonic()
        jump = self._watch.observe(wall, mono)
        return self._watch.now(wall, mono), jump

    def holding(self) -> bool:
        """Whether time-based actions wait for the clock to settle after a jump."""
        return self._paired and self._watch.holding(self.clock.monotonic())

    def _age_s(self, seq: Any, t: datetime | None, now: datetime) -> float:
        """Seconds since an own journal event, on the monotonic clock (the wall clock's
        ``now - t`` only for an event this engine has not read yet)."""
        at = self._mono_at.get(seq) if isinstance(seq, int) else None
        if at is not None:
            return self._mono() - at
        return (now - t).total_seconds() if t is not None else 0.0

    def _live(self, seq: Any) -> bool:
        """Whether an own event appeared while this engine watched (its time is monotonic)."""
        return isinstance(seq, int) and seq > self._opened_seq and seq in self._mono_at

    def _owner_alive(self, event: Mapping[str, Any], ours: bool = False) -> bool:
        """Whether the process that wrote a claim still lives (pid and start time). A claim
        of this very process counts as ``ours`` (what this engine still does, it knows
        without the journal)."""
        pid, start = event.get("owner_pid"), event.get("owner_start")
        if not isinstance(pid, int) or isinstance(pid, bool):
            return True  # an older claim without an owner: only its time limit ends it
        if (pid, start) == self.owner:
            return ours
        return process_alive(pid, float(start) if isinstance(start, (int, float)) else None)
    def history(self, now: datetime | None = None) -> list[Mapping[str, Any]]:
        """The events the state was folded from: this machine's and its peers', merged
        and filtered (what ``budget``, ``export`` and ``next`` read)."""
        self.state(now)
        return self._history

    def close(self) -> None:
        if self.gpu_sampler is not None:
            self.gpu_sampler.close()
        if self.peers is not None:
            self.peers.close()

    # ------------------------------------------------------------------ machines (D12)
    def _machine_views(self, now: datetime) -> tuple[MachineView, ...]:
        if self.peers is None:
            return ()
        wall = time.time()
        out = []
        for v in self.peers.views():
            status = v.status or {}
            gpus = status.get("gpus")
            out.append(MachineView(
                v.machine, v.ssh, v.reachable, v.age_s(wall), v.error, v.held_bytes,
                tuple(g for g in gpus if isinstance(g, dict)) if isinstance(gpus, list) else (),
                str(status["t"]) if "t" in status else None, v.notices))
        return tuple(out)

    def _peer_events(self) -> list[list[dict[str, Any]]]:
        return self.peers.events() if self.peers is not None else []

    def _merge(self, own: list[dict[str, Any]],
               peers: list[list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
        """The own journal's events with the peers' (tagged ``machine``), one history."""
        if peers is None:
            peers = self._peer_events()
        if not peers:
            return own
        return merge_events(own, peers, self.machine or 0)

    def _fold(self, own: list[dict[str, Any]], now: datetime) -> CampaignState:
        """``fold`` over the own events (read under the lock) and the peers' copies."""
        return fold(self.campaign, self._merge(own), now, self.machine)

    def _mine(self, stage_id: str | None) -> bool:
        """Whether a stage (by id) is this machine's to launch, stop and supervise."""
        if stage_id is None:
            return False
        try:
            return self.campaign.stage(stage_id).machine == self.machine
        except KeyError:
            return False

    def _mine_run(self, run_id: str) -> bool:
        stage = self.campaign.stage_of_run(run_id)
        return stage is not None and stage.machine == self.machine

    def _refuse_other_machine(self, stage: Stage, what: str) -> None:
        if refusal := machine_refusal(stage, self.machine, what):
            raise ActionRefused(refusal)

    # ------------------------------------------------------------------ lookups
    def stage_status(self, state: CampaignState, stage: Stage) -> str:
        """pending stages refined: ready / needs-person / waiting / blocked."""
        return stage_status(self.campaign, state, stage)

    def unmet_after(self, state: CampaignState, stage: Stage) -> list[str]:
        """The stages in ``stage.after`` that have not ended (in plan order)."""
        return unmet_after(self.campaign, state, stage)

    def _resource_holder(self, state: CampaignState, stage: Stage) -> tuple[str, str] | None:
        return resource_holder(self.campaign, state, stage)

    def _stage(self, stage_id: str) -> Stage:
        try:
            return self.campaign.stage(stage_id)
        except KeyError:
            known = ", ".join(s.id for s in self.campaign.stages)
            raise InputError(f"{self.campaign.path}: no stage {stage_id!r} (stages: {known})") \
                from None

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

    def _journal_once(self, kind: str, key: str, now: datetime, **fields: Any) -> None:
        if key in self._keys:
            return  # cheap check first: no lock taken on every tick
        with self.journal.transaction() as txn:
            if any(ev.get("key") == key for ev in txn.events):
                return
            txn.append(kind, now=now, key=key, **fields)
