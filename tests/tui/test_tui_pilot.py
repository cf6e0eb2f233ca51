"""Pilot tests of the TUI's keys against campaigns with real child processes.

Each test presses keys as a person would and asserts on the journal the action
wrote (or did not write). Ticks run every 0.1 s so the tests stay fast.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual")

from cockpit.campaign import load_campaign  # noqa: E402
from cockpit.engine import Engine  # noqa: E402
from cockpit.runs import supervisor  # noqa: E402
from cockpit.tui.app import CockpitApp  # noqa: E402
from cockpit.tui.dialogs import (  # noqa: E402
    ConfirmScreen,
    DecideScreen,
    FormScreen,
    InfoScreen,
    PickScreen,
)
from cockpit.tui.full_screens import TimelineScreen  # noqa: E402
from tests.helpers.campaigns import FINITE, step_command, write_campaign  # noqa: E402
from tests.helpers.process import pilot_until  # noqa: E402

SIZE = (120, 40)


def run_async(fn: Callable[..., Any]) -> Callable[..., Any]:
    """No async pytest plugin here: each test drives its own event loop."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))
    return wrapper


def journal(path: Path) -> list[dict[str, Any]]:
    file = path.parent / ".cockpit" / "journal.jsonl"
    if not file.exists():
        return []
    return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]


def kinds(path: Path) -> list[str]:
    return [e["kind"] for e in journal(path)]


@pytest.fixture
def campaign(tmp_path: Path) -> Iterator[Path]:
    path = write_campaign(tmp_path, [
        {"id": "prep", "hours": 1, "resource": "human"},
        {"id": "pilot", "hours": 1, "resource": "human", "after": ["prep"],
         "decision_point": True},
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=4000, sleep=0.05)},
        {"id": "extra", "hours": 1, "resource": "cpu", "after": ["pilot"], "run": "rx",
         "category": "exploratory", "command": step_command(steps=3, sleep=0.01)},
        {"id": "diverge", "hours": 1, "resource": "cpu", "run": "rd", "category": "exploratory",
         "command": step_command(steps=400, sleep=0.02, nan_at=3)},
    ], rules=[FINITE])
    yield path
    kill_started(path)


def kill_started(path: Path) -> None:
    """Never leave a child behind: kill every process group the journal started."""
    for ev in journal(path):
        if ev["kind"] == "stage_started" and ev.get("pgid"):
            try:
                os.killpg(ev["pgid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def make_app(path: Path) -> tuple[CockpitApp, Engine]:
    engine = Engine(load_campaign(path), actor="tui")
    return CockpitApp(engine, interval=0.1), engine


async def until(pilot: Any, cond: Callable[[], Any], timeout: float = 30.0) -> None:
    """Wait for ``cond`` with the current screen mounted: a screen just pushed is
    ``app.screen`` before its widgets are composed (a busy box shows the gap)."""
    code = getattr(cond, "__code__", None)
    where = f"{Path(code.co_filename).name}:{code.co_firstlineno}" if code else repr(cond)
    await pilot_until(pilot, cond, timeout=timeout, what=f"the condition at {where}")


async def type_text(pilot: Any, text: str) -> None:
    await pilot.press(*["space" if ch == " " else ch for ch in text])


async def settle(app: CockpitApp, pilot: Any) -> None:
    """The workers done (an action written), then what they posted handled."""
    await app.workers.wait_for_complete()
    await pilot.pause()


def flow_done(app: CockpitApp) -> bool:
    """No flow of the main screen is under way (a key's flow ended, or none began)."""
    assert app.main is not None
    flow = app.main._flow
    return flow is None or flow.is_finished


def form_error(app: CockpitApp) -> str:
    """The open form's error line ("" when no form is up or it says nothing)."""
    if not isinstance(app.screen, FormScreen):
        return ""
    return str(app.screen.query_one("#form-error").render()).strip()


def running(app: CockpitApp, run_id: str) -> bool:
    snap = app.snapshot
    return bool(snap and any(r.id == run_id and r.state == "running" for r in snap.runs))


@run_async
async def test_stop_with_reason_writes_stop_requested(campaign: Path) -> None:
    app, engine = make_app(campaign)
    engine.start("train")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: running(app, "r1") and app.main.key_available("stop_run"))
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, FormScreen))
        await type_text(pilot, "loss plateaued")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "stop_requested" not in kinds(campaign)  # nothing written before y
        await pilot.press("y")
        await settle(app, pilot)
        await until(pilot, lambda: "stop_requested" in kinds(campaign))
    stop = next(e for e in journal(campaign) if e["kind"] == "stop_requested")
    assert stop["reason"] == "loss plateaued"
    assert stop["run"] == "r1" and stop["actor"] == "tui"


