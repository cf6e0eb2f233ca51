"""A scripted stand-in for the `pynvml` module of nvidia-ml-py.

This module owns the fake NVML used by tests, the benchmark and
`--simulate-gpus N`: the scripted library (`FakeNvml`) and devices (`FakeGpu`).
The names it must share with the real module (integer constants, NVMLError and
its per-code subclasses) live in :mod:`cockpit.telemetry.simulated.pynvml_names`;
`FakeNvml(...).module()` binds them with this fake's functions into a module
object, so the real adapter in `gpu.py` runs against it unchanged. A test
checks every public name against the installed pynvml so the two cannot drift.

Scripting is per GPU (`FakeGpu`): values, functions that raise NotSupported,
a GPU lost after K utilization reads, pids psutil cannot see; per library
(`FakeNvml`): queued Xid/ECC events, init failing with any NVML code or
exception, functions missing in an older driver (absent attribute or
NVMLError_FunctionNotFound). `FakeNvml.simulated(n)` animates plausible
values (sin waves plus seeded noise) from an injected clock. The per-GPU script,
the records the functions return and the simulation live in
:mod:`cockpit.telemetry.simulated.gpu` and are importable from here too.

Use `FakeNvml(...).module()` to get a ModuleType to inject.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Literal

# GIB and SIM_PID_BASE re-exported; the records are also reached as fake_nvml.FakeX
from cockpit.telemetry.simulated.gpu import GIB as GIB
from cockpit.telemetry.simulated.gpu import (
    SIM_PID_BASE,
    FakeEventData,
    FakeEventSet,
    FakeGpu,
    FakeHandle,
    FakeMemory,
    FakeProcessInfo,
    FakeUtilization,
    Simulation,
)
from cockpit.telemetry.simulated.pynvml_names import (
    ERROR_STRINGS,
    NVML_CLOCK_MEM,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_TIMEOUT,
    NVML_ERROR_UNINITIALIZED,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
    PUBLIC_NAMES,
    NVMLError,
    nvmlEventTypeDoubleBitEccError,
    nvmlEventTypeSingleBitEccError,
    nvmlEventTypeXidCriticalError,
    nvmlTemperature_v1,
)

MissingAs = Literal["absent", "raise"]


class FakeNvml:
    """Scripted NVML library state; `module()` exposes it as a pynvml-like module."""

    def __init__(
        self,
        gpus: Iterable[FakeGpu] | int = 1,
        *,
        driver: str = "550.54.15",
        init_error: int | None = None,
        init_exception: BaseException | None = None,
        missing: Iterable[str] = (),
        missing_as: MissingAs = "raise",
    ) -> None:
        if isinstance(gpus, int):
            gpus = [FakeGpu() for _ in range(gpus)]
        self.gpus: list[FakeGpu] = list(gpus)
        for i, g in enumerate(self.gpus):
            if g.uuid is None:
                g.uuid = f"GPU-fake{i:04d}-0000-0000-0000-{i:012d}"
        self.driver = driver
        self.init_error = init_error
        self.init_exception = init_exception
        self.missing: set[str] = set(missing)
        self.missing_as: MissingAs = missing_as
        self.initialized = 0
        self.calls: Counter[str] = Counter()
        self.event_sets: list[FakeEventSet] = []
        self._events: deque[tuple[int, int, int]] = deque()
        self._handles = [FakeHandle(i) for i in range(len(self.gpus))]
        self._sim: Simulation | None = None

    # --- scripting helpers (not part of the pynvml surface) ------------------

    @classmethod
    def simulated(
        cls, n: int, *, seed: int = 0, clock: Callable[[], float] = time.monotonic
    ) -> FakeNvml:
        """N GPUs with plausible moving values, deterministic for a given seed."""
        # like an SXM datacenter GPU: no fan to report
        fake = cls([FakeGpu(unsupported={"nvmlDeviceGetFanSpeed"}) for _ in range(n)])
        for i, g in enumerate(fake.gpus):
            g.uuid = f"GPU-sim{i:05d}-5eed-{seed:04d}-0000-{i:012d}"
            g.processes = [(SIM_PID_BASE + i, 0)]
        fake._sim = Simulation(fake.gpus, seed, clock)
        return fake

    def describe_process(self, pid: int) -> tuple[str, str] | None:
        """User and command of a simulated process (psutil cannot see them)."""
        if self._sim is not None and SIM_PID_BASE <= pid < SIM_PID_BASE + len(self.gpus):
            i = pid - SIM_PID_BASE
            return ("sim", f"python train.py --rank {i} (simulated)")
        return None

    def queue_xid(self, index: int, xid: int) -> None:
        self._events.append((index, nvmlEventTypeXidCriticalError, xid))

    def queue_ecc_event(self, index: int, double_bit: bool = True) -> None:
        kind = nvmlEventTypeDoubleBitEccError if double_bit else nvmlEventTypeSingleBitEccError
        self._events.append((index, kind, 0))

    def lose(self, index: int, code: int = NVML_ERROR_GPU_IS_LOST) -> None:
        self.gpus[index].lost = True
        self.gpus[index].lost_code = code

    def module(self) -> ModuleType:
        """A module object with pynvml's names bound to this fake's state."""
        mod = ModuleType("pynvml", "scripted fake of nvidia-ml-py's pynvml")
        for name, value in PUBLIC_NAMES.items():
            setattr(mod, name, value)
        for name in FUNCTION_NAMES:
            if name in self.missing and self.missing_as == "absent":
                continue
            setattr(mod, name, getattr(self, name))
        mod._fake = self  # type: ignore[attr-defined]  # lets tests reach the script
        return mod

    # --- internals -----------------------------------------------------------

    def _enter(self, name: str, handle: FakeHandle | None = None) -> FakeGpu | None:
        self.calls[name] += 1
        if name in self.missing:
            raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
        if not self.initialized:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        if handle is None:
            return None
        gpu = self.gpus[handle.index]
        if gpu.lost:
            raise NVMLError(gpu.lost_code)
        if name in gpu.unsupported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if name in gpu.errors:
            raise NVMLError(gpu.errors[name])
        if self._sim is not None:
            self._sim.animate(handle.index)
        return gpu

    def _gpu(self, name: str, handle: FakeHandle) -> FakeGpu:
        gpu = self._enter(name, handle)
        assert gpu is not None
        return gpu

    # --- the pynvml surface ----------------------------------------------------

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self.init_exception is not None:
            raise self.init_exception
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialized += 1

    def nvmlInitWithFlags(self, flags: int) -> None:
        self.nvmlInit()

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialized -= 1

    def nvmlErrorString(self, result: int) -> str:
        return ERROR_STRINGS.get(result, "Unknown Error")

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._enter("nvmlSystemGetNVMLVersion")
        return "12." + self.driver

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[index]
        if gpu.handle_error is not None:
            raise NVMLError(gpu.handle_error)
        if gpu.lost:
            raise NVMLError(gpu.lost_code)
        return self._handles[index]

    def nvmlDeviceGetIndex(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetIndex")
        return handle.index

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        return self._gpu("nvmlDeviceGetName", handle).name

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:
        return self._gpu("nvmlDeviceGetUUID", handle).uuid or ""

    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> FakeUtilization:
        gpu = self._gpu("nvmlDeviceGetUtilizationRates", handle)
        if gpu.lost_after is not None and gpu.util_reads >= gpu.lost_after:
            gpu.lost = True
            raise NVMLError(gpu.lost_code)
        gpu.util_reads += 1
        return FakeUtilization(gpu=gpu.util, memory=gpu.mem_util)

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle, version: int | None = None) -> FakeMemory:
        gpu = self._gpu("nvmlDeviceGetMemoryInfo", handle)
        if version and "nvmlDeviceGetMemoryInfo_v2" in self.missing:
            # the Python wrapper exists; the C symbol of an older driver does not
            raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
        return FakeMemory(total=gpu.mem_total, free=gpu.mem_total - gpu.mem_used, used=gpu.mem_used)

    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        return self._gpu("nvmlDeviceGetPowerUsage", handle).power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeHandle) -> int:
        return self._gpu("nvmlDeviceGetEnforcedPowerLimit", handle).power_limit_mw

    def nvmlDeviceGetPowerManagementLimit(self, handle: FakeHandle) -> int:
        return self._gpu("nvmlDeviceGetPowerManagementLimit", handle).power_limit_mw

    def nvmlDeviceGetTemperatureV(
        self, handle: FakeHandle, sensor: int, version: int = nvmlTemperature_v1
    ) -> int:
        return self._gpu("nvmlDeviceGetTemperatureV", handle).temp

    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        return self._gpu("nvmlDeviceGetTemperature", handle).temp

    def nvmlDeviceGetFanSpeed(self, handle: FakeHandle) -> int:
        return self._gpu("nvmlDeviceGetFanSpeed", handle).fan

    def nvmlDeviceGetClockInfo(self, handle: FakeHandle, type: int) -> int:
        gpu = self._gpu("nvmlDeviceGetClockInfo", handle)
        if type == NVML_CLOCK_MEM:
            return gpu.mem_clock
        return gpu.sm_clock

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: FakeHandle) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksEventReasons", handle).throttle

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeHandle) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksThrottleReasons", handle).throttle

    def _processes(self, name: str, handle: FakeHandle) -> list[FakeProcessInfo]:
        gpu = self._gpu(name, handle)
        return [FakeProcessInfo(pid=pid, usedGpuMemory=mem) for pid, mem in gpu.processes]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeHandle) -> list[FakeProcessInfo]:
        return self._processes("nvmlDeviceGetComputeRunningProcesses", handle)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: FakeHandle) -> list[FakeProcessInfo]:
        return self._processes("nvmlDeviceGetComputeRunningProcesses_v2", handle)

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: FakeHandle) -> list[FakeProcessInfo]:
        return self._processes("nvmlDeviceGetComputeRunningProcesses_v3", handle)

    def nvmlDeviceGetTotalEccErrors(
        self, handle: FakeHandle, errorType: int, counterType: int
    ) -> int:
        gpu = self._gpu("nvmlDeviceGetTotalEccErrors", handle)
        return gpu.ecc_uncorrected if errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED else 0

    def nvmlDeviceGetPcieThroughput(self, device: FakeHandle, counter: int) -> int:
        self._gpu("nvmlDeviceGetPcieThroughput", device)
        return 1_000_000

    def nvmlDeviceGetSupportedEventTypes(self, handle: FakeHandle) -> int:
        return self._gpu("nvmlDeviceGetSupportedEventTypes", handle).event_types

    def nvmlEventSetCreate(self) -> FakeEventSet:
        self._enter("nvmlEventSetCreate")
        es = FakeEventSet()
        self.event_sets.append(es)
        return es

    def nvmlDeviceRegisterEvents(
        self, handle: FakeHandle, eventTypes: int, eventSet: FakeEventSet
    ) -> None:
        gpu = self._gpu("nvmlDeviceRegisterEvents", handle)
        if eventTypes & ~gpu.event_types:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        eventSet.registered[handle.index] = eventSet.registered.get(handle.index, 0) | eventTypes

    def nvmlEventSetWait(self, eventSet: FakeEventSet, timeoutms: int) -> FakeEventData:
        self._enter("nvmlEventSetWait")
        while self._events:
            index, kind, data = self._events.popleft()
            if eventSet.registered.get(index, 0) & kind:
                return FakeEventData(device=self._handles[index], eventType=kind, eventData=data)
        # timeout 0 and nothing pending: pynvml raises NVMLError_Timeout
        raise NVMLError(NVML_ERROR_TIMEOUT)

    def nvmlEventSetFree(self, eventSet: FakeEventSet) -> None:
        self._enter("nvmlEventSetFree")
        eventSet.freed = True


FUNCTION_NAMES: tuple[str, ...] = tuple(
    n for n in vars(FakeNvml) if n.startswith("nvml") and callable(getattr(FakeNvml, n))
)
