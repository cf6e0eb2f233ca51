"""The main screen during a campaign with running stages, at 60x20, 80x24, 120x40 and
200x60: what must always be visible is (the running stages, each running run with its
step and loss, the fired rule, the window line and the key bar), and the SVG baselines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pytest_textual_snapshot")

from cockpit.tui.app import CockpitApp  # noqa: E402
from tests.test_tui_snapshots import ready  # noqa: E402
from tests.tui_campaign import running_campaign  # noqa: E402

SIZES = [(60, 20), (80, 24), (120, 40), (200, 60)]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_running_campaign_at_every_size(snap_compare: Any, tmp_path: Path,
                                        size: tuple[int, int]) -> None:
    app = CockpitApp(running_campaign(tmp_path), interval=3600, theme="default")
    seen: dict[str, str] = {}
    assert snap_compare(app, terminal_size=size, run_before=ready(seen))
    text = seen["text"]
    assert "window 12-02 08:00" in text, text  # the window line
    assert "fits" in text
    for stage in ("control", "diverge"):
        assert re.search(rf"▶ (running\s+)?{stage}", text), (stage, size, text)
    # Every running run with its step and its loss.
    for step, loss in (("2,400/6,000", "0.3278"), ("1,800/6,000", "0.4071")):
        assert step in text and loss in text, (step, loss, size, text)
    assert "finite-loss" in text and "wild-lr" in text  # the fired rule, full names
    assert "Start" in text and ("Chart" in text or size[0] < 80)  # the key bar
