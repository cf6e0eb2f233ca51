"""The scripted GPUs of the fake NVML: one script per device, and how it moves.

This module owns what :mod:`cockpit.telemetry.simulated.nvml` scripts per GPU: the
`FakeGpu` record (values, functions that raise NotSupported or another code, a
GPU lost after K utilization reads or before start, supported event types), the
records pynvml's functions return (handles, utilization, memory, processes, event
data, event sets), and `Simulation`, which animates plausible values (sin waves
plus seeded noise) from an injected clock for `FakeNvml.simulated(n)` and
`--simulate-gpus N`. The library around them, with its pynvml functions, is
`FakeNvml` in :mod:`cockpit.telemetry.simulated.nvml`, which re-exports these names.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from cockpit.telemetry.simulated.pynvml_names import (
    NVML_ERROR_GPU_IS_LOST,
    nvmlClocksEventReasonGpuIdle,
    nvmlClocksEventReasonSwPowerCap,
    nvmlEventTypeDoubleBitEccError,
    nvmlEventTypeSingleBitEccError,
    nvmlEventTypeXidCriticalError,
)

GIB = 2**30
# Linux caps pid_max at 2**22, so these pids can never exist on the machine:
# simulated processes are described by the fake itself, never by psutil.
SIM_PID_BASE = 2**22 + 1000


@dataclass
class FakeHandle:
    """Opaque device handle, like pynvml's c_nvmlDevice_t pointer."""

    index: int


@dataclass
class FakeUtilization:
    gpu: int
    memory: int


@dataclass
class FakeMemory:
    total: int
    free: int
    used: int


@dataclass
class FakeProcessInfo:
    pid: int
    usedGpuMemory: int | None
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


@dataclass
class FakeEventData:
    device: FakeHandle
    eventType: int
    eventData: int
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


@dataclass
class FakeEventSet:
    registered: dict[int, int] = field(default_factory=dict)  # gpu index -> event mask
    freed: bool = False


@dataclass
class FakeGpu:
    """The script for one GPU. Mutate fields between samples to move values."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str | None = None  # default: derived from the index
    mem_total: int = 80 * GIB
    mem_used: int = 1 * GIB
    util: int = 0
    mem_util: int = 0
    temp: int = 35
    power_mw: int = 70_000
    power_limit_mw: int = 700_000
    sm_clock: int = 1980
    mem_clock: int = 2619
    fan: int = 30
    throttle: int = 0
    ecc_uncorrected: int = 0
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    # Function names that raise NVMLError_NotSupported on this GPU.
    unsupported: set[str] = field(default_factory=set)
    # Function name -> NVML error code raised on this GPU (e.g. NoPermission).
    errors: dict[str, int] = field(default_factory=dict)
    # The GPU falls off the bus after this many utilization reads.
    lost_after: int | None = None
    lost_code: int = NVML_ERROR_GPU_IS_LOST
    lost: bool = False
    # nvmlDeviceGetHandleByIndex raises this code (GPU broken before we start).
    handle_error: int | None = None
    event_types: int = (
        nvmlEventTypeSingleBitEccError
        | nvmlEventTypeDoubleBitEccError
        | nvmlEventTypeXidCriticalError
    )
    util_reads: int = 0


class Simulation:
    """Moves the scripted values of each GPU as smooth waves plus seeded noise."""

    def __init__(self, gpus: list[FakeGpu], seed: int, clock: Callable[[], float]) -> None:
        self.gpus = gpus
        self.clock = clock
        self.t0 = clock()
        self.rngs = [random.Random(seed * 1000 + i) for i in range(len(gpus))]
        self.phase = [r.uniform(0, 2 * math.pi) for r in self.rngs]
        self.last_t: list[float | None] = [None] * len(gpus)
        self.temp = [40.0] * len(gpus)
        for g in gpus:
            g.mem_total = 80 * GIB
            g.power_limit_mw = 700_000

    def animate(self, i: int) -> None:
        t = self.clock() - self.t0
        if self.last_t[i] == t:  # one update per tick, however many calls read it
            return
        self.last_t[i] = t
        g, rng, ph = self.gpus[i], self.rngs[i], self.phase[i]
        util = 72 + 22 * math.sin(2 * math.pi * t / 97 + ph) + rng.gauss(0, 3)
        # a short dip every ~10 minutes, like an eval or checkpoint save
        if (t + ph * 60) % 600 < 20:
            util = rng.uniform(0, 4)
        util = min(100.0, max(0.0, util))
        g.util = int(util)
        g.mem_util = int(util * 0.55)
        g.mem_used = int(g.mem_total * (0.62 + 0.06 * math.sin(t / 300 + ph)))
        g.power_mw = int(g.power_limit_mw * (0.12 + 0.8 * util / 100))
        # temperature follows load with a lag
        self.temp[i] += (32 + 45 * util / 100 - self.temp[i]) * 0.05
        g.temp = int(self.temp[i])
        g.sm_clock = int(1410 + 570 * util / 100)
        g.mem_clock = 2619
        g.throttle = (
            nvmlClocksEventReasonSwPowerCap
            if g.power_mw > 0.9 * g.power_limit_mw
            else nvmlClocksEventReasonGpuIdle
            if util < 5
            else 0
        )
        g.processes = [(SIM_PID_BASE + i, int(g.mem_used - 600 * 2**20))]
