"""GPU telemetry through NVML (the `pynvml` module of nvidia-ml-py).

This module owns the NVML adapter: init/shutdown, device handles, what is read
how often, decoding throttle reasons, the event API (Xid, ECC), GPU process
lookup through psutil, and every way NVML can fail. It degrades, never dies:
a field NVML does not support becomes None, a lost GPU is marked lost while
the others keep reporting, and a missing library, driver or permission turns
into an "unavailable" reading with a one-line reason that says the fix.

The module is injected (`GpuSampler(nvml=fake_module)`) so tests run this
code against `fake_nvml`; with nothing injected the real pynvml is imported
lazily in `start()`, never at import time. One sampler is used from one
thread (the engine's telemetry worker); it is not thread-safe.
"""

from __future__ import annotations

import ctypes
import math
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import psutil

from cockpit.telemetry.fake_nvml import FakeNvml
from cockpit.telemetry.model import (
    GpuInfo,
    GpuProcess,
    GpuReading,
    ReadingStatus,
    TelemetryEvent,
)

# NVML return codes are part of the C ABI; the module's own constants are used
# when present, these only back them up.
_SUPPORT_CODES = {
    "NVML_ERROR_NO_PERMISSION": 4,
    "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_DRIVER_NOT_LOADED": 9,
    "NVML_ERROR_TIMEOUT": 10,
    "NVML_ERROR_LIBRARY_NOT_FOUND": 12,
    "NVML_ERROR_FUNCTION_NOT_FOUND": 13,
    "NVML_ERROR_GPU_IS_LOST": 15,
    "NVML_ERROR_RESET_REQUIRED": 16,
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": 18,
    "NVML_ERROR_GPU_NOT_FOUND": 28,
    "NVML_ERROR_UNKNOWN": 999,
}

_INIT_FIXES = {
    "NVML_ERROR_LIBRARY_NOT_FOUND": (
        "NVML library not found: install the NVIDIA driver (libnvidia-ml.so.1)"
    ),
    "NVML_ERROR_DRIVER_NOT_LOADED": (
        "NVIDIA driver not loaded: load it (sudo modprobe nvidia) or reboot"
    ),
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": (
        "driver/library version mismatch: reboot or reload the nvidia kernel module"
    ),
    "NVML_ERROR_NO_PERMISSION": (
        "no permission to use the GPUs: check /dev/nvidia* permissions "
        "(video group) or the container's --gpus flag"
    ),
}

# Clock event ("throttle") reason bits, stable across NVML versions.
THROTTLE_WORDS: tuple[tuple[int, str], ...] = (
    (0x1, "idle"),
    (0x2, "app clocks"),
    (0x4, "power cap"),
    (0x8, "hw slowdown"),
    (0x10, "sync boost"),
    (0x20, "sw thermal"),
    (0x40, "hw thermal"),
    (0x80, "power brake"),
    (0x100, "display clock"),
    (0x200, "board limit"),
    (0x400, "reliability"),
)
# Reasons that mean the hardware is protecting itself, not normal operation.
ALARMING_THROTTLE = frozenset({"hw slowdown", "sw thermal", "hw thermal", "power brake"})

_XID_HINTS = {
    13: "graphics engine exception (often an application bug)",
    31: "GPU memory page fault (often an application bug)",
    43: "GPU stopped processing",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error",
    63: "ECC page retirement / row remap",
    64: "ECC page retirement / row remap failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP firmware timeout",
    120: "GSP firmware error",
}

_EVENT_XID = 0x8  # nvmlEventTypeXidCriticalError
_EVENT_DBE = 0x2  # nvmlEventTypeDoubleBitEccError
_MAX_EVENTS_PER_TICK = 64
_LOST_FIX = "check `dmesg` for Xid messages; it usually needs a reboot"

# (label recorded when missing, attribute on the module, args after the handle)
_Candidate = tuple[str, str, tuple[Any, ...]]


def decode_throttle(mask: int) -> tuple[str, ...]:
    """Clock event reason bits as words, lowest bit first."""
    return tuple(word for bit, word in THROTTLE_WORDS if mask & bit)


