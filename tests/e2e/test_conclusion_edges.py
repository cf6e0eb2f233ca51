"""Conclusions that prove what they claim (D2) and a limit that would be a revise (D4),
with real processes: each variant is run, judged by its acceptance checks and the
question concluded from what was journaled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cockpit.journal.log import Journal
from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import run_cockpit

# The step script's val/accuracy ends at 0.5 + 3 / (2 x 3) = 1.0 after 3 steps:
# min 0.6 passes, min 1.1 fails; the question asks for val/accuracy >= 1.1.
PASSES = {"metric": "val/accuracy", "min": 0.6}
FAILS = {"metric": "val/accuracy", "min": 1.1}
THRESHOLD = {"metric": "val/accuracy", "rule": "reach_threshold", "threshold": 1.1}


def _stage(sid: str, after: list[str] | None = None, code: int = 0, **extra: object) -> dict:
    stage = {"id": sid, "duration": "5m", "resource": "cpu", "run": sid,
             "command": step_command(3, 0.01, code=code), **extra}
    if after:
        stage["after"] = after
    return stage


def _headless(path: Path) -> tuple[int, str]:
    done = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       timeout=120)
    return done.returncode, done.stdout + done.stderr


def _conclusion(path: Path) -> str:
    return json.loads(run_cockpit("budget", str(path), "--json").stdout)["conclusion"]


@pytest.mark.parametrize("case", ["crashed", "wrongly-rejected", "truly-low"])
def test_a_crash_a_wrong_rejection_and_a_low_value_conclude_differently(
        tmp_path: Path, case: str) -> None:
    variant: dict = {"acceptance": [PASSES]}
    code = 0
    if case == "crashed":
        code = 1  # it writes its 3 steps (val/accuracy 1.0) and exits 1
    elif case == "wrongly-rejected":
        # The metric passes; the predictions file is missing (wrong split, never written).
        variant = {"acceptance": [PASSES, {"predictions": "non_empty"}],
                   "predictions": "preds.jsonl"}
    else:
        variant = {"acceptance": [FAILS]}  # rejected by its check on the question's metric
    path = write_campaign(tmp_path, stages=[
        _stage("control"), _stage("variant-a", after=["control"], code=code,
                                  category="useful")],
        runs={"control": {"acceptance": [PASSES]}, "variant-a": variant}, rules=[FINITE],
        extra={"conclusion": {**THRESHOLD, "variants": ["variant-a"]}})
    exit_code, out = _headless(path)
    text = _conclusion(path)
    if case == "crashed":
        assert exit_code == 4, out  # every essential stage done, the question open
        assert text.startswith("the question cannot be closed yet: no variant reaches "
                               "val/accuracy >= 1.1 so far")
        assert "variant-a: failed (exit code 1): a crash says nothing of val/accuracy " \
               "— rerun variant-a, or decide revise" in text
        assert "closes the question" not in text
    elif case == "wrongly-rejected":
        assert exit_code == 4, out
        assert "variant-a: rejected (val/accuracy 1 >= 0.6; predictions file preds.jsonl " \
               "does not exist): not a verdict on val/accuracy" in text
        assert "closes the question" not in text
    else:
        assert exit_code == 0, out
        assert text == (
            "no variant reaches val/accuracy >= 1.1 (variant-a: rejected by its acceptance "
            "check on val/accuracy (val/accuracy 1 is below the minimum 1.1), val/accuracy 1)"
            ": a negative result that closes the question (D2)")


def _decision_campaign(tmp_path: Path, variants: list[str]) -> Path:
    """pilot (decision point) -> control, variant-a, variant-b; variant-a's check on the
    question's metric fails (1.0 < 1.1), variant-b's passes."""
    return write_campaign(tmp_path, stages=[
        _stage("pilot", decision_point=True), _stage("control", after=["pilot"]),
        _stage("variant-a", after=["control"], category="useful"),
        _stage("variant-b", after=["control"], category="exploratory")],
        runs={"pilot": {"result": "none"}, "control": {"acceptance": [PASSES]},
              "variant-a": {"acceptance": [FAILS]}, "variant-b": {"acceptance": [PASSES]}},
        rules=[FINITE], extra={"conclusion": {**THRESHOLD, "variants": variants}})


def _decisions(path: Path) -> list[dict]:
    events = Journal(path.parent / ".cockpit" / "journal.jsonl").events()
    return [e for e in events if e["kind"] == "decision"]


def test_limit_then_judge_closes_the_question(tmp_path: Path) -> None:
    path = _decision_campaign(tmp_path, ["variant-a", "variant-b"])
    code, out = _headless(path)
    assert code == 3 and "waiting for a decision at pilot" in out, out
    # Dropping both variants would leave the question unanswerable: a revise (D4).
    both = run_cockpit("decide", str(path), "limit", "--drop", "variant-a", "variant-b",
                       "--note", "too slow")
    assert both.returncode == 2, both.stderr
    assert f"{path}: decide limit --drop variant-a variant-b: it drops every variant left " \
           "(variant-a, variant-b)" in both.stderr and "cockpit decide revise" in both.stderr
    assert "Traceback" not in both.stderr and _decisions(path) == []
    limited = run_cockpit("decide", str(path), "limit", "--drop", "variant-b", "--note",
                          "the pilot says variant-b cannot fit")
    assert limited.returncode == 0, limited.stderr
    code, out = _headless(path)
    # variant-a was judged on val/accuracy (1.0 < 1.1); variant-b is not needed any more.
    assert code == 0, out
    assert _conclusion(path) == (
        "no variant reaches val/accuracy >= 1.1 (variant-a: rejected by its acceptance "
        "check on val/accuracy (val/accuracy 1 is below the minimum 1.1), val/accuracy 1) "
        "(dropped: variant-b): a negative result that closes the question (D2)")


def test_limit_refuses_to_drop_the_questions_only_variant(tmp_path: Path) -> None:
    path = _decision_campaign(tmp_path, ["variant-a"])
    code, out = _headless(path)
    assert code == 3, out
    refused = run_cockpit("decide", str(path), "limit", "--drop", "variant-a", "--note", "x")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip() == (
        f"{path}: decide limit --drop variant-a: it drops the question's last variant "
        "variant-a, and the conclusion (reach_threshold on val/accuracy) could no longer be "
        "answered: that is a revise, not a limit (D4): cockpit decide revise --note '...'")
    assert _decisions(path) == []
    # variant-b is not a variant of this question: dropping it is a plain limit.
    assert run_cockpit("decide", str(path), "limit", "--drop", "variant-b", "--note",
                       "not needed").returncode == 0
