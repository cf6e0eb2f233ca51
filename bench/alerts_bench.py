"""A tick with a dead alert target (issue 26's goal: under 50 ms). Not a test.

    python bench/alerts_bench.py [--ticks 200]

The engine (8 simulated GPUs, a campaign of one idle stage) ticks back to back while
an alert is raised on every tick for a target that never answers (an HTTP server on
127.0.0.1 that accepts the connection and sleeps: each send hangs until apprise's
timeout), against the same engine with no target, in the same run. Printed: the
median and 95th percentile tick with each, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cockpit.alerts.message import Alert  # noqa: E402
from cockpit.alerts.targets import Target  # noqa: E402
from cockpit.campaign import load_campaign  # noqa: E402
from cockpit.engine import Engine, default_samplers  # noqa: E402
from tests.helpers.campaigns import write_campaign  # noqa: E402


def silent_server() -> tuple[socket.socket, int]:
    """Accepts connections and never answers (a target that hangs)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return
    threading.Thread(target=accept, daemon=True).start()
    return server, int(server.getsockname()[1])


def ticks(folder: Path, targets: list[Target], count: int) -> list[float]:
    path = write_campaign(folder, [{"id": "idle", "hours": 1, "resource": "human"}])
    campaign = load_campaign(path)
    gpu, host = default_samplers(campaign, 8)
    engine = Engine(campaign, gpu_sampler=gpu, host_sampler=host, alerts=targets)
    engine.tick()
    took: list[float] = []
    try:
        for i in range(count):
            began = time.perf_counter()  # the alert is raised inside the tick's time
            if targets:
                engine.alerting.notify(Alert(f"bench:{i}", "critical", "a rule fired",
                                             "stopped it", "cockpit status"),
                                       datetime.now(timezone.utc))
            engine.tick()
            took.append(time.perf_counter() - began)
    finally:
        engine.close()
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=200)
    args = parser.parse_args()
    server, port = silent_server()
    dead = [Target("dead", f"json://127.0.0.1:{port}/hook")]
    with tempfile.TemporaryDirectory() as tmp:
        alone = ticks(Path(tmp) / "alone", [], args.ticks)
        with_dead = ticks(Path(tmp) / "dead", dead, args.ticks)
    server.close()

    def p95(values: list[float]) -> float:
        return sorted(values)[int(len(values) * 0.95) - 1]

    a, d = statistics.median(alone), statistics.median(with_dead)
    print(f"tick, no alert target:        median {a * 1000:.1f} ms, p95 {p95(alone) * 1000:.1f} ms")
    print(f"tick, a dead target, an alert every tick: median {d * 1000:.1f} ms, "
          f"p95 {p95(with_dead) * 1000:.1f} ms ({d / a:.2f}x; goal < 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
