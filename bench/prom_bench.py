"""Prometheus outputs benchmark (a script, not a test; issue 29).

  python bench/prom_bench.py [--scrapes 2000] [--rounds 3]

One real snapshot (the illustrative sample campaign: 12 stages, its runs and rules,
8 simulated GPUs) rendered once, then offered both ways, alternately, ``--rounds``
times, in the same run:

- textfile: ``write_atomic`` of the text, what headless does each tick with ``--prom``
  (node_exporter reads the file at its own scrape);
- endpoint: ``headless --prom-port``'s server in this process, scraped ``--scrapes``
  times by a client in another process (as Prometheus would, one connection a scrape).

Printed: the text's size and render time (once a tick, shared by both), the CPU this
process spends per textfile write and per scrape (the server's threads), the client's
wall time per scrape, and the ratio endpoint / textfile.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cockpit.common.fsutil import write_atomic  # noqa: E402
from cockpit.fleet.open import open_engine  # noqa: E402
from cockpit.headless.prom_http import MetricsEndpoint  # noqa: E402
from cockpit.headless.prometheus import render  # noqa: E402
from tests.helpers.campaigns import move_window_to_now  # noqa: E402

CLIENT = """
import sys, time, urllib.request
url, n = sys.argv[1], int(sys.argv[2])
started = time.perf_counter()
for _ in range(n):
    with urllib.request.urlopen(url, timeout=10) as reply:
        reply.read()
print(time.perf_counter() - started)
"""


def snapshot_text(folder: Path) -> tuple[str, list[float]]:
    path = folder / "illustrative.yaml"
    shutil.copy(ROOT / "sample_campaigns" / "illustrative.yaml", path)
    move_window_to_now(path)
    engine = open_engine(path, simulate_gpus=8)
    try:
        snap = engine.tick()
    finally:
        engine.close()
    times = []
    for _ in range(200):
        started = time.perf_counter()
        text = render(snap)
        times.append(time.perf_counter() - started)
    return text, times


def textfile_cpu(text: str, folder: Path, writes: int) -> float:
    target = folder / "cockpit.prom"
    started = time.process_time()
    for _ in range(writes):
        write_atomic(target, text)
    return (time.process_time() - started) / writes


def endpoint_cpu(text: str, scrapes: int) -> tuple[float, float]:
    endpoint = MetricsEndpoint("127.0.0.1", 0)
    endpoint.publish(text)
    try:
        started = time.process_time()
        client = subprocess.run([sys.executable, "-c", CLIENT,
                                 f"http://127.0.0.1:{endpoint.port}/metrics", str(scrapes)],
                                capture_output=True, text=True, check=True)
        cpu = (time.process_time() - started) / scrapes
    finally:
        endpoint.close()
    return cpu, float(client.stdout) / scrapes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scrapes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        text, renders = snapshot_text(folder)
        print(f"text: {len(text.encode()):,} bytes, {text.count(chr(10)):,} lines; render "
              f"median {statistics.median(renders) * 1e3:.2f} ms (once a tick, both ways)")
        for round_ in range(1, args.rounds + 1):
            file_cpu = textfile_cpu(text, folder, args.scrapes)
            http_cpu, http_wall = endpoint_cpu(text, args.scrapes)
            print(f"round {round_}: textfile write {file_cpu * 1e6:.0f} µs CPU · endpoint "
                  f"scrape {http_cpu * 1e6:.0f} µs CPU (client wall {http_wall * 1e3:.2f} "
                  f"ms) · ratio {http_cpu / file_cpu:.2f}")


if __name__ == "__main__":
    main()
