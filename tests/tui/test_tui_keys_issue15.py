"""Pilot tests of the keys added for issue 15: a / r (verdicts), g (chart), l (log),
e (completes the export stage) and the keymap file."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual_plotext")

from textual.widgets import OptionList  # noqa: E402

from cockpit.campaign import load_campaign  # noqa: E402
from cockpit.engine import Engine  # noqa: E402
from cockpit.telemetry import GpuSampler  # noqa: E402
from cockpit.tui.app import CockpitApp  # noqa: E402
from cockpit.tui.dialogs import ConfirmScreen, FormScreen, InfoScreen, PickScreen  # noqa: E402
from cockpit.tui.full_screens import ChartScreen, LogScreen  # noqa: E402
from cockpit.tui.keymap import parse_keymap  # noqa: E402
from tests.engine.test_engine_guards import FakeSupervisor  # noqa: E402
from tests.helpers.campaigns import FIXED_START, write_campaign  # noqa: E402
from tests.helpers.tui_campaign import NOW, running_campaign, write_reports  # noqa: E402
from tests.tui.test_tui_pilot import journal, settle, type_text, until  # noqa: E402

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
            shown = {label.split(" (running)")[0] for label in screen.labels
                     if "(running)" in label}
            assert {"control", "variant-a", "wild-lr"} <= shown
            # wild-lr's loss went NaN: counted and dated in the legend, never plotted.
            assert any(label.startswith("wild-lr (running) ✗") and "non-finite from step"
                       in label for label in screen.labels)
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
    # The files the journal names for control's attempt (the Snapshot's log_path).
    paths = next(r for r in engine.tick().runs if r.id == "control").log_path
    assert paths is not None
    out_file, err_file = Path(paths.out), Path(paths.err)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text("epoch 1 loss 0.9\n")
    err_file.write_text("warning: slow disk\n")

    async def go() -> None:
        app = CockpitApp(engine, interval=3600)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None
                        and app.main.runs_table.row_count > 0)
            app.main.runs_table.focus()
            # focus() lands after a refresh: `l` then takes the run under the cursor
            # (before it, `l` asks which run, and no log screen opens).
            await until(pilot, lambda: app.main.focused is app.main.runs_table)
            await pilot.press("l")
            await until(pilot, lambda: isinstance(app.screen, LogScreen))
            screen = app.screen
            out = screen.query_one("#log-out")
            await until(pilot, lambda: len(out.lines) == 1)
            with open(out_file, "a") as handle:
                handle.write("epoch 2 loss 0.5\n")
            # The screen follows every second; a loaded machine may take a few.
            await until(pilot, lambda: len(out.lines) == 2, timeout=20)
            assert out_file.name in str(screen.query_one("#log-out-path").render())
            await pilot.press("escape")
    asyncio.run(go())


def test_reject_records_a_verdict_after_showing_the_checks(tmp_path: Path) -> None:
    async def go() -> None:
        # The runs ended; the tick auto-accepted control (its check passes) and
        # auto-rejected variant-a: control is the one left to reject, by hand.
        app = ended_campaign(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None
                        and app.main.key_available("reject") is True)
            await pilot.press("r")
            await until(pilot, lambda: isinstance(app.screen, FormScreen))
            assert "Reject control" in str(app.screen.query_one(".dialog-title").render())
            assert "acceptance checks" in str(app.screen.query_one(".dialog-body").render())
            await type_text(pilot, "leak in eval")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await settle(app, pilot)
            await until(pilot, lambda: verdicts(app, "control"))
        [event] = verdicts(app, "control")
        assert event["kind"] == "result_rejected" and event["reason"] == "leak in eval"
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
            await until(pilot, lambda: app.screen is app.main)
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, InfoScreen))
            body = str(app.screen.query_one("#info-body").render())
            assert "G  Chart" in body.replace("  ", " ").replace(" G ", "G ") or " G " in body
            assert str(keymap) in body
    asyncio.run(go())


def test_parse_keymap_reports_bad_lines() -> None:
    keymap, problems = parse_keymap('stop-run = "X"\nbad line\n', ["stop-run"])
    assert keymap == {"stop-run": "X"} and "line 2" in problems[0]


# ------------------------------------------------------------ a (accept) and e (export)
class FixedClock:
    def __init__(self, at: Any) -> None:
        self.at = at

    def now(self) -> Any:
        return self.at

    def monotonic(self) -> float:
        return 0.0

    def sleep(self, seconds: float) -> None:
        pass


def ended_campaign(tmp_path: Path) -> CockpitApp:
    """The runs have ended: control passed its check (val/accuracy 0.9 ≥ 0.8) and was
    auto-accepted, variant-a failed it (0.62) and was auto-rejected, wild-lr was stopped."""
    engine = running_campaign(tmp_path)
    write_reports(engine, "control", 6000, 6000)
    _finish_all_engine(engine)
    later = NOW + timedelta(minutes=1)
    engine.clock = FixedClock(later)  # type: ignore[assignment]
    engine.tick(later)
    return CockpitApp(engine, interval=3600)


def _finish_all_engine(engine: Any) -> None:
    for stage in ("control", "variant-a-long-name", "diverge"):
        engine.supervisor.finish(stage, 0)


def verdicts(app: CockpitApp, run: str, actor: str = "tui") -> list[dict[str, Any]]:
    return [e for e in journal(app.engine.campaign.path)
            if e["kind"] in ("result_accepted", "result_rejected") and e.get("run") == run
            and e.get("actor") == actor]


async def accept_with(pilot: Any, app: CockpitApp, run: str, note: str) -> str:
    """a → (pick the run) → the checks and a note → y; returns the form's checks text."""
    await until(pilot, lambda: app.snapshot is not None and app.main.key_available("accept"))
    await pilot.press("a")
    await until(pilot, lambda: isinstance(app.screen, (PickScreen, FormScreen)))
    if isinstance(app.screen, PickScreen):
        options = app.screen.query_one(OptionList)
        options.highlighted = options.get_option_index(run)
        await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, FormScreen))
    assert f"Accept {run}" in str(app.screen.query_one(".dialog-title").render())
    checks = str(app.screen.query_one(".dialog-body").render())
    await type_text(pilot, note)
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
    await pilot.press("y")
    await settle(app, pilot)
    return checks


