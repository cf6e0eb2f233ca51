"""NVML's vocabulary for the GPU adapter: codes, fixes in words, throttle reasons, lookups.

This module owns the pure and near-pure pieces that :mod:`cockpit.telemetry.nvml.adapter`'s
sampler uses: the NVML return codes it backs up, the one-line fix per init failure,
throttle-reason decoding (``decode_throttle``), Xid hints, loading the real pynvml
(``load_pynvml``), ``COCKPIT_SIMULATE_GPUS``, the psutil lookup of a GPU process, and
the per-device record the sampler keeps (``DeviceState``).
"""

from __future__ import annotations

import ctypes
import math
import os
import warnings
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import psutil

# NVML return codes are part of the C ABI; the module's own constants are used
# when present, these only back them up.
SUPPORT_CODES = {
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


INIT_FIXES = {
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


XID_HINTS = {
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


EVENT_XID = 0x8  # nvmlEventTypeXidCriticalError


EVENT_DBE = 0x2  # nvmlEventTypeDoubleBitEccError


MAX_EVENTS_PER_TICK = 64


LOST_FIX = "check `dmesg` for Xid messages; it usually needs a reboot"


# (label recorded when missing, attribute on the module, args after the handle)
Candidate = tuple[str, str, tuple[Any, ...]]


def decode_throttle(mask: int) -> tuple[str, ...]:
    """Clock event reason bits as words, lowest bit first."""
    return tuple(word for bit, word in THROTTLE_WORDS if mask & bit)


def load_pynvml() -> ModuleType:
    """Import the real pynvml, hiding the FutureWarning of the deprecated `pynvml` dist."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import pynvml
    module: ModuleType = pynvml
    return module


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


def nvml_text(value: Any) -> str:
    # nvidia-ml-py before 11.515 returned bytes for strings
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def handle_key(handle: Any) -> int:
    # pynvml hands back a fresh ctypes pointer in event data: compare addresses
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value or id(handle)
    except (TypeError, ctypes.ArgumentError):
        return id(handle)


class Lost(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class Never(Exception):
    """Stands in for exception classes a module does not have."""


@dataclass
class DeviceState:
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
