"""The screen a person watches (issue 25): pilot tests of what the dashboard does while
a person works in it (the status line it writes for tmux, …)."""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual")

from textual.screen import ModalScreen  # noqa: E402
from textual.widgets import OptionList  # noqa: E402
from textual_plotext import PlotextPlot  # noqa: E402

from cockpit.campaign import load_campaign  # noqa: E402
from cockpit.common.lease import ConductorLease  # noqa: E402
from cockpit.engine import CampaignFiles, Engine  # noqa: E402
from cockpit.headless.status_line import line_from_status_log  # noqa: E402
from cockpit.runs.supervisor import report_path  # noqa: E402
from cockpit.tui import flows  # noqa: E402
from cockpit.tui.app import CockpitApp  # noqa: E402
from cockpit.tui.dialogs import (  # noqa: E402
    ConfirmScreen,
    DecideScreen,
    FormScreen,
    PickScreen,
    WaitScreen,
)
from cockpit.tui.full_screens import ChartScreen  # noqa: E402
from cockpit.tui.keybar import BarKey, KeyBar, key_bar_text, urgent_actions  # noqa: E402
from tests.helpers.campaigns import FINITE, step_command, write_campaign  # noqa: E402
from tests.helpers.process import run_cockpit  # noqa: E402
from tests.helpers.tui_campaign import NOW, running_campaign  # noqa: E402
from tests.tui.test_tui_keys_issue15 import ended_campaign  # noqa: E402
from tests.tui.test_tui_pilot import (  # noqa: E402
    SIZE,
    flow_done,
    journal,
    kill_started,
    kinds,
    make_app,
    run_async,
    running,
    type_text,
    until,
)
from tests.tui.test_tui_snapshots import ready, screen_text  # noqa: E402


@run_async
async def test_the_tui_writes_the_status_line_tmux_reads(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [
        {"id": "prep", "hours": 1, "resource": "human"},
        {"id": "pilot", "hours": 1, "resource": "human", "after": ["prep"],
         "decision_point": True}])
    campaign = load_campaign(path)
    log = CampaignFiles.of(campaign).status_log
    # As `cockpit tui` opens it: a face with the campaign's lease (it conducts).
    lease = ConductorLease(str(campaign.state_dir), 1, "tui")
    app = CockpitApp(Engine(campaign, actor="tui", lease=lease), interval=0.1,
                     status_log=log)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: log.exists() and log.read_text().count("\n") >= 3)
        line = line_from_status_log(path)
        assert line is not None and "NOT WATCHED" not in line and "rules" in line
        last = json.loads(log.read_text().splitlines()[-1])
        assert set(last["stages"]) == {"prep", "pilot"}
        assert last["conductor"]["you"] and last["conductor"]["face"] == "tui"


def two_long_runs(folder: Path) -> Path:
    return write_campaign(folder, [
        {"id": "train", "hours": 1, "resource": "cpu", "run": "r1",
         "command": step_command(steps=4000, sleep=0.05)},
        {"id": "other", "hours": 1, "resource": "cpu", "run": "r2",
         "command": step_command(steps=4000, sleep=0.05)},
        {"id": "diverge", "hours": 1, "resource": "cpu", "run": "rd",
         "category": "exploratory", "command": step_command(steps=400, sleep=0.02, nan_at=3)},
    ], rules=[FINITE])


@pytest.fixture
def long_runs(tmp_path: Path) -> Iterator[Path]:
    path = two_long_runs(tmp_path)
    yield path
    kill_started(path)


@run_async
async def test_a_rule_that_fires_while_a_dialog_is_open_shows_on_the_dashboard(
        long_runs: Path) -> None:
    app, engine = make_app(long_runs)
    engine.start("train")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: running(app, "r1"))
        await pilot.press("n")  # a note: the person picks a stage, types for a while
        await until(pilot, lambda: isinstance(app.screen, ModalScreen))
        dialog = app.screen
        drawn_before = app.main.window_panel._last
        app.act("start", app.engine.start, "diverge", force=True)  # beside train (D6)
        # The rule fires behind the dialog: the dashboard draws it, the dialog stays.
        await until(pilot, lambda: "FIRED" in (app.main.rules_panel._last or "").upper())
        assert app.screen is dialog
        assert any("stop rule fired" in n.title for n in app._notifications)
        assert app.main.host_line._last is not None and drawn_before is not None
        await pilot.press("escape")
    assert "note" not in kinds(long_runs)  # the note was cancelled: nothing written


