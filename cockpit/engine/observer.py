"""The observer: what the tick reads of the world. It is the only part that polls.

Each step it polls the metric streams of this machine's runs (the new points of the
current attempt; checkpoint reports fed to their scanners), scans checkpoint folders,
and tells the guards what it saw of each run (:class:`~cockpit.engine.guards.RunSeen`:
the new points, ages and silences on the monotonic clock). Once per tick it samples
telemetry (GPUs, host): a lost GPU or an Xid is journaled once, and so are a GPU's
clocks held down and a disk running low when each begins; idle GPUs while a GPU stage
runs are a warning; each sample feeds the ``underfed`` rules' streaks
(:mod:`cockpit.engine.underfed`). What it holds (streams, checkpoint scans, readings)
goes into the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.common.event_kinds import WARNING
from cockpit.common.units import format_bytes
from cockpit.engine.guards import RunSeen
from cockpit.engine.ports import GpuSource, HostSource, Supervisor, ancestor_run
from cockpit.engine.scope import Scope
from cockpit.engine.timebase import Timebase, parse_t
from cockpit.engine.underfed import UnderfedWatch
from cockpit.journal.fold import NOT_STARTED, RUNNING, CampaignState, RunState
from cockpit.journal.paths import CampaignFiles
from cockpit.runs.attempts import attempt_start
from cockpit.runs.checkpoints.discovery import CheckpointScan, CheckpointScanner
from cockpit.runs.checkpoints.verifier import feed_checkpoint_reports, run_stream, scanner_for
from cockpit.runs.metrics import stream_cache
from cockpit.runs.metrics.stream import MetricPoint, MetricStream
from cockpit.runs.rules import step_interval
from cockpit.runs.supervisor import stage_gpus
from cockpit.telemetry import GpuReading, HostInfo, IdleDetector
from cockpit.telemetry.nvml.vocabulary import ALARMING_THROTTLE

# A once-only journal writer: (kind, key, now, **fields) -> written.
JournalOnce = Callable[..., bool]
THROTTLE_EVENT = "gpu_throttle"  # a GPU's clocks held down (thermal, power brake): journaled

# A stream cache is written when a stream moved and this much engine time passed since
# its last write, or when it moved by more than this many bytes; and at close.
CACHE_EVERY_S = 30.0
CACHE_EVERY_BYTES = 1024 * 1024


class Observer:
    """Metric streams, checkpoint scans, telemetry (see the module text)."""

    def __init__(self, scope: Scope, timebase: Timebase, supervisor: Supervisor, *,
                 gpu: GpuSource | None = None, host: HostSource | None = None) -> None:
        self.scope = scope
        self.campaign: Campaign = scope.campaign
        self.time = timebase
        self.supervisor = supervisor
        self.gpu_sampler = gpu
        self.host_sampler = host
        self.streams: dict[str, MetricStream] = {}
        self._stream_attempt: dict[str, Any] = {}
        # Stream caches: read by every engine; written only by one that observes (the
        # tick that acts), never by a read-only one (it only calls `poll`).
        self._cache_dir = CampaignFiles.of(self.campaign).stream_cache
        self._writing = False
        self._cached: dict[str, tuple[float, int]] = {}  # run -> (mono, bytes) at last write
        self.stream_starts: dict[str, str] = {}  # run -> "cache", "tail" or "start"
        # run -> (attempt, last step seen, monotonic time it was first seen): stalled rules.
        self._step_seen: dict[str, tuple[Any, int | None, float]] = {}
        self._scanners: dict[str, CheckpointScanner | None] = {}
        self.checkpoints: dict[str, CheckpointScan] = {}
        self.gpu: GpuReading = GpuReading("unavailable", "not sampled", (), (), (), None)
        self.host: HostInfo | None = None
        self.warnings: tuple[str, ...] = ()
        settings = self.campaign.settings
        self._idle: dict[int, IdleDetector] = {}
        self._idle_args = (settings.idle_util_pct, settings.idle_grace_s)
        self._held: set[str] = set()  # GPUs held down and disks low at the last sample
        self.underfed = UnderfedWatch(scope, timebase,
                                      CampaignFiles.of(self.campaign).recorder)

    def start(self) -> None:
        """Start sampling the GPUs (NVML init; a background sampler thread)."""
        if self.gpu_sampler is not None:
            self.gpu_sampler.start()

    def close(self) -> None:
        if self.gpu_sampler is not None:
            self.gpu_sampler.close()
        if self._writing:
            self.save_streams(force=True)

    # ------------------------------------------------------------------ metrics
    def _stream(self, run_id: str, attempt: Any, started: float | None,
                since: float | None = None) -> MetricStream:
        if run_id not in self.streams or self._stream_attempt.get(run_id) != attempt:
            # ``since``: the attempt's start; what an earlier one wrote is not read
            stream = run_stream(self.campaign, run_id, since)
            # From its cache when it is valid (a restart reads only what is new); else a
            # read-only engine starts large files at their tail, and one that acts reads
            # them from the start (what the rules need) over several polls, its snapshot
            # seeded from the tail at once.
            self.stream_starts[run_id] = stream_cache.open_stream(
                stream, stream_cache.cache_file(self._cache_dir, run_id),
                one_shot=not self._writing, since=started)
            self.streams[run_id] = stream
            self._stream_attempt[run_id] = attempt
            self._cached[run_id] = (self.time.mono(), _position(stream))
        return self.streams[run_id]

    def poll(self, state: CampaignState, now: datetime) -> dict[str, list[MetricPoint]]:
        """New metric points per run of the current attempt (older attempts' skipped),
        for this machine's runs; then the checkpoint folders are scanned."""
        fresh: dict[str, list[MetricPoint]] = {}
        for run in state.runs.values():
            if run.state == NOT_STARTED or not self.scope.mine_run(run.id):
                continue  # another machine's run: its files are there, its cockpit reads them
            started = run.started_at.timestamp() - 1.0 if run.started_at else None
            stream = self._stream(run.id, run.attempt, started, attempt_start(run))
            fresh[run.id] = [p for p in stream.poll()
                             if started is None or p.t is None or p.t >= started]
            scanner = self.scanner(run.id)
            events = stream.poll_events()
            if scanner is not None:
                feed_checkpoint_reports(self.campaign, scanner, events)
        self._scan_checkpoints(state, now)
        if self._writing:
            self.save_streams()
        return fresh

    def save_streams(self, force: bool = False) -> None:
        """Write the cache of each stream that moved, when enough engine time passed or
        it moved far enough (``force``: whenever it moved)."""
        mono = self.time.mono()
        for run_id, stream in self.streams.items():
            at, saved = self._cached.get(run_id, (mono, 0))
            moved = _position(stream) - saved
            if moved and (force or moved > CACHE_EVERY_BYTES or mono - at >= CACHE_EVERY_S):
                stream_cache.save(stream, stream_cache.cache_file(self._cache_dir, run_id))
                self._cached[run_id] = (mono, _position(stream))

    def observe(self, state: CampaignState, now: datetime,
                verifying: Callable[[RunState], bool]) -> dict[str, RunSeen]:
        """Poll, then what the guards need of each of this machine's started runs."""
        self._writing = True  # the acting engine's tick: it keeps the stream caches
        fresh = self.poll(state, now)
        return {run_id: self.seen(state.runs[run_id], points, now, verifying)
                for run_id, points in fresh.items()}

    def seen(self, run: RunState, points: list[MetricPoint], now: datetime,
             verifying: Callable[[RunState], bool]) -> RunSeen:
        stream = self.streams[run.id]
        mono = self.time.mono()
        if run.state == RUNNING:
            last = self._step_seen.get(run.id)
            if last is None or last[:2] != (run.attempt, stream.latest_step):
                self._step_seen[run.id] = (run.attempt, stream.latest_step, mono)
        step_at = self._step_seen.get(run.id, (None, None, mono))[2]
        since = run.started_at.timestamp() - 1.0 if run.started_at else None
        restart_rule = any(r.kind == "restart" and r.applies_to(run.id)
                           for r in self.campaign.stop_rules)
        return RunSeen(
            points=tuple(points), stream=stream,
            age_s=self.time.age_s(run.attempt, run.started_at, now),
            since_restart_s=self._since_restart(run, now), silent_s=mono - step_at,
            interval_s=step_interval(stream.recent, since),
            verifying=restart_rule and run.state == RUNNING and verifying(run),
            underfed=self.underfed.looks().get(run.id, {}))

    def stop_ages(self, state: CampaignState, now: datetime) -> dict[str, float]:
        """Seconds since each stop request of this machine's runs (monotonic)."""
        return {run.id: self.time.age_s(run.stop.seq, run.stop.at, now)
                for run in state.runs.values()
                if run.stop is not None and run.stop.at is not None
                and self.scope.mine_run(run.id)}

    def _since_restart(self, run: RunState, now: datetime) -> float | None:
        """Seconds since the run last had a usable restart (its start or a passing
        verification), on the monotonic clock."""
        if run.started_at is None:
            return None
        ages = [self.time.age_s(run.attempt, run.started_at, now)]
        newest = next((v for v in reversed(run.verified)  # the newest is the youngest
                       if v.get("ok") and v.get("attempt") in (None, run.attempt)), None)
        if newest is not None:
            ages.append(self.time.age_s(newest.get("seq"), parse_t(newest), now))
        return min(ages)

    # ------------------------------------------------------------------ checkpoints
    def scanner(self, run_id: str) -> CheckpointScanner | None:
        if run_id not in self._scanners:
            run = self.campaign.runs.get(run_id)
            self._scanners[run_id] = scanner_for(self.campaign, run) if run else None
        return self._scanners[run_id]

    def _scan_checkpoints(self, state: CampaignState, now: datetime) -> None:
        now_ts = now.timestamp()  # file ages and the settle time, on the engine's clock
        for run in state.runs.values():
            scanner = self.scanner(run.id)
            if scanner is not None and run.state != NOT_STARTED:
                scanner.since = attempt_start(run)  # an earlier attempt's do not count
                self.checkpoints[run.id] = scanner.scan(now_ts)

    def newest_sizes(self) -> dict[str, int | None]:
        """The newest checkpoint's size per run (what an export would carry)."""
        return {run_id: view.newest.size_bytes if view.newest else None
                for run_id, view in self.checkpoints.items()}

    # ------------------------------------------------------------------ telemetry
    def sample_telemetry(self, state: CampaignState, now: datetime,
                         journal_once: JournalOnce | None) -> None:
        """Read the GPUs and the host; ``journal_once`` (None: read-only) records a lost
        GPU once and each Xid / ECC increase as its own event."""
        warnings: list[str] = []
        if self.gpu_sampler is not None:
            self.gpu = self.gpu_sampler.sample()
            warnings.extend(self._idle_warnings(state))
            for event in self.gpu.events:
                if journal_once is None:
                    break  # read-only: nothing journaled
                key = f"gpu:{event.kind}:{event.gpu}" + (
                    "" if event.kind == "gpu_lost" else f":{event.code}:{event.at}")
                journal_once(WARNING, key, now, message=event.message, source="gpu",
                             gpu=event.gpu, event=event.kind)
        # Without a GPU sampler the reading stays "not sampled": underfed rules are blind.
        self.underfed.update(state, self.gpu, now)
        if self.host_sampler is not None:
            self.host = self.host_sampler.sample()
            warnings.extend(self.host.warnings)
        self.warnings = tuple(warnings)
        if journal_once is not None:
            self._journal_held(now, journal_once)

    def _journal_held(self, now: datetime, journal_once: JournalOnce) -> None:
        """A GPU's clocks held down (thermal, power brake) and a disk below
        ``disk_warn_gb``, journaled as a warning when each begins (at most hourly each):
        what an alert tells a person away from the screen."""
        held: dict[str, tuple[str, dict[str, Any]]] = {}
        for gpu in self.gpu.gpus:
            reasons = [r for r in gpu.throttle if r in ALARMING_THROTTLE]
            if reasons and not gpu.lost:
                held[f"gpu:{gpu.index}"] = (
                    f"GPU{gpu.index} clocks held down: {', '.join(reasons)}",
                    {"source": "gpu", "gpu": gpu.index, "event": THROTTLE_EVENT})
        for disk in self.host.disks if self.host is not None else ():
            if disk.low:
                held[f"disk:{disk.path}"] = (
                    f"low disk: {disk.path} has {format_bytes(disk.free)} free (warning under "
                    f"{format_bytes(self.campaign.settings.disk_warn_bytes)})",
                    {"source": "disk"})
        hour = now.strftime("%Y%m%d%H")
        for what, (message, fields) in held.items():
            if what in self._held:
                continue  # still held since the last sample: journaled when it began
            journal_once(WARNING, f"held:{what}:{hour}", now, message=message, **fields)
        self._held = set(held)

    def _idle_warnings(self, state: CampaignState) -> list[str]:
        """"GPU idle while a GPU stage runs": the most common waste on a rented box."""
        held: set[int] = set()
        for stage in self.campaign.stages:
            if stage.machine == self.scope.machine and state.stages[stage.id].state == RUNNING:
                held |= set(stage_gpus(stage, self.campaign.package.offer.gpus))
        out = []
        for gpu in self.gpu.gpus:
            detector = self._idle.setdefault(gpu.index, IdleDetector(*self._idle_args))
            # Idle for how long: on the monotonic clock (a wall step is not idle time).
            warning = detector.update(self.time.mono(), None if gpu.lost else gpu.util,
                                      gpu.index in held)
            if warning:
                out.append(f"GPU {gpu.index}: {warning}")
        return out

    def gpu_memory_by_run(self, state: CampaignState) -> Mapping[str, int]:
        """Where NVML shows a run's pid (or its children) on a GPU, its memory."""
        out: dict[str, int] = {}
        pids = {run.pid: run.id for run in state.runs.values()
                if run.state == RUNNING and run.pid and self.scope.mine_run(run.id)}
        if not pids:
            return out
        for gpu in self.gpu.gpus:
            for proc in gpu.processes:
                run_id = pids.get(proc.pid)
                if run_id is None and proc.visible:
                    run_id = ancestor_run(self.supervisor, proc.pid, pids)
                if run_id and proc.used_memory:
                    out[run_id] = out.get(run_id, 0) + proc.used_memory
        return out


def _position(stream: MetricStream) -> int:
    """Bytes read of all the stream's files (what a cache write is measured by)."""
    return sum(reader.position or 0 for reader in stream.readers)
