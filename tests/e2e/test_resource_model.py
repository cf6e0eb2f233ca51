"""One resource model for the plan and for ``start``/``--auto`` (issue 22, D6).

``planning.schedule.resource_conflict`` answers "may this stage start while those run";
the planner asks it over planned hours, readiness over the stages running now. A stage
with ``resource: cpu`` holds its machine's CPU: two never run at once, in the plan or
live; ``none`` shares everything.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cockpit.campaign.model import Resource, Stage
from cockpit.planning.schedule import resource_conflict
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit


def _stage(sid: str, *resources: Resource, machine: int = 1) -> Stage:
    return Stage(id=sid, seconds=3600.0, resources=resources, category="essential",
                 machine=machine)


def test_what_each_resource_shares() -> None:
    cpu, gpu, human, none = Resource("cpu"), Resource("gpu"), Resource("human"), Resource("none")
    a = _stage("a", cpu)
    assert resource_conflict(a, [_stage("b", cpu)], 2) == ("b", "the CPU of machine 1")
    assert resource_conflict(a, [_stage("b", cpu, machine=2)], 2) is None  # another box
    assert resource_conflict(a, [_stage("b", none), _stage("c", gpu)], 2) is None
    assert resource_conflict(a, [a], 2) is None  # a stage never waits for itself
    g0 = _stage("g0", Resource("gpu", 0))
    assert resource_conflict(g0, [_stage("g1", Resource("gpu", 1))], 2) is None
    assert resource_conflict(g0, [_stage("all", gpu)], 2) == ("all", "GPU 0 of machine 1")
    # One person across all machines.
    assert resource_conflict(_stage("h", human), [_stage("h2", human, machine=2)], 2) == (
        "h2", "the person")


def test_plan_and_auto_agree_on_two_cpu_stages(tmp_path: Path) -> None:
    # first (cpu, 1 h) and second (cpu, 1 h) share the machine's CPU: the plan places second
    # at 1 h, when first ends; side (resource none, 1 h) shares nothing and starts at 0.
    script = tmp_path / "nap.py"
    script.write_text("import sys, time\ntime.sleep(float(sys.argv[1]))\n")
    nap = [sys.executable, "nap.py"]
    path = write_campaign(tmp_path, [
        {"id": "first", "hours": 1, "resource": "cpu", "command": [*nap, "1.5"]},
        {"id": "second", "hours": 1, "resource": "cpu", "command": [*nap, "0.1"]},
        {"id": "side", "hours": 1, "resource": "none", "command": [*nap, "1.5"]},
    ])
    plan = json.loads(run_cockpit("plan", str(path), "--json").stdout)
    slots = {s["id"]: (s["start_hours"], s["end_hours"]) for s in plan["stages"]}
    assert slots == {"first": (0.0, 1.0), "second": (1.0, 2.0), "side": (0.0, 1.0)}

    done = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       timeout=120)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in
              (tmp_path / ".cockpit" / "journal.jsonl").read_text().splitlines()]
    seq = {(e["kind"], e.get("stage")): e["seq"] for e in events
           if e["kind"] in ("stage_started", "stage_finished")}
    # Live as planned: second starts only after first has finished; side ran beside first.
    assert seq[("stage_started", "second")] > seq[("stage_finished", "first")]
    assert seq[("stage_started", "side")] < seq[("stage_finished", "first")]
    assert all(e["outcome"] == "done" for e in events if e["kind"] == "stage_finished")