@run_async
async def test_a_key_pressed_twice_opens_one_dialog(long_runs: Path) -> None:
    app, engine = make_app(long_runs)
    engine.start("train")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: running(app, "r1") and app.main.key_available("stop_run"))
        await pilot.press("x", "x")
        await until(pilot, lambda: isinstance(app.screen, FormScreen))
        await pilot.pause()  # what the second x left pending (nothing: one flow)
        assert sum(isinstance(s, FormScreen) for s in app.screen_stack) == 1
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)


@run_async
async def test_the_run_list_highlights_the_run_under_the_cursor(long_runs: Path) -> None:
    app, engine = make_app(long_runs)
    engine.start("train")
    engine.start("other", force=True)  # beside train on the CPU (D6)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: running(app, "r1") and running(app, "r2"))
        table = app.main.runs_table
        await until(pilot, lambda: table.row_count >= 2)
        row = next(i for i in range(table.row_count) if table.row_key_at(i) == "r2")
        table.move_cursor(row)
        app.main.stages_table.focus()  # the cursor stays on r2; the table has no focus
        await until(pilot, lambda: app.focused is app.main.stages_table)  # focus() is deferred
        assert table.cursor_key == "r2"
        await pilot.press("x")
        # The list has the focus once its screen mounted (and highlighted the cursor's
        # run): before that, OptionList's own default highlight is the first option.
        await until(pilot, lambda: isinstance(app.screen, PickScreen)
                    and app.screen.query_one(OptionList).has_focus)
        options = app.screen.query_one(OptionList)
        assert options.highlighted is not None
        assert options.get_option_at_index(options.highlighted).id == "r2"
        await pilot.press("escape")


@run_async
async def test_s_on_a_failed_stage_restarts_it_and_keeps_the_attempt(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [
        {"id": "flaky", "hours": 1, "resource": "cpu", "run": "rf",
         "command": [sys.executable, "-c", "raise SystemExit(3)"]}])
    app, engine = make_app(path)
    engine.start("flaky")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.snapshot is not None
                    and app.snapshot.stage("flaky").state == "failed")
        assert app.snapshot.stage("flaky").start.ok  # offered again: no greyed s
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, PickScreen))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "Restart stage flaky?" in str(app.screen.query_one(".dialog-title").render())
        await pilot.press("y")
        await until(pilot, lambda: kinds(path).count("stage_started") == 2)
    started = [e for e in journal(path) if e["kind"] == "stage_started"]
    assert [e["stage"] for e in started] == ["flaky", "flaky"]


@pytest.mark.parametrize("width", [60, 80, 120])
@run_async
async def test_the_key_bar_always_shows_help_and_quit_and_the_urgent_key_first(
        tmp_path: Path, width: int) -> None:
    path = write_campaign(tmp_path, [
        {"id": "pilot", "hours": 1, "resource": "human", "decision_point": True},
        {"id": "later", "hours": 1, "resource": "human", "after": ["pilot"]}])
    assert run_cockpit("mark", str(path), "pilot", "done").returncode == 0
    app, _engine = make_app(path)
    async with app.run_test(size=(width, 24)) as pilot:
        await until(pilot, lambda: app.snapshot is not None and app.snapshot.pending_decisions)
        bar = app.main.query_one(KeyBar)
        # The key bar draws from the main screen's snapshot: the one with the decision.
        await until(pilot, lambda: "decide" in urgent_actions(app.main.snapshot))
        line = str(bar.render())
        assert len(line) <= width
        assert "? Help" in line and "q Quit" in line, line
        assert line.lstrip().startswith("d Decide"), line  # the pending decision's key first
        # A greyed key still answers: x with nothing running says why.
        assert not app.main.key_available("stop_run")
        await pilot.press("x")
        await until(pilot, lambda: any("no run is running" in str(n.message)
                                       for n in app._notifications))


