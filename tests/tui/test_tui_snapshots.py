"""Snapshot tests of the main screen: each theme at 120x40 and 80x24, plus 60x20.

A fixed clock, deterministic simulated GPUs and a fixed host reading make the SVGs
stable; each test also asserts on the screen's text, so a blank or broken screen
cannot be approved as a baseline.
"""

from __future__ import annotations

import html
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pytest_textual_snapshot")

from cockpit.campaign import load_campaign  # noqa: E402
from cockpit.engine import Engine  # noqa: E402
from cockpit.telemetry import DiskInfo, GpuSampler, HostInfo  # noqa: E402
from cockpit.tui.app import CockpitApp  # noqa: E402
from tests.helpers.process import pilot_until  # noqa: E402

NOW = datetime(2026, 12, 3, 9, 30, tzinfo=timezone.utc)
SAMPLE = Path(__file__).resolve().parents[2] / "sample_campaigns" / "illustrative.yaml"


class FixedHost:
    def sample(self) -> HostInfo:
        return HostInfo(cpu_percent=12.0, cpu_count=16, load1=1.0, mem_used=6 * 2**30,
                        mem_total=64 * 2**30, swap_used=0, swap_total=0,
                        disks=(DiskInfo("/data", 200 * 2**30, 500 * 2**30, False),),
                        own_cpu_percent=1.0, own_rss=60 * 2**20, warnings=())


def make_app(tmp_path: Path, theme: str) -> CockpitApp:
    path = tmp_path / "illustrative.yaml"
    shutil.copy(SAMPLE, path)
    engine = Engine(load_campaign(path), clock=lambda: NOW, actor="tui",
                    gpu_sampler=GpuSampler(simulate=2, clock=lambda: 1000.0),
                    host_sampler=FixedHost())  # type: ignore[arg-type]
    engine.mark("prep", "done", now=datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc))
    engine.note("data-check", "corpus arrived 1 h late", now=NOW)
    return CockpitApp(engine, interval=3600, theme=theme)


def screen_text(app: CockpitApp) -> str:
    """The screen's text, line by line, rebuilt from the SVG's positioned <text> runs."""
    rows: dict[float, list[tuple[float, str]]] = {}
    for m in re.finditer(r'<text[^>]*?x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>',
                         app.export_screenshot(), re.S):
        chunk = html.unescape(re.sub(r"<[^>]+>", "", m.group(3))).replace("\xa0", " ")
        rows.setdefault(float(m.group(2)), []).append((float(m.group(1)), chunk))
    lines = []
    for y in sorted(rows):
        line = ""
        for x, chunk in sorted(rows[y]):
            line = line.ljust(int(round(x / 12.2))) + chunk
        lines.append(line.rstrip())
    return "\n".join(lines)


async def screen_settled(pilot: Any) -> str:
    """Wait for the screen to settle, and return its text. Settled: no redraw pending
    on the main screen, no callback waiting for the screen's refresh, and the same text
    after three rounds in a row of pending messages handled (``pilot.pause()``): a
    loaded machine lays the panels out over several frames, and a screenshot mid-way is
    not the screen."""
    app = pilot.app
    texts: list[str] = []

    def same_text_thrice() -> bool:
        texts.append(screen_text(app))
        return (not app.main._redraw_pending and not app.screen._callbacks
                and len(texts) >= 3 and len(set(texts[-3:])) == 1)

    await pilot_until(pilot, same_text_thrice, what="the screen settled")
    await pilot.wait_for_scheduled_animations()
    return screen_text(app)


async def settled(pilot: Any) -> str:
    """The main screen has drawn its first snapshot (the stages are in their table) and
    settled (:func:`screen_settled`): its text."""
    app = pilot.app
    await pilot_until(pilot, lambda: app.snapshot is not None and app.main is not None
                      and app.main.stages_table.row_count, what="the first snapshot drawn")
    return await screen_settled(pilot)


def ready(seen: dict[str, str]) -> Any:
    async def run_before(pilot: Any) -> None:
        await pilot_until(pilot, lambda: pilot.app.snapshot is not None
                          and pilot.app.main.stages_table.row_count,
                          what="the first snapshot drawn")
        # No focused widget: a cursor drawn or not (focus is timing-dependent) would
        # change the SVG's styles while its text stays the same.
        pilot.app.set_focus(None)
        seen["text"] = await screen_settled(pilot)
    return run_before


@pytest.mark.parametrize("theme", ["default", "light", "high-contrast"])
@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
def test_main_screen(snap_compare: Any, tmp_path: Path, theme: str,
                     size: tuple[int, int]) -> None:
    seen: dict[str, str] = {}
    assert snap_compare(make_app(tmp_path, theme), terminal_size=size, run_before=ready(seen))
    text = seen["text"]
    # Under 32 rows the GPUs collapse to one summary line in the now panel.
    for words in ("window 12-02 08:00", "! tight", "SIMULATED",
                  "H100" if size[1] >= 32 else "2 GPUs", "data-check",
                  "✓ done", "? needs-person", "budget" if size[0] >= 100 else "stages",
                  "? Help", "q Quit"):  # the key bar: help and quit at any width
        assert words in text, f"{words!r} missing at {size} in {theme}"
    # Under 50 rows the timeline and the events go behind T (the tables get the rows).
    assert ("machine plan" in text) == (size[1] >= 50)


def test_compact_screen_does_not_crash(snap_compare: Any, tmp_path: Path) -> None:
    seen: dict[str, str] = {}
    assert snap_compare(make_app(tmp_path, "default"), terminal_size=(60, 20),
                        run_before=ready(seen))
    assert "window" in seen["text"] and "✓ done" in seen["text"]
