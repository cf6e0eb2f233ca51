"""TUI cost benchmark (a script, not a test): CPU, memory and time to first frame.

  python bench/tui_bench.py [--minutes 5]

1. CPU % of one core at a 1 s tick: the cockpit (8 simulated GPUs, 3 active runs
   reporting a loss) at 120x40 (runs with their metrics and curves, budget, rules), at
   80x24 (the now panel), with a dialog open over the main screen (n: the dashboard
   keeps drawing behind it), with the chart screen (g) open, and with the chart open
   on a live run whose metric file holds 10^6 points, against a bare Textual app
   refreshing 8 sparklines at the same rate, all headless in the same run, each for a
   sixth of N minutes. Goals (issue 25): ratio <= 1.2 (main screen, dialog open),
   <= 2 (chart, 10^6 points). ``--only PART`` measures one part (for py-spy).
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


def campaign(folder: Path, history_points: int = 0) -> Engine:
    """3 live runs; with ``history_points``, r0's metric file already holds that many
    points when it starts (a run that has logged for days)."""
    stages = [{"id": f"s{i}", "hours": 1, "resource": "cpu", "run": f"r{i}",
               "command": step_command(steps=100000, sleep=0.5)} for i in range(3)]
    path = write_campaign(folder, stages)
    camp = load_campaign(path)
    if history_points:
        report = folder / ".cockpit" / "runs" / "r0" / "report.jsonl"
        report.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.time() - history_points - 3600  # it ends an hour before the runs start
        with open(report, "w") as handle:
            for step in range(history_points):
                handle.write(f'{{"t": {t0 + step:.1f}, "step": {step}, '
                             f'"loss": {2.5 / (1 + step / 3000) + random.random() * 0.01:.5f}}}\n')
    gpu, host = default_samplers(camp, 8)
    engine = Engine(camp, gpu_sampler=gpu, host_sampler=host, actor="bench")
    for i in range(3):
        engine.start(f"s{i}", force=i > 0)  # three runs side by side on the CPU (D6)
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


PARTS = ("main", "small", "dialog", "chart", "chart-1m", "bare")


def caught_up(app: CockpitApp, since: float) -> bool:
    """r0's stream has read its whole history: its newest point is a live one."""
    snap = app.snapshot
    run = snap.run("r0") if snap is not None else None
    return bool(run and run.points and (run.points[-1].t or 0) >= since)


def measure_part(part: str, engine: Engine, big: Engine, seconds: float,
                 live_since: float) -> tuple[float, float]:
    """CPU % and the time to the first snapshot of one part. The 10^6-point chart is
    measured once the engine has read the history (catching up is issue 24's bench)."""
    if part == "bare":
        return asyncio.run(measure(BareApp(), seconds))
    app = CockpitApp(big if part == "chart-1m" else engine, interval=1.0)
    keys = {"dialog": ("n",), "chart": ("g",), "chart-1m": ("g",)}.get(part, ())
    size = (80, 24) if part == "small" else (120, 40)

    def ready() -> bool:
        return app.snapshot is not None and (part != "chart-1m" or caught_up(app, live_since))

    return asyncio.run(measure(app, seconds, ready=ready, size=size, keys=keys))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=6.0)
    parser.add_argument("--ticks", type=int, default=3600)
    parser.add_argument("--only", choices=PARTS, default=None,
                        help="measure one part for --minutes (e.g. under py-spy)")
    args = parser.parse_args()
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory() as tmp:
        engine = campaign(Path(tmp) / "live")
        live_since = time.time()
        big = engine if args.only not in (None, "chart-1m") else \
            campaign(Path(tmp) / "big", history_points=1_000_000)
        try:
            if args.only:
                cpu, _ = measure_part(args.only, engine, big, seconds, live_since)
                print(f"{args.only}: {cpu:.1f}% of one core")
                return 0
            part = seconds / len(PARTS)
            cpu: dict[str, float] = {}
            first = 0.0
            for name in PARTS:
                cpu[name], took = measure_part(name, engine, big, part, live_since)
                first = took if name == "main" else first
            # Memory: tick as fast as the loop allows, then read RSS.
            fast = CockpitApp(engine, interval=0.001)

            async def many() -> int:
                async with fast.run_test(size=(120, 40)) as pilot:
                    while fast.ticks < args.ticks:
                        await pilot.pause(0.05)
                    return psutil.Process().memory_info().rss

            rss = asyncio.run(many())
        finally:
            for each in {id(engine): engine, id(big): big}.values():
                kill_runs(each)
                each.close()
    bare_cpu = cpu["bare"]

    def ratio(value: float) -> str:
        return f"{value / bare_cpu:.2f}" if bare_cpu else "inf"

    print(f"cpu (% of one core, {part:.0f} s each): bare textual, 8 sparklines {bare_cpu:.1f}%")
    print(f"  cockpit 120x40  {cpu['main']:.1f}% -> ratio {ratio(cpu['main'])} (goal <= 1.2)")
    print(f"  cockpit 80x24   {cpu['small']:.1f}% -> ratio {ratio(cpu['small'])} (goal <= 1.2)")
    print(f"  a dialog open   {cpu['dialog']:.1f}% -> ratio {ratio(cpu['dialog'])} "
          "(goal <= 1.2)")
    print(f"  chart open      {cpu['chart']:.1f}% -> ratio {ratio(cpu['chart'])} (goal <= 2)")
    print(f"  chart, 10^6 pts {cpu['chart-1m']:.1f}% -> ratio {ratio(cpu['chart-1m'])} "
          "(goal <= 2)")
    print(f"rss after {args.ticks} ticks: {rss / 2**20:.0f} MB (goal < 120 MB)")
    print(f"time to first frame: {first:.2f} s (goal < 1 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
