"""A rule on a run that has not started has watched nothing: it is *waiting*, never
counted as ok (issue 22: unknown is never shown as ok), on every face."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import run_cockpit


def _campaign(tmp_path: Path) -> Path:
    # Two stages with a run each; the loss rule applies to both, and none has started.
    return write_campaign(tmp_path / "c", [
        {"id": "a", "hours": 1, "command": step_command(), "run": "a"},
        {"id": "b", "hours": 1, "command": step_command(), "run": "b", "after": ["a"]},
    ], runs={"a": {}, "b": {}}, rules=[FINITE])


def test_rules_on_runs_not_started_are_waiting_not_ok(tmp_path: Path) -> None:
    path = _campaign(tmp_path)
    text = run_cockpit("status", str(path))
    assert text.returncode == 0, text.stderr
    # 2 rules (the loss rule and the default stalled rule of train runs) x 2 runs, neither
    # started: 0 ok, 4 waiting.
    assert "rules: 0 ok, 0 fired, 4 waiting (run not started)" in text.stdout, text.stdout
    data = json.loads(run_cockpit("status", str(path), "--json").stdout)
    states = {(r["rule"], r["run"]): r["state"] for r in data["rules"]
              if r["rule"] == "finite-loss"}
    assert states == {("finite-loss", "a"): "waiting", ("finite-loss", "b"): "waiting"}
    line = run_cockpit("status", str(path), "--line").stdout
    assert "rules waiting" in line and "rules ok" not in line, line


def test_a_started_run_turns_its_rule_from_waiting_to_ok(tmp_path: Path) -> None:
    from tests.helpers.process import wait_for

    path = _campaign(tmp_path)
    started = run_cockpit("start", str(path), "a")
    assert started.returncode == 0, started.stderr

    def rule_on_a() -> str:
        data = json.loads(run_cockpit("status", str(path), "--json").stdout)
        return next(r["state"] for r in data["rules"]
                    if r["rule"] == "finite-loss" and r["run"] == "a")

    wait_for(lambda: rule_on_a() == "ok", what="the loss rule on run a ok once a reports loss")
    data = json.loads(run_cockpit("status", str(path), "--json").stdout)
    assert next(r["state"] for r in data["rules"]
                if r["rule"] == "finite-loss" and r["run"] == "b") == "waiting"