def load_pynvml() -> ModuleType:
    """Import the real pynvml, hiding the FutureWarning of the deprecated `pynvml` dist."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import pynvml
    return pynvml


def simulate_count_from_env(cli_value: int | None) -> int:
    """GPUs to simulate: the CLI flag wins, else COCKPIT_SIMULATE_GPUS, else 0."""
    if cli_value is not None:
        if cli_value < 0:
            raise ValueError(f"--simulate-gpus must be 0 or more, got {cli_value}")
        return cli_value
    raw = os.environ.get("COCKPIT_SIMULATE_GPUS", "").strip()
    if not raw:
        return 0
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"COCKPIT_SIMULATE_GPUS must be a whole number, got {raw!r}") from None
    if value < 0:
        raise ValueError(f"COCKPIT_SIMULATE_GPUS must be 0 or more, got {value}")
    return value


def psutil_describe(pid: int) -> tuple[str | None, str | None, bool]:
    """(user, command, visible) for a pid; visible=False when psutil cannot see it."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            try:
                user: str | None = proc.username()
            except (psutil.AccessDenied, KeyError):
                user = None  # KeyError: uid without a passwd entry (containers)
            try:
                command: str | None = " ".join(proc.cmdline()) or proc.name()
            except psutil.AccessDenied:
                command = None
    except psutil.NoSuchProcess:  # includes zombies
        return None, None, False
    except psutil.Error:
        return None, None, True  # it exists; we may not look at it
    return user, command, True


def _text(value: Any) -> str:
    # nvidia-ml-py before 11.515 returned bytes for strings
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _handle_key(handle: Any) -> int:
    # pynvml hands back a fresh ctypes pointer in event data: compare addresses
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value or id(handle)
    except (TypeError, ctypes.ArgumentError):
        return id(handle)


