"""A non_finite rule added to the plan after the run reported a NaN (issue 41): it never
judged that value, so it is never ✓ beside it. On an ended run it watches from the next
attempt; on a running run it judges the reports from now on, and fires on the first
non-finite one it sees. Fake clock and supervisor, real journal and metric files."""

from __future__ import annotations

import json
import math
from pathlib import Path

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor
from tests.helpers.campaigns import FIXED_START, write_campaign

RULE = {"id": "finite-loss", "kind": "non_finite", "metric": "train/loss"}


def _campaign(folder: Path) -> Path:
    return write_campaign(folder, [
        {"id": "train", "run": "r1", "duration": "10m", "resource": "cpu",
         "command": ["true"]},
    ], runs={"r1": {"metrics": "logs/r1.jsonl"}}, start=FIXED_START)


def _report(folder: Path, step: int, loss: float) -> None:
    path = folder / "logs" / "r1.jsonl"
    path.parent.mkdir(exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps({"step": step, "train/loss": loss}) + "\n")


def _add_rule(path: Path) -> None:
    data = json.loads(path.read_text())
    data["stop_rules"] = [RULE]
    path.write_text(json.dumps(data))


def test_a_non_finite_rule_added_after_the_nan_of_an_ended_run_is_never_ok(
        tmp_path: Path) -> None:
    from cockpit.headless.render_text import status_text

    path = _campaign(tmp_path)
    clock, sup = FakeClock(), FakeSupervisor()
    engine = Engine(load_campaign(path), clock=clock, supervisor=sup)
    engine.start("train")
    _report(tmp_path, 1, 0.5)
    _report(tmp_path, 2, math.nan)
    clock.advance(5)
    engine.tick()  # read without a rule on it
    sup.finish("train", 1)
    clock.advance(5)
    assert engine.tick().run("r1").state == "failed"

    _add_rule(path)  # the rule comes after the NaN (the plan changed since)
    engine = Engine(load_campaign(path), clock=clock, supervisor=sup)
    clock.advance(5)
    snap = engine.tick()
    (rule,) = [r for r in snap.rules if r.rule == "finite-loss"]
    assert rule.state == "waiting", rule
    assert rule.reason == ("train/loss was nan before this rule watched run r1: watches "
                           "from attempt 2")
    text = status_text(snap)
    assert "finite-loss on r1: · waiting: train/loss was nan before this rule watched" in text
    assert "rules: 1 ok, 0 fired, 1 waiting" in text, text  # the ok one: the default stalled


def test_a_non_finite_rule_added_while_the_run_runs_fires_on_the_nan_it_sees(
        tmp_path: Path) -> None:
    path = _campaign(tmp_path)
    clock, sup = FakeClock(), FakeSupervisor()
    engine = Engine(load_campaign(path), clock=clock, supervisor=sup)
    engine.start("train")
    _report(tmp_path, 1, math.nan)
    clock.advance(5)
    engine.tick()  # the NaN read without a rule on it

    _add_rule(path)
    engine = Engine(load_campaign(path), clock=clock, supervisor=sup)
    clock.advance(5)
    (rule,) = [r for r in engine.tick().rules if r.rule == "finite-loss"]
    assert rule.state != "ok", rule  # never ✓ beside a NaN: fired, or waiting with why
    assert rule.state == "fired" or "it judges the run's reports from now on" in (
        rule.reason or ""), rule
    _report(tmp_path, 2, math.nan)  # a NaN the rule sees
    clock.advance(5)
    (rule,) = [r for r in engine.tick().rules if r.rule == "finite-loss"]
    assert rule.state == "fired" and "train/loss is nan (non-finite)" in (rule.reason or "")
