"""Pilot tests of the keys added for issue 15: a / r (verdicts), g (chart), l (log),
e (completes the export stage) and the keymap file."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual_plotext")

from cockpit.tui.app import CockpitApp  # noqa: E402
from cockpit.tui.dialogs import ConfirmScreen, FormScreen  # noqa: E402
from cockpit.tui.keymap import parse_keymap  # noqa: E402
from cockpit.tui.screens import ChartScreen, LogScreen  # noqa: E402
from tests.test_tui_pilot import journal, settle, type_text, until  # noqa: E402
from tests.tui_campaign import NOW, running_campaign  # noqa: E402

SIZE = (120, 40)


def app_for(tmp_path: Path) -> CockpitApp:
    return CockpitApp(running_campaign(tmp_path), interval=3600)


def test_chart_shows_every_run_and_the_threshold(tmp_path: Path) -> None:
    async def go() -> None:
        app = app_for(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None)
            await pilot.press("g")
            await until(pilot, lambda: isinstance(app.screen, ChartScreen))
            screen = app.screen
            assert isinstance(screen, ChartScreen)
            await until(pilot, lambda: bool(screen.labels))
            assert screen.metric == "loss"
            assert {"control (running)", "variant-a (running)", "wild-lr (running)"} <= \
                set(screen.labels)
            assert "rule loss-ceiling: stop > 3" in screen.labels  # the threshold's value
            await pilot.press("m")  # the next metric: val/accuracy, its acceptance bound
            await until(pilot, lambda: screen.metric == "val/accuracy")
            assert "accept ≥ 0.8" in screen.labels
            drawn = screen._drawn
            screen.update_snapshot(app.snapshot)  # same data: nothing redrawn
            assert screen._drawn is drawn
            await pilot.press("s")
            await until(pilot, lambda: screen.log_scale)
            await pilot.press("escape")
            await until(pilot, lambda: len(app.screen_stack) == 1)
    asyncio.run(go())


def test_log_screen_follows_the_stage_output(tmp_path: Path) -> None:
    engine = running_campaign(tmp_path)
    logs = engine.campaign.state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "control.20261202T195000000000Z.out").write_text("epoch 1 loss 0.9\n")
    (logs / "control.20261202T195000000000Z.err").write_text("warning: slow disk\n")

    async def go() -> None:
        app = CockpitApp(engine, interval=3600)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None)
            app.runs_table.focus()
            await pilot.press("l")
            await until(pilot, lambda: isinstance(app.screen, LogScreen))
            screen = app.screen
            out = screen.query_one("#log-out")
            await until(pilot, lambda: len(out.lines) == 1)
            with open(logs / "control.20261202T195000000000Z.out", "a") as handle:
                handle.write("epoch 2 loss 0.5\n")
            await until(pilot, lambda: len(out.lines) == 2, timeout=5)
            assert "control.20261202T195000000000Z.out" in str(
                screen.query_one("#log-out-path").render())
            await pilot.press("escape")
    asyncio.run(go())


def _finish_all(app: CockpitApp) -> None:
    sup: Any = app.engine.supervisor
    for stage in ("control", "variant-a-long-name", "diverge"):
        sup.finish(stage, 0)


def test_reject_records_a_verdict_after_showing_the_checks(tmp_path: Path) -> None:
    async def go() -> None:
        app = app_for(tmp_path)
        clock = [NOW]
        app.engine.clock = type("C", (), {"now": lambda self: clock[0],  # noqa: ARG005
                                          "monotonic": lambda self: 0.0,
                                          "sleep": lambda self, s: None})()
        # The runs end; auto-accept rejects control and variant-a (val/accuracy under its
        # floor); a person accepts variant-a by override, then rejects it with the key.
        _finish_all(app)
        clock[0] = NOW + timedelta(minutes=1)
        app.engine.tick()
        app.engine.accept("variant-a", "the floor was set too high", override=True)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None
                        and app.check_action("reject", ()) is True)
            await pilot.press("r")
            await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen)
                        and len(app.screen_stack) > 1)
            if not isinstance(app.screen, FormScreen):  # a pick list first: take variant-a
                await pilot.press("down", "enter")
            await until(pilot, lambda: isinstance(app.screen, FormScreen))
            assert "acceptance checks" in str(app.screen.query_one(".dialog-body").render())
            await type_text(pilot, "leak in eval")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await settle(app, pilot)
            await until(pilot, lambda: any(e["kind"] == "result_rejected"
                                           and e.get("actor") == "tui"
                                           for e in journal(app.engine.campaign.path)))
    asyncio.run(go())


def test_keymap_file_moves_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('# moved off g\nchart = "G"\nnope = "z"\n')
    monkeypatch.setenv("COCKPIT_KEYMAP", str(keymap))

    async def go() -> None:
        app = app_for(tmp_path / "c")
        assert app.keymap == {"chart": "G"} and "no binding 'nope'" in app.keymap_problems[0]
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None)
            await pilot.press("G")
            await until(pilot, lambda: isinstance(app.screen, ChartScreen))
            await pilot.press("escape")
            await pilot.press("question_mark")
            await pilot.pause(0.2)
            body = str(app.screen.query_one("#info-body").render())
            assert "G  Chart" in body.replace("  ", " ").replace(" G ", "G ") or " G " in body
            assert str(keymap) in body
    asyncio.run(go())


def test_parse_keymap_reports_bad_lines() -> None:
    keymap, problems = parse_keymap('stop-run = "X"\nbad line\n', ["stop-run"])
    assert keymap == {"stop-run": "X"} and "line 2" in problems[0]