@pytest.mark.parametrize("cancel_at", ["form", "confirm-n", "confirm-escape"])
@run_async
async def test_stop_cancelled_writes_nothing(campaign: Path, cancel_at: str) -> None:
    app, engine = make_app(campaign)
    engine.start("train")
    before = journal(campaign)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: running(app, "r1") and app.main.key_available("stop_run"))
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, FormScreen))
        await type_text(pilot, "nope")
        if cancel_at == "form":
            await pilot.press("escape")
        else:
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            # focus starts on the safe choice
            assert app.focused is not None and app.focused.id == "no"
            await pilot.press("n" if cancel_at == "confirm-n" else "escape")
        await settle(app, pilot)
        assert len(app.screen_stack) == 1
        assert running(app, "r1")
    assert [e for e in journal(campaign) if e["kind"] in ("stop_requested", "note")] == \
        [e for e in before if e["kind"] in ("stop_requested", "note")]
    assert "stop_requested" not in kinds(campaign)


@run_async
async def test_stop_needs_a_reason(campaign: Path) -> None:
    app, engine = make_app(campaign)
    engine.start("train")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: running(app, "r1") and app.main.key_available("stop_run"))
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, FormScreen))
        await pilot.press("enter")  # empty reason: stays in the form with an error
        await until(pilot, lambda: form_error(app))
        assert isinstance(app.screen, FormScreen)
        assert "reason is required" in str(app.screen.query_one("#form-error").render())
        await pilot.press("escape")
    assert "stop_requested" not in kinds(campaign)


@run_async
async def test_start_a_ready_stage(campaign: Path) -> None:
    app, _ = make_app(campaign)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.key_available("start_stage"))
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, PickScreen))
        items = [o.id for o in app.screen.query_one("#pick-list").options]
        assert items == ["train", "diverge"]  # only ready stages are offered
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await settle(app, pilot)
        await until(pilot, lambda: "stage_started" in kinds(campaign))
    started = [e for e in journal(campaign) if e["kind"] == "stage_started"]
    assert [e["stage"] for e in started] == ["train"] and started[0]["actor"] == "tui"


@run_async
async def test_mark_a_manual_stage_done(campaign: Path) -> None:
    app, _ = make_app(campaign)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.key_available("mark"))
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, PickScreen))
        await pilot.press("enter")  # prep (the only needs-person stage)
        await until(pilot, lambda: isinstance(app.screen, PickScreen)
                    and "Mark prep" in app.screen._title)
        await pilot.press("down", "enter")  # done
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await settle(app, pilot)
        await until(pilot, lambda: "stage_finished" in kinds(campaign))
    done = [e for e in journal(campaign) if e["kind"] == "stage_finished"]
    assert done[0]["stage"] == "prep" and done[0]["outcome"] == "done" and done[0]["manual"]


