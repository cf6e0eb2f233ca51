"""The TUI reads the flight recording (issue 27): a cockpit opened after telemetry was
recorded (through the recorder's own API, at past times; or by a real headless cockpit
killed with SIGKILL) shows it at once: the GPU sparklines are seeded with the seconds
before the open, the timeline draws each GPU's utilization under the stage bars (a ·
where nothing was recorded, never idle or busy), and the full-screen timeline fits
60x20, 80x24 and 120x40 (fewer GPU rows, "+N GPUs", rather than overflow)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("textual")

from textual.widgets import Label  # noqa: E402

from cockpit.campaign import load_campaign  # noqa: E402
from cockpit.engine import CampaignFiles, Engine, Recorded  # noqa: E402
from cockpit.engine.snapshot import Snapshot  # noqa: E402
from cockpit.telemetry import GpuSampler  # noqa: E402
from cockpit.telemetry.flight import (  # noqa: E402
    FlightRecorder,
    RecordingReader,
    RecordingUnreadable,
    gpu_series,
)
from cockpit.tui import text as tx  # noqa: E402
from cockpit.tui.app import CockpitApp  # noqa: E402
from cockpit.tui.chart_data import TELEMETRY  # noqa: E402
from cockpit.tui.full_screens import ChartScreen, TimelineScreen  # noqa: E402
from cockpit.tui.panels.gpus import spark_cells  # noqa: E402
from cockpit.tui.panels.timeline import _Scale, timeline_text  # noqa: E402
from tests.helpers.campaigns import write_campaign  # noqa: E402
from tests.helpers.process import pilot_until, wait_for  # noqa: E402
from tests.tui.test_tui_snapshots import (  # noqa: E402
    FixedHost,
    screen_settled,
    screen_text,
    settled,
)
from tests.unit.test_recorder import gpu, host  # noqa: E402

STAGES = [{"id": "train", "hours": 20, "resource": "human"}]


def recorded_before(path: Path, now: float, gpus: int = 2) -> None:
    """GPU 0 busy (95 %) and the others idle (5 %) from 3 h to 2 h ago and for the last
    30 minutes (up to 5 s ago); nothing recorded between (the cockpit was down)."""
    seconds = [*range(int(now) - 3 * 3600, int(now) - 2 * 3600),
               *range(int(now) - 1800, int(now) - 5)]
    with FlightRecorder(CampaignFiles.beside(path).recorder) as rec:
        rec.open()
        for sec in seconds:
            rec.record(float(sec), [gpu(i, 95.0 if i == 0 else 5.0, 2**30, 100.0, 50.0)
                                    for i in range(gpus)], host(20.0, 2**33))
        rec.flush(60.0)


def app_for(path: Path, simulate: int = 2) -> CockpitApp:
    engine = Engine(load_campaign(path), actor="tui", gpu_sampler=GpuSampler(simulate=simulate),
                    host_sampler=FixedHost())  # type: ignore[arg-type]
    return CockpitApp(engine, interval=3600, theme="default")


async def opened(app: CockpitApp, pilot: object) -> Snapshot:
    """The first snapshot drawn, with what the recording held, and the screen settled."""
    await settled(pilot)
    assert app.snapshot is not None
    return app.snapshot


def cells_of(text: str, label: str) -> str:
    """The strip of the timeline row that starts with ``label`` (between the │s)."""
    line = next(line for line in text.splitlines() if label in line)
    return line[line.index(label):].split("│")[1]


def test_a_recording_made_before_the_open_shows_in_the_sparklines_and_timeline(
        tmp_path: Path) -> None:
    path = write_campaign(tmp_path, STAGES)
    now = time.time()
    recorded_before(path, now)
    app = app_for(path)

    async def run() -> None:
        async with app.run_test(size=(200, 60)) as pilot:
            snap = await opened(app, pilot)
            assert isinstance(app.recorded, Recorded) and app.recorded.state == "read"
            # Sparklines: the recording's last seconds, before the one live sample.
            history = app.main.gpu_panel.history  # type: ignore[union-attr]
            util0 = history.find("util", 0)
            assert util0 is not None
            seeded = util0.recent(600)
            assert seeded.count(95.0) >= 580 and set(seeded[:-1]) == {95.0}
            assert set(history.recent("util", 1, 600)[:-1]) == {5.0}
            cells = spark_cells(util0, 12)
            assert len(cells) == 12 and cells[:-1] == [95.0] * 11
            text = screen_text(app)
            assert tx.sparkline([95.0] * 11, 11) in text  # drawn on the GPU row
            # Timeline: one row per GPU under the stage bars, on the stages' time axis.
            scale = _Scale(snap, len(cells_of(text, "gpu 0 util")))
            busy, idle = cells_of(text, "gpu 0 util"), cells_of(text, "gpu 1 util")

            def col(hours_ago: float) -> int:
                return scale.at(snap.taken_at - timedelta(hours=hours_ago))

            assert busy[col(2.5)] == "█" and idle[col(2.5)] == "▁"
            assert busy[col(0.25)] == "█" and idle[col(0.25)] == "▁"
            assert busy[col(1.25)] == "·" and idle[col(1.25)] == "·"  # not recorded
            assert busy[col(8)] == "·"  # the window's start: before any recording
            assert busy[col(-3)] == " "  # ahead of now: blank
            lines = text.splitlines()
            assert lines.index(next(x for x in lines if "gpu 0 util" in x)) > \
                lines.index(next(x for x in lines if "machine plan" in x))
    asyncio.run(run())


@pytest.mark.parametrize("size", [(60, 20), (80, 24), (120, 40)],
                         ids=["60x20", "80x24", "120x40"])
def test_the_full_screen_timeline_fits_with_its_gpu_rows(tmp_path: Path,
                                                         size: tuple[int, int]) -> None:
    path = write_campaign(tmp_path, STAGES)
    recorded_before(path, time.time(), gpus=8)
    app = app_for(path, simulate=8)

    async def run() -> None:
        async with app.run_test(size=size) as pilot:
            await opened(app, pilot)
            await pilot.press("T")
            await pilot_until(pilot, lambda: isinstance(app.screen, TimelineScreen)
                              and "util" in screen_text(app), what="the timeline's GPU rows")
            lines = (await screen_settled(pilot)).splitlines()
            assert len(lines) <= size[1] and all(len(x) <= size[0] for x in lines)
            rows = [x for x in lines if x.strip().startswith("gpu ")]
            more = [x for x in lines if "+" in x and "GPUs" in x]
            room = size[1] - 9  # TimelineScreen's fixed rows
            if room >= 8:
                assert len(rows) == 8 and not more
            else:
                assert len(rows) == room - 1 and more
                assert f"+{8 - len(rows)} GPUs" in more[0]
            assert "machine plan" in "\n".join(lines)  # the stage bars above them
            assert all("█" in x for x in rows if x.strip().startswith("gpu 0 "))
    asyncio.run(run())


def test_no_recording_or_an_unreadable_one_is_said_never_drawn_as_idle(
        tmp_path: Path) -> None:
    path = write_campaign(tmp_path, STAGES)
    engine = Engine(load_campaign(path), actor="tui", gpu_sampler=GpuSampler(simulate=2),
                    record=False)
    snap = engine.tick()
    t0, t1 = snap.window.start.timestamp(), snap.taken_at.timestamp()
    absent = engine.telemetry_history(t0, t1)
    assert absent.state == "absent"
    text = timeline_text(snap, snap.schedule, 100, recorded=absent).plain
    assert "GPU util" in text and "no recording yet" in text and "▁" not in text
    store = CampaignFiles.of(engine.campaign).recorder
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_bytes(b"\x1b]52;c;garbage\x07" * 200)  # hostile bytes, not SQLite
    bad = engine.telemetry_history(t0, t1)
    text = timeline_text(snap, snap.schedule, 100, recorded=bad).plain
    assert "recording unreadable" in text and "\x1b" not in text
    nothing = Recorded(t0, t1)  # a recording that holds no GPU, and no GPU live
    empty = timeline_text(snap, snap.schedule, 100, recorded=nothing).plain
    assert "gpu 0 util" in empty  # the live GPUs get their (unrecorded) rows
    assert set(cells_of(empty, "gpu 0 util").strip()) == {"·"}
    engine.close()


def headless(path: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop("COCKPIT_SIMULATE_GPUS", None)
    return subprocess.Popen([sys.executable, "-m", "cockpit", "headless", str(path),
                             "--simulate-gpus", "2", "--interval", "0.2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def raw_utils(store: Path) -> dict[float, float] | None:
    try:
        with RecordingReader.open(store) as reader:
            points = reader.series(gpu_series(0, "util"), 0, 2**40)
    except RecordingUnreadable:
        return None
    return {p.t: p.value for p in points if p.span_s == 1} if len(points) >= 8 else None


@pytest.mark.slow  # a real headless killed, then the TUI on its recording
def test_a_cockpit_killed_and_reopened_in_the_tui_shows_the_curves_from_before(
        tmp_path: Path) -> None:
    """A real headless cockpit records, is killed with SIGKILL, and the TUI opened on
    the same campaign seeds its sparklines with what the killed one committed."""
    path = write_campaign(tmp_path, STAGES)
    store = CampaignFiles.beside(path).recorder
    first = headless(path)
    try:
        wait_for(lambda: raw_utils(store), timeout=90, what="a committed batch")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    before = raw_utils(store)
    assert before is not None
    app = app_for(path)

    async def run() -> None:
        async with app.run_test(size=(200, 60)) as pilot:
            snap = await opened(app, pilot)
            series = app.main.gpu_panel.history.find("util", 0)  # type: ignore[union-attr]
            assert series is not None
            start = int(snap.taken_at.timestamp()) - 600
            # The ring keeps 600: the seed's seconds 1..599, then the one live sample.
            seeded = series.recent(600, skip_missing=False)[:-1]
            compared = 0
            for t, value in before.items():
                # Each second the killed cockpit committed, in place (the open's own
                # second is the live sample's).
                if start < t < start + 600:
                    assert abs(seeded[int(t) - start - 1] - value) < 1e-3, t
                    compared += 1
            assert compared >= 8
            assert spark_cells(series, 12)  # drawn from the seeded seconds
    asyncio.run(run())
    assert datetime.now(timezone.utc).timestamp() - max(before) < 600


def test_the_timeline_shows_fewer_gpu_rows_and_says_how_many_more(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, STAGES)
    engine = Engine(load_campaign(path), actor="tui", record=False)
    snap = engine.tick()
    eight = Recorded(snap.window.start.timestamp(), snap.taken_at.timestamp(),
                     gpus=tuple(range(8)))
    lines = timeline_text(snap, snap.schedule, 60, recorded=eight, gpu_rows=3).plain \
        .splitlines()
    assert [x.split("│")[0].strip() for x in lines if x.startswith("gpu ")] == \
        ["gpu 0 util", "gpu 1 util"]
    assert any("+6 GPUs" in x for x in lines)
    assert all(len(x) <= 60 for x in lines if x.startswith(("gpu ", " ")) and "│" in x)
    engine.close()


def test_the_chart_puts_a_recorded_gpu_metric_beside_the_loss_over_time(
        tmp_path: Path) -> None:
    """``u`` on the chart: GPU utilization from the recording (written before the app
    opened, from 3 h ago) beside the runs' loss, both in hours before now."""
    from tests.helpers.tui_campaign import NOW, running_campaign

    recorded_before(tmp_path / "campaign.yaml", NOW.timestamp())
    app = CockpitApp(running_campaign(tmp_path), interval=3600, theme="default")

    async def run() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await opened(app, pilot)
            await pilot.press("g")
            await pilot_until(pilot, lambda: isinstance(app.screen, ChartScreen),
                              what="the chart")
            chart = app.screen
            assert isinstance(chart, ChartScreen) and chart.metric == "loss"
            await pilot.press("u")
            await pilot_until(pilot, lambda: chart.overlay, what="the recorded GPU metric drawn")
            assert chart.overlay == ["gpu 0 util", "gpu 1 util"]
            overlay = dict(chart._drawn[4][1])
            busy = overlay["gpu 0 util"]
            assert min(busy.xs) <= -2.9 and max(busy.xs) <= 0  # from before the open
            assert set(busy.ys) == {95.0} and set(overlay["gpu 1 util"].ys) == {5.0}
            gap = [x for x in busy.xs if -1.9 < x < -0.6]
            assert not gap  # nothing recorded there: no point made up
            loss = dict(chart._drawn[2])["control"]
            assert -0.7 < min(loss.xs) < max(loss.xs) <= 0.0  # the same axis: hours
            title = str(chart.query_one("#chart-title", Label).render())
            assert "over time · GPU util % on the right" in title
            for _ in TELEMETRY:  # round to none: over steps again
                await pilot.press("u")
            await pilot_until(pilot, lambda: chart.telemetry is None and "over steps" in str(
                chart.query_one("#chart-title", Label).render()), what="over steps again")
            assert chart.telemetry is None
            assert "over steps" in str(chart.query_one("#chart-title", Label).render())
    asyncio.run(run())