def test_accept_a_run_whose_checks_pass(tmp_path: Path) -> None:
    async def go() -> None:
        app = ended_campaign(tmp_path)
        # A person rejected control by hand; its checks pass, so `a` takes that back.
        app.engine.reject("control", "second thoughts", now=app.engine.clock.now())
        async with app.run_test(size=SIZE) as pilot:
            checks = await accept_with(pilot, app, "control", "")
            assert "✓ all pass" in checks and "0.9" in checks, checks
            await until(pilot, lambda: len(verdicts(app, "control")) == 2)
        rejected, event = verdicts(app, "control")  # the hand's rejection, then `a`
        assert rejected["kind"] == "result_rejected"
        assert event["kind"] == "result_accepted" and "override" not in event
        assert app.engine.state().runs["control"].verdict == "accepted"
    asyncio.run(go())


def test_accept_with_failing_checks_needs_a_note(tmp_path: Path) -> None:
    async def go() -> None:
        app = ended_campaign(tmp_path)
        shown: list[str] = []
        app.notify = lambda message, **kw: shown.append(str(message))  # type: ignore[method-assign]
        async with app.run_test(size=SIZE) as pilot:
            before = len(journal(app.engine.campaign.path))
            checks = await accept_with(pilot, app, "variant-a", "")  # no note: refused
            assert "✗ not all pass" in checks and "0.62" in checks, checks
            await until(pilot, lambda: any("fails its acceptance checks" in s for s in shown))
            assert len(journal(app.engine.campaign.path)) == before  # nothing written
            assert app.engine.state().runs["variant-a"].verdict == "rejected"
            await accept_with(pilot, app, "variant-a", "eval set mislabeled")
            await until(pilot, lambda: verdicts(app, "variant-a"))
        [event] = verdicts(app, "variant-a")
        assert event["kind"] == "result_accepted" and event["override"] is True
        assert event["reason"] == "eval set mislabeled" and event["checks"]
        assert app.engine.state().runs["variant-a"].verdict == "accepted"
    asyncio.run(go())


def test_export_key_starts_the_plans_export_stage(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["true"]},
        {"id": "bundle", "hours": 0.5, "resource": "cpu", "role": "export",
         "after": ["train"], "command": ["true"]},
    ], start=FIXED_START)
    engine = Engine(load_campaign(path), clock=lambda: NOW, actor="tui",
                    supervisor=FakeSupervisor(),  # type: ignore[arg-type]
                    gpu_sampler=GpuSampler(simulate=1, clock=lambda: 1000.0))
    engine.start("train", now=NOW)
    engine.supervisor.finish("train", 0)  # type: ignore[attr-defined]
    engine.tick(NOW)

    async def go() -> None:
        app = CockpitApp(engine, interval=3600)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None
                        and app.snapshot.stage("bundle").state == "ready")
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert "Start the export stage bundle?" in str(
                app.screen.query_one(".dialog-title").render())
            assert "stage_started" not in [e["kind"] for e in journal(path)][-1:]
            await pilot.press("y")
            await settle(app, pilot)
            await until(pilot, lambda: any(e["kind"] == "stage_started"
                                           and e.get("stage") == "bundle"
                                           for e in journal(path)))
        assert "export_done" not in [e["kind"] for e in journal(path)]  # its command exports
    asyncio.run(go())


def test_export_key_exports_and_marks_a_manual_export_stage_done(tmp_path: Path) -> None:
    async def go() -> None:
        app = ended_campaign(tmp_path)  # its plan's "export" stage has no command
        path = app.engine.campaign.path
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None)
            assert app.snapshot is not None
            assert app.snapshot.stage("export").state == "needs-person"  # manual
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert "marks stage export done" in str(
                app.screen.query_one(".dialog-body").render())
            await pilot.press("y")
            await settle(app, pilot)
            await until(pilot, lambda: any(e["kind"] == "stage_finished"
                                           and e.get("stage") == "export"
                                           for e in journal(path)), timeout=60)
            app.kick()
            await until(pilot, lambda: app.snapshot is not None
                        and app.snapshot.stage("export").state == "done")
        kinds_written = [e["kind"] for e in journal(path)]
        assert kinds_written.count("export_done") == 1
        assert kinds_written.index("export_done") < len(kinds_written) - 1  # then the mark
    asyncio.run(go())
