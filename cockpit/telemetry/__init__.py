"""Live GPU and host telemetry: NVML and psutil readings, history, derived alerts.

This package owns everything the cockpit measures about the machine. It
imports neither Textual nor Rich; pynvml is imported lazily when a real
`GpuSampler` starts. `fake_nvml` is the scripted stand-in used by tests and
by `--simulate-gpus N` / COCKPIT_SIMULATE_GPUS.
"""

from __future__ import annotations

from cockpit.common.units import format_bytes
from cockpit.telemetry.history import GPU_SERIES, HOST_SERIES, Series, TelemetryHistory
from cockpit.telemetry.host import HostSampler
from cockpit.telemetry.idle import IdleDetector
from cockpit.telemetry.model import (
    DiskInfo,
    GpuInfo,
    GpuProcess,
    GpuReading,
    HostInfo,
    TelemetryEvent,
    event_json,
    gpu_json,
    host_json,
    reading_json,
)
from cockpit.telemetry.nvml.adapter import (
    GpuSampler,
    decode_throttle,
    load_pynvml,
    simulate_count_from_env,
)

__all__ = [
    "GPU_SERIES",
    "HOST_SERIES",
    "DiskInfo",
    "GpuInfo",
    "GpuProcess",
    "GpuReading",
    "GpuSampler",
    "HostInfo",
    "HostSampler",
    "IdleDetector",
    "Series",
    "TelemetryEvent",
    "TelemetryHistory",
    "decode_throttle",
    "event_json",
    "format_bytes",
    "gpu_json",
    "host_json",
    "load_pynvml",
    "reading_json",
    "simulate_count_from_env",
]