class _Lost(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class _Never(Exception):
    """Stands in for exception classes a module does not have."""


@dataclass
class _Device:
    index: int
    handle: Any = None
    name: str | None = None
    uuid: str | None = None
    mem_total: int | None = None
    power_limit: float | None = None
    lost: bool = False
    lost_reason: str | None = None
    unsupported: set[str] = field(default_factory=set)
    next_slow: float = -math.inf
    temp: float | None = None
    fan: float | None = None
    ecc: int | None = None
    ecc_reported: int = 0
    sticky: list[tuple[float, str]] = field(default_factory=list)  # (until, warning)


class GpuSampler:
    """Reads all GPUs once per `sample()`; cheap fields every tick, slow ones cached."""

    def __init__(
        self,
        nvml: ModuleType | None = None,
        simulate: int = 0,
        clock: Callable[[], float] = time.monotonic,
        *,
        slow_interval_s: float = 5.0,
        sticky_s: float = 600.0,
        describe: Callable[[int], tuple[str | None, str | None, bool]] | None = None,
    ) -> None:
        if simulate < 0:
            raise ValueError("simulate must be 0 or more")
        if simulate and nvml is not None:
            raise ValueError("pass nvml or simulate, not both")
        self._clock = clock
        self._slow_interval = slow_interval_s
        self._sticky_s = sticky_s
        self._describe = describe or psutil_describe
        self._simulated = simulate > 0
        if simulate:
            fake = FakeNvml.simulated(simulate, clock=clock)
            nvml = fake.module()
            base = self._describe

            def describe_sim(pid: int) -> tuple[str | None, str | None, bool]:
                known = fake.describe_process(pid)
                return (known[0], known[1], True) if known else base(pid)

            self._describe = describe_sim
        self._nvml: Any = nvml
        self._started = False
        self._initialized = False
        self._closed = False
        self._error: str | None = None
        self._driver: str | None = None
        self._devices: list[_Device] = []
        self._by_key: dict[int, _Device] = {}
        self._inaccessible: list[str] = []
        self._missing: set[str] = set()
        self._chains: dict[str, list[_Candidate]] = {}
        self._codes: dict[str, int] = {}
        self._lost_codes: frozenset[int] = frozenset()
        self._err: type[BaseException] = _Never
        self._mismatch: type[BaseException] = _Never
        self._event_set: Any = None
        self._pending: list[TelemetryEvent] = []
        self._tick_warnings: list[str] = []
        self._proc_cache: dict[int, tuple[str | None, str | None, bool]] = {}

    # --- public ---------------------------------------------------------------

    @property
    def status(self) -> ReadingStatus:
        if self._error is not None:
            return "unavailable"
        return "simulated" if self._simulated else "ok"

    @property
    def error(self) -> str | None:
        return self._error

    @property
    def missing_functions(self) -> frozenset[str]:
        """NVML functions this driver/library lacks (each recorded once)."""
        return frozenset(self._missing)

    def start(self) -> None:
        """nvmlInit and read static facts. Never raises: failures make it unavailable."""
        if self._started:
            return
        self._started = True
        if self._nvml is None:
            try:
                self._nvml = load_pynvml()
            except ImportError:
                self._error = "nvidia-ml-py is not installed: pip install nvidia-ml-py"
                return
        self._bind_module()
        try:
            self._nvml.nvmlInit()
        except Exception as exc:  # any failure here means: no GPU telemetry
            self._error = self._init_reason(exc)
            return
        self._initialized = True
        try:
            self._driver = _text(self._nvml.nvmlSystemGetDriverVersion())
        except Exception:
            self._driver = None
        try:
            count = int(self._nvml.nvmlDeviceGetCount())
        except Exception as exc:
            self._error = f"NVML could not count the GPUs ({exc}): run nvidia-smi to see why"
            return
        if count == 0:
            self._error = (
                "NVML sees no GPUs: run nvidia-smi; in a container, start it with --gpus all"
            )
            return
        try:
            for index in range(count):
                self._open_device(index)
        except Exception as exc:  # not an NVML error: a broken binding; never raise
            self._error = f"NVML setup failed ({exc!r}): run nvidia-smi to see what the driver says"
            return
        try:
            self._open_events()
        except Exception:
            self._event_set = None  # events are a bonus: sampling works without them

    def sample(self) -> GpuReading:
        """One reading of every GPU, plus events that are new since the last one."""
        if not self._started:
            self.start()
        if self._closed:
            return self._unavailable("GPU telemetry closed")
        if self._error is not None:
            return self._unavailable(self._error)
        now = self._clock()
        self._tick_warnings = []
        events, self._pending = self._pending, []
        self._poll_events(now, events)
        gpus: list[GpuInfo] = []
        seen_pids: set[int] = set()
        for dev in self._devices:
            try:
                gpus.append(self._sample_device(dev, now, events, seen_pids))
            except Exception as exc:  # a bug or odd binding must not stop the others
                self._tick_warnings.append(f"GPU{dev.index} read failed: {exc!r}")
                gpus.append(self._info(dev, {}))
        for pid in self._proc_cache.keys() - seen_pids:
            del self._proc_cache[pid]
        warns: list[str] = list(self._inaccessible)
        for dev, info in zip(self._devices, gpus, strict=True):
            warns.extend(self._device_warnings(dev, now, info))
        warns.extend(self._tick_warnings)
        return GpuReading(
            status=self.status,
            error=None,
            gpus=tuple(gpus),
            warnings=tuple(warns),
            events=tuple(events),
            driver=self._driver,
        )

    def close(self) -> None:
        """Free the event set and nvmlShutdown; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._event_set is not None:
            try:
                self._nvml.nvmlEventSetFree(self._event_set)
            except Exception:
                pass  # shutting down anyway
            self._event_set = None
        if self._initialized:
            self._initialized = False
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass

    def __enter__(self) -> GpuSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- setup ---------------------------------------------------------------

    def _bind_module(self) -> None:
        nvml = self._nvml
        self._codes = {name: getattr(nvml, name, code) for name, code in _SUPPORT_CODES.items()}
        self._lost_codes = frozenset(
            self._codes[n]
            for n in (
                "NVML_ERROR_GPU_IS_LOST",
                "NVML_ERROR_UNKNOWN",
                "NVML_ERROR_RESET_REQUIRED",
                "NVML_ERROR_GPU_NOT_FOUND",
            )
        )
        self._err = getattr(nvml, "NVMLError", _Never)
        self._mismatch = getattr(nvml, "NVMLLibraryMismatchError", _Never)
        sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        uncorrected = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        volatile = getattr(nvml, "NVML_VOLATILE_ECC", 0)
        memory: list[_Candidate] = []
        if hasattr(nvml, "nvmlMemory_v2"):
            # v2 excludes driver-reserved memory, matching nvidia-smi since R510
            memory.append(
                ("nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo", (nvml.nvmlMemory_v2,))
            )
        else:
            self._missing.add("nvmlMemory_v2")
        memory.append(("nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo", ()))

        def one(name: str, *args: Any) -> list[_Candidate]:
            return [(name, name, args)]

        self._chains = {
            "name": one("nvmlDeviceGetName"),
            "uuid": one("nvmlDeviceGetUUID"),
            "power_limit": one("nvmlDeviceGetEnforcedPowerLimit")
            + one("nvmlDeviceGetPowerManagementLimit"),
            "util": one("nvmlDeviceGetUtilizationRates"),
            "memory": memory,
            "power": one("nvmlDeviceGetPowerUsage"),
            "sm_clock": one("nvmlDeviceGetClockInfo", getattr(nvml, "NVML_CLOCK_SM", 1)),
            "mem_clock": one("nvmlDeviceGetClockInfo", getattr(nvml, "NVML_CLOCK_MEM", 2)),
            "throttle": one("nvmlDeviceGetCurrentClocksEventReasons")
            + one("nvmlDeviceGetCurrentClocksThrottleReasons"),
            "processes": one("nvmlDeviceGetComputeRunningProcesses_v3")
            + one("nvmlDeviceGetComputeRunningProcesses_v2")
            + one("nvmlDeviceGetComputeRunningProcesses"),
            "temp": one("nvmlDeviceGetTemperatureV", sensor)
            + one("nvmlDeviceGetTemperature", sensor),
            "fan": one("nvmlDeviceGetFanSpeed"),
            "ecc": one("nvmlDeviceGetTotalEccErrors", uncorrected, volatile),
        }

    def _init_reason(self, exc: BaseException) -> str:
        code = getattr(exc, "value", None)
        if isinstance(exc, self._err) and isinstance(code, int):
            for name, reason in _INIT_FIXES.items():
                if code == self._codes.get(name):
                    return reason
            return f"NVML init failed ({exc}): run nvidia-smi to see what the driver says"
        return (
            f"NVML init failed ({type(exc).__name__}: {exc}): "
            "run nvidia-smi to see what the driver says"
        )

    def _open_device(self, index: int) -> None:
        dev = _Device(index)
        try:
            dev.handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
        except self._err as exc:
            if getattr(exc, "value", None) in self._lost_codes:
                self._devices.append(dev)
                self._mark_lost(dev, exc, self._clock(), self._pending)
            else:
                # e.g. NoPermission for a GPU outside this container's cgroup
                self._inaccessible.append(f"GPU{index} not accessible: {exc}")
            return
        self._devices.append(dev)
        self._by_key[_handle_key(dev.handle)] = dev
        try:
            name = self._read(dev, "name")
            uuid = self._read(dev, "uuid")
            limit = self._read(dev, "power_limit")
        except _Lost as lost:
            self._mark_lost(dev, lost.error, self._clock(), self._pending)
            return
        dev.name = None if name is None else _text(name)
        dev.uuid = None if uuid is None else _text(uuid)
        dev.power_limit = None if limit is None else limit / 1000.0

    def _open_events(self) -> None:
        nvml = self._nvml
        create = getattr(nvml, "nvmlEventSetCreate", None)
        if create is None or not hasattr(nvml, "nvmlEventSetWait"):
            self._missing.add("nvmlEventSetCreate" if create is None else "nvmlEventSetWait")
            return
        try:
            event_set = create()
        except Exception as exc:
            if getattr(exc, "value", None) == self._codes["NVML_ERROR_FUNCTION_NOT_FOUND"]:
                self._missing.add("nvmlEventSetCreate")
            return
        wanted = getattr(nvml, "nvmlEventTypeXidCriticalError", _EVENT_XID) | getattr(
            nvml, "nvmlEventTypeDoubleBitEccError", _EVENT_DBE
        )
        registered = 0
        for dev in self._devices:
            if dev.lost:
                continue
            try:
                supported = int(nvml.nvmlDeviceGetSupportedEventTypes(dev.handle))
            except Exception:
                supported = wanted
            mask = supported & wanted
            if not mask:
                dev.unsupported.add("events")
                continue
            try:
                nvml.nvmlDeviceRegisterEvents(dev.handle, mask, event_set)
                registered += 1
            except Exception:
                dev.unsupported.add("events")
        if registered:
            self._event_set = event_set
        else:
            try:
                nvml.nvmlEventSetFree(event_set)
            except Exception:
                pass

    # --- per tick ------------------------------------------------------------

    def _read(self, dev: _Device, key: str) -> Any:
        """One field through its chain of functions, newest first.

        Returns None when the field is not supported on this device (remembered:
        not asked again) or failed this tick (a warning); raises _Lost when the
        GPU is gone.
        """
        if key in dev.unsupported:
            return None
        chain = self._chains[key]
        while chain:
            label, attr, args = chain[0]
            fn = getattr(self._nvml, attr, None)
            if fn is None:
                self._drop(chain, label)
                continue
            try:
                return fn(dev.handle, *args)
            except self._mismatch:
                self._drop(chain, label)
            except self._err as exc:
                code = getattr(exc, "value", None)
                if code == self._codes["NVML_ERROR_FUNCTION_NOT_FOUND"]:
                    self._drop(chain, label)
                    continue
                if code in self._lost_codes:
                    raise _Lost(exc) from exc
                if code in (
                    self._codes["NVML_ERROR_NOT_SUPPORTED"],
                    self._codes["NVML_ERROR_NO_PERMISSION"],
                ):
                    dev.unsupported.add(key)
                    return None
                self._tick_warnings.append(f"GPU{dev.index} {key}: {exc}")
                return None
        dev.unsupported.add(key)  # no function for it in this driver
        return None

    def _drop(self, chain: list[_Candidate], label: str) -> None:
        # the chain list is shared by all devices: a missing function is global
        self._missing.add(label)
        chain[:] = [c for c in chain if c[0] != label]

    def _sample_device(
        self, dev: _Device, now: float, events: list[TelemetryEvent], seen: set[int]
    ) -> GpuInfo:
        if dev.lost:
            return self._info(dev, {})
        values: dict[str, Any] = {}
        try:
            util = self._read(dev, "util")
            if util is not None:
                values["util"] = float(util.gpu)
                values["mem_util"] = float(util.memory)
            mem = self._read(dev, "memory")
            if mem is not None:
                values["mem_used"] = int(mem.used)
                dev.mem_total = int(mem.total)
            power = self._read(dev, "power")
            if power is not None:
                values["power"] = power / 1000.0
            values["sm_clock"] = self._read(dev, "sm_clock")
            values["mem_clock"] = self._read(dev, "mem_clock")
            mask = self._read(dev, "throttle")
            values["throttle"] = decode_throttle(int(mask)) if mask is not None else ()
            procs = self._read(dev, "processes")
            values["processes"] = self._processes(procs or (), seen)
            if now >= dev.next_slow:
                dev.next_slow = now + self._slow_interval
                self._read_slow(dev, now, events)
        except _Lost as lost:
            self._mark_lost(dev, lost.error, now, events)
            return self._info(dev, {})
        return self._info(dev, values)

    def _read_slow(self, dev: _Device, now: float, events: list[TelemetryEvent]) -> None:
        temp = self._read(dev, "temp")
        dev.temp = None if temp is None else float(temp)
        fan = self._read(dev, "fan")
        dev.fan = None if fan is None else float(fan)
        ecc = self._read(dev, "ecc")
        if ecc is None:
            return
        dev.ecc = int(ecc)
        if dev.ecc > dev.ecc_reported:
            events.append(
                TelemetryEvent(
                    kind="gpu_ecc",
                    gpu=dev.index,
                    message=(
                        f"GPU{dev.index}: {dev.ecc} volatile uncorrected ECC error(s) "
                        f"(was {dev.ecc_reported}); results since then may be corrupt"
                    ),
                    code=dev.ecc,
                    at=now,
                )
            )
        dev.ecc_reported = dev.ecc  # also follows a reset after a driver reload

    def _processes(self, procs: Any, seen: set[int]) -> tuple[GpuProcess, ...]:
        out: list[GpuProcess] = []
        for p in procs:
            pid = int(p.pid)
            seen.add(pid)
            # a pid NVML keeps reporting is the same process: describe it once
            desc = self._proc_cache.get(pid)
            if desc is None:
                desc = self._describe(pid)
                self._proc_cache[pid] = desc
            used = getattr(p, "usedGpuMemory", None)
            out.append(
                GpuProcess(
                    pid=pid,
                    used_memory=None if used is None else int(used),
                    user=desc[0],
                    command=desc[1],
                    visible=desc[2],
                )
            )
        return tuple(out)

    def _poll_events(self, now: float, events: list[TelemetryEvent]) -> None:
        if self._event_set is None:
            return
        wait = self._nvml.nvmlEventSetWait
        for _ in range(_MAX_EVENTS_PER_TICK):
            try:
                data = wait(self._event_set, 0)  # timeout 0: never blocks the tick
            except self._err as exc:
                if getattr(exc, "value", None) != self._codes["NVML_ERROR_TIMEOUT"]:
                    self._tick_warnings.append(f"NVML event wait failed: {exc}")
                return
            except Exception as exc:
                self._tick_warnings.append(f"NVML event wait failed: {exc!r}")
                return
            dev = self._by_key.get(_handle_key(data.device))
            index = dev.index if dev is not None else -1
            kind = int(data.eventType)
            if kind & _EVENT_XID:
                xid = int(data.eventData)
                hint = _XID_HINTS.get(xid, "see NVIDIA's Xid catalog")
                message = f"GPU{index}: Xid {xid} critical error: {hint}"
                events.append(
                    TelemetryEvent(kind="gpu_xid", gpu=index, message=message, code=xid, at=now)
                )
                if dev is not None:
                    dev.sticky.append((now + self._sticky_s, message))
            elif kind & _EVENT_DBE:
                if dev is not None and "ecc" not in dev.unsupported:
                    dev.next_slow = now  # the counter read this tick makes the event
                else:
                    events.append(
                        TelemetryEvent(
                            kind="gpu_ecc",
                            gpu=index,
                            message=f"GPU{index}: uncorrected (double-bit) ECC error",
                            at=now,
                        )
                    )

    def _mark_lost(
        self, dev: _Device, error: BaseException, now: float, events: list[TelemetryEvent]
    ) -> None:
        if dev.lost:
            return
        dev.lost = True
        dev.lost_reason = str(error)
        events.append(
            TelemetryEvent(
                kind="gpu_lost",
                gpu=dev.index,
                message=f"GPU{dev.index} lost ({dev.lost_reason}): {_LOST_FIX}",
                code=getattr(error, "value", None),
                at=now,
            )
        )

    def _device_warnings(self, dev: _Device, now: float, info: GpuInfo) -> list[str]:
        out: list[str] = []
        if dev.lost:
            label = f" ({dev.name})" if dev.name else ""
            out.append(f"GPU{dev.index}{label} lost: {dev.lost_reason}; {_LOST_FIX}")
        if dev.ecc:
            out.append(f"GPU{dev.index}: {dev.ecc} volatile uncorrected ECC error(s)")
        alarming = [w for w in info.throttle if w in ALARMING_THROTTLE]
        if alarming:
            out.append(f"GPU{dev.index} clocks held down: {', '.join(alarming)}")
        if dev.sticky:
            dev.sticky = [(until, msg) for until, msg in dev.sticky if until > now]
            out.extend(msg for _, msg in dev.sticky)
        return out

    def _info(self, dev: _Device, v: dict[str, Any]) -> GpuInfo:
        live = not dev.lost
        return GpuInfo(
            index=dev.index,
            name=dev.name,
            uuid=dev.uuid,
            util=v.get("util"),
            mem_util=v.get("mem_util"),
            mem_used=v.get("mem_used"),
            mem_total=dev.mem_total,
            temp=dev.temp if live else None,
            power=v.get("power"),
            power_limit=dev.power_limit,
            sm_clock=v.get("sm_clock"),
            mem_clock=v.get("mem_clock"),
            fan=dev.fan if live else None,
            throttle=v.get("throttle", ()),
            processes=v.get("processes", ()),
            lost=dev.lost,
            unsupported=tuple(sorted(dev.unsupported)),
        )

    def _unavailable(self, reason: str) -> GpuReading:
        return GpuReading(
            status="unavailable", error=reason, gpus=(), warnings=(), events=(), driver=None
        )
