"""The engine's edges as small Protocols, and the real implementations it uses by default.

The engine reads time only through a :class:`Clock`, writes and reads the journal
through :class:`EventJournal`, touches processes only through :class:`Supervisor`,
reads the machine through the two samplers and the other machines' journals through
a :class:`PeerSource`. Tests hand it fakes of these
(a clock that moves when told, a supervisor that records the signals it was asked
to send) and drive the guards in milliseconds; the real ones below are the defaults.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol, runtime_checkable

import psutil

from cockpit.campaign.model import Campaign, Stage
from cockpit.journal.merge import Events
from cockpit.journal.writer import JournalView, JournalWriter
from cockpit.runs import supervisor as _supervisor
from cockpit.runs.supervisor import Launched, Marked
from cockpit.telemetry import GpuReading, HostInfo


# ---------------------------------------------------------------------- time
@runtime_checkable
class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC (journal stamps, file ages, the window)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back, paired with ``now`` (a step of the wall
        clock shows as the two moving apart): waits, graces, ages, the clock-jump watch."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait (a fake clock advances instead)."""
        ...


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return utc_now()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class CallableClock:
    """A bare ``() -> datetime`` (the engine's older ``clock=`` argument) as a Clock.

    Only wall time is given, so waits keep the real monotonic clock and sleep, and the
    engine cannot watch it for jumps (``wall_is_paired``): its ages are wall ages."""

    wall_is_paired = False

    def __init__(self, now: Callable[[], datetime]) -> None:
        self._now = now

    def now(self) -> datetime:
        return self._now()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def as_clock(clock: Clock | Callable[[], datetime] | None) -> Clock:
    if clock is None:
        return SystemClock()
    if isinstance(clock, Clock):
        return clock
    return CallableClock(clock)  # a bare () -> datetime


# ---------------------------------------------------------------------- the journal
# The journal's one writer interface (cockpit.journal.writer), under the engine's name.
EventJournal = JournalWriter


# ---------------------------------------------------------------------- processes
class Supervisor(Protocol):
    """Launching stages and signalling the process groups the journal recorded.

    Every launch carries a ``marker`` (``COCKPIT_LAUNCH`` in its environment) that finds
    it again without the journal and proves a group is ours once its leader is gone."""

    def launch(self, campaign: Campaign, stage: Stage, now: datetime,
               marker: str | None = None) -> Launched: ...

    def alive(self, pid: int | None, create_time: float | None) -> bool: ...

    def read_exit(self, exit_file: str | None) -> dict[str, Any] | None: ...

    def unproven(self, pid: int | None, pgid: int | None, create_time: float | None,
                 marker: str | None = None) -> str | None:
        """Why the group's identity is not proven, in words (None: proven, may be signalled)."""
        ...

    def signal_group(self, pid: int | None, pgid: int | None, create_time: float | None,
                     sig: signal.Signals, marker: str | None = None) -> bool: ...

    def group_alive(self, pgid: int | None, marker: str | None = None) -> bool: ...

    def kill_leftovers(self, pgid: int, pid: int | None, create_time: float | None,
                       marker: str | None = None) -> None:
        """SIGKILL a recorded group whose leader (the wrapper) is gone but members linger."""
        ...

    def find_marked(self, prefix: str) -> list[Marked]:
        """Live processes whose launch marker is ``prefix`` (or, for a prefix ending in
        ``:``, any claim of that stage), group leaders first."""
        ...

    def ancestors(self, pid: int) -> list[int]:
        """The pids of a process's parents (empty when it is gone)."""
        ...


class ProcessSupervisor:
    """The real supervisor: :mod:`cockpit.runs.supervisor` and the process table."""

    def launch(self, campaign: Campaign, stage: Stage, now: datetime,
               marker: str | None = None) -> Launched:
        return _supervisor.launch(campaign, stage, now, marker=marker)

    def alive(self, pid: int | None, create_time: float | None) -> bool:
        return _supervisor.alive(pid, create_time)

    def read_exit(self, exit_file: str | None) -> dict[str, Any] | None:
        return _supervisor.read_exit(exit_file)

    def unproven(self, pid: int | None, pgid: int | None, create_time: float | None,
                 marker: str | None = None) -> str | None:
        return _supervisor.unproven_group(pid, pgid, create_time, marker)

    def signal_group(self, pid: int | None, pgid: int | None, create_time: float | None,
                     sig: signal.Signals, marker: str | None = None) -> bool:
        return _supervisor.signal_group(pid, pgid, create_time, sig, marker)

    def group_alive(self, pgid: int | None, marker: str | None = None) -> bool:
        return _supervisor.group_alive(pgid, marker)

    def kill_leftovers(self, pgid: int, pid: int | None, create_time: float | None,
                       marker: str | None = None) -> None:
        if pid and _supervisor.alive(pid, create_time):
            return  # signal_group already handled it
        if marker is None or not _supervisor.group_members(pgid, marker):
            return  # nothing of ours is provably left in that group: never signal it
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def find_marked(self, prefix: str) -> list[Marked]:
        return _supervisor.find_marked(prefix)

    def ancestors(self, pid: int) -> list[int]:
        try:
            return [p.pid for p in psutil.Process(pid).parents()]
        except psutil.Error:
            return []


# ---------------------------------------------------------------------- telemetry
class GpuSource(Protocol):
    """What the engine uses of :class:`cockpit.telemetry.GpuSampler`."""

    def start(self) -> None: ...

    def sample(self) -> GpuReading: ...

    def close(self) -> None: ...


class HostSource(Protocol):
    """What the engine uses of :class:`cockpit.telemetry.HostSampler`."""

    def sample(self) -> HostInfo: ...


# ---------------------------------------------------------------------- peers
class PeerInfo(Protocol):
    """What a face shows of another machine of the campaign (the fleet's ``PeerView``)."""

    machine: int
    ssh: str
    reachable: bool | None
    error: str | None
    held_bytes: int
    status: Mapping[str, Any] | None
    notices: tuple[str, ...]

    def age_s(self, now: float) -> float | None: ...


class PeerSource(Protocol):
    """The other machines' journals, as this cockpit holds them (D12). The engine knows
    no fleet: whoever opens it (``cockpit.fleet.open``) hands it one of these."""

    def events(self) -> Sequence[Events]:
        """Each peer's events, tagged ``machine`` (the same list while a copy is unchanged)."""
        ...

    def views(self) -> Sequence[PeerInfo]: ...

    def close(self) -> None: ...


def ancestor_run(supervisor: Supervisor, pid: int, runs: Mapping[int, str]) -> str | None:
    """The run whose recorded pid is a parent of ``pid`` (a worker of a launcher)."""
    for parent in supervisor.ancestors(pid):
        if parent in runs:
            return runs[parent]
    return None


__all__ = ["CallableClock", "Clock", "EventJournal", "GpuSource", "HostSource", "JournalView",
           "PeerInfo", "PeerSource", "ProcessSupervisor", "Supervisor", "SystemClock",
           "ancestor_run", "as_clock", "utc_now"]
