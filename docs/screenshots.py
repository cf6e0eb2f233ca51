"""Regenerate the docs' screenshots: `PYTHONPATH=. python docs/screenshots.py`.

The campaign is the layout tests' (tests/helpers/tui_campaign.py): three runs running,
one whose loss went NaN so its rule fired, a fixed clock and simulated GPUs, plus two
other costs for the budget panel. Writes docs/cockpit-80x24.svg and
docs/cockpit-120x40.svg (the main screen), docs/cockpit-chart.svg (the chart screen,
`g`, at 120x40), docs/decide-80x24.svg (the decision after the pilot at 80x24, its
note being typed) and docs/cockpit-timeline.svg (the full-screen timeline, `T`, at
120x40: each GPU's utilization under the stages, from a flight recording written before
the cockpit opened, with a stretch nothing was recorded) and
docs/report-hours-example.md (REPORT.md's "What the hours bought" for the same campaign).
"""

from __future__ import annotations

import asyncio
import math
import tempfile
from datetime import timedelta
from pathlib import Path

from cockpit.export.hours_md import hours_section
from cockpit.journal.paths import CampaignFiles
from cockpit.telemetry.flight import FlightRecorder
from cockpit.telemetry.model import GpuInfo
from cockpit.tui.app import CockpitApp
from tests.helpers.tui_campaign import NOW, STARTED, running_campaign

DOCS = Path(__file__).resolve().parent


def util_at(t: float, index: int) -> float | None:
    """A day as the recording saw it: a smoke test on GPU 0 in the morning, the cockpit
    down (nothing recorded) at midday, idle GPUs, then the runs from STARTED."""
    hours = (t - NOW.timestamp()) / 3600
    if hours < -10 or -8 <= hours < -6:
        return None  # not recorded
    if hours < -8:
        return 55 + 10 * math.sin(t / 600) if index == 0 else 2.0
    if t < STARTED.timestamp():
        return 3.0
    return (93.0 if index == 0 else 68.0) + 4 * math.sin(t / 300 + index)


def record_day(folder: Path) -> None:
    """The recording of the day before the screenshot's NOW, a sample every 10 s."""
    with FlightRecorder(CampaignFiles.beside(folder / "campaign.yaml").recorder) as rec:
        rec.open()
        t = (NOW - timedelta(hours=10)).timestamp()
        while t < NOW.timestamp() - 30:
            gpus = [GpuInfo(index=i, name="NVIDIA H100", uuid=None, util=u, mem_util=None,
                            mem_used=40 * 2**30, mem_total=80 * 2**30, temp=60.0,
                            power=500.0, power_limit=700.0, sm_clock=1800, mem_clock=9501,
                            fan=None, throttle=(), processes=(), lost=False, unsupported=())
                    for i in range(2) if (u := util_at(t, i)) is not None]
            if gpus:
                rec.record(t, gpus, None)
            t += 10
        rec.flush(60.0)


async def shoot(name: str, size: tuple[int, int], keys: tuple[str, ...] = (),
                pilot_done: bool = False, recorded: bool = False) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if recorded:
            record_day(Path(tmp))
        engine = running_campaign(Path(tmp))
        engine.cost("cloud storage", "12.50", "USD", now=NOW)
        if pilot_done:  # a decision is due
            engine.mark("pilot", "started", now=NOW)
            engine.mark("pilot", "done", now=NOW)
        app = CockpitApp(engine, interval=3600, theme="default")
        async with app.run_test(size=size) as pilot:
            for _ in range(100):
                if app.snapshot is not None and app.main.stages_table.row_count:
                    break
                await pilot.pause(0.05)
            for key in keys:
                await pilot.press(key)
                await pilot.pause(0.5)
            if not keys:
                app.set_focus(None)
            await pilot.pause(0.5)
            (DOCS / name).write_text(app.export_screenshot())
            if recorded and app.snapshot is not None and app.snapshot.hours is not None:
                # REPORT.md's "What the hours bought" for the same campaign and recording.
                (DOCS / "report-hours-example.md").write_text(
                    hours_section(app.snapshot.hours))


async def main() -> None:
    await shoot("cockpit-80x24.svg", (80, 24))
    await shoot("cockpit-120x40.svg", (120, 40))
    await shoot("cockpit-chart.svg", (120, 40), ("g",))
    await shoot("decide-80x24.svg", (80, 24), ("d", "enter", *"pilot", "space", *"fits"),
                pilot_done=True)
    await shoot("cockpit-timeline.svg", (120, 40), ("T",), recorded=True)


if __name__ == "__main__":
    asyncio.run(main())
