"""An export that went stale says so, and "closed" means the question is answered
(issue 41): the facts an export is made from against the facts now (a verdict after it,
a new verified checkpoint of an accepted run, a change of the answer; nothing changed:
fresh), and the one wording every face uses (answered positive or negative: closed; no
accepted control, a crash: the question open)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from cockpit.campaign import load_campaign
from cockpit.campaign.model import Campaign
from cockpit.close.conclusion import conclude
from cockpit.close.export_state import NO_FACTS, export_facts, export_state, stale_why
from cockpit.engine.alert_kinds import closed_alert, stale_alert
from cockpit.engine.guards import until_done
from cockpit.journal.fold import CampaignState, fold
from cockpit.journal.log import Journal
from tests.helpers.campaigns import FIXED_START, write_campaign

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=timezone.utc)
ACC = {"metric": "val/accuracy", "min": 0.6}
# The step script's val/accuracy: 0.9 for control, 0.95 for the variant (see VALUES).
VALUES = {"control": 0.9, "variant": 0.95}


def _campaign(tmp_path: Path, rule: dict[str, Any]) -> Campaign:
    stages = [{"id": r, "duration": "5m", "resource": "cpu", "run": r, "command": ["x"]}
              for r in ("control", "variant")]
    stages.append({"id": "export", "duration": "5m", "resource": "cpu", "role": "export",
                   "after": ["control", "variant"], "command": ["x"]})
    return load_campaign(write_campaign(
        tmp_path, stages, runs={"control": {"acceptance": [ACC]},
                                "variant": {"acceptance": [ACC]}},
        extra={"conclusion": {"metric": "val/accuracy", **rule}}, start=FIXED_START))


BEAT = {"better": "higher", "baseline": "control", "margin": 0.02, "variants": ["variant"]}
REACH = {"rule": "reach_threshold", "better": "higher", "threshold": 0.99,
         "variants": ["variant"]}


class Story:
    """A journal written the way the engine writes it, minute by minute."""

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        self.journal = Journal(campaign.state_dir / "journal.jsonl")
        self.t = T0

    def add(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.t += timedelta(minutes=1)
        return dict(self.journal.append(kind, now=self.t, **fields))

    def run(self, run: str, verdict: str | None = "accepted", code: int = 0,
            failed: list[str] | None = None) -> int:
        started = self.add("stage_started", stage=run, run=run, pid=1)
        attempt = started["seq"]
        self.add("run_started", run=run, stage=run, attempt=attempt, params_hash="x")
        self.add("run_exited", run=run, stage=run, code=code, attempt=attempt)
        self.add("stage_finished", stage=run, outcome="done" if code == 0 else "failed")
        if verdict == "accepted":
            self.add("result_accepted", run=run, reason="checks passed", attempt=attempt)
        elif verdict == "rejected":
            self.add("result_rejected", run=run, reason="predictions missing",
                     attempt=attempt, failed=failed or ["predictions"])
        return attempt

    def export(self, facts: Any = None, **extra: Any) -> dict[str, Any]:
        started = self.add("stage_started", stage="export", pid=2)
        done = self.add("export_done", path="bag", verified=True, facts=facts, **extra)
        self.add("stage_finished", stage="export", outcome="done")
        assert started["seq"] < done["seq"]
        return done

    def state(self) -> CampaignState:
        return fold(self.campaign, self.journal.events(), self.t)


def _exported(story: Story) -> CampaignState:
    """Export now, with the facts the export command records."""
    state = story.state()
    story.export(export_facts(story.campaign, state,
                              conclude(story.campaign, state, VALUES)))
    return story.state()


def test_nothing_changed_is_fresh_and_a_verdict_after_the_export_is_stale(tmp_path) -> None:
    campaign = _campaign(tmp_path, BEAT)
    story = Story(campaign)
    story.run("control")
    story.run("variant", "rejected")  # not on the question's metric: the question open
    state = _exported(story)
    now = export_state(campaign, state, conclude(campaign, state, VALUES))
    assert now.exported and now.stale is None and not now.closed
    assert now.words() == ("exported, question open: variant: rejected (predictions "
                           "missing): not a verdict on val/accuracy")
    # The variant is rerun and accepted: the bag says the question is open; it is not.
    story.run("variant")
    state = story.state()
    now = export_state(campaign, state, conclude(campaign, state, VALUES))
    assert now.stale == "predates 1 verdict (variant); the question is answered now"
    assert now.words() == ("export STALE: predates 1 verdict (variant); the question is "
                           "answered now — cockpit export campaign.yaml")
    assert not now.closed and now.open is None
    assert now.as_json()["stale"] is True and now.as_json()["closed"] is False
    # Exported again: fresh, and closed (variant beats control by 0.05).
    state = _exported(story)
    again = export_state(campaign, state, conclude(campaign, state, VALUES))
    assert again.stale is None and again.closed and again.words() == "closed"


def test_two_verdicts_and_a_restart_are_counted_and_named(tmp_path) -> None:
    campaign = _campaign(tmp_path, BEAT)
    story = Story(campaign)
    story.run("control", verdict=None)
    story.run("variant", verdict=None)
    state = _exported(story)
    story.add("result_accepted", run="control", reason="ok",
              attempt=state.runs["control"].attempt)
    story.add("result_rejected", run="variant", reason="low",
              attempt=state.runs["variant"].attempt, failed=["metric:val/accuracy"])
    state = story.state()
    assert export_state(campaign, state, conclude(campaign, state, VALUES)).stale.startswith(
        "predates 2 verdicts (control, variant)")
    # A new attempt of a judged run withdraws its verdict: the export predates it.
    state = _exported(story)
    story.add("stage_started", stage="variant", run="variant", pid=3)
    story.add("run_started", run="variant", stage="variant", attempt=story.journal.events()[-1]
              ["seq"], params_hash="x")
    state = story.state()
    why = export_state(campaign, state, conclude(campaign, state, VALUES)).stale
    assert why is not None and "predates a new attempt of variant" in why


def test_a_new_verified_checkpoint_of_an_accepted_run_makes_it_stale(tmp_path) -> None:
    campaign = _campaign(tmp_path, BEAT)
    story = Story(campaign)
    control = story.run("control")
    story.run("variant")
    story.add("checkpoint_verified", run="control", attempt=control, ok=True,
              path="ckpt/step-10.pt", step=10)
    state = _exported(story)
    assert export_state(campaign, state, conclude(campaign, state, VALUES)).stale is None
    # A failed reload is no newer verified checkpoint; a reload that passes is.
    story.add("checkpoint_verified", run="control", attempt=control, ok=False,
              path="ckpt/step-20.pt", step=20, error="bad")
    state = story.state()
    assert export_state(campaign, state, conclude(campaign, state, VALUES)).stale is None
    story.add("checkpoint_verified", run="control", attempt=control, ok=True,
              path="ckpt/step-20.pt", step=20)
    state = story.state()
    assert export_state(campaign, state, conclude(campaign, state, VALUES)).stale == \
        "predates a new verified checkpoint of control"


def test_a_change_of_the_answer_alone_makes_it_stale(tmp_path) -> None:
    campaign = _campaign(tmp_path, BEAT)
    story = Story(campaign)
    story.run("control")
    story.run("variant")
    state = _exported(story)  # variant 0.95 beats control 0.9: answered, variant wins
    lower = conclude(campaign, state, {"control": 0.9, "variant": 0.91})  # a negative answer
    assert lower.closed and not lower.winners
    assert export_state(campaign, state, lower).stale == "the answer changed"
    assert export_state(campaign, state, conclude(campaign, state, VALUES)).stale is None


def test_an_export_without_facts_is_never_shown_fresh(tmp_path) -> None:
    campaign = _campaign(tmp_path, BEAT)
    story = Story(campaign)
    story.run("control")
    story.run("variant")
    story.export()  # written by an older cockpit: no facts
    state = story.state()
    now = export_state(campaign, state, conclude(campaign, state, VALUES))
    assert now.stale == NO_FACTS and not now.closed
    assert stale_why({"format": 99}, export_facts(campaign, state, None)) == NO_FACTS
    # A hostile copy names no run it made up in the words.
    facts = export_facts(campaign, state, None)
    hostile = {**facts, "verdicts": {**facts["verdicts"], "\x1b[2Jx": {"verdict": "no"}}}
    assert stale_why(hostile, facts) is None


def test_closed_for_a_positive_and_a_negative_answer_open_otherwise(tmp_path) -> None:
    # Answered positive: closed.
    positive = _campaign(tmp_path / "p", BEAT)
    story = Story(positive)
    story.run("control")
    story.run("variant")
    state = _exported(story)
    assert export_state(positive, state, conclude(positive, state, VALUES)).words() == "closed"
    # Answered negative (D2): no variant reaches 0.99, the variant judged on it: closed.
    negative = _campaign(tmp_path / "n", REACH)
    story = Story(negative)
    story.run("control")
    story.run("variant", "rejected", failed=["metric:val/accuracy"])
    state = _exported(story)
    verdict = conclude(negative, state, VALUES)
    assert verdict.closed and not verdict.winners
    assert export_state(negative, state, verdict).words() == "closed"
    # No accepted control: open, and said why.
    open_ = _campaign(tmp_path / "o", BEAT)
    story = Story(open_)
    story.run("control", "rejected")
    story.run("variant")
    state = _exported(story)
    assert export_state(open_, state, conclude(open_, state, VALUES)).words() == (
        "exported, question open: no accepted baseline control (rejected (predictions "
        "missing))")
    # A crash is no answer (D2): open, naming the crash.
    crash = _campaign(tmp_path / "c", REACH)
    story = Story(crash)
    story.run("control")
    story.run("variant", verdict=None, code=1)
    state = _exported(story)
    words = export_state(crash, state, conclude(crash, state, VALUES)).words()
    assert words is not None and words.startswith(
        "exported, question open: variant: failed (exit code 1): a crash says nothing of "
        "val/accuracy")


def test_until_done_never_exits_0_on_a_stale_export_and_the_alerts_say_so(
        tmp_path, monkeypatch) -> None:
    # The runs' metric files, as the conclusion reads them, hold VALUES.
    for where in ("cockpit.engine.alert_kinds", "cockpit.engine.guards"):
        monkeypatch.setattr(f"{where}.conclude_now",
                            lambda campaign, state: conclude(campaign, state, VALUES))
    campaign = _campaign(tmp_path, BEAT)
    story = Story(campaign)
    story.run("control")
    story.run("variant", "rejected")
    state = _exported(story)
    story.run("variant")
    state = story.state()
    stale = export_state(campaign, state, conclude(campaign, state, VALUES))
    verdict = until_done(campaign, state, auto=False, judging=False, machine=1, export=stale)
    assert verdict.code == 6 and "the export is stale (predates 1 verdict (variant)" \
        in verdict.reason and verdict.reason.endswith("cockpit export campaign.yaml")
    # In auto mode the export stage runs again first (it is done; its product is not).
    assert until_done(campaign, state, auto=True, judging=False, machine=1,
                      export=stale).code is None
    alert = stale_alert(stale)
    assert alert is not None and alert.kind == "export" and alert.key == \
        f"export:stale:{stale.seq}"
    assert alert.what.startswith("export STALE: predates 1 verdict (variant)")
    assert alert.todo == "cockpit export campaign.yaml"
    # The campaign closed is not said over a stale export (the stale alert speaks); it
    # follows the export made again, with the fetch.
    assert closed_alert(campaign, state, T0, stale) is None
    state = _exported(story)
    fresh = export_state(campaign, state, conclude(campaign, state, VALUES))
    assert stale_alert(fresh) is None
    closed = closed_alert(campaign, state, T0, fresh)
    assert closed is not None and closed.what.startswith("the campaign closed: variant")
    assert "fetch the export before the window ends" in closed.todo
    assert until_done(campaign, state, auto=True, judging=False, machine=1,
                      export=fresh).code == 0
