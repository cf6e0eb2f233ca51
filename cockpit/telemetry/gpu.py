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

NVML's vocabulary (codes, fixes in words, throttle decoding, Xid hints, loading
pynvml, the psutil process lookup) lives in :mod:`cockpit.telemetry.gpu_nvml`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from cockpit.telemetry.fake_nvml import FakeNvml
from cockpit.telemetry.gpu_nvml import (
    ALARMING_THROTTLE,
    EVENT_DBE,
    EVENT_XID,
    INIT_FIXES,
    LOST_FIX,
    MAX_EVENTS_PER_TICK,
    SUPPORT_CODES,
    XID_HINTS,
    Candidate,
    DeviceState,
    Lost,
    Never,
    handle_key,
    nvml_text,
    psutil_describe,
)
from cockpit.telemetry.gpu_nvml import decode_throttle as decode_throttle  # re-exported
from cockpit.telemetry.gpu_nvml import load_pynvml as load_pynvml  # re-exported
from cockpit.telemetry.gpu_nvml import (
    simulate_count_from_env as simulate_count_from_env,  # re-exported
)
from cockpit.telemetry.model import (
    GpuInfo,
    GpuProcess,
    GpuReading,
    ReadingStatus,
    TelemetryEvent,
)


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
        self._devices: list[DeviceState] = []
        self._by_key: dict[int, DeviceState] = {}
        self._inaccessible: list[str] = []
        self._missing: set[str] = set()
        self._chains: dict[str, list[Candidate]] = {}
        self._codes: dict[str, int] = {}
        self._lost_codes: frozenset[int] = frozenset()
        self._err: type[BaseException] = Never
        self._mismatch: type[BaseException] = Never
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
            self._driver = nvml_text(self._nvml.nvmlSystemGetDriverVersion())
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
        self._codes = {name: getattr(nvml, name, code) for name, code in SUPPORT_CODES.items()}
        self._lost_codes = frozenset(
            self._codes[n]
            for n in (
                "NVML_ERROR_GPU_IS_LOST",
                "NVML_ERROR_UNKNOWN",
                "NVML_ERROR_RESET_REQUIRED",
                "NVML_ERROR_GPU_NOT_FOUND",
            )
        )
        self._err = getattr(nvml, "NVMLError", Never)
        self._mismatch = getattr(nvml, "NVMLLibraryMismatchError", Never)
        sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        uncorrected = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        volatile = getattr(nvml, "NVML_VOLATILE_ECC", 0)
        memory: list[Candidate] = []
        if hasattr(nvml, "nvmlMemory_v2"):
            # v2 excludes driver-reserved memory, matching nvidia-smi since R510
            memory.append(
                ("nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo", (nvml.nvmlMemory_v2,))
            )
        else:
            self._missing.add("nvmlMemory_v2")
        memory.append(("nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo", ()))

        def one(name: str, *args: Any) -> list[Candidate]:
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
            for name, reason in INIT_FIXES.items():
                if code == self._codes.get(name):
                    return reason
            return f"NVML init failed ({exc}): run nvidia-smi to see what the driver says"
        return (
            f"NVML init failed ({type(exc).__name__}: {exc}): "
            "run nvidia-smi to see what the driver says"
        )

    def _open_device(self, index: int) -> None:
        dev = DeviceState(index)
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
        self._by_key[handle_key(dev.handle)] = dev
        try:
            name = self._read(dev, "name")
            uuid = self._read(dev, "uuid")
            limit = self._read(dev, "power_limit")
        except Lost as lost:
            self._mark_lost(dev, lost.error, self._clock(), self._pending)
            return
        dev.name = None if name is None else nvml_text(name)
        dev.uuid = None if uuid is None else nvml_text(uuid)
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
        wanted = getattr(nvml, "nvmlEventTypeXidCriticalError", EVENT_XID) | getattr(
            nvml, "nvmlEventTypeDoubleBitEccError", EVENT_DBE
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

    def _read(self, dev: DeviceState, key: str) -> Any:
        """One field through its chain of functions, newest first.

        Returns None when the field is not supported on this device (remembered:
        not asked again) or failed this tick (a warning); raises Lost when the
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
                    raise Lost(exc) from exc
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

    def _drop(self, chain: list[Candidate], label: str) -> None:
        # the chain list is shared by all devices: a missing function is global
        self._missing.add(label)
        chain[:] = [c for c in chain if c[0] != label]

    def _sample_device(
        self, dev: DeviceState, now: float, events: list[TelemetryEvent], seen: set[int]
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
        except Lost as lost:
            self._mark_lost(dev, lost.error, now, events)
            return self._info(dev, {})
        return self._info(dev, values)

    def _read_slow(self, dev: DeviceState, now: float, events: list[TelemetryEvent]) -> None:
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
        for _ in range(MAX_EVENTS_PER_TICK):
            try:
                data = wait(self._event_set, 0)  # timeout 0: never blocks the tick
            except self._err as exc:
                if getattr(exc, "value", None) != self._codes["NVML_ERROR_TIMEOUT"]:
                    self._tick_warnings.append(f"NVML event wait failed: {exc}")
                return
            except Exception as exc:
                self._tick_warnings.append(f"NVML event wait failed: {exc!r}")
                return
            dev = self._by_key.get(handle_key(data.device))
            index = dev.index if dev is not None else -1
            kind = int(data.eventType)
            if kind & EVENT_XID:
                xid = int(data.eventData)
                hint = XID_HINTS.get(xid, "see NVIDIA's Xid catalog")
                message = f"GPU{index}: Xid {xid} critical error: {hint}"
                events.append(
                    TelemetryEvent(kind="gpu_xid", gpu=index, message=message, code=xid, at=now)
                )
                if dev is not None:
                    dev.sticky.append((now + self._sticky_s, message))
            elif kind & EVENT_DBE:
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
        self, dev: DeviceState, error: BaseException, now: float, events: list[TelemetryEvent]
    ) -> None:
        if dev.lost:
            return
        dev.lost = True
        dev.lost_reason = str(error)
        events.append(
            TelemetryEvent(
                kind="gpu_lost",
                gpu=dev.index,
                message=f"GPU{dev.index} lost ({dev.lost_reason}): {LOST_FIX}",
                code=getattr(error, "value", None),
                at=now,
            )
        )

    def _device_warnings(self, dev: DeviceState, now: float, info: GpuInfo) -> list[str]:
        out: list[str] = []
        if dev.lost:
            label = f" ({dev.name})" if dev.name else ""
            out.append(f"GPU{dev.index}{label} lost: {dev.lost_reason}; {LOST_FIX}")
        if dev.ecc:
            out.append(f"GPU{dev.index}: {dev.ecc} volatile uncorrected ECC error(s)")
        alarming = [w for w in info.throttle if w in ALARMING_THROTTLE]
        if alarming:
            out.append(f"GPU{dev.index} clocks held down: {', '.join(alarming)}")
        if dev.sticky:
            dev.sticky = [(until, msg) for until, msg in dev.sticky if until > now]
            out.extend(msg for _, msg in dev.sticky)
        return out

    def _info(self, dev: DeviceState, v: dict[str, Any]) -> GpuInfo:
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
