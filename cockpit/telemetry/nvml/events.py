"""NVML event watching for the GPU adapter: Xid critical errors and double-bit ECC.

This module owns the event set of :class:`cockpit.telemetry.nvml.adapter.GpuSampler`:
creating it and registering each open GPU for the event types it supports,
polling it without blocking once per tick (at most `MAX_EVENTS_PER_TICK`
events), turning what it returns into `gpu_xid`/`gpu_ecc` telemetry events (an
Xid also leaves a warning that sticks for `sticky_s`), and freeing it. Events are
a bonus: when the driver cannot deliver them, sampling works without them.

It works on the devices and NVML binding of a
:class:`cockpit.telemetry.nvml.device.DeviceReader`.
"""

from __future__ import annotations

from typing import Any

from cockpit.telemetry.model import TelemetryEvent
from cockpit.telemetry.nvml.device import DeviceReader
from cockpit.telemetry.nvml.vocabulary import (
    EVENT_DBE,
    EVENT_XID,
    MAX_EVENTS_PER_TICK,
    XID_HINTS,
    handle_key,
)


class EventWatcher:
    """One NVML event set over the reader's devices; not thread-safe, like the sampler."""

    def __init__(self, reader: DeviceReader, *, sticky_s: float) -> None:
        self._reader = reader
        self._nvml: Any = reader.nvml
        self._sticky_s = sticky_s
        self._event_set: Any = None

    def open(self) -> None:
        """Create the event set and register the live GPUs. Never raises."""
        try:
            self._open()
        except Exception:
            self._event_set = None  # events are a bonus: sampling works without them

    def _open(self) -> None:
        nvml, reader = self._nvml, self._reader
        create = getattr(nvml, "nvmlEventSetCreate", None)
        if create is None or not hasattr(nvml, "nvmlEventSetWait"):
            reader.missing.add("nvmlEventSetCreate" if create is None else "nvmlEventSetWait")
            return
        try:
            event_set = create()
        except Exception as exc:
            if getattr(exc, "value", None) == reader.codes["NVML_ERROR_FUNCTION_NOT_FOUND"]:
                reader.missing.add("nvmlEventSetCreate")
            return
        wanted = getattr(nvml, "nvmlEventTypeXidCriticalError", EVENT_XID) | getattr(
            nvml, "nvmlEventTypeDoubleBitEccError", EVENT_DBE
        )
        registered = 0
        for dev in reader.devices:
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

    def poll(self, now: float, events: list[TelemetryEvent]) -> None:
        """Append the events that arrived since the last poll; failures are tick warnings."""
        if self._event_set is None:
            return
        reader = self._reader
        wait = self._nvml.nvmlEventSetWait
        for _ in range(MAX_EVENTS_PER_TICK):
            try:
                data = wait(self._event_set, 0)  # timeout 0: never blocks the tick
            except reader.err as exc:
                if getattr(exc, "value", None) != reader.codes["NVML_ERROR_TIMEOUT"]:
                    reader.tick_warnings.append(f"NVML event wait failed: {exc}")
                return
            except Exception as exc:
                reader.tick_warnings.append(f"NVML event wait failed: {exc!r}")
                return
            dev = reader.by_key.get(handle_key(data.device))
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

    def close(self) -> None:
        """Free the event set; safe to call twice."""
        if self._event_set is not None:
            try:
                self._nvml.nvmlEventSetFree(self._event_set)
            except Exception:
                pass  # shutting down anyway
            self._event_set = None
