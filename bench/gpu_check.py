"""Check the real NVML path on an NVIDIA machine while a small torch load runs.

Starts a child process that runs fp32 matmuls on cuda:0, samples GPUs and
host through the real adapter (GpuSampler with the real pynvml) for
--seconds (default 20) at --interval (default 0.5 s), prints what it read
and the mean and max cost of one full sampling tick (GPU + host) in ms.

Exit codes: 0 ok; 1 utilization never rose above 0 (telemetry or load
broken); 2 no GPU here (no torch, no cuda, or NVML unavailable), with the
reason on stderr.

Usage: python bench/gpu_check.py [--seconds 20] [--interval 0.5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cockpit.telemetry import GpuSampler, HostSampler, gpu_json, host_json

LOAD = r"""
import sys, time, torch
dev = torch.device("cuda:0")
a = torch.randn(4096, 4096, device=dev)
b = torch.randn(4096, 4096, device=dev)
torch.cuda.synchronize()
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
"""


def no_gpu(reason: str) -> None:
    print(f"gpu_check: no GPU to check here: {reason}", file=sys.stderr)
    sys.exit(2)


def main() -> None:
    ap = argparse.ArgumentParser(description="sample real GPUs under a small torch load")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--json", action="store_true", help="also print the last reading as JSON")
    args = ap.parse_args()

    try:
        import torch
    except ImportError:
        no_gpu("torch is not installed")
    if not torch.cuda.is_available():
        no_gpu("torch.cuda.is_available() is False (CPU-only torch or no NVIDIA driver)")

    gpu = GpuSampler()
    gpu.start()
    first = gpu.sample()
    if first.status != "ok":
        no_gpu(f"NVML: {first.error}")
    if not first.gpus:
        no_gpu(f"NVML reports no accessible GPU: {list(first.warnings)}")
    host = HostSampler([Path.cwd()])

    load = subprocess.Popen(
        [sys.executable, "-c", LOAD, str(args.seconds + 5)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert load.stdout is not None
        ready = load.stdout.readline().strip()  # waits for CUDA init in the child
        if ready != "ready":
            print(f"gpu_check: the torch load did not start (got {ready!r})", file=sys.stderr)
            sys.exit(1)
        costs: list[float] = []
        max_util = 0.0
        seen_pids: set[int] = set()
        events: list[str] = []
        end = time.monotonic() + args.seconds
        reading = first
        h = host.sample()
        while time.monotonic() < end:
            t0 = time.perf_counter()
            reading = gpu.sample()
            h = host.sample()
            costs.append((time.perf_counter() - t0) * 1000)
            events.extend(f"{e.kind}: {e.message}" for e in reading.events)
            for g in reading.gpus:
                max_util = max(max_util, g.util or 0.0)
                seen_pids.update(p.pid for p in g.processes)
            g0 = reading.gpus[0]
            print(
                f"  GPU0 util {g0.util}% mem {fmt_gib(g0.mem_used)}/{fmt_gib(g0.mem_total)} "
                f"power {g0.power} W temp {g0.temp} C sm {g0.sm_clock} MHz "
                f"throttle {','.join(g0.throttle) or '-'} procs {len(g0.processes)}"
            )
            time.sleep(args.interval)
    finally:
        load.kill()
        load.wait()
    gpu.close()

    print(f"driver {reading.driver}, {len(reading.gpus)} GPU(s)")
    for g in reading.gpus:
        print(f"  GPU{g.index} {g.name} {g.uuid} lost={g.lost} unsupported={list(g.unsupported)}")
    print(f"missing NVML functions: {sorted(gpu.missing_functions) or 'none'}")
    print(f"load pid {load.pid} seen in NVML processes: {load.pid in seen_pids}")
    print(f"warnings: {list(reading.warnings) or 'none'}; events: {events or 'none'}")
    print(f"host: cpu {h.cpu_percent}% of {h.cpu_count}, own rss {fmt_gib(h.own_rss)}")
    print(
        f"tick cost (GPU + host) over {len(costs)} ticks: "
        f"mean {statistics.fmean(costs):.2f} ms, max {max(costs):.2f} ms"
    )
    print(f"max utilization seen: {max_util}%")
    if args.json:
        out: dict[str, Any] = {
            "gpus": [gpu_json(g) for g in reading.gpus],
            "host": host_json(h),
            "tick_ms_mean": statistics.fmean(costs),
            "tick_ms_max": max(costs),
            "max_util": max_util,
            "missing_functions": sorted(gpu.missing_functions),
        }
        print(json.dumps(out, indent=2))
    if max_util <= 0:
        print("gpu_check: FAIL: utilization never rose above 0", file=sys.stderr)
        sys.exit(1)
    print("gpu_check: OK")


def fmt_gib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**30:.1f} GiB"


if __name__ == "__main__":
    main()
