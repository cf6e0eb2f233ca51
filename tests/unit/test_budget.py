"""The close's budget (D20, D21): exact money, results counted once, undefined at zero."""

from __future__ import annotations

import json
from datetime import timedelta

from cockpit.campaign import load_campaign
from cockpit.close.budget import budget, render_budget
from cockpit.journal.fold import fold
from cockpit.journal.log import Journal
from tests.e2e.test_export_sample import NOW, START, drive_journal, write_sample


def _state(campaign):
    return fold(campaign, Journal(campaign.state_dir / "journal.jsonl").events(), NOW)


def _campaign(tmp_path, **edits):
    path = write_sample(tmp_path / "c")
    doc = json.loads(path.read_text())
    for key, value in edits.items():
        if key == "offers":
            doc["offers"] = value
        elif key == "result":
            doc["runs"]["variant-a"]["result"] = value
    path.write_text(json.dumps(doc))
    campaign = load_campaign(path)
    drive_journal(campaign)
    return campaign


def _accept(campaign, *runs):
    j = Journal(campaign.state_dir / "journal.jsonl")
    for run in runs:
        j.append("result_accepted", now=NOW, run=run, reason="checks passed")


def test_d21_two_accepted_results_are_23_57_each(tmp_path):
    campaign = _campaign(tmp_path)
    _accept(campaign, "control", "variant-a")
    data = budget(campaign, _state(campaign), NOW)
    assert data["committed"] == {"amount": "47.14", "currency": "USD"}
    assert data["accepted"] == 2 and data["accepted_results"] == ["control", "variant-a"]
    assert data["share_per_accepted"] == {"amount": "23.57", "currency": "USD"}
    assert data["undefined_reason"] is None
    assert data["other_costs"][0]["label"] == "extra storage"
    assert data["other_costs"][0]["amount"] == "3.50"
    assert data["cost_incurred"] == [{"amount": "50.64", "currency": "USD"}]
    # GPU-hours from the journal: stopped variant-b is an expense too (D15).
    assert data["gpu_hours"] == {"control": 7.0, "variant-a": 5.5, "variant-b": 1.0}
    assert {r["run"]: r["kind"] for r in data["rejections"]} == {"variant-b": "stopped"}
    assert data["rejections"][0]["reason"] == "loss is nan at step 3"
    text = render_budget(data)
    assert "rental share per accepted result: 23.57 USD" in text
    assert "/h" not in text and "per hour" not in text  # never a price per hour (D8)
    json.dumps(data)  # JSON-ready


def test_two_runs_with_one_result_id_count_once(tmp_path):
    campaign = _campaign(tmp_path, result="control")  # variant-a re-runs the same corpus
    _accept(campaign, "control", "variant-a")
    data = budget(campaign, _state(campaign), NOW)
    assert data["accepted"] == 1 and data["accepted_results"] == ["control"]
    assert data["accepted_runs"] == {"control": ["control", "variant-a"]}
    assert data["share_per_accepted"] == {"amount": "47.14", "currency": "USD"}
    assert "counts once" in render_budget(data)


def test_zero_accepted_is_undefined_with_every_reason(tmp_path):
    campaign = _campaign(tmp_path)
    Journal(campaign.state_dir / "journal.jsonl").append(
        "result_rejected", now=NOW, run="control", reason="val/accuracy 0.6 is below 0.7")
    data = budget(campaign, _state(campaign), NOW)
    assert data["accepted"] == 0
    assert data["share_per_accepted"] is None
    assert "undefined" in data["undefined_reason"]
    reasons = {r["run"]: (r["kind"], r["reason"]) for r in data["rejections"]}
    assert reasons == {"control": ("rejected", "val/accuracy 0.6 is below 0.7"),
                       "variant-a": ("unjudged", "finished, but not yet accepted or rejected"),
                       "variant-b": ("stopped", "loss is nan at step 3")}
    text = render_budget(data)
    assert "undefined" in text and "0.00 USD" not in text and " 0 USD" not in text
    assert "cost incurred: 50.64 USD" in text


