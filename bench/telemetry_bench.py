"""Benchmark of the telemetry layer: tick cost, CPU share, history memory.

Measures, in one run:
  1. the cost of one sampling tick (8 simulated GPUs through the real adapter
     + the host sampler), median over N ticks, with a clock advancing 1 s per
     tick so slow fields (temperature, fan, ECC every 5 s) and disks are read
     at their real cadence;
  2. a trivial baseline in the same run: a bare loop calling the same fake
     module functions directly (no adapter), so the adapter's overhead is a
     ratio rather than a machine-dependent number;
  3. CPU time of 10 minutes of 1 Hz sampling as % of one core: process CPU
     time of N back-to-back ticks, divided by N, times 600 ticks, over 600 s;
  4. RSS growth after filling the real history buffers for 8 GPUs (4 series
     each) + 2 host series with 30 x 86,400 samples each, through
     Series.extend in one-day chunks (every sample goes through the buffers;
     nothing is extrapolated). It runs in a fresh child process and reports
     RSS growth and glibc's malloc-in-use growth (mallinfo2): a growth under
     ~1 MiB can fit in heap the interpreter freed at import and not show in RSS.

Note: with simulated GPUs the per-call cost is the fake's Python code; on a
real machine it is ctypes + the driver (see bench/gpu_check.py).

Usage: python bench/telemetry_bench.py [--ticks 10000] [--json]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import math
import statistics
import subprocess
import sys
import time
from array import array
from pathlib import Path
from typing import Any

import psutil

from cockpit.telemetry import GPU_SERIES, HOST_SERIES, GpuSampler, HostSampler, TelemetryHistory
from cockpit.telemetry.simulated.nvml import FakeNvml

N_GPUS = 8
DAYS = 30
SAMPLES_PER_DAY = 86_400


class StepClock:
    """Advances one second per tick, so cadences behave as at 1 Hz."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def bench_ticks(n: int) -> dict[str, float]:
    clock = StepClock()
    gpu = GpuSampler(simulate=N_GPUS, clock=clock)
    host = HostSampler([Path.cwd()], clock=clock)
    gpu.start()
    for _ in range(20):  # warm caches (process descriptions, chains)
        gpu.sample()
        host.sample()
        clock.t += 1
    full: list[int] = []
    gpu_only: list[int] = []
    cpu0 = time.process_time()
    for _ in range(n):
        t0 = time.perf_counter_ns()
        gpu.sample()
        t1 = time.perf_counter_ns()
        host.sample()
        t2 = time.perf_counter_ns()
        full.append(t2 - t0)
        gpu_only.append(t1 - t0)
        clock.t += 1
    cpu = time.process_time() - cpu0
    gpu.close()
    return {
        "tick_us_median": statistics.median(full) / 1000,
        "tick_us_p99": sorted(full)[int(0.99 * n)] / 1000,
        "gpu_tick_us_median": statistics.median(gpu_only) / 1000,
        "host_tick_us_median": (statistics.median(full) - statistics.median(gpu_only)) / 1000,
        "cpu_s_per_tick": cpu / n,
    }


def bench_baseline(n: int) -> float:
    """Median µs of one bare tick: the same NVML calls, no adapter."""
    clock = StepClock()
    fake = FakeNvml.simulated(N_GPUS, clock=clock)
    m: Any = fake.module()
    m.nvmlInit()
    handles = [m.nvmlDeviceGetHandleByIndex(i) for i in range(N_GPUS)]
    es = m.nvmlEventSetCreate()
    for h in handles:
        m.nvmlDeviceRegisterEvents(h, m.nvmlEventTypeXidCriticalError, es)
    times: list[int] = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        try:
            m.nvmlEventSetWait(es, 0)
        except m.NVMLError:
            pass
        for h in handles:
            m.nvmlDeviceGetUtilizationRates(h)
            m.nvmlDeviceGetMemoryInfo(h, m.nvmlMemory_v2)
            m.nvmlDeviceGetPowerUsage(h)
            m.nvmlDeviceGetClockInfo(h, m.NVML_CLOCK_SM)
            m.nvmlDeviceGetClockInfo(h, m.NVML_CLOCK_MEM)
            m.nvmlDeviceGetCurrentClocksEventReasons(h)
            m.nvmlDeviceGetComputeRunningProcesses_v3(h)
        times.append(time.perf_counter_ns() - t0)
        clock.t += 1
    m.nvmlShutdown()
    return statistics.median(times) / 1000


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def malloc_in_use() -> int | None:
    """Bytes malloc has handed out and not got back (glibc >= 2.33), else None."""
    try:
        fn = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    info = fn()
    return int(info.uordblks + info.hblkhd)


