"""GPU telemetry through NVML (the `pynvml` module of nvidia-ml-py).

This module and the two beside it own the NVML adapter: init/shutdown, device
handles, what is read how often, decoding throttle reasons, the event API (Xid,
ECC), GPU process lookup through psutil, and every way NVML can fail. It degrades, never dies:
a field NVML does not support becomes None, a lost GPU is marked lost while
the others keep reporting, and a missing library, driver or permission turns
into an "unavailable" reading with a one-line reason that says the fix.

The module is injected (`GpuSampler(nvml=fake_module)`) so tests run this
code against `fake_nvml`; with nothing injected the real pynvml is imported
lazily in `start()`, never at import time. One sampler is used from one
thread (the engine's telemetry worker); it is not thread-safe.

NVML's vocabulary (codes, fixes in words, throttle decoding, Xid hints, loading
pynvml, the psutil process lookup) lives in :mod:`cockpit.telemetry.nvml.vocabulary`;
opening and reading each device, with its degradation chain, lives in
:mod:`cockpit.telemetry.nvml.device`; the Xid/ECC event set in
:mod:`cockpit.telemetry.nvml.events`. `GpuSampler` here is the facade over them:
lifecycle (load, init, shutdown), the unavailable reasons, and one reading per tick.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from cockpit.telemetry.model import GpuReading, ReadingStatus, TelemetryEvent
from cockpit.telemetry.nvml.device import DeviceReader
from cockpit.telemetry.nvml.events import EventWatcher
from cockpit.telemetry.nvml.vocabulary import INIT_FIXES, nvml_text, psutil_describe
from cockpit.telemetry.nvml.vocabulary import decode_throttle as decode_throttle  # re-exported
from cockpit.telemetry.nvml.vocabulary import load_pynvml as load_pynvml  # re-exported
from cockpit.telemetry.nvml.vocabulary import (
    simulate_count_from_env as simulate_count_from_env,  # re-exported
)
from cockpit.telemetry.simulated.nvml import FakeNvml


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
        self._missing: set[str] = set()
        self._reader: DeviceReader | None = None  # made in start(), once the module is known
        self._events: EventWatcher | None = None  # made in start(), once devices are open
        self._pending: list[TelemetryEvent] = []

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
        reader = self._reader = DeviceReader(
            self._nvml,
            clock=self._clock,
            slow_interval_s=self._slow_interval,
            describe=self._describe,
            missing=self._missing,
        )
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
                reader.open_device(index, self._pending)
        except Exception as exc:  # not an NVML error: a broken binding; never raise
            self._error = f"NVML setup failed ({exc!r}): run nvidia-smi to see what the driver says"
            return
        self._events = EventWatcher(reader, sticky_s=self._sticky_s)
        self._events.open()

    def sample(self) -> GpuReading:
        """One reading of every GPU, plus events that are new since the last one."""
        if not self._started:
            self.start()
        if self._closed:
            return self._unavailable("GPU telemetry closed")
        reader = self._reader
        if self._error is not None or reader is None:  # no reader: start() failed
            return self._unavailable(self._error or "GPU telemetry not started")
        now = self._clock()
        reader.tick_warnings = []
        events, self._pending = self._pending, []
        if self._events is not None:
            self._events.poll(now, events)
        gpus = reader.read_all(now, events)
        warns = reader.warnings(now, gpus)
        warns.extend(reader.tick_warnings)
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
        if self._events is not None:
            self._events.close()
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

    def _init_reason(self, exc: BaseException) -> str:
        code = getattr(exc, "value", None)
        reader = self._reader
        if reader is not None and isinstance(exc, reader.err) and isinstance(code, int):
            for name, reason in INIT_FIXES.items():
                if code == reader.codes.get(name):
                    return reason
            return f"NVML init failed ({exc}): run nvidia-smi to see what the driver says"
        return (
            f"NVML init failed ({type(exc).__name__}: {exc}): "
            "run nvidia-smi to see what the driver says"
        )

    def _unavailable(self, reason: str) -> GpuReading:
        return GpuReading(
            status="unavailable", error=reason, gpus=(), warnings=(), events=(), driver=None
        )
