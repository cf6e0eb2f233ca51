"""Telemetry value types: the frozen readings the samplers hand to the engine.

This module owns the shapes (GPU, process, host, disk, event) and their JSON
form for `cockpit status` and the headless log. Units are fixed here: bytes
for memory and disk, watts for power, degrees C, MHz, percent. `None` means
"not supported / not read", never zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

EventKind = Literal["gpu_ecc", "gpu_xid", "gpu_lost"]
ReadingStatus = Literal["ok", "simulated", "unavailable"]


@dataclass(frozen=True)
class TelemetryEvent:
    """Something the journal should keep: a new ECC error, an Xid, a lost GPU."""

    kind: EventKind
    gpu: int
    message: str
    code: int | None = None  # Xid number or ECC count, when there is one
    at: float | None = None  # sampler clock time when it was seen


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_memory: int | None
    user: str | None
    command: str | None
    # False when NVML reports a pid psutil cannot see (host pid from inside a
    # container, or a process that already exited): kept, never dropped.
    visible: bool


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str | None
    uuid: str | None
    util: float | None
    mem_util: float | None
    mem_used: int | None
    mem_total: int | None
    temp: float | None
    power: float | None
    power_limit: float | None
    sm_clock: int | None
    mem_clock: int | None
    fan: float | None
    throttle: tuple[str, ...]
    processes: tuple[GpuProcess, ...]
    lost: bool
    unsupported: tuple[str, ...]


@dataclass(frozen=True)
class GpuReading:
    status: ReadingStatus
    error: str | None
    gpus: tuple[GpuInfo, ...]
    warnings: tuple[str, ...]
    events: tuple[TelemetryEvent, ...]
    driver: str | None

    @property
    def simulated(self) -> bool:
        return self.status == "simulated"


@dataclass(frozen=True)
class DiskInfo:
    path: str
    free: int
    total: int
    low: bool


@dataclass(frozen=True)
class HostInfo:
    cpu_percent: float | None  # None until psutil has a real interval to measure
    cpu_count: int
    load1: float | None
    mem_used: int
    mem_total: int
    swap_used: int
    swap_total: int
    disks: tuple[DiskInfo, ...]
    own_cpu_percent: float | None
    own_rss: int
    warnings: tuple[str, ...]


def process_json(p: GpuProcess) -> dict[str, Any]:
    return {
        "pid": p.pid,
        "used_memory": p.used_memory,
        "user": p.user,
        "command": p.command,
        "visible": p.visible,
    }


def gpu_json(g: GpuInfo) -> dict[str, Any]:
    """One GPU as plain JSON types (bytes in bytes, watts, None = not supported)."""
    return {
        "index": g.index,
        "name": g.name,
        "uuid": g.uuid,
        "util": g.util,
        "mem_util": g.mem_util,
        "mem_used": g.mem_used,
        "mem_total": g.mem_total,
        "temp": g.temp,
        "power": g.power,
        "power_limit": g.power_limit,
        "sm_clock": g.sm_clock,
        "mem_clock": g.mem_clock,
        "fan": g.fan,
        "throttle": list(g.throttle),
        "processes": [process_json(p) for p in g.processes],
        "lost": g.lost,
        "unsupported": list(g.unsupported),
    }


def event_json(e: TelemetryEvent) -> dict[str, Any]:
    return {"kind": e.kind, "gpu": e.gpu, "message": e.message, "code": e.code}


def reading_json(r: GpuReading) -> dict[str, Any]:
    return {
        "status": r.status,
        "simulated": r.simulated,
        "error": r.error,
        "driver": r.driver,
        "gpus": [gpu_json(g) for g in r.gpus],
        "warnings": list(r.warnings),
        "events": [event_json(e) for e in r.events],
    }


def host_json(h: HostInfo) -> dict[str, Any]:
    return {
        "cpu_percent": h.cpu_percent,
        "cpu_count": h.cpu_count,
        "load1": h.load1,
        "mem_used": h.mem_used,
        "mem_total": h.mem_total,
        "swap_used": h.swap_used,
        "swap_total": h.swap_total,
        "disks": [
            {"path": d.path, "free": d.free, "total": d.total, "low": d.low} for d in h.disks
        ],
        "own_cpu_percent": h.own_cpu_percent,
        "own_rss": h.own_rss,
        "warnings": list(h.warnings),
    }