def test_the_key_bar_folds_what_does_not_fit_and_counts_it() -> None:
    keys = [BarKey(k, label, action, enabled) for k, label, action, enabled in [
        ("s", "Start", "start_stage", False), ("x", "Stop", "stop_run", True),
        ("n", "Note", "note", True), ("c", "Cost", "cost", True),
        ("e", "Export", "export", False), ("?", "Help", "help", True),
        ("q", "Quit", "quit_cockpit", True)]]
    for width in (20, 30, 44, 200):
        text, spans = key_bar_text(keys, width)
        plain = text.plain
        assert plain.rstrip().endswith("q Quit") and "? Help" in plain
        assert text.cell_len <= max(width, len(" ? Help  q Quit "))
        shown = [a for _s, _e, a in spans if a not in ("help", "quit_cockpit")]
        folded = len(keys) - 2 - len(shown)
        assert (f"+{folded} ?" in plain) == (folded > 0 and width >= 30)
        # What applies now comes before what is greyed.
        order = [a for a in ("stop_run", "note", "cost", "start_stage", "export") if a in shown]
        assert shown == order


@run_async
async def test_a_diverging_run_never_flattens_the_other_curves(tmp_path: Path) -> None:
    engine = running_campaign(tmp_path)
    report = report_path(engine.campaign, "wild-lr")
    with open(report, "a") as handle:  # wild-lr diverges to 1e25 (finite, after its NaN)
        for i in range(1, 43):
            handle.write(json.dumps({"t": NOW.timestamp(), "step": 900 + i,
                                     "loss": 0.5 * 10 ** (i * 0.6)}) + "\n")
    app = CockpitApp(engine, interval=3600)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.snapshot is not None)
        app.kick()
        await until(pilot, lambda: any(
            p.values.get("loss", 0) > 1e20 for r in app.snapshot.runs if r.id == "wild-lr"
            for p in r.points))
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, ChartScreen))
        screen = app.screen
        await until(pilot, lambda: screen.bounds is not None)
        assert screen.metric == "loss"  # the loss first, not a data check's metric
        bounds = screen.bounds
        assert bounds.clipped == ("wild-lr",) and bounds.hi < 10
        assert any(label.startswith("wild-lr") and "clipped" in label for label in screen.labels)
        sane = [p.values["loss"] for r in app.snapshot.runs if r.id in ("control", "variant-a")
                for p in r.points if "loss" in p.values]
        assert (max(sane) - min(sane)) / (bounds.hi - bounds.lo) > 0.5
        drawn = screen.query_one(PlotextPlot).plt.build()
        assert not re.search(r"\d{9,}", drawn)  # no 26102613256272895130206208.0 ticks
        await pilot.press("escape")


@run_async
async def test_at_120x40_the_runs_table_shows_verdict_and_checkpoint(tmp_path: Path) -> None:
    app = CockpitApp(running_campaign(tmp_path), interval=3600)
    seen: dict[str, str] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(seen)(pilot)
    rows = {line.split("│")[1].split()[0]: line for line in seen["text"].splitlines()
            if line.startswith("│ ") and line.split("│")[1].split()[:1] in
            (["control"], ["variant-a"], ["wild-lr"]) and "/" in line}
    assert set(rows) == {"control", "variant-a", "wild-lr"}
    header = next(line for line in seen["text"].splitlines() if "loss · curve" in line)
    assert "verdict · stop" in header and "ckpt · reload" in header  # not cut off
    assert "✗ finite-loss" in rows["wild-lr"] and "none yet" in rows["wild-lr"]
    # The stages take the rows they need: no empty rows in their box, no stray glyph.
    lines = seen["text"].splitlines()
    top = next(i for i, line in enumerate(lines) if "─ stages " in line)
    bottom = next(i for i in range(top, len(lines)) if lines[i].startswith("╰"))
    assert all(line.strip("│ ") for line in lines[top + 1:bottom])
    assert "▏" not in "".join(lines[top:bottom + 1])