def bench_history_memory() -> dict[str, float | None]:
    proc = psutil.Process()
    # one plausible day, reused for every day and series (input is not history)
    # filled in place: growing it would leave freed heap the history could reuse
    day = array("d", bytes(8 * SAMPLES_PER_DAY))
    for i in range(SAMPLES_PER_DAY):
        day[i] = 50 + 40 * math.sin(i / 600)
    gc.collect()
    heap0 = malloc_in_use()
    rss0 = proc.memory_info().rss
    t0 = time.perf_counter()
    hist = TelemetryHistory()
    series = [hist.series(name, g) for g in range(N_GPUS) for name in GPU_SERIES]
    series += [hist.series(name) for name in HOST_SERIES]
    for d in range(DAYS):
        for s in series:
            s.extend(day, d * float(SAMPLES_PER_DAY), 1.0)
    fill_s = time.perf_counter() - t0
    gc.collect()
    rss1 = proc.memory_info().rss
    heap1 = malloc_in_use()
    total = len(series) * DAYS * SAMPLES_PER_DAY
    assert all(len(s.fine) == 600 and len(s.coarse) == 72 * 60 for s in series)
    return {
        "series": len(series),
        "samples_filled": total,
        "fill_s": fill_s,
        "history_bytes": hist.nbytes,
        "rss_growth_bytes": rss1 - rss0,
        "malloc_growth_bytes": None if heap0 is None or heap1 is None else heap1 - heap0,
    }


def _mib(n: float | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.2f} MiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=10_000)
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--history-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.history_only:
        print(json.dumps(bench_history_memory()))
        return
    child = subprocess.run(
        [sys.executable, __file__, "--history-only"], capture_output=True, text=True, check=True
    )
    mem: dict[str, Any] = json.loads(child.stdout)
    ticks = bench_ticks(args.ticks)
    baseline = bench_baseline(args.ticks)
    cpu_pct = ticks["cpu_s_per_tick"] * 600 / 600 * 100  # 600 ticks over 600 s, % of a core
    result = {
        "ticks": args.ticks,
        "gpus": N_GPUS,
        **ticks,
        "baseline_gpu_tick_us_median": baseline,
        "adapter_over_baseline": ticks["gpu_tick_us_median"] / baseline,
        "cpu_percent_of_one_core_at_1hz": cpu_pct,
        **mem,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    rows = [
        ("tick, 8 sim GPUs + host (median)", f"{ticks['tick_us_median']:.0f} µs"),
        ("tick, 8 sim GPUs + host (p99)", f"{ticks['tick_us_p99']:.0f} µs"),
        ("  GPU sampler part (median)", f"{ticks['gpu_tick_us_median']:.0f} µs"),
        ("  host sampler part (median)", f"{ticks['host_tick_us_median']:.0f} µs"),
        ("baseline: bare fake calls, 8 GPUs", f"{baseline:.0f} µs"),
        ("adapter / baseline", f"{result['adapter_over_baseline']:.2f}x"),
        ("CPU at 1 Hz (10 min)", f"{cpu_pct:.3f} % of one core"),
        (f"history fill ({mem['series']} series x {DAYS} d)", f"{mem['fill_s']:.1f} s"),
        ("history buffers", f"{mem['history_bytes'] / 2**20:.2f} MiB"),
        ("RSS growth after fill", _mib(mem["rss_growth_bytes"])),
        ("malloc in use, growth", _mib(mem["malloc_growth_bytes"])),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"telemetry bench: {args.ticks} ticks, {N_GPUS} simulated GPUs")
    for label, value in rows:
        print(f"  {label:<{width}}  {value:>16}")


if __name__ == "__main__":
    main()
