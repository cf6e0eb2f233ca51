"""What the Snapshot offers a person, against what the real engine's actions do.

Each predicate (accept, reject, start, stop, mark, the export key) is checked on a real
Engine over a tmp campaign, with the fake clock and fake supervisor of the guard tests:
where the action refuses, the Snapshot says not allowed in the action's own words; where
the Snapshot allows, the action succeeds. Milliseconds; no process is started except in
the one log-path test, which is about the supervisor's real files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.common.errors import ActionRefused, InputError
from cockpit.common.printable import printable
from cockpit.engine import Engine
from cockpit.engine.snapshot import Allowed, ExportAction, LogPaths, Snapshot, snapshot_json
from cockpit.fleet.open import open_engine
from cockpit.planning.schedule import plan_campaign
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor, make, report
from tests.helpers.campaigns import FINITE, FIXED_START, step_command, write_campaign


def refused(action: object, *args: object, **kwargs: object) -> str:
    """The words the action refuses with (it must refuse)."""
    assert callable(action)
    with pytest.raises(ActionRefused) as caught:
        action(*args, **kwargs)
    return printable(str(caught.value))


def says_no(allowed: Allowed, why: str) -> None:
    assert allowed == Allowed(False, why), allowed


PLAN = [
    {"id": "prep", "hours": 1, "resource": "cpu", "command": ["prep"]},
    {"id": "pilot", "hours": 1, "resource": "gpu", "run": "pilot", "after": ["prep"],
     "decision_point": True, "command": ["pilot"]},
    {"id": "main", "hours": 2, "resource": "gpu", "run": "main", "after": ["pilot"],
     "command": ["main"]},
    {"id": "review", "hours": 1, "resource": "human", "category": "useful"},
]


def test_start_is_offered_exactly_as_the_engine_starts(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    engine, _ = make(tmp_path, PLAN, clock, sup)
    snap = engine.tick()
    assert snap.stage("prep").start.ok
    says_no(snap.stage("pilot").start, refused(engine.start, "pilot"))
    assert "waits for prep (pending)" in snap.stage("pilot").start.why_not
    says_no(snap.stage("review").start, refused(engine.start, "review"))  # no command

    engine.start("prep")  # allowed: the engine starts it
    snap = engine.tick()
    says_no(snap.stage("prep").start, refused(engine.start, "prep"))  # already running
    assert "already running" in snap.stage("prep").start.why_not

    sup.finish("prep")
    clock.advance(60)
    snap = engine.tick()
    assert snap.stage("pilot").start.ok
    engine.start("pilot")
    sup.finish("pilot")
    clock.advance(60)
    snap = engine.tick()
    # Blocked by the pending decision: not offered, though `cockpit start` would run it.
    assert snap.stage("main").state == "blocked"
    says_no(snap.stage("main").start, "stage 'main' is blocked: the decision at 'pilot' is "
                                      "pending (D4); `cockpit start` runs it anyway")
    # A stage that is done is not offered again (the CLI restarts it with --force).
    says_no(snap.stage("prep").start, "stage 'prep' is done; --force starts it again (a new "
                                      "attempt, the earlier one kept)")
    says_no(snap.stage("prep").start, refused(engine.start, "prep"))  # the action agrees


def test_start_refusals_for_a_held_resource_a_rule_stop_and_a_dropped_stage(
        tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor(term_exits=True)
    engine, path = make(tmp_path, [
        {"id": "a", "hours": 1, "resource": "gpu:0", "run": "a", "command": ["a"]},
        {"id": "b", "hours": 1, "resource": "gpu:0", "run": "b", "command": ["b"],
         "category": "exploratory"},
        {"id": "c", "hours": 1, "resource": "cpu", "run": "c", "command": ["c"],
         "category": "exploratory", "decision_point": True},
        {"id": "d", "hours": 1, "resource": "cpu", "command": ["d"], "after": ["c"],
         "category": "exploratory"},
    ], clock, sup, rules=[FINITE])
    engine.start("a")
    snap = engine.tick()
    says_no(snap.stage("b").start, refused(engine.start, "b"))
    assert "which stage 'a' holds (D6)" in snap.stage("b").start.why_not

    report(path, "a", clock, 1, float("nan"))  # the rule stops a; a restart needs --force
    clock.advance(1)
    engine.tick()
    clock.advance(1)
    snap = engine.tick()
    assert snap.stage("a").state == "stopped"
    says_no(snap.stage("a").start, refused(engine.start, "a"))
    assert "a restart needs --force (D15)" in snap.stage("a").start.why_not

    engine.start("c")
    sup.finish("c")
    clock.advance(60)
    engine.tick()
    engine.decide("limit", drops=["d"], note="no time")
    snap = engine.tick()
    says_no(snap.stage("d").start, refused(engine.start, "d"))
    assert snap.stage("d").start.why_not == "stage 'd' was dropped"


def test_stop_is_offered_exactly_as_the_engine_stops(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor(term_exits=False)
    engine, _ = make(tmp_path, PLAN, clock, sup)
    snap = engine.tick()
    says_no(snap.stage("prep").stop, "stage 'prep' has no run; give it `run: ID` to supervise "
                                     "and stop it")
    with pytest.raises(InputError) as caught:
        engine.stop("prep", "why")
    assert snap.stage("prep").stop.why_not in caught.value.text
    engine.start("prep")
    sup.finish("prep")
    clock.advance(60)
    engine.tick()
    engine.start("pilot")
    snap = engine.tick()
    assert snap.run("pilot").stop.ok and snap.stage("pilot").stop.ok
    says_no(snap.run("main").stop, refused(engine.stop, "main", "why"))  # not running
    engine.stop("pilot", "wrong learning rate")  # allowed: the engine stops it
    snap = engine.tick()
    says_no(snap.run("pilot").stop, refused(engine.stop, "pilot", "again"))
    assert snap.stage("pilot").stop == snap.run("pilot").stop
    assert "already being stopped (wrong learning rate)" in snap.run("pilot").stop.why_not


def test_mark_offers_a_manual_stage_as_the_engine_marks_it(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    engine, _ = make(tmp_path, [
        {"id": "review", "hours": 1, "resource": "human"},
        {"id": "prep", "hours": 1, "resource": "cpu", "command": ["prep"]},
    ], clock, sup)
    snap = engine.tick()
    review = snap.stage("review")
    assert review.state == "needs-person" and review.mark.ok
    assert review.mark_as == ("started", "done")
    engine.mark("review", "started")
    snap = engine.tick()
    assert snap.stage("review").mark_as == ("done",)
    refused(engine.mark, "review", "started")  # not offered: the engine refuses it too
    engine.mark("review", "done")
    snap = engine.tick()
    says_no(snap.stage("review").mark, refused(engine.mark, "review", "done"))
    assert snap.stage("review").mark_as == ()

    engine.start("prep")
    snap = engine.tick()  # a stage the cockpit runs: the engine's own refusal
    says_no(snap.stage("prep").mark, refused(engine.mark, "prep", "done"))
    assert "runs under the cockpit" in snap.stage("prep").mark.why_not


def _results_plan(tmp_path: Path, clock: FakeClock, sup: FakeSupervisor) -> Engine:
    engine, _ = make(tmp_path, [
        {"id": "pilot", "hours": 1, "resource": "gpu:0", "run": "pilot", "command": ["p"]},
        {"id": "data-check", "hours": 1, "resource": "cpu", "run": "data-check",
         "command": ["d"]},
        {"id": "good", "hours": 1, "resource": "gpu:0", "run": "good", "command": ["g"],
         "after": ["pilot"]},
        {"id": "bad", "hours": 1, "resource": "none", "run": "bad", "command": ["b"]},
    ], clock, sup)
    return engine


def test_a_pilot_or_data_check_run_is_never_offered_a_verdict(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    engine = _results_plan(tmp_path, clock, sup)
    for stage in ("pilot", "data-check"):
        engine.start(stage)
        sup.finish(stage)
    clock.advance(60)
    snap = engine.tick()
    for run_id in ("pilot", "data-check"):
        run = snap.run(run_id)
        assert run.state == "succeeded" and not run.produces_result
        says_no(run.accept, refused(engine.accept, run_id))
        says_no(run.reject, refused(engine.reject, run_id, "why"))
        assert "produces no result" in run.accept.why_not


def test_accept_and_reject_are_offered_as_the_engine_judges(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    engine = _results_plan(tmp_path, clock, sup)
    snap = engine.tick()
    says_no(snap.run("good").accept, refused(engine.accept, "good"))  # has not run
    engine.start("pilot")
    sup.finish("pilot")
    engine.start("bad")
    clock.advance(60)
    engine.tick()
    engine.start("good")
    snap = engine.tick()
    says_no(snap.run("good").accept, refused(engine.accept, "good"))  # still running
    says_no(snap.run("good").reject, refused(engine.reject, "good", "why"))
    sup.finish("good")
    sup.finish("bad", code=3)
    clock.advance(60)
    snap = engine.tick()
    assert snap.run("good").accept.ok and snap.run("good").reject.ok
    says_no(snap.run("bad").accept, refused(engine.accept, "bad"))
    assert snap.run("bad").accept.why_not == "run 'bad' failed (exit code 3)"
    assert snap.run("bad").reject.ok
    assert engine.accept("good", "fine") is not None  # allowed: the engine accepts
    assert engine.reject("bad", "crashed") is not None
    snap = engine.tick()
    # A verdict it already has is not offered again: the engine would do nothing.
    says_no(snap.run("good").accept, "run 'good' is already accepted")
    assert engine.accept("good") is None
    says_no(snap.run("bad").reject, "run 'bad' is already rejected")
    assert engine.reject("bad", "again") is None
    assert snap.run("good").reject.ok  # a later verdict replaces an earlier one


def test_a_run_stopped_by_a_rule_is_never_offered_acceptance(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor(term_exits=True)
    engine, path = make(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["t"]},
    ], clock, sup, rules=[FINITE])
    engine.start("train")
    report(path, "r1", clock, 1, float("nan"))
    clock.advance(1)
    engine.tick()
    clock.advance(1)
    snap = engine.tick()
    assert snap.run("r1").state == "stopped"
    says_no(snap.run("r1").accept, refused(engine.accept, "r1"))
    says_no(snap.run("r1").reject, refused(engine.reject, "r1", "why"))
    assert "a stopped run is never an accepted result (D15)" in snap.run("r1").accept.why_not


def test_the_other_machines_stages_are_refused_in_the_engines_words(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    machines = {"1": {"ssh": "box-a", "path": "/c"}, "2": {"ssh": "box-b", "path": "/c"}}
    engine, _ = make(tmp_path, [
        {"id": "here", "hours": 1, "resource": "gpu:0", "run": "here", "command": ["h"],
         "machine": 1},
        {"id": "there", "hours": 1, "resource": "gpu:0", "run": "there", "command": ["t"],
         "machine": 2},
    ], clock, sup, extra={"machines": machines,
                          "package": {"offer": "rtx4090-3d", "start": FIXED_START,
                                      "count": 2}})
    snap = engine.tick()
    assert snap.stage("here").start.ok
    says_no(snap.stage("there").start, refused(engine.start, "there"))
    assert "runs on machine 2 and this cockpit is machine 1" in snap.stage("there").start.why_not


EXPORT_STAGES = [
    {"id": "train", "hours": 1, "resource": "gpu", "run": "train", "command": ["t"]},
]


def test_the_export_key_starts_an_automatic_export_stage(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    engine, _ = make(tmp_path, [*EXPORT_STAGES, {
        "id": "export", "hours": 1, "resource": "cpu", "after": ["train"],
        "command": ["export"]}], clock, sup)
    snap = engine.tick()
    # Not ready (it waits for train): started anyway, with force, as the key always did.
    assert snap.export_action == ExportAction("start_stage", "export", True)
    engine.start("train")
    sup.finish("train")
    clock.advance(60)
    snap = engine.tick()
    assert snap.export_action == ExportAction("start_stage", "export", False)
    engine.start("export", force=snap.export_action.force)
    snap = engine.tick()
    assert snap.export_action == ExportAction(
        "none", "export", allowed=Allowed(False, "the export stage 'export' is running"))
    sup.finish("export")
    clock.advance(60)
    assert engine.tick().export_action == ExportAction("export")  # ended: a plain export
    assert snapshot_json(snap)["export_action"] == {
        "kind": "none", "stage": "export", "force": False, "ok": False,
        "why_not": "the export stage 'export' is running"}


def test_the_export_key_marks_a_manual_export_stage_or_just_exports(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    engine, _ = make(tmp_path / "manual", [*EXPORT_STAGES, {
        "id": "bundle", "role": "export", "hours": 1, "resource": "human"}], clock, sup)
    assert engine.tick().export_action == ExportAction("export_and_mark", "bundle")
    engine.mark("bundle", "done")  # what the key does after exporting
    assert engine.tick().export_action == ExportAction("export")

    engine, _ = make(tmp_path / "none", EXPORT_STAGES, clock, sup)
    assert engine.tick().export_action == ExportAction("export")


def test_log_paths_are_the_files_the_supervisor_wrote(tmp_path: Path) -> None:
    """A real launch: the run's log_path names the files the TUI found by glob."""
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "cpu", "run": "r1",
         "command": step_command(steps=1, sleep=0.0)}])
    engine = open_engine(path, telemetry=False)
    try:
        assert engine.tick().run("r1").log_path is None  # not started: no output
        engine.start("train")
        snap: Snapshot = engine.tick()
    finally:
        engine.close()
    outs = sorted((tmp_path / ".cockpit" / "logs").glob("train.*.out"))
    assert len(outs) == 1
    expected = LogPaths(str(outs[0]), str(outs[0].with_suffix(".err")))
    assert snap.run("r1").log_path == expected == snap.stage("train").log_path
    assert Path(expected.err).exists()