@run_async
async def test_decide_limit_drops_the_picked_stage(campaign: Path) -> None:
    engine = Engine(load_campaign(campaign), actor="setup")
    engine.mark("prep", "done")
    engine.mark("pilot", "done")
    app, _ = make_app(campaign)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.key_available("decide"))
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, DecideScreen))
        # What the decision rests on is shown first: measured vs planned, the forecast.
        context = str(app.screen.query_one("#decide-context").render())
        assert "measured" in context and "planned" in context and "forecast" in context
        await pilot.press("down", "enter")  # limit -> the drop list
        await pilot.press("space")  # pick the first optional stage
        drops = app.screen.query_one("#decide-drops")
        assert str(drops.get_option_at_index(0).prompt).startswith("[x] ")  # not colour only
        await pilot.press("tab")
        await type_text(pilot, "pilot too slow")
        await pilot.press("enter")  # -> which result would have changed the choice
        await type_text(pilot, "acc below 0.5")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await settle(app, pilot)
        await until(pilot, lambda: "decision" in kinds(campaign))
    decision = next(e for e in journal(campaign) if e["kind"] == "decision")
    assert decision["outcome"] == "limit"
    assert decision["note"] == "pilot too slow (would have changed the choice: acc below 0.5)"
    assert decision["stage"] == "pilot" and decision["drops"] == ["extra"]
    assert any(e["kind"] == "stage_dropped" and e["stage"] == "extra"
               for e in journal(campaign))


@run_async
async def test_note_on_a_stage(campaign: Path) -> None:
    app, _ = make_app(campaign)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.snapshot is not None)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, PickScreen))
        await pilot.press("enter")  # first stage: prep
        await until(pilot, lambda: isinstance(app.screen, FormScreen))
        await type_text(pilot, "data arrived late")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await settle(app, pilot)
        await until(pilot, lambda: "note" in kinds(campaign))
    note = next(e for e in journal(campaign) if e["kind"] == "note")
    assert note["stage"] == "prep" and note["text"] == "data arrived late"


@run_async
async def test_cost_is_recorded_exactly(campaign: Path) -> None:
    app, _ = make_app(campaign)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.snapshot is not None)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, FormScreen))
        await type_text(pilot, "transfer")
        await pilot.press("enter")
        await type_text(pilot, "12.50")
        await pilot.press("enter", "enter")  # currency keeps USD
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await settle(app, pilot)
        await until(pilot, lambda: "cost" in kinds(campaign))
    cost = next(e for e in journal(campaign) if e["kind"] == "cost")
    assert (cost["label"], cost["amount"], cost["currency"]) == ("transfer", "12.50", "USD")


@run_async
async def test_bad_cost_amount_stays_in_the_form(campaign: Path) -> None:
    app, _ = make_app(campaign)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.snapshot is not None)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, FormScreen))
        await type_text(pilot, "x")
        await pilot.press("enter", "a", "b", "enter", "enter")
        await until(pilot, lambda: form_error(app))
        assert isinstance(app.screen, FormScreen)
        assert "not an amount" in str(app.screen.query_one("#form-error").render())
    assert "cost" not in kinds(campaign)


@run_async
async def test_refused_action_is_shown_not_raised(campaign: Path) -> None:
    app, engine = make_app(campaign)
    shown: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        app.notify = lambda message, **kw: shown.append(str(message))  # type: ignore[method-assign]
        await until(pilot, lambda: app.snapshot is not None)
        app.act("start", engine.start, "prep")  # a manual stage has no command
        await settle(app, pilot)
        assert app.is_running
    assert any("has no command" in m for m in shown)


@run_async
async def test_verify_and_export_say_when_not_available(campaign: Path) -> None:
    app, engine = make_app(campaign)
    engine.start("train")
    shown: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        app.notify = lambda message, **kw: shown.append(str(message))  # type: ignore[method-assign]
        await until(pilot, lambda: running(app, "r1") and app.main.key_available("verify"))
        await pilot.press("e")
        if not hasattr(engine, "verify"):
            await pilot.press("v")
            assert "verification not yet available" in shown
        else:
            await pilot.press("v")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await settle(app, pilot)
            # this run saves no checkpoint: the engine's answer is shown, never raised
            assert "checkpoint_verified" in kinds(campaign) or shown[-1:] != []
            assert app.is_running
    if not hasattr(engine, "export"):
        assert "export not yet available" in shown


