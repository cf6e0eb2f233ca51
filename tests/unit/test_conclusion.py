"""Conclusion (D1, D2), acceptance checks and their schema (D15), the deadline guard (D19)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cockpit.campaign import load_campaign
from cockpit.close.acceptance import auto_accept, evaluate_acceptance
from cockpit.close.conclusion import conclude
from cockpit.common.errors import InputError
from cockpit.engine import Engine
from cockpit.journal.fold import fold
from cockpit.journal.log import Journal
from cockpit.planning.deadline import closing_times, deadline_check
from tests.e2e.test_export_sample import NOW, START, drive_journal, write_sample


def _fake_verifier(path, kind, **_kw):
    from cockpit.runs.checkpoints.reload_check import VerifyReport
    return VerifyReport(True, kind, str(path), layout="fake")


@pytest.fixture
def judged(tmp_path):
    campaign = load_campaign(write_sample(tmp_path / "c"))
    drive_journal(campaign)
    auto_accept(Engine(campaign), NOW, verifier=_fake_verifier)
    state = fold(campaign, Journal(campaign.state_dir / "journal.jsonl").events(), NOW)
    return campaign, state


def test_conclusion_flips_when_one_metric_changes(judged):
    campaign, state = judged
    win = conclude(campaign, state, {"control": 0.80, "variant-a": 0.82})
    assert win.closed and win.winners == ("variant-a",)  # exactly the margin: 0.82 - 0.80
    assert "variant-a" in win.text and "beats the baseline control" in win.text
    lose = conclude(campaign, state, {"control": 0.80, "variant-a": 0.8199})
    # variant-b was stopped by a rule: it was never judged on val/accuracy, so the
    # negative answer waits for it (D2: a stop is no evidence against the hypothesis).
    assert not lose.closed and lose.winners == ()
    assert lose.text.startswith("the question cannot be closed yet: no variant beats the "
                                "baseline control by 0.02 on val/accuracy so far")
    assert "variant-b: stopped (loss is nan at step 3): a stopped run is not judged on " \
        "val/accuracy" in lose.text
    # Without variant-b in the question, variant-a alone answers it: a negative result.
    object.__setattr__(campaign.conclusion, "variants", ("variant-a",))
    alone = conclude(campaign, state, {"control": 0.80, "variant-a": 0.8199})
    assert alone.closed and alone.winners == ()
    assert alone.text.startswith("no variant beats the baseline control by 0.02 on "
                                 "val/accuracy") and "negative result" in alone.text


def test_measured_figures_are_rounded_for_people_but_never_look_equal(judged):
    campaign, state = judged
    win = conclude(campaign, state, {"control": 0.4134431, "variant-a": 0.8000121})
    assert "variant-a (val/accuracy 0.8, +0.387)" in win.text  # not +0.386569
    assert "control (val/accuracy 0.413)" in win.text
    # 0.0200001 beats the margin 0.02 by a hair: the hair is shown, never "+0.02 vs 0.02".
    hair = conclude(campaign, state, {"control": 0.8, "variant-a": 0.8200001})
    delta = hair.text.split("val/accuracy 0.82", 1)[1].split(")", 1)[0]
    assert delta.startswith(", +0.0200") and delta != ", +0.02"
    # 999.96 against 999.5 needs four digits: the baseline gets them too, never
    # "1000 ... baseline 1e+03" (equal figures for different values).
    close = conclude(campaign, state, {"control": 999.5, "variant-a": 999.96})
    assert close.winners == ("variant-a",)
    assert "variant-a (val/accuracy 1000," in close.text
    assert "baseline control (val/accuracy 999.5)" in close.text


@settings(max_examples=200, deadline=None)
@given(st.floats(-1e6, 1e6, allow_nan=False), st.floats(-1e6, 1e6, allow_nan=False))
@example(-999950.0, -999500.0)  # once both shown as -1e+06 (CI, 2026-12-04)
def test_a_rounded_figure_differs_from_the_one_it_is_compared_with(value, other):
    from cockpit.close.conclusion import _shown
    text = _shown(value, other)
    assert len(text) <= len(repr(value)) + 4
    if value != other:
        # Never shown equal to a figure it differs from, when both are shown.
        assert float(text) != float(_shown(other, value))
        assert float(text) != other or float(text) == value


def test_lower_is_better(judged):
    campaign, state = judged
    spec = campaign.conclusion
    object.__setattr__(spec, "better", "lower")
    try:
        assert conclude(campaign, state, {"control": 0.5, "variant-a": 0.4}).winners == (
            "variant-a",)
        assert conclude(campaign, state, {"control": 0.5, "variant-a": 0.6}).winners == ()
    finally:
        object.__setattr__(spec, "better", "higher")


def test_baseline_not_accepted_cannot_close(tmp_path):
    campaign = load_campaign(write_sample(tmp_path / "c"))
    drive_journal(campaign)
    Journal(campaign.state_dir / "journal.jsonl").append(
        "result_rejected", now=NOW, run="control", reason="predictions: 1 expected id missing")
    state = fold(campaign, Journal(campaign.state_dir / "journal.jsonl").events(), NOW)
    verdict = conclude(campaign, state, {"control": 0.9, "variant-a": 0.99})
    assert not verdict.closed and verdict.winners == ()
    assert "cannot be closed" in verdict.text and "control" in verdict.text
    assert "predictions: 1 expected id missing" in verdict.text


def test_acceptance_evaluation_and_auto_accept_once(tmp_path):
    campaign = load_campaign(write_sample(tmp_path / "c", accuracy_a=0.65))
    drive_journal(campaign)
    state = fold(campaign, Journal(campaign.state_dir / "journal.jsonl").events(), NOW)
    ok, reasons = evaluate_acceptance(campaign, state, "variant-a", verifier=_fake_verifier)
    assert not ok and "val/accuracy 0.65 is below the minimum 0.7" in reasons
    ok, reasons = evaluate_acceptance(campaign, state, "variant-b", verifier=_fake_verifier)
    assert not ok and "never an accepted result (D15)" in reasons[0]
    first, second = Engine(campaign), Engine(campaign)
    written = auto_accept(first, NOW, verifier=_fake_verifier)
    assert {e["run"]: e["kind"] for e in written} == {
        "control": "result_accepted", "variant-a": "result_rejected",
        "variant-b": "result_rejected"}
    assert auto_accept(second, NOW, verifier=_fake_verifier) == []  # judged once only
    events = Journal(campaign.state_dir / "journal.jsonl").events()
    assert sum(e["kind"].startswith("result_") for e in events) == 3


def _bad(tmp_path, change) -> str:
    path = write_sample(tmp_path / "c")
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2))
    with pytest.raises(InputError) as info:
        load_campaign(path)
    return str(info.value)


def test_schema_errors_are_located(tmp_path):
    def bad_checks(doc):
        doc["runs"]["control"]["acceptance"] = [{"metric": "val/accuracy"},
                                                {"predictions": "nonempty"},
                                                {"checkpoint": "reloads", "metric": "x"}]
    text = _bad(tmp_path, bad_checks)
    assert "a metric check needs min and/or max" in text
    assert "predictions check must be one of non_empty, expected_ids" in text
    assert "names exactly one of" in text
    assert "campaign.yaml:" in text  # FILE:LINE:COL


def test_conclusion_baseline_must_be_a_run(tmp_path):
    def bad(doc):
        doc["conclusion"]["baseline"] = "contrl"
        doc["on_deadline"] = "panic"
    text = _bad(tmp_path, bad)
    assert "baseline 'contrl' is not a run" in text
    assert "on_deadline must be one of warn, stop-optional" in text


def test_deadline_check(tmp_path):
    campaign = load_campaign(write_sample(tmp_path / "c"))
    times = closing_times(campaign)  # its export stage (2 h) + deadline.retrieve_hours (1 h)
    end = campaign.package.end

    def check(now, work, exported):
        return deadline_check(campaign, now, work, exported, times)

    assert check(START, START + timedelta(hours=40), False) is None
    late = check(START, end - timedelta(hours=2), False)
    assert late is not None and "export 2h (stage export)" in late
    assert "retrieval 1h (deadline.retrieve_hours)" in late and "1h short" in late
    now = end - timedelta(hours=2)
    assert "export the results now" in check(now, None, False)
    assert check(now, None, True) is None  # exported: 1 h fetch fits
    assert "fetch" in check(end - timedelta(minutes=30), None, True)
    assert "has ended" in check(end + timedelta(hours=1), None, True)