def test_the_snapshot_json_says_what_may_be_done(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    engine, _ = make(tmp_path, PLAN, clock, sup)
    snap = engine.tick()
    data = snapshot_json(snap)
    stages = {s["id"]: s["may"] for s in data["stages"]}
    assert stages["prep"]["start"] == {"ok": True, "why_not": ""}
    assert stages["review"]["mark_as"] == ["started", "done"]
    assert stages["pilot"]["start"]["ok"] is False
    # The schedule is the plan's, as `cockpit plan` orders it (the timeline's plan lane).
    assert snap.schedule == plan_campaign(engine.campaign).slots
    assert {slot.stage.id for slot in snap.schedule} == {"prep", "pilot", "main", "review"}


def test_the_fleet_is_refused_by_no_machine_it_acts_where_the_stage_lives(
        tmp_path: Path) -> None:
    """`cockpit fleet` (machine None) runs each action on the stage's own machine."""
    from cockpit.campaign import load_campaign
    from cockpit.engine.affordances import start_allowed
    from cockpit.engine.readiness import stage_status
    from cockpit.journal.fold import fold
    from tests.engine.test_engine_guards import START

    machines = {"1": {"ssh": "box-a", "path": "/c"}, "2": {"ssh": "box-b", "path": "/c"}}
    campaign = load_campaign(write_campaign(tmp_path, [
        {"id": "one", "hours": 1, "resource": "gpu:0", "command": ["a"], "machine": 1},
        {"id": "two", "hours": 1, "resource": "gpu:0", "command": ["b"], "machine": 2},
    ], extra={"machines": machines, "package": {
        "offer": "rtx4090-3d", "start": FIXED_START, "count": 2}}))
    state = fold(campaign, [], START, None)
    for stage in campaign.stages:
        status = stage_status(campaign, state, stage)
        assert start_allowed(campaign, state, stage, None, status).ok
        assert not start_allowed(campaign, state, stage, 3 - stage.machine, status).ok