def test_a_stopped_run_is_never_an_accepted_result(tmp_path):
    campaign = _campaign(tmp_path)
    _accept(campaign, "variant-b")  # a wrong journal entry must not make it a result
    data = budget(campaign, _state(campaign), NOW)
    assert data["accepted"] == 0 and data["share_per_accepted"] is None


def test_unknown_price_is_unknown_never_zero(tmp_path):
    path = write_sample(tmp_path / "c")
    doc = json.loads(path.read_text())
    doc["offers"] = [{"id": "b200-3d", "gpu": "B200", "gpus": 2, "days": 3}]
    doc["package"]["offer"] = "b200-3d"
    path.write_text(json.dumps(doc))
    campaign = load_campaign(path)
    drive_journal(campaign)
    _accept(campaign, "control")
    data = budget(campaign, _state(campaign), NOW)
    assert data["committed"] is None and "unknown" in data["committed_note"]
    assert data["share_per_accepted"] is None and "unknown" in data["undefined_reason"]
    assert "package committed: unknown" in render_budget(data)


def test_running_run_counts_hours_until_now(tmp_path):
    campaign = _campaign(tmp_path)
    j = Journal(campaign.state_dir / "journal.jsonl")
    ev = j.append("stage_started", now=START + timedelta(hours=20), stage="export",
                  run=None, manual=True)
    assert ev
    j.append("run_started", now=START + timedelta(hours=28), run="extra", gpus=[0, 1],
             attempt=99)
    data = budget(campaign, _state(campaign), NOW)
    assert data["gpu_hours"]["extra"] == 4.0  # 2 h x 2 GPUs, still running at NOW


def test_the_typed_budget_carries_d20_d21_figures_worked_by_hand(tmp_path):
    """The Snapshot's budget: 47.14 USD committed, one other cost of 3.50 kept apart (D20),
    two accepted results: 47.14 / 2 = 23.57 each (D21), and the JSON unchanged."""
    from decimal import Decimal

    from cockpit.close.budget import SEE_BELOW, budget_of
    from cockpit.common.units import Money

    campaign = _campaign(tmp_path)
    _accept(campaign, "control", "variant-a")
    typed = budget_of(campaign, _state(campaign), NOW)
    assert typed.committed == Money(Decimal("47.14"), "USD")
    assert typed.committed_label == "47.14 USD"
    assert [(c.label, c.money) for c in typed.other_costs] == [
        ("extra storage", Money(Decimal("3.50"), "USD"))]
    assert typed.other_costs_total == (Money(Decimal("3.50"), "USD"),)
    assert typed.cost_incurred == (Money(Decimal("50.64"), "USD"),)  # 47.14 + 3.50
    assert typed.accepted == 2 and typed.accepted_results == ("control", "variant-a")
    assert typed.share_per_accepted == Money(Decimal("23.57"), "USD")
    assert typed.share_undefined is None and typed.undefined_reason is None
    assert [(r.run, r.kind, r.rule, r.step) for r in typed.rejections] == [
        ("variant-b", "stopped", "finite-loss", 3)]
    assert typed.as_json() == budget(campaign, _state(campaign), NOW)
    assert SEE_BELOW not in str(typed.as_json())


def test_the_typed_budget_says_why_the_share_is_undefined_apart_from_the_pointer(tmp_path):
    from cockpit.close.budget import SEE_BELOW, budget_of

    campaign = _campaign(tmp_path)
    typed = budget_of(campaign, _state(campaign), NOW)
    assert typed.accepted == 0 and typed.share_per_accepted is None
    # The sentence a panel shows beside the incurred cost, and the JSON's full text.
    assert typed.share_undefined == ("no accepted result: the rental share per accepted "
                                     "result is undefined (D21)")
    assert typed.undefined_reason == typed.share_undefined + SEE_BELOW
    assert budget(campaign, _state(campaign), NOW)["undefined_reason"] == \
        typed.undefined_reason