@run_async
async def test_rule_firing_rings_the_bell(campaign: Path) -> None:
    app, engine = make_app(campaign)
    engine.start("diverge")
    bells: list[int] = []
    # Before the app runs: the first tick (at mount) may already see the rule fire.
    app.bell = lambda: bells.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "rule_fired" in kinds(campaign), timeout=15)
        await until(pilot, lambda: bells and app.main.last_fired == ("finite-loss", "rd"))
        await settle(app, pilot)
        # The rules panel drawn from a snapshot with the rule fired.
        await until(pilot, lambda: "fired (last)" in str(app.query_one("#rules-panel").render()))
        rules = str(app.query_one("#rules-panel").render()).splitlines()
        # Grouped by rule, full names: the rule line, then its fired run with the reason.
        assert rules[0].startswith("✗ finite-loss"), rules
        assert rules[1].strip().startswith("✗ fired (last) rd:"), rules



@run_async
async def test_quit_with_active_run_asks_and_leaves_it_running(campaign: Path) -> None:
    app, engine = make_app(campaign)
    engine.start("train")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: running(app, "r1"))
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "keep running" in str(app.screen.query_one("#confirm-body").render())
        await pilot.press("n")
        await until(pilot, lambda: len(app.screen_stack) == 1)  # the dialog closed
        assert app.is_running and app.return_code is None
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running)  # the app's loop ended
    assert app.return_code == 0
    run = engine.state().runs["r1"]
    assert supervisor.alive(run.pid, run.create_time)  # quitting never stops a run


@run_async
async def test_quit_without_runs_does_not_ask(campaign: Path) -> None:
    app, _ = make_app(campaign)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.snapshot is not None)
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running)  # no dialog: the app's loop ended
        assert app.return_code == 0 and len(app.screen_stack) == 1


@run_async
async def test_keys_that_do_not_apply_are_greyed(campaign: Path) -> None:
    app, _ = make_app(campaign)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.snapshot is not None)
        assert app.main.key_available("stop_run") is False  # nothing runs
        assert app.main.key_available("decide") is False  # nothing pending
        assert app.main.key_available("start_stage") is True
        await pilot.press("x")  # a greyed key does nothing but say why
        await until(pilot, lambda: any("no run is running" in str(n.message)
                                       for n in app._notifications))
        assert len(app.screen_stack) == 1


@run_async
async def test_help_timeline_and_theme_keys(campaign: Path) -> None:
    app, _ = make_app(campaign)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.snapshot is not None)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, InfoScreen))
        body = str(app.screen.query_one("#info-body").render())
        assert "Stop" in body and "(not now)" in body
        await pilot.press("escape")
        await pilot.press("T")
        await until(pilot, lambda: isinstance(app.screen, TimelineScreen)
                    and "machine plan" in str(app.screen.query_one("#timeline-full").render()))
        full = str(app.screen.query_one("#timeline-full").render())
        assert "machine plan" in full and "train" in full
        await pilot.press("escape")
        assert app.has_class("-cockpit-theme-default")
        await pilot.press("t")
        assert app.has_class("-cockpit-theme-light")
        assert not app.has_class("-cockpit-theme-default")
        assert app.theme == "textual-light"


@run_async
async def test_export_key_writes_and_journals_the_export(campaign: Path) -> None:
    app, engine = make_app(campaign)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.snapshot is not None)
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "export_done" not in kinds(campaign)  # nothing written before y
        await pilot.press("y")
        await until(pilot, lambda: "export_done" in kinds(campaign), timeout=60)
        await settle(app, pilot)
    done = next(e for e in journal(campaign) if e["kind"] == "export_done")
    assert (Path(done["path"]) / "bagit.txt").exists()
