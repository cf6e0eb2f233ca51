"""The landing's other paths (issue 26), with real processes: a run that never honours
the save request is stopped once its wait has passed (its newest checkpoint is what is
kept), an optional run is stopped at once, and so is an essential run with nothing to
save (no save request: issue 41), nothing new starts, and a cockpit restarted
mid-landing goes on from its journal without asking twice. The clock is faked only
where the engine takes one: it runs ahead, wall and monotonic together."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from cockpit.planning.deadline import save_wait_s
from tests.e2e.test_landing import WINDOW_H, AheadClock
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import wait_for


def journal(folder: Path) -> list[dict]:
    path = folder / ".cockpit" / "journal.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def phases(folder: Path) -> list[tuple[str, str | None]]:
    return [(e["phase"], e.get("run")) for e in journal(folder) if e["kind"] == "landing"]


def test_a_run_deaf_to_the_request_is_stopped_after_its_wait_and_the_rest_lands(
        tmp_path: Path) -> None:
    start = datetime.now(timezone.utc) - timedelta(hours=WINDOW_H) + timedelta(hours=2)
    forever = [sys.executable, "step.py", "100000", "0.05", "0", "0"]
    path = write_campaign(tmp_path, [
        {"id": "control", "hours": 1, "resource": "cpu", "run": "control", "command": forever},
        {"id": "explore", "hours": 1, "resource": "gpu:0", "run": "explore",
         "category": "exploratory", "command": forever},
        {"id": "side", "hours": 1, "resource": "human", "run": "side", "command": forever},
        {"id": "report", "hours": 1, "resource": "cpu", "run": "report", "after": ["control"],
         "command": forever}],
        runs={"control": {"checkpoints": "ckpt/control"}},
        start=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        extra={"on_deadline": "land", "deadline": {"export_hours": "1m",
                                                    "retrieve_hours": "1m"}})
    # control has a checkpoint (it is asked to save); side declares none (it is not).
    (tmp_path / "ckpt" / "control").mkdir(parents=True)
    (tmp_path / "ckpt" / "control" / "step-000001.pt").write_bytes(b"an earlier checkpoint")
    clock = AheadClock()
    engine = Engine(load_campaign(path), auto=True, clock=clock)
    wait_for(lambda: all(engine.tick().run(r).state == "running"
                         for r in ("control", "explore", "side")), timeout=30,
             what="the three runs")
    point = engine.tick().window.point_of_no_return
    assert point is not None
    clock.ahead = (point - datetime.now(timezone.utc)).total_seconds() + 1
    wait_for(lambda: engine.tick().run("explore").state == "stopped"
             and ("save_requested", "control") in phases(tmp_path), timeout=30,
             what="the request, and the optional run stopped")
    assert ("stopped", "explore") in phases(tmp_path)
    assert ("save_requested", "explore") not in phases(tmp_path)  # optional: no wait
    assert ("stopped", "side") in phases(tmp_path)  # nothing to save: no request, no wait
    assert ("save_requested", "side") not in phases(tmp_path)
    assert not (tmp_path / ".cockpit" / "runs" / "side" / "save-request").exists()
    request = tmp_path / ".cockpit" / "runs" / "control" / "save-request"
    assert request.read_text().startswith("landing ")

    # A restarted cockpit goes on: the request is not made twice, its wait still runs.
    engine.close()
    engine = Engine(load_campaign(path), auto=True, clock=clock)
    for _ in range(5):
        engine.tick()
    assert phases(tmp_path).count(("save_requested", "control")) == 1
    assert engine.state().runs["control"].state == "running"  # still within its wait

    asked = next(e for e in journal(tmp_path) if e.get("phase") == "save_requested")
    assert asked["limit_s"] == save_wait_s(None) == 240  # a save never measured: 2 × 2 min
    clock.ahead += asked["limit_s"] + 1  # the wait passes: step.py never saves
    wait_for(lambda: engine.tick() and ("landed", None) in phases(tmp_path), timeout=60,
             what="the landing's end")
    steps = [p for p, _ in phases(tmp_path)]
    assert steps.index("save_missed") < steps.index("exporting") < steps.index("landed")
    assert ("stopped", "control") in phases(tmp_path)
    stops = {e["run"]: e["rule"] for e in journal(tmp_path) if e["kind"] == "stop_requested"}
    assert stops == {"control": "landing", "explore": "landing", "side": "landing"}
    # Nothing new started once the landing began (report waited on control).
    assert engine.state().runs["report"].state == "not_started"
    landed = next(e for e in journal(tmp_path) if e.get("phase") == "landed")
    assert landed["text"].startswith(("landed: fetch it now: rsync", "landed WITHOUT"))
    assert engine.until_done(engine.state()).code == 5
    engine.close()
