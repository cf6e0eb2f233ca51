"""The flight recorder's cost and size (issue 27). Not a test.

    python bench/recorder_bench.py [--ticks 1200] [--pace 0.02] [--hours 72] [--gpus 8]

1. The engine's tick with the recorder against the same tick without it, in the same
   run: two engines on two copies of a campaign of one idle stage, 8 simulated GPUs
   each (``cockpit.engine.default_samplers``), in blocks of 60 ticks taken in turn,
   each tick one second later than the last in sample time (so every tick records a
   sample, a transaction is written every 5 ticks and a minute closes every 60) and
   ``--pace`` (20 ms) later in real time: a campaign's ticks are 1 s apart and the
   recorder writes in its own thread between them (ticked back to back, that thread
   would fight the tick for the GIL as no campaign's does). The recording engine's
   store is first filled with 6.5 h of history through the recorder's API, so the
   ticks measured also delete the raw rows leaving the 6 h window, as a long
   campaign's do. Printed: median, p95, mean and max of each tick and the ratios
   (goal: the recorder within 5 % of a tick); and the process's CPU time per tick
   (every thread, each block's writing included) with and without, and the writer
   thread's own CPU time: what recording costs wherever it runs.
2. A synthetic recording of ``--hours`` (72) of ``--gpus`` (8) GPUs at 1 Hz written
   through the recorder's own API at accelerated time (each sample's time an argument;
   transactions every 5 s of sample time, as in a campaign): the store's size (file +
   WAL) every 12 h and at the end, and how long writing it took (goal: at most 50 MB);
   then how long a reader takes for one GPU series over the whole recording and for
   the whole campaign's totals.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cockpit.campaign import load_campaign  # noqa: E402
from cockpit.engine import Engine, default_samplers  # noqa: E402
from cockpit.journal.paths import CampaignFiles  # noqa: E402
from cockpit.telemetry.flight import (  # noqa: E402
    RAW_KEEP_S,
    FlightRecorder,
    RecordingReader,
    gpu_series,
)
from cockpit.telemetry.model import DiskInfo, GpuInfo, GpuProcess, HostInfo  # noqa: E402
from tests.helpers.campaigns import write_campaign  # noqa: E402


def synthetic(sec: int, gpus: int) -> tuple[list[GpuInfo], HostInfo]:
    """Readings shaped like NVML's: integer %, MiB-aligned bytes, milliwatts as watts,
    integer °C and MHz, one process per GPU, now and then a thermal throttle."""
    out = []
    for g in range(gpus):
        k = sec * 7919 + g * 104729
        util = k % 101
        out.append(GpuInfo(
            index=g, name="sim", uuid=None, util=float(util), mem_util=None,
            mem_used=(40_000 + k % 9_000) * 2**20, mem_total=80 * 2**30,
            temp=float(40 + util // 3), power=(70_000 + (k % 630_000)) / 1000,
            power_limit=700.0, sm_clock=1410 + util * 5, mem_clock=2619, fan=None,
            throttle=("sw thermal",) if k % 997 < 3 else (),
            processes=(GpuProcess(4000 + g, None, None, None, True),), lost=False,
            unsupported=()))
    host = HostInfo(cpu_percent=(sec * 31 % 1000) / 10, cpu_count=16, load1=None,
                    mem_used=(30_000 + sec % 5_000) * 2**20, mem_total=128 * 2**30,
                    swap_used=0, swap_total=0,
                    disks=(DiskInfo("/", 2**40 - sec * 4096, 2**41, False),
                           DiskInfo("/data", 2**41 - sec * 65536, 2**42, False)),
                    own_cpu_percent=None, own_rss=0, warnings=())
    return out, host


BLOCK = 60  # ticks an engine runs before the other takes its turn


def store_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def p95(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.95) - 1]


def tick_cost(folder: Path, count: int, pace: float) -> None:
    engines = {}
    start = datetime.now(timezone.utc).replace(microsecond=0)
    for name in ("without", "with"):
        campaign = load_campaign(write_campaign(folder / name,
                                                [{"id": "idle", "hours": 1, "resource": "human"}]))
        if name == "with":  # a full raw window behind it: the ticks prune as in a campaign
            t0 = int(start.timestamp()) - int(RAW_KEEP_S * 1.08)
            with FlightRecorder(CampaignFiles.of(campaign).recorder, batch_s=60) as rec:
                for sec in range(t0, int(start.timestamp()) - 1):
                    rec.record(sec, *synthetic(sec, 8))
        gpu, host = default_samplers(campaign, 8)
        engines[name] = Engine(campaign, gpu_sampler=gpu, host_sampler=host,
                               record=name == "with")
        engines[name].tick(start - timedelta(seconds=1))
    took: dict[str, list[float]] = {"without": [], "with": []}
    cpu: dict[str, float] = {"without": 0.0, "with": 0.0}
    flight = engines["with"].flight
    assert flight is not None
    try:
        for block in range(0, count, BLOCK):
            # Blocks of ticks, in turn (which goes first alternates): each block's CPU
            # time (every thread of the process) ends when the writer has written it.
            order = ("without", "with") if block // BLOCK % 2 else ("with", "without")
            for name in order:
                cpu_began = time.process_time()
                for i in range(block, min(block + BLOCK, count)):
                    now = start + timedelta(seconds=i)
                    began = time.perf_counter()
                    engines[name].tick(now)
                    took[name].append(time.perf_counter() - began)
                    time.sleep(pace)
                if name == "with":
                    flight.flush()
                cpu[name] += time.process_time() - cpu_began
    finally:
        for engine in engines.values():
            engine.close()
    assert not flight.warnings, flight.warnings
    a, w = took["without"], took["with"]
    print(f"1. engine tick, 8 simulated GPUs, {count} ticks 1 s apart in sample time, "
          f"{pace * 1e3:g} ms apart in real time (each engine):")
    for name, label, values in (("without", "without the recorder", a),
                                ("with", "with the recorder   ", w)):
        print(f"   {label}: median {statistics.median(values) * 1e3:.3f} ms, "
              f"p95 {p95(values) * 1e3:.3f} ms, mean {statistics.fmean(values) * 1e3:.3f} ms, "
              f"max {max(values) * 1e3:.1f} ms; CPU (all threads) "
              f"{cpu[name] / count * 1e3:.3f} ms a tick")
    med = statistics.median(w) / statistics.median(a)
    mean = statistics.fmean(w) / statistics.fmean(a)
    print(f"   the tick with/without: median {med:.3f}x, p95 {p95(w) / p95(a):.3f}x, "
          f"mean {mean:.3f}x (goal: within 5 %)")
    print(f"   CPU with/without, the writer thread included: "
          f"{cpu['with'] / cpu['without']:.3f}x; the writer thread's own time: "
          f"{flight.busy_s / count * 1e6:.0f} us of CPU a tick, "
          f"{flight.busy_s / count / statistics.fmean(a) * 100:.1f} % of a tick without "
          f"the recorder ({flight.transactions} transactions, {flight.samples} samples)")


def recording_size(folder: Path, hours: float, gpus: int) -> None:
    path = folder / "recorder.sqlite"
    seconds = int(hours * 3600)
    t0 = 1_800_000_000
    began = time.perf_counter()
    marks = []
    with FlightRecorder(path) as rec:
        for i in range(seconds):
            rec.record(t0 + i, *synthetic(t0 + i, gpus))
            if (i + 1) % (12 * 3600) == 0:
                rec.flush()
                marks.append(f"{(i + 1) // 3600} h {store_bytes(path) / 1e6:.1f} MB")
        transactions = rec.transactions
    took = time.perf_counter() - began
    size = store_bytes(path)
    print(f"2. a synthetic recording, {hours:g} h x {gpus} GPUs at 1 Hz through the "
          f"recorder's API: {size / 1e6:.1f} MB ({size / 2**20:.1f} MiB; goal at most "
          f"50 MB), written in {took:.1f} s ({took / seconds * 1e6:.0f} us a sample, "
          f"{transactions} transactions)")
    print(f"   size along the way: {', '.join(marks)}")
    with RecordingReader.open(path) as reader:
        began = time.perf_counter()
        points = reader.series(gpu_series(0, "util"), t0, t0 + seconds)
        series_s = time.perf_counter() - began
        began = time.perf_counter()
        totals = reader.totals()
        totals_s = time.perf_counter() - began
    print(f"   reading GPU 0's utilization over the whole recording: {len(points)} points "
          f"(minutes, then the raw seconds) in {series_s * 1e3:.0f} ms; the whole "
          f"campaign's totals of {len(totals)} series in {totals_s * 1e3:.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ticks", type=int, default=1200)
    parser.add_argument("--pace", type=float, default=0.02,
                        help="real seconds between two ticks (a campaign's are 1 s apart)")
    parser.add_argument("--hours", type=float, default=72.0)
    parser.add_argument("--gpus", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tick_cost(Path(tmp) / "ticks", args.ticks, args.pace)
        recording_size(Path(tmp) / "size", args.hours, args.gpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