@pytest.mark.parametrize("size", [(80, 24), (60, 20)])
@run_async
async def test_the_decide_dialog_shows_the_note_field_when_it_is_typed_into(
        tmp_path: Path, size: tuple[int, int]) -> None:
    engine = running_campaign(tmp_path)
    engine.mark("pilot", "started", now=NOW)
    engine.mark("pilot", "done", now=NOW)
    app = CockpitApp(engine, interval=3600)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.snapshot is not None and app.snapshot.pending_decisions)
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, DecideScreen))
        await pilot.press("enter")  # continue: the note is the next thing to type
        note = app.screen.query_one("#decide-note")
        await until(pilot, lambda: app.screen.focused is note and note.is_on_screen)
        assert app.screen.focused is note and note.is_on_screen
        await type_text(pilot, "pilot fits")
        await until(pilot, lambda: "pilot fits" in screen_text(app))  # the typed text drawn
        text = screen_text(app)
        assert "note: why (required)" in text and "pilot fits" in text  # typed in view
        assert "[x]" in text or size[1] < 24  # the drop list's legend is literal text
        await pilot.press("enter", "enter")  # the second field, then on to the y/n
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "note: pilot fits" in screen_text(app)  # the y/n shows what is written
        await pilot.press("n")


class SlowChecks:
    """The real acceptance checks, held until the test releases them (a reload check
    of a big model takes seconds, or minutes): ``done`` once they have run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.release = threading.Event()
        self.done = threading.Event()
        real = flows._acceptance_checks

        def slow(app: Any, run_id: str) -> str:
            try:
                if not self.release.wait(timeout=120):  # only a hang guard
                    raise RuntimeError("the test never released the checks")
                return real(app, run_id)
            finally:
                self.done.set()

        monkeypatch.setattr(flows, "_acceptance_checks", slow)


def wait_body(app: CockpitApp) -> str:
    """The wait dialog's text ("" when it is not up)."""
    if not isinstance(app.screen, WaitScreen):
        return ""
    return str(app.screen.query_one("#wait-body").render())


async def reject_and_wait(app: CockpitApp, pilot: Any) -> None:
    """``r`` once the run may be rejected: the slow check's wait dialog opens."""
    await until(pilot, lambda: app.snapshot is not None and app.main.key_available("reject"))
    await pilot.press("r")
    await until(pilot, lambda: isinstance(app.screen, WaitScreen))


@run_async
async def test_a_slow_check_shows_its_progress_at_once_and_the_budget_follows_the_reject(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checks = SlowChecks(monkeypatch)
    app = ended_campaign(tmp_path)
    app.interval = 0.2
    try:
        async with app.run_test(size=SIZE) as pilot:
            await reject_and_wait(app, pilot)
            ticks = app.ticks
            await pilot.press("r")  # pressed again while waiting: no second flow
            # The check is under way: its seconds count up, the dashboard ticks behind.
            await until(pilot, lambda: re.search(r"… [1-9] s", wait_body(app))
                        and app.ticks > ticks)
            body = wait_body(app)
            assert "acceptance checks" in body and re.search(r"… [1-9] s", body), body
            assert app.ticks > ticks  # the dashboard ticks behind the wait
            checks.release.set()  # the check ends
            await until(pilot, lambda: isinstance(app.screen, FormScreen))
            assert sum(isinstance(s, (WaitScreen, FormScreen)) for s in app.screen_stack) == 1
            await type_text(pilot, "leak in eval")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await until(pilot, lambda: any(e["kind"] == "result_rejected"
                                           for e in journal(app.engine.campaign.path)))
            # The next frame shows what the journal says: the budget as `cockpit budget`.
            budget = run_cockpit("budget", str(app.engine.campaign.path))
            accepted = re.search(r"accepted results: (\d+)", budget.stdout)
            assert accepted is not None, budget.stdout
            await until(pilot, lambda: f"accepted results {accepted.group(1)}" in
                        (app.main.budget_panel._last or "").replace("[bold]", "").replace(
                            "[/bold]", ""))
    finally:
        checks.release.set()


@run_async
async def test_esc_stops_waiting_for_a_check_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checks = SlowChecks(monkeypatch)
    app = ended_campaign(tmp_path)
    before = journal(app.engine.campaign.path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await reject_and_wait(app, pilot)
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is app.main)
            # The check ends in the background (after the person stopped waiting): the
            # flow is over, and no dialog comes back.
            checks.release.set()
            await until(pilot, lambda: checks.done.is_set() and flow_done(app))
            await pilot.pause()
            assert app.screen is app.main
    finally:
        checks.release.set()
    assert journal(app.engine.campaign.path) == before
