"""Per-device NVML reading for the GPU adapter: handles, fields, degradation, loss.

This module owns what :class:`cockpit.telemetry.nvml.adapter.GpuSampler` does per GPU:
binding an NVML module (its error codes and classes, and the chain of functions
that can read each field, newest first), opening device handles, reading the
fast fields every tick and the slow ones (temperature, fan, ECC) every few
seconds, the degradation chain (a function missing in this driver is dropped for
all devices, a field unsupported on one device is not asked again, any other
failure is a warning for this tick), marking a GPU lost, describing its
processes, and turning a device's state into a `GpuInfo` plus warnings.

`DeviceReader` is created by the sampler once the module is known; the event
watcher (:mod:`cockpit.telemetry.nvml.events`) reads its binding and devices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cockpit.telemetry.model import GpuInfo, GpuProcess, TelemetryEvent
from cockpit.telemetry.nvml.vocabulary import (
    ALARMING_THROTTLE,
    LOST_FIX,
    SUPPORT_CODES,
    Candidate,
    DeviceState,
    Lost,
    Never,
    decode_throttle,
    handle_key,
    nvml_text,
)

Describe = Callable[[int], tuple[str | None, str | None, bool]]


class DeviceReader:
    """The devices of one NVML module and how each field of them is read."""

    def __init__(
        self,
        nvml: Any,
        *,
        clock: Callable[[], float],
        slow_interval_s: float,
        describe: Describe,
        missing: set[str],
    ) -> None:
        self.nvml = nvml
        self._clock = clock
        self._slow_interval = slow_interval_s
        self._describe = describe
        # shared with the sampler: NVML functions this driver/library lacks
        self.missing = missing
        self.devices: list[DeviceState] = []
        self.by_key: dict[int, DeviceState] = {}
        self.inaccessible: list[str] = []
        # warnings of the current tick; the sampler starts a fresh list each tick
        self.tick_warnings: list[str] = []
        self._proc_cache: dict[int, tuple[str | None, str | None, bool]] = {}
        self.codes: dict[str, int] = {}
        self.lost_codes: frozenset[int] = frozenset()
        self.err: type[BaseException] = Never
        self._mismatch: type[BaseException] = Never
        self._chains: dict[str, list[Candidate]] = {}
        self._bind()

    # --- setup ---------------------------------------------------------------

    def _bind(self) -> None:
        nvml = self.nvml
        self.codes = {name: getattr(nvml, name, code) for name, code in SUPPORT_CODES.items()}
        self.lost_codes = frozenset(
            self.codes[n]
            for n in (
                "NVML_ERROR_GPU_IS_LOST",
                "NVML_ERROR_UNKNOWN",
                "NVML_ERROR_RESET_REQUIRED",
                "NVML_ERROR_GPU_NOT_FOUND",
            )
        )
        self.err = getattr(nvml, "NVMLError", Never)
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
            self.missing.add("nvmlMemory_v2")
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

    def open_device(self, index: int, events: list[TelemetryEvent]) -> None:
        """Get the handle and static facts of GPU `index`; a lost one goes in `events`."""
        dev = DeviceState(index)
        try:
            dev.handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
        except self.err as exc:
            if getattr(exc, "value", None) in self.lost_codes:
                self.devices.append(dev)
                mark_lost(dev, exc, self._clock(), events)
            else:
                # e.g. NoPermission for a GPU outside this container's cgroup
                self.inaccessible.append(f"GPU{index} not accessible: {exc}")
            return
        self.devices.append(dev)
        self.by_key[handle_key(dev.handle)] = dev
        try:
            name = self._read(dev, "name")
            uuid = self._read(dev, "uuid")
            limit = self._read(dev, "power_limit")
        except Lost as lost:
            mark_lost(dev, lost.error, self._clock(), events)
            return
        dev.name = None if name is None else nvml_text(name)
        dev.uuid = None if uuid is None else nvml_text(uuid)
        dev.power_limit = None if limit is None else limit / 1000.0

    # --- per tick ------------------------------------------------------------

    def read_all(self, now: float, events: list[TelemetryEvent]) -> list[GpuInfo]:
        """One `GpuInfo` per device, in order; a device that fails is reported empty."""
        gpus: list[GpuInfo] = []
        seen_pids: set[int] = set()
        for dev in self.devices:
            try:
                gpus.append(self._sample_device(dev, now, events, seen_pids))
            except Exception as exc:  # a bug or odd binding must not stop the others
                self.tick_warnings.append(f"GPU{dev.index} read failed: {exc!r}")
                gpus.append(self._info(dev, {}))
        for pid in self._proc_cache.keys() - seen_pids:
            del self._proc_cache[pid]
        return gpus

    def warnings(self, now: float, gpus: list[GpuInfo]) -> list[str]:
        """Inaccessible GPUs, then each device's standing warnings (not this tick's)."""
        warns: list[str] = list(self.inaccessible)
        for dev, info in zip(self.devices, gpus, strict=True):
            warns.extend(self._device_warnings(dev, now, info))
        return warns

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
            fn = getattr(self.nvml, attr, None)
            if fn is None:
                self._drop(chain, label)
                continue
            try:
                return fn(dev.handle, *args)
            except self._mismatch:
                self._drop(chain, label)
            except self.err as exc:
                code = getattr(exc, "value", None)
                if code == self.codes["NVML_ERROR_FUNCTION_NOT_FOUND"]:
                    self._drop(chain, label)
                    continue
                if code in self.lost_codes:
                    raise Lost(exc) from exc
                if code in (
                    self.codes["NVML_ERROR_NOT_SUPPORTED"],
                    self.codes["NVML_ERROR_NO_PERMISSION"],
                ):
                    dev.unsupported.add(key)
                    return None
                self.tick_warnings.append(f"GPU{dev.index} {key}: {exc}")
                return None
        dev.unsupported.add(key)  # no function for it in this driver
        return None

    def _drop(self, chain: list[Candidate], label: str) -> None:
        # the chain list is shared by all devices: a missing function is global
        self.missing.add(label)
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
            mark_lost(dev, lost.error, now, events)
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


def mark_lost(
    dev: DeviceState, error: BaseException, now: float, events: list[TelemetryEvent]
) -> None:
    """Mark `dev` lost (once) and say so in `events`; the other GPUs keep reporting."""
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
