"""TUI cost benchmark (a script, not a test): CPU, memory and time to first frame.

  python bench/tui_bench.py [--minutes 5]

1. CPU % of one core at a 1 s tick: the cockpit (8 simulated GPUs, 3 active runs
   reporting a loss) at 120x40 (runs with their metrics and curves, budget, rules) and
   at 80x24 (the now panel), and with the chart screen (g) open, against a bare
   Textual app refreshing 8 sparklines at the same rate, all headless in the same run,
   each for a quarter of N minutes. Goals: ratio <= 1.5 (main screen), <= 2 (chart).
2. RSS after 3,600 ticks (fast clock: ticks back to back). Goal: < 120 MB.
3. Time from App start to the first drawn snapshot. Goal: < 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual.app import App, ComposeResult  # noqa: E402
from textual.widgets import Sparkline  # noqa: E402

from cockpit.campaign import load_campaign  # noqa: E402
from cockpit.engine import Engine, default_samplers  # noqa: E402
from cockpit.tui.app import CockpitApp  # noqa: E402
from tests.helpers.campaigns import step_command, write_campaign  # noqa: E402


class BareApp(App[None]):
    """The floor: 8 sparklines redrawn once a second."""

    def compose(self) -> ComposeResult:
        for _ in range(8):
            yield Sparkline([random.random() for _ in range(60)])

    def on_mount(self) -> None:
        self.set_interval(1.0, self.tick)

    def tick(self) -> None:
        for spark in self.query(Sparkline):
            spark.data = [*list(spark.data or [])[1:], random.random()]


def campaign(folder: Path) -> Engine:
    stages = [{"id": f"s{i}", "hours": 1, "resource": "cpu", "run": f"r{i}",
               "command": step_command(steps=100000, sleep=0.5)} for i in range(3)]
    path = write_campaign(folder, stages)
    camp = load_campaign(path)
    gpu, host = default_samplers(camp, 8)
    engine = Engine(camp, gpu_sampler=gpu, host_sampler=host, actor="bench")
    for i in range(3):
        engine.start(f"s{i}")
    return engine


def cpu_seconds() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system


async def measure(app: App[Any], seconds: float, ready: Any = None,
                  size: tuple[int, int] = (120, 40), keys: tuple[str, ...] = ()
                  ) -> tuple[float, float]:
    async with app.run_test(size=size) as pilot:
        start = time.perf_counter()
        while ready is not None and not ready():
            await pilot.pause(0.01)
        first = time.perf_counter() - start
        for key in keys:  # e.g. g: the chart screen stays open while measured
            await pilot.press(key)
        await pilot.pause(1.0)
        c0, t0 = cpu_seconds(), time.perf_counter()
        await asyncio.sleep(seconds)
        cpu = (cpu_seconds() - c0) / (time.perf_counter() - t0) * 100
    return cpu, first


def kill_runs(engine: Engine) -> None:
    for ev in engine.journal.events():
        if ev["kind"] == "stage_started" and ev.get("pgid"):
            try:
                os.killpg(ev["pgid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--ticks", type=int, default=3600)
    args = parser.parse_args()
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory() as tmp:
        engine = campaign(Path(tmp))
        try:
            part = seconds / 4
            app = CockpitApp(engine, interval=1.0)
            cockpit_cpu, first = asyncio.run(measure(app, part,
                                                     ready=lambda: app.snapshot is not None))
            small = CockpitApp(engine, interval=1.0)
            small_cpu, _ = asyncio.run(measure(small, part, size=(80, 24),
                                               ready=lambda: small.snapshot is not None))
            chart = CockpitApp(engine, interval=1.0)
            chart_cpu, _ = asyncio.run(measure(chart, part, keys=("g",),
                                               ready=lambda: chart.snapshot is not None))
            bare_cpu, _ = asyncio.run(measure(BareApp(), part))
            # Memory: tick as fast as the loop allows, then read RSS.
            fast = CockpitApp(engine, interval=0.001)

            async def many() -> int:
                async with fast.run_test(size=(120, 40)) as pilot:
                    while fast.ticks < args.ticks:
                        await pilot.pause(0.05)
                    return psutil.Process().memory_info().rss

            rss = asyncio.run(many())
        finally:
            kill_runs(engine)
            engine.close()
    def ratio(cpu: float) -> str:
        return f"{cpu / bare_cpu:.2f}" if bare_cpu else "inf"

    print(f"cpu (% of one core, {part:.0f} s each): bare textual, 8 sparklines {bare_cpu:.1f}%")
    print(f"  cockpit 120x40 {cockpit_cpu:.1f}% -> ratio {ratio(cockpit_cpu)} (goal <= 1.5)")
    print(f"  cockpit 80x24  {small_cpu:.1f}% -> ratio {ratio(small_cpu)} (goal <= 1.5)")
    print(f"  chart open     {chart_cpu:.1f}% -> ratio {ratio(chart_cpu)} (goal <= 2)")
    print(f"rss after {args.ticks} ticks: {rss / 2**20:.0f} MB (goal < 120 MB)")
    print(f"time to first frame: {first:.2f} s (goal < 1 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
