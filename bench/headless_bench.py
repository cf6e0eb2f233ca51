"""Headless cost: CPU % of one core at 1 Hz with 8 simulated GPUs and 3 running runs,
and `cockpit status --line` latency. Not a test: prints numbers for the README.

Baselines measured in the same run (the machines are shared and noisy):
- CPU: a bare 1 Hz loop that samples the same 8 fake GPUs straight from the fake
  pynvml module and tails the same 3 metric files (the least any monitor must do);
- latency: `python -c pass` (interpreter start-up).

    python bench/headless_bench.py --seconds 600    # the README's 10-minute figure
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil

RUN_SCRIPT = textwrap.dedent("""
    import sys, time
    from cockpit import report
    step = 0
    while True:
        step += 1
        report.log(step, loss=1.0 / step)
        time.sleep(0.5)
""")

BASELINE = textwrap.dedent("""
    import sys, time
    from cockpit.telemetry.simulated.nvml import FakeNvml
    nvml = FakeNvml.simulated(8).module()
    nvml.nvmlInit()
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(8)]
    files = [open(p) for p in sys.argv[2:]]
    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:
        for h in handles:
            nvml.nvmlDeviceGetUtilizationRates(h); nvml.nvmlDeviceGetMemoryInfo(h)
            nvml.nvmlDeviceGetPowerUsage(h)
        for f in files:
            f.read()
        time.sleep(1.0)
""")


def campaign(folder: Path) -> Path:
    (folder / "run.py").write_text(RUN_SCRIPT)
    stages = [{"id": f"s{i}", "hours": 1, "resource": "cpu" if i == 2 else f"gpu:{i}",
               "run": f"r{i}", "command": [sys.executable, "run.py"]} for i in range(3)]
    doc = {"campaign": "bench", "package": {"offer": "b200-3d",
                                            "start": "2026-12-02T08:00:00Z"},
           "stages": stages,
           "stop_rules": [{"id": "finite-loss", "kind": "non_finite", "metric": "loss"}]}
    path = folder / "campaign.yaml"
    path.write_text(json.dumps(doc))
    return path


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def measure_headless(path: Path, seconds: float) -> tuple[float, subprocess.Popen[bytes]]:
    """CPU % of the headless process; it is left running for the live latency test."""
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "headless", str(path), "--auto",
                             "--interval", "1", "--simulate-gpus", "8"],
                            stdout=subprocess.DEVNULL)
    ps = psutil.Process(proc.pid)
    time.sleep(5)  # start-up and the three launches are not the steady state
    start_cpu, start = cpu_seconds(ps), time.monotonic()
    time.sleep(seconds)
    used = cpu_seconds(ps) - start_cpu
    wall = time.monotonic() - start
    return 100.0 * used / wall, proc


def measure_baseline(files: list[Path], seconds: float) -> float:
    proc = subprocess.Popen([sys.executable, "-c", BASELINE, str(seconds + 5),
                             *map(str, files)])
    ps = psutil.Process(proc.pid)
    time.sleep(5)
    start_cpu, start = cpu_seconds(ps), time.monotonic()
    time.sleep(seconds)
    used = cpu_seconds(ps) - start_cpu
    wall = time.monotonic() - start
    proc.wait()
    return 100.0 * used / wall


def latency(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--latency-runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = campaign(Path(tmp))
        headless, proc = measure_headless(path, args.seconds)
        # A live status log (headless still running) for the fast path.
        live = latency([sys.executable, "-m", "cockpit", "status", str(path), "--line"],
                       args.latency_runs)
        proc.terminate()
        proc.wait()
        reports = sorted((Path(tmp) / ".cockpit" / "runs").glob("*/report.jsonl"))
        baseline = measure_baseline(reports, args.seconds)
        # Then a stale log for the cold path (a quick snapshot, no NVML init).
        os.utime(Path(tmp) / ".cockpit" / "status.jsonl", (0, 0))
        cold = latency([sys.executable, "-m", "cockpit", "status", str(path), "--line"],
                       max(5, args.latency_runs // 5))
        bare = latency([sys.executable, "-c", "pass"], args.latency_runs)
        subprocess.run([sys.executable, "-m", "cockpit", "stop", str(path), "r0", "--reason",
                        "bench over"], stdout=subprocess.DEVNULL)
        for run in ("r1", "r2"):
            subprocess.run([sys.executable, "-m", "cockpit", "stop", str(path), run,
                            "--reason", "bench over"], stdout=subprocess.DEVNULL)
    print(f"headless, 8 simulated GPUs, 3 runs, 1 Hz, {args.seconds:.0f} s:")
    print(f"  cockpit headless   {headless:.3f} % of one core")
    print(f"  bare 1 Hz loop     {baseline:.3f} % of one core (baseline)")
    print(f"  ratio              {headless / baseline if baseline else float('nan'):.1f}x")
    print(f"status --line, median of {args.latency_runs}:")
    print(f"  live status log    {live:.0f} ms")
    print(f"  cold (no live log) {cold:.0f} ms")
    print(f"  python -c pass     {bare:.0f} ms (baseline); live/bare {live / bare:.1f}x")


if __name__ == "__main__":
    main()
