"""The landing reserves only what will happen (issue 41), with a fake clock and a fake
supervisor (the engine's own journal, on tmp_path): a run with nothing to save is stopped
at the point of no return without a save request and reserves no save or reload time,
and with a window too short for a stage --auto does not start what the landing would
cut, says why once, and leaves it for a person."""

from __future__ import annotations

from datetime import timedelta

from cockpit.engine.guards import landing_cuts
from cockpit.engine.intents import RecordOnce, StartStage
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor, journal, make

LAND = {"on_deadline": "land",
        "deadline": {"export_hours": "10m", "retrieve_hours": "10m", "landing_margin": "10m",
                     "landing_lead": "2h"}}


def test_a_run_with_nothing_to_save_is_stopped_without_a_request_and_reserves_nothing(
        tmp_path):
    clock, sup = FakeClock(), FakeSupervisor(term_exits=True)
    engine, path = make(tmp_path, [
        {"id": "data", "hours": 1, "resource": "cpu", "run": "data", "command": ["data"]},
        {"id": "train", "hours": 1, "resource": "gpu", "run": "train", "command": ["train"]},
    ], clock, sup, runs={"train": {"checkpoints": "ckpt/train"}}, extra=LAND)
    engine.start("data")
    engine.start("train")
    snap = engine.tick()
    end = engine.campaign.package.end
    # Neither can save (no checkpoints declared; none written yet): the reserve is the
    # export, the retrieval and the margin alone, and it says why.
    assert snap.window.point_of_no_return == end - timedelta(minutes=30)
    assert snap.window.landing_words.startswith(
        "save 0s (data, train: no checkpoint to save, stopped without a save request) + "
        "reload 0s (nothing saved to reload) + export 10m"), snap.window.landing_words
    clock.t = end - timedelta(minutes=30)
    for _ in range(4):
        engine.tick()
    events = [e for e in journal(path) if e["kind"] == "landing"]
    phases = [(e["phase"], e.get("run")) for e in events]
    assert ("save_requested", "data") not in phases and ("save_requested", "train") \
        not in phases
    stops = {e["run"]: e["text"] for e in events if e["phase"] == "stopped"}
    assert stops == {"data": "data stopped (nothing to save: no checkpoints declared; not "
                             "asked to save)",
                     "train": "train stopped (nothing to save: no checkpoint written yet; "
                              "not asked to save)"}
    assert not (tmp_path / ".cockpit" / "runs" / "train" / "save-request").exists()
    began = events[0]
    assert began["phase"] == "began" and began["reserve"]["save_s"] == 0
    assert began["reserve"]["total_s"] == 30 * 60 and began["point"].startswith(
        (end - timedelta(minutes=30)).isoformat()[:19])
    assert [p for p, _ in phases][-3:] == ["exporting", "exported", "landed"]
    engine.close()


def test_auto_starts_nothing_the_landing_would_cut_and_says_why_once(tmp_path):
    clock, sup = FakeClock(), FakeSupervisor()
    engine, path = make(tmp_path, [
        {"id": "quick", "hours": 0.25, "resource": "cpu", "run": "quick",
         "command": ["quick"]},
        {"id": "long", "hours": 2, "resource": "gpu", "run": "long", "command": ["long"]},
        {"id": "export", "hours": 1 / 6, "resource": "cpu", "role": "export",
         "after": ["quick", "long"], "command": ["export"]},
    ], clock, sup, runs={"long": {"checkpoints": "ckpt/long"}}, extra=LAND, auto=True)
    end = engine.campaign.package.end
    clock.t = end - timedelta(hours=1)  # the point: end − 30 min (nothing runs yet)
    for _ in range(3):
        engine.tick()
    assert sup.launched == ["quick"]  # 15 min ends before the point; 2 h would not
    cut = [e for e in journal(path) if e["kind"] == "warning"
           and str(e.get("key")).startswith("landing_cut:")]
    assert [e["key"] for e in cut] == ["landing_cut:long"], cut  # said once
    assert cut[0]["message"].startswith(
        "long not started by --auto: its planned 2h would end 09:00 UTC, after the point of "
        "no return (07:30 UTC), and the landing would cut it; left for a person")
    sup.finish("quick")
    engine.tick()
    verdict = engine.until_done(engine.state())
    assert verdict.code == 3 and "long" in verdict.reason, verdict  # a person's, not "starting"
    assert sup.launched == ["quick"]
    engine.start("long")  # a person may still start it, knowing
    assert sup.launched == ["quick", "long"]
    engine.close()


def test_the_cut_is_by_the_planned_duration_and_never_holds_a_closing_stage(tmp_path):
    clock, sup = FakeClock(), FakeSupervisor()
    engine, _path = make(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "train", "command": ["t"]},
        {"id": "export", "hours": 1, "resource": "cpu", "role": "export", "command": ["e"]},
    ], clock, sup, extra=LAND)
    campaign = engine.campaign
    now = clock.t
    starts = [StartStage("train", auto=True), StartStage("export", auto=True)]
    # The point 61 min away: the 1 h stage ends before it and starts.
    kept, held = landing_cuts(campaign, starts, now, now + timedelta(minutes=61))
    assert kept == starts and held == frozenset()
    # The point 59 min away: the training stage is held and said; the export still starts.
    kept, held = landing_cuts(campaign, starts, now, now + timedelta(minutes=59))
    assert held == {"train"} and StartStage("export", auto=True) in kept
    said = [i for i in kept if isinstance(i, RecordOnce)]
    assert [s.key for s in said] == ["landing_cut:train"]
    engine.close()
