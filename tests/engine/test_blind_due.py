"""Blind is news, so it must be true (issue 42, from the field): a running run that
reports its training loss but has not evaluated yet is *waiting* for its first
``eval_loss`` — evaluations come at the run's evaluation interval — not blind, and
nobody is paged; past half its steps with no evaluation it is blind. A rule that watches
from ``after_step`` waits until the run gets there. A misspelling stays blind at once,
and ``eval_loss`` is never a misspelt ``loss``."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from cockpit.common.metric_names import suggestion
from cockpit.runs.blind import value_due
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor, make

RULES = [{"id": "eval-ceiling", "kind": "threshold", "metric": "eval_loss", "max": 9.0,
          "runs": ["r1"]},
         {"id": "late-acc", "kind": "threshold", "metric": "accuracy", "min": 0.1,
          "after_step": 50, "runs": ["r1"]},
         {"id": "typo", "kind": "threshold", "metric": "los", "max": 9.0, "runs": ["r1"]}]


def _report(path: Path, clock: FakeClock, step: int, max_steps: int) -> None:
    file = path.parent / ".cockpit" / "runs" / "r1" / "report.jsonl"
    file.parent.mkdir(parents=True, exist_ok=True)
    with file.open("a") as handle:
        handle.write(json.dumps({"t": clock.now().timestamp(), "step": step, "loss": 1.0,
                                 "max_steps": max_steps}) + "\n")


def test_a_run_not_yet_evaluated_waits_and_is_blind_past_half_its_steps(
        tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    engine, path = make(tmp_path, [{"id": "train", "hours": 1, "resource": "gpu",
                                    "run": "r1", "command": ["train"]}], clock, sup,
                        rules=RULES)
    engine.start("train")
    clock.t += timedelta(minutes=5)  # well past the first report's 2 min grace
    _report(path, clock, 10, 100)
    clock.t += timedelta(seconds=1)
    states = {r.rule: (r.state, r.reason) for r in engine.tick().rules}
    assert states["eval-ceiling"][0] == "waiting", states
    assert "evaluations come at the run's evaluation interval" in states["eval-ceiling"][1]
    assert states["late-acc"] == ("waiting", "watches from step 50; the run is at step 10")
    assert states["typo"][0] == "blind" and "did you mean loss" in states["typo"][1], states
    _report(path, clock, 60, 100)  # past half its steps, still no evaluation: news
    clock.t += timedelta(seconds=1)
    states = {r.rule: (r.state, r.reason) for r in engine.tick().rules}
    assert states["eval-ceiling"][0] == "blind", states
    assert "(did you mean" not in states["eval-ceiling"][1], states  # not a misspelt loss
    assert states["late-acc"][0] == "blind", states  # past step 50, accuracy never seen
    engine.close()


def test_the_words_of_value_due() -> None:
    reported = {"loss", "max_steps"}
    assert value_due("loss", 50, "running", 10, 100, reported) == (
        "watches from step 50; the run is at step 10")
    assert value_due("loss", 50, "running", 50, 100, reported) is None
    assert value_due("val/accuracy", 0, "running", 10, None, reported) is not None
    assert value_due("val/accuracy", 0, "succeeded", 10, None, reported) is None  # ended
    assert value_due("accuracy", 0, "running", 10, 100, reported) is None  # no evaluation
    assert value_due("eval_los", 0, "running", 10, 100, {"eval_loss"}) is None  # a typo
    assert suggestion("eval_loss", {"loss"}) is None
    assert suggestion("los", {"loss"}) == "loss"
