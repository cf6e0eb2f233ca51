"""Host telemetry through psutil: CPU, load, memory, swap, disks, the cockpit itself.

This module owns `HostSampler`. Disks are given as paths (campaign folder,
checkpoint folder, dataset cache...) and reported once per filesystem, with
a low-disk warning under a threshold in bytes. Disk and swap numbers are
refreshed every few seconds, not every tick: a stalled network mount can make
statvfs slow, and swap is the most expensive psutil read. Failures of one
reading (a vanished path, no swap info in a container) degrade that part only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

from cockpit.common.units import format_bytes
from cockpit.telemetry.model import DiskInfo, HostInfo


def _existing(path: Path) -> Path | None:
    # a checkpoint folder that does not exist yet lives on its parent's disk
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return None


MIN_CPU_INTERVAL_S = 0.5


class HostSampler:
    """One `sample()` per tick; cheap (a few psutil calls)."""

    def __init__(
        self,
        paths: Sequence[Path] = (),
        disk_warn_bytes: int = 10 * 2**30,
        *,
        clock: Callable[[], float] = time.monotonic,
        disk_interval_s: float = 5.0,
    ) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self.disk_warn_bytes = disk_warn_bytes
        self._clock = clock
        self._disk_interval = disk_interval_s
        self._next_disk = -float("inf")
        self._disks: tuple[DiskInfo, ...] = ()
        self._disk_warnings: tuple[str, ...] = ()
        self._swap: tuple[int, int] = (0, 0)
        self._cpu_count = psutil.cpu_count(logical=True) or os.cpu_count() or 1
        self._own = psutil.Process()
        # psutil's first cpu_percent(None) is always 0.0, and one taken a few ms after the
        # baseline is noise (1133 % was seen): prime both now, report nothing until the
        # baseline is MIN_CPU_INTERVAL_S old. Real time: psutil measures real CPU time.
        psutil.cpu_percent(interval=None)
        self._own.cpu_percent(interval=None)
        self._cpu_since = time.monotonic()

    def sample(self) -> HostInfo:
        now = self._clock()
        warnings: list[str] = []
        baseline_ok = time.monotonic() - self._cpu_since >= MIN_CPU_INTERVAL_S
        cpu: float | None = float(psutil.cpu_percent(interval=None)) if baseline_ok else None
        try:
            load1: float | None = float(psutil.getloadavg()[0])
        except (OSError, AttributeError):
            load1 = None
        vm = psutil.virtual_memory()
        with self._own.oneshot():
            # percent of one core, like top: 200.0 means two cores busy
            own_cpu: float | None = float(self._own.cpu_percent(interval=None))
            if not baseline_ok:
                own_cpu = None
            own_rss = int(self._own.memory_info().rss)
        if now >= self._next_disk:
            self._next_disk = now + self._disk_interval
            self._disks, self._disk_warnings = self._read_disks()
            self._swap = self._read_swap()  # parses /proc/vmstat too: not every tick
        warnings.extend(self._disk_warnings)
        return HostInfo(
            cpu_percent=cpu,
            cpu_count=self._cpu_count,
            load1=load1,
            mem_used=int(vm.total - vm.available),  # what top calls used, minus cache
            mem_total=int(vm.total),
            swap_used=self._swap[0],
            swap_total=self._swap[1],
            disks=self._disks,
            own_cpu_percent=own_cpu,
            own_rss=own_rss,
            warnings=tuple(warnings),
        )

    @staticmethod
    def _read_swap() -> tuple[int, int]:
        try:
            sw = psutil.swap_memory()
        except (OSError, RuntimeError):
            return 0, 0  # some containers hide swap entirely
        return int(sw.used), int(sw.total)

    def _read_disks(self) -> tuple[tuple[DiskInfo, ...], tuple[str, ...]]:
        disks: list[DiskInfo] = []
        warnings: list[str] = []
        seen: set[int] = set()
        for path in self.paths:
            existing = _existing(path)
            if existing is None:
                warnings.append(f"disk: {path} not found")
                continue
            try:
                dev = os.stat(existing).st_dev
                if dev in seen:  # same filesystem as an earlier path
                    continue
                usage = psutil.disk_usage(str(existing))
            except OSError as exc:
                warnings.append(f"disk: cannot read {path}: {exc.strerror or exc}")
                continue
            seen.add(dev)
            low = usage.free < self.disk_warn_bytes
            disks.append(
                DiskInfo(path=str(path), free=int(usage.free), total=int(usage.total), low=low)
            )
            if low:
                warnings.append(
                    f"low disk: {path} has {format_bytes(usage.free)} free "
                    f"(warning under {format_bytes(self.disk_warn_bytes)})"
                )
        return tuple(disks), tuple(warnings)
