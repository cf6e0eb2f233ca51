"""Benchmark: checkpoint scanning per tick, and reload verification cost.

1. ``CheckpointScanner.scan`` over a folder of 10,000 checkpoint files: first scan and
   steady state (folder unchanged), against a bare ``os.stat`` of the folder.
2. ``verify_checkpoint`` of a ~1 GB checkpoint against a bare ``torch.load`` in a fresh
   process (both include starting python and importing torch).

Usage: ``python bench/checkpoint_bench.py [--files 10000] [--size-mb 1024] [--ticks 500]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cockpit.runs.checkpoints.discovery import CheckpointScanner
from cockpit.runs.checkpoints.reload_check import verify_checkpoint


def bench_scan(root: Path, files: int, ticks: int) -> None:
    folder = root / "scan"
    folder.mkdir()
    old = time.time() - 3600
    for i in range(files):
        path = folder / f"step_{i}.pt"
        path.write_bytes(b"x")
        os.utime(path, (old, old))  # written long ago: complete at first sight
    os.utime(folder, (old, old))  # not "just changed": the steady state applies

    scanner = CheckpointScanner(folder)
    started = time.perf_counter()
    view = scanner.scan(time.time())
    first = time.perf_counter() - started
    assert view.complete_count == files, view.complete_count

    def per_call(fn) -> float:
        samples = []
        for _ in range(ticks):
            t = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t)
        return statistics.median(samples)

    steady = per_call(lambda: scanner.scan(time.time()))
    bare = per_call(lambda: os.stat(folder))
    (folder / "step_999999.pt").write_bytes(b"y")  # one new checkpoint: one relisting
    started = time.perf_counter()
    scanner.scan(time.time())
    relist = time.perf_counter() - started
    print(f"scan, {files} files: first scan {first * 1e3:.1f} ms; "
          f"steady tick {steady * 1e6:.0f} us (median of {ticks}); "
          f"bare os.stat of the folder {bare * 1e6:.1f} us; ratio {steady / bare:.0f}x; "
          f"tick after one new file {relist * 1e3:.1f} ms")


def bench_verify(root: Path, size_mb: int) -> None:
    try:
        import torch
    except ImportError:
        print("verify: torch not installed, skipped")
        return
    free_mb = shutil.disk_usage(root).free // 2**20
    if free_mb < size_mb * 2 + 512:
        shrunk = max(16, (free_mb - 512) // 2)
        print(f"verify: only {free_mb} MB free under {root}: using {shrunk} MB "
              f"instead of {size_mb} MB")
        size_mb = shrunk
    model = torch.nn.Linear(1024, 1024)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # The size is in the weights: one float32 tensor of size_mb.
    weights = {"big": torch.zeros(size_mb * 2**20 // 4), **model.state_dict()}
    path = root / "big.pt"
    started = time.perf_counter()
    torch.save({"model": weights, "optimizer": opt.state_dict(), "step": 1}, path)
    write = time.perf_counter() - started
    actual_mb = path.stat().st_size / 2**20
    del weights

    with path.open("rb") as stream:  # same page-cache state for both measurements
        while stream.read(1 << 24):
            pass
    code = ("import time, torch, sys; t=time.perf_counter(); "
            "torch.load(sys.argv[1], map_location='cpu', weights_only=True); "
            "print(time.perf_counter()-t)")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, check=True)
    bare_wall = time.perf_counter() - started
    bare_load = float(done.stdout.strip())

    report = verify_checkpoint(path, "train", timeout=600)
    assert report.ok, report.summary()
    print(f"verify, {actual_mb:.0f} MB checkpoint (written in {write:.2f} s): "
          f"verify_checkpoint {report.wall_seconds:.2f} s wall (load {report.load_seconds:.2f} s)"
          f"; bare torch.load in a fresh process {bare_wall:.2f} s wall "
          f"(load {bare_load:.2f} s); ratio {report.wall_seconds / bare_wall:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--ticks", type=int, default=500)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--skip-verify", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cockpit-bench-") as tmp:
        root = Path(tmp)
        bench_scan(root, args.files, args.ticks)
        if not args.skip_verify:
            bench_verify(root, args.size_mb)


if __name__ == "__main__":
    main()
