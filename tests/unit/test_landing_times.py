"""The point of no return (issue 26) as pure figures: what the landing must fit between
it and the window end; the save request a training loop reads; the warning before it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.campaign import load_campaign
from cockpit.engine.guards import landing_near
from cockpit.engine.intents import RecordOnce
from cockpit.planning.advice import plan_warnings
from cockpit.planning.deadline import (
    SAVE_WAIT_MIN_S,
    UNMEASURED_S,
    closing_times,
    landing_times,
    planned_landing_times,
    point_of_no_return,
    save_wait_s,
    window_shorter_than_reserve,
)
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit

DEADLINE = {"export_hours": "20m", "retrieve_hours": "10m", "landing_margin": "5m",
            "landing_lead": "30m"}


def campaign(tmp_path: Path, mode: str = "land"):
    return load_campaign(write_campaign(tmp_path, [
        {"id": "control", "hours": 1, "resource": "gpu", "run": "control"}],
        extra={"on_deadline": mode, "deadline": DEADLINE}))


def test_the_point_is_the_end_less_save_reload_export_retrieval_and_margin(tmp_path) -> None:
    c = campaign(tmp_path)
    closing = closing_times(c)
    measured = landing_times(c, closing, {"control": 40.0}, {"control": 12.0}, None, None)
    # 2 × 40 s save + 12 s reload + 20 m export + 10 m retrieval + 5 m margin
    assert measured.total_s == 80 + 12 + 1200 + 600 + 300
    assert point_of_no_return(c, measured) == c.package.end - timedelta(seconds=2192)
    assert measured.words().startswith("save 1m (control: 2 × its save) + reload 12s")
    # Never measured: the cautious figures, said as such.
    blind = landing_times(c, closing, {"control": None}, {"control": None}, None, None)
    assert blind.wait_s == 2 * UNMEASURED_S and blind.reload_s == UNMEASURED_S
    assert "save 4m (control: save not measured: 2m assumed, 2 × that)" in blind.words()
    assert "reload 2m (reload not measured: 2m assumed)" in blind.words()
    # Nothing running: export and retrieval only.
    idle = landing_times(c, closing, {}, {}, None, None)
    assert idle.total_s == 1200 + 600 + 300 and "nothing running" in idle.words()


def test_the_reserve_counts_only_the_runs_the_landing_asks_to_save(tmp_path) -> None:
    """A run stopped at once (no checkpoint to save, optional) reserves nothing: it is
    named, never given a save or a reload; a measured and an unmeasured reload are told
    apart, term by term."""
    c = campaign(tmp_path)
    closing = closing_times(c)
    stopped = landing_times(c, closing, {}, {}, None, None, stopped=["report"])
    assert stopped.wait_s == 0 and stopped.reload_s == 0
    assert stopped.total_s == 1200 + 600 + 300
    assert stopped.words().startswith(
        "save 0s (report: no checkpoint to save, stopped without a save request) + "
        "reload 0s (nothing saved to reload)")
    mixed = landing_times(c, closing, {"a": 20.0, "b": None}, {"a": 5.0, "b": None}, None,
                          None, stopped=["report"])
    assert mixed.wait_s == 2 * UNMEASURED_S and mixed.reload_s == 5 + UNMEASURED_S
    assert mixed.wait_from == "b: save not measured: 2m assumed, 2 × that"
    assert mixed.reload_from == "1 of 2 reloads not measured: 2m assumed each"
    terms = mixed.terms()
    assert terms["save_s"] == 240 and terms["reload_s"] == 125 and terms["export_s"] == 1200
    assert terms["total_s"] == mixed.total_s == 240 + 125 + 1200 + 600 + 300
    measured = landing_times(c, closing, {"a": 20.0}, {"a": 5.0}, None, None)
    assert measured.reload_from == "measured" and "not measured" not in measured.words()
    assert measured.wait_from == "a: 2 × its save"  # 40 s: over the 30 s floor


def test_plan_says_when_the_window_is_shorter_than_the_landing_reserve(tmp_path) -> None:
    short = load_campaign(write_campaign(tmp_path / "short", [
        {"id": "control", "hours": 1, "resource": "gpu", "run": "control"}],
        runs={"control": {"checkpoints": "ckpt"}},
        extra={"on_deadline": "land", "deadline": {"export_hours": "60h",
                                                    "retrieve_hours": "12h"}}))
    times = planned_landing_times(short)
    assert times.wait_s == 2 * UNMEASURED_S and times.reload_s == UNMEASURED_S  # assumed
    said = window_shorter_than_reserve(short)
    assert said is not None and said.startswith(
        "the window (72.00 h) is shorter than the landing reserve (72.27 h: save 4m (control: "
        "save not measured: 2m assumed, 2 × that) + reload 2m (reload not measured: 2m "
        "assumed) + export 2d12h"), said
    assert said in plan_warnings(short)
    out = run_cockpit("plan", str(short.path))
    assert out.returncode == 0 and "is shorter than the landing reserve" in out.stdout, out
    roomy = campaign(tmp_path / "roomy")
    assert window_shorter_than_reserve(roomy) is None
    assert not any("landing reserve" in w for w in plan_warnings(roomy))


def test_a_measured_export_replaces_the_plan_and_grows_with_the_size(tmp_path) -> None:
    c = campaign(tmp_path)
    closing = closing_times(c)
    same = landing_times(c, closing, {}, {}, (90.0, 1000), 1000)
    assert same.export_s == 90.0 and same.export_from == "the last export, measured"
    bigger = landing_times(c, closing, {}, {}, (90.0, 1000), 3000)
    assert bigger.export_s == 270.0 and "× 3.0 for its size now" in bigger.export_from


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_a_run_is_given_twice_its_save_never_under_the_floor(cost: float) -> None:
    wait = save_wait_s(cost)
    assert wait >= SAVE_WAIT_MIN_S and wait >= 2 * cost
    assert wait == max(2 * cost, SAVE_WAIT_MIN_S)


def test_more_runs_wait_in_parallel_but_reload_one_after_another(tmp_path) -> None:
    c = campaign(tmp_path)
    times = landing_times(c, closing_times(c), {"a": 100.0, "b": 10.0},
                          {"a": 30.0, "b": 20.0}, None, None)
    assert times.wait_s == 200.0 and times.reload_s == 50.0


def test_the_warning_comes_once_at_the_lead_and_only_when_the_cockpit_lands(tmp_path) -> None:
    c = campaign(tmp_path / "land")
    point = c.package.end - timedelta(hours=1)
    assert landing_near(c, point - timedelta(minutes=31), point) == []
    near = landing_near(c, point - timedelta(minutes=29), point)
    assert len(near) == 1 and isinstance(near[0], RecordOnce) and near[0].key == "landing_near"
    assert "the landing begins in 29m" in near[0].fields["message"]
    assert landing_near(c, point + timedelta(seconds=1), point) == []  # past it
    # Once the landing began, the point moves later as runs stop: never "begins in 29m".
    assert landing_near(c, point - timedelta(minutes=29), point, began=True) == []
    warn_only = campaign(tmp_path / "warn", mode="warn")
    assert landing_near(warn_only, point - timedelta(minutes=29), point) == []


@pytest.mark.slow  # a real training process (torch)
def test_save_requested_is_true_once_per_request_in_a_real_training_process(tmp_path) -> None:
    """The protocol a training loop honours: a request file, read once a second."""
    flag = tmp_path / "save-request"
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys, time
        from cockpit import report
        answers = []
        for i in range(40):  # 4 s of steps
            if report.save_requested():
                answers.append(i)
            if i == 12:
                open({str(flag)!r} + ".go", "w").close()  # tell the test: ask again
            time.sleep(0.1)
        print(",".join(map(str, answers)))
    """))
    flag.write_text("landing 1\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env={"COCKPIT_SAVE_REQUEST": str(flag), "PATH": "/usr/bin:/bin",
                                 "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    go = Path(f"{flag}.go")
    deadline = 100
    while not go.exists() and deadline:
        deadline -= 1
        subprocess.run(["sleep", "0.05"], check=True)
    flag.write_text("landing 2\n")  # a second request: one more True
    out, _ = proc.communicate(timeout=30)
    answers = [int(x) for x in out.strip().split(",") if x]
    assert len(answers) == 2, out  # once per token, never every step
    assert answers[0] == 0 and answers[1] > 12
    # Outside the cockpit (no variable): always False, and no file is read.
    import cockpit.report as report
    assert report.save_requested() is False
