"""The planning edges of issue 22: the pilot by position (D21), a pilot that measured
nothing (D13), `next` from what was measured (D24) and the D11 options. Every expected
figure is computed by hand from the catalog (47.14 USD / 3 d, 110 / 7 d, 390 / 30 d)
and the plans written here."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from cockpit.campaign import load_campaign
from cockpit.close.budget import budget
from cockpit.common.units import Money
from cockpit.journal.fold import fold
from cockpit.journal.log import format_time
from cockpit.planning.calibrate import estimates
from cockpit.planning.forecast import forecast
from cockpit.planning.schedule import plan_campaign
from tests.helpers.campaigns import FINITE, FIXED_START, step_command, write_campaign
from tests.helpers.process import run_cockpit

SAMPLES = Path(__file__).resolve().parents[2] / "sample_campaigns"
T0 = datetime(2026, 12, 2, 8, tzinfo=timezone.utc)  # FIXED_START, the window start


def ev(seq: int, seconds: float, kind: str, **fields: object) -> dict[str, object]:
    return {"seq": seq, "t": format_time(T0 + timedelta(seconds=seconds)), "kind": kind,
            **fields}


def ran(seq: int, stage: str, start_s: float, end_s: float, code: int = 0,
        outcome: str = "done") -> list[dict[str, object]]:
    """A stage whose run (same id) started and ended: four journal events."""
    return [ev(seq, start_s, "stage_started", stage=stage, run=stage),
            ev(seq + 1, start_s, "run_started", run=stage, stage=stage, attempt=seq + 1),
            ev(seq + 2, end_s, "run_exited", run=stage, stage=stage, code=code,
               attempt=seq + 1),
            ev(seq + 3, end_s, "stage_finished", stage=stage, outcome=outcome, code=code)]


def usd(amount: str) -> Money:
    return Money(Decimal(amount), "USD")


# ------------------------------------------------------------------ D21: pilot by position

@pytest.mark.parametrize("decide_apart", [False, True])
def test_d21_the_stage_before_the_decision_point_is_the_pilot_whatever_its_id(
        tmp_path: Path, decide_apart: bool) -> None:
    """A decision stage called ``smoke`` (or the GPU stage before a human ``decide``
    stage) is the pilot: its run is no result. Accepted: control and variant-a, so the
    share is 47.14 / 2 = 23.57 USD; counting smoke it was 47.14 / 3 = 15.71."""
    stages: list[dict] = [{"id": "smoke", "hours": 1, "resource": "gpu", "run": "smoke",
                           "decision_point": not decide_apart, "command": ["true"]}]
    if decide_apart:
        stages.append({"id": "decide", "hours": 1, "resource": "human", "after": ["smoke"],
                       "decision_point": True})
    stages += [{"id": "control", "hours": 1, "resource": "gpu", "run": "control",
                "after": [stages[-1]["id"]], "command": ["true"]},
               {"id": "variant-a", "hours": 1, "resource": "gpu", "run": "variant-a",
                "after": ["control"], "command": ["true"]}]
    campaign = load_campaign(write_campaign(tmp_path, stages, start=FIXED_START))
    assert campaign.runs["smoke"].produces_result is False
    assert campaign.runs["control"].produces_result is True
    events = ran(1, "smoke", 0, 60) + ran(5, "control", 60, 120) + ran(9, "variant-a", 120, 180)
    events += [ev(13 + i, 200, "result_accepted", run=run)
               for i, run in enumerate(("smoke", "control", "variant-a"))]
    now = T0 + timedelta(hours=1)
    data = budget(campaign, fold(campaign, events, now), now)
    assert data["accepted"] == 2 and data["accepted_results"] == ["control", "variant-a"]
    assert data["share_per_accepted"] == {"amount": "23.57", "currency": "USD"}


def test_d21_a_control_as_the_decision_point_stays_a_result(tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path, [
        {"id": "control", "hours": 1, "resource": "gpu", "run": "control",
         "decision_point": True, "command": ["true"]}]))
    assert campaign.runs["control"].produces_result is True


# ------------------------------------------------------------------ D13: measured nothing

def _pilot_campaign(tmp_path: Path) -> object:
    # pilot 10 h, then control 40 h, variant-a 30 h (GPU), write-up 4 h (human):
    # 84 h planned in a 72 h window.
    return load_campaign(write_campaign(tmp_path, [
        {"id": "pilot", "hours": 10, "resource": "gpu", "run": "pilot",
         "decision_point": True, "command": ["true"]},
        {"id": "control", "hours": 40, "resource": "gpu", "after": ["pilot"],
         "run": "control", "command": ["true"]},
        {"id": "variant-a", "hours": 30, "resource": "gpu", "after": ["control"],
         "run": "variant-a", "category": "useful", "command": ["true"]},
        {"id": "write-up", "hours": 4, "resource": "human", "after": ["variant-a"]}],
        start=FIXED_START))


def test_d13_a_failed_pilot_gives_no_ratio_and_the_forecast_still_exceeds(
        tmp_path: Path) -> None:
    campaign = _pilot_campaign(tmp_path)
    events = ran(1, "pilot", 0, 1, code=1, outcome="failed")  # crashed after 1 s
    now = T0 + timedelta(seconds=2)
    fc = forecast(campaign, fold(campaign, events, now), now)
    # The old ratio 1 s / 10 h = 2.8e-5 shrank 70 GPU hours to 7 s: "fits". Without it,
    # the control starts now (2 s): 2 s + 40 h + 30 h + 4 h, over 72 h by 2 h 2 s.
    assert fc.pilot_ratio is None
    assert fc.pilot_note is not None and fc.pilot_note.startswith("pilot measured nothing")
    assert fc.verdict == "exceeds"
    assert fc.slack_s == pytest.approx(-(2 * 3600 + 2), abs=0.01)


def test_d13_a_pilot_under_a_tenth_of_its_steps_gives_no_ratio(tmp_path: Path) -> None:
    campaign = _pilot_campaign(tmp_path)
    events = ran(1, "pilot", 0, 3600)  # exit 0 after 1 h of a planned 10 h
    now = T0 + timedelta(hours=1)
    state = fold(campaign, events, now)
    barely = forecast(campaign, state, now, {"pilot": 0.05})  # 5 of 100 steps
    assert barely.pilot_ratio is None and "5%" in (barely.pilot_note or "")
    half = forecast(campaign, state, now, {"pilot": 0.5})
    assert half.pilot_ratio == pytest.approx(0.1)  # 1 h / 10 h
    # 1 h + (40 + 30) h x 0.1 + 4 h = 12 h: 60 h to spare.
    assert half.slack_s == pytest.approx(60 * 3600)


# ------------------------------------------------------------------ D24: next

def test_d24_a_stopped_stage_counts_only_scaled_by_its_progress(tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path, [
        {"id": "train", "duration": "10m", "resource": "gpu", "run": "train",
         "command": ["true"]},
        {"id": "other", "duration": "10m", "resource": "gpu", "run": "other",
         "command": ["true"]},
        {"id": "variant", "hours": 40, "resource": "gpu", "run": "variant",
         "after": ["train"], "command": ["true"]}], start=FIXED_START))
    events = (ran(1, "train", 0, 3.6, code=-15, outcome="stopped")
              + ran(5, "other", 10, 13.6, code=1, outcome="failed"))
    now = T0 + timedelta(minutes=1)
    found = {e.stage: e for e in estimates(campaign, fold(campaign, events, now), now,
                                           {"train": 8 / 40})}
    # Stopped at step 8 of 40 after 3.6 s: 3.6 x 40 / 8 = 18 s (not "10m -> 4s").
    assert found["train"].next_s == pytest.approx(18.0)
    assert found["other"].next_s == 600  # failed, progress unknown: the plan's 10 m
    assert found["variant"].next_s == 40 * 3600  # no pilot, no ratio: as planned


def test_d24_a_stage_stopped_too_early_is_timed_by_its_measured_throughput(
        tmp_path: Path) -> None:
    """Issue 27: at 2 % of its steps a stopped stage's time says nothing (D13), but the
    throughput its run measured does: its max_steps at that rate."""
    from cockpit.planning.calibrate import StageMeasure

    campaign = load_campaign(write_campaign(tmp_path, [
        {"id": "train", "duration": "10m", "resource": "gpu", "run": "train",
         "command": ["true"]}], start=FIXED_START))
    events = ran(1, "train", 0, 3.6, code=-15, outcome="stopped")
    now = T0 + timedelta(minutes=1)
    state = fold(campaign, events, now)
    found = estimates(campaign, state, now, {"train": 0.02},
                      {"train": StageMeasure(throughput=2.5, max_steps=1000, mean_util=40.0)})
    assert found[0].next_s == pytest.approx(400.0)  # 1000 steps / 2.5 steps/s
    assert found[0].source.endswith("1000 steps at the measured 2.5 steps/s")
    # Without a throughput, or without max_steps, the plan stands.
    for measure in (StageMeasure(max_steps=1000), StageMeasure(throughput=2.5)):
        assert estimates(campaign, state, now, {"train": 0.02},
                         {"train": measure})[0].next_s == 600


def test_d24_a_failed_pilot_never_scales_next(tmp_path: Path) -> None:
    campaign = _pilot_campaign(tmp_path)
    events = ran(1, "pilot", 0, 1, code=1, outcome="failed")
    now = T0 + timedelta(seconds=2)
    found = {e.stage: e for e in estimates(campaign, fold(campaign, events, now), now)}
    assert found["control"].next_s == 40 * 3600  # not 40 h x 1/36000 = 4 s
    assert found["pilot"].next_s == 10 * 3600  # crashed, progress unknown: as planned


def test_next_of_a_campaign_with_a_stopped_stage_and_short_stages_passes_check(
        tmp_path: Path) -> None:
    """Real processes: a 2-step stage of seconds written with ``hours:`` (it was written
    ``hours: 0.00``, which check refuses) and a run stopped by its rule at step 8."""
    start = (datetime.now(timezone.utc) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    path = write_campaign(tmp_path, [
        {"id": "data", "hours": 0.5, "resource": "cpu", "run": "data",
         "command": step_command(steps=2, sleep=0.01)},
        {"id": "train", "hours": 2, "resource": "gpu", "run": "train", "after": ["data"],
         "command": step_command(steps=40, sleep=0.1, nan_at=8)}],
        rules=[FINITE], start=start)
    run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.2",
                timeout=120)
    journal = [json.loads(line) for line in
               (tmp_path / ".cockpit" / "journal.jsonl").read_text().splitlines()]
    finished = {e["stage"]: e for e in journal if e["kind"] == "stage_finished"}
    assert finished["train"]["outcome"] == "stopped"
    out = tmp_path / "next.yaml"
    made = run_cockpit("next", str(path), "--out", str(out))
    assert made.returncode == 0, made.stderr
    checked = run_cockpit("check", str(out))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    calibrated = {s.id: s.seconds for s in load_campaign(out).stages}
    assert calibrated["data"] > 0
    # The train run's own report: its last step of 40, and the stage's measured time.
    report = [json.loads(line) for line in
              (tmp_path / ".cockpit" / "runs" / "train" / "report.jsonl").read_text()
              .splitlines() if line.strip()]
    last = max(r["step"] for r in report if "step" in r)
    started = next(e for e in journal if e["kind"] == "stage_started" and e["stage"] == "train")
    from cockpit.journal.log import parse_time

    elapsed = finished["train"].get("elapsed_s") or (
        parse_time(finished["train"]["t"]) - parse_time(started["t"])).total_seconds()
    expected = elapsed * 40 / last  # scaled by progress, rounded up to 0.001 h (3.6 s)
    assert expected - 0.01 <= calibrated["train"] <= expected + 3.6 + 0.01
    assert calibrated["train"] < 2 * 3600  # not the plan: the run measured it


# ------------------------------------------------------------------ D11: options

def _illustrative_plan(overrun_h: float):  # type: ignore[no-untyped-def]
    return plan_campaign(load_campaign(SAMPLES / "illustrative.yaml"), overrun_hours=overrun_h)


def test_d11_30h_over_the_7_day_package_and_drop_variant_b_nothing_dominated() -> None:
    plan = _illustrative_plan(30)
    # 48 + 30 = 78 h in a 72 h window. The 7-day package (168 h) holds it for 110 USD;
    # the 30-day one (390 USD) also fits but costs more: dominated. Dropping variant-b
    # saves its 10 h: 68 h fits, so dropping variant-a too is dominated (and would drop
    # every variant: the question could no longer be answered).
    offers = [(o.offer, o.cost) for o in plan.options if o.kind == "offer"]
    assert offers == [("rtx4090-7d", usd("110"))]
    shorten = [(o.drops, o.reserved_hours, o.fits) for o in plan.options
               if o.kind == "shorten"]
    assert shorten == [(("variant-b",), 68.0, True)]
    second = next(o for o in plan.options if o.kind == "second-package")
    assert (second.offer, second.cost, second.moved, second.reserved_hours) == (
        "rtx4090-3d", usd("47.14"), ("variant-b",), 68.0)


def test_d11_40h_over_only_the_7_day_package_fits() -> None:
    plan = _illustrative_plan(40)
    # 88 h: 7 d (168 h) fits for 110 USD, 30 d dominated. Dropping variant-b gives 78 h,
    # still over; dropping both variants (68 h) would leave no variant: not offered.
    assert [o.offer for o in plan.options if o.kind == "offer"] == ["rtx4090-7d"]
    shorten = [o for o in plan.options if o.kind == "shorten"]
    assert [(o.drops, o.reserved_hours, o.fits) for o in shorten] == [
        (("variant-b",), 78.0, False)]
    assert "saves 10 h: reserved 78 h, still exceeds" in shorten[0].describe()


def test_d11_1000h_over_nothing_fits_and_says_so(tmp_path: Path) -> None:
    plan = _illustrative_plan(1000)
    # 1048 h: longer than the 30-day package's 720 h; no option fits.
    assert not any(o.fits for o in plan.options)
    out = run_cockpit("plan", str(SAMPLES / "illustrative.yaml"), "--overrun", "1000h")
    assert "nothing fits: no RTX 4090 package of the catalog holds 1048 h (the longest, " \
           "rtx4090-30d, holds 720 h)" in out.stdout
    assert "options (D11):" not in out.stdout
    data = json.loads(run_cockpit("plan", str(SAMPLES / "illustrative.yaml"), "--json",
                                  "--overrun", "1000h").stdout)
    assert data["no_option_reason"].startswith("nothing fits: ")
    second = next(o for o in data["options"] if o["kind"] == "second-package")
    # 1048 - 10 = 1038 h on one machine with variant-b on a second 47.14 USD package.
    assert (second["offer"], second["cost"], second["moved"], second["reserved_hours"],
            second["fits"]) == ("rtx4090-3d", {"amount": "47.14", "currency": "USD"},
                                ["variant-b"], 1038.0, False)


def test_d11_figures_are_the_schedules_own(tmp_path: Path) -> None:
    """A 12 s stage: the option's hours are the schedule's exact 40.0033 h, not the plan's
    hours minus a rounded saving."""
    campaign = load_campaign(write_campaign(tmp_path, [
        {"id": "control", "hours": 40, "resource": "gpu", "run": "control"},
        {"id": "variant-a", "hours": 30, "resource": "gpu", "run": "variant-a",
         "after": ["control"], "category": "useful"},
        {"id": "variant-b", "hours": 30.00333, "resource": "gpu", "run": "variant-b",
         "after": ["control"], "category": "exploratory"},
        {"id": "tick", "duration": "12s", "resource": "cpu", "after": ["variant-a",
                                                                       "variant-b"]}]))
    plan = plan_campaign(campaign)
    # 40 + 30 + 30.00333 + 12/3600 = 100.00667 h; without variant-b: 70.00333 h.
    shorten = next(o for o in plan.options if o.kind == "shorten")
    assert shorten.drops == ("variant-b",)
    assert shorten.reserved_hours == round(40 + 30 + 12 / 3600, 4)
    # The saving is the difference of the two figures the schedule shows:
    # 100.0067 - 70.0033 = 30.0034, so the text adds up.
    assert plan.figures.reserved_hours == 100.0067
    assert shorten.saves_hours == pytest.approx(30.0034)


def test_d11_two_hours_before_the_end_a_longer_package_is_an_additional_rental(
        tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path, [
        {"id": "control", "hours": 10, "resource": "gpu", "run": "control",
         "command": ["true"]},
        {"id": "variant-a", "hours": 10, "resource": "gpu", "run": "variant-a",
         "after": ["control"], "category": "useful", "command": ["true"]},
        {"id": "variant-b", "hours": 10, "resource": "gpu", "run": "variant-b",
         "after": ["control"], "category": "exploratory", "command": ["true"]},
        {"id": "report", "hours": 4, "resource": "human", "after": ["variant-a",
                                                                      "variant-b"]}],
        start=FIXED_START))
    events = [ev(1, 0, "stage_started", stage="control", run="control")]
    now = T0 + timedelta(hours=70)  # two hours before the 72 h window ends
    # The control, half done after 70 h, takes 140 h; then 10 + 10 + 4: ends at 164 h.
    fc = forecast(campaign, fold(campaign, events, now), now, {"control": 0.5})
    assert fc.slack_s == pytest.approx((72 - 164) * 3600)
    offers = [o for o in fc.options if o.kind == "offer"]
    # A 7-day rental from now holds 70 + 168 = 238 h >= 164 h; it comes on top of the
    # 47.14 spent: 110 more, 157.14 in all. The 30-day one (390 more) is dominated.
    assert [(o.offer, o.cost, o.spent, o.total) for o in offers] == [
        ("rtx4090-7d", usd("110"), usd("47.14"), usd("157.14"))]
    assert offers[0].additional and offers[0].as_json()["total"] == {
        "amount": "157.14", "currency": "USD"}
    text = offers[0].describe()
    assert "110 USD more on top of the 47.14 USD already spent: 157.14 USD in all" in text
    assert not text.startswith("take ")


def test_the_readmes_overrun_example_is_the_commands_own_output() -> None:
    """The README's `plan --overrun 30h` lines after its "..." are printed word for word
    (it went stale once: it still listed the dominated 30-day package)."""
    readme = (SAMPLES.parent / "README.md").read_text().splitlines()
    at = readme.index("$ cockpit plan sample_campaigns/illustrative.yaml --overrun 30h")
    shown = readme[at + 2:readme.index("```", at)]  # after the "..." line
    out = run_cockpit("plan", str(SAMPLES / "illustrative.yaml"), "--overrun", "30h").stdout
    real = out.splitlines()
    start = real.index(shown[0])
    assert real[start:start + len(shown)] == shown


def test_next_keeps_an_earlier_attempts_stop_among_the_uncertainties(tmp_path: Path) -> None:
    """D15: a run stopped by its rule, restarted with --force and then done: `next` still
    names the first attempt's stop (the state keeps only the latest attempt's)."""
    from cockpit.planning.calibrate import uncertainties

    campaign = load_campaign(write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "train", "command": ["true"]}],
        rules=[FINITE], start=FIXED_START))
    first = ran(1, "train", 0, 10, code=-15, outcome="stopped")  # run attempt 2
    first[2:2] = [ev(90, 5, "rule_fired", run="train", rule="finite-loss", reason="loss nan",
                     step=8, action="stop", attempt=2),
                  ev(91, 5, "stop_requested", run="train", rule="finite-loss",
                     reason="loss nan", attempt=2)]
    events = first + ran(10, "train", 20, 30)  # run attempt 11, exit 0
    for i, e in enumerate(events, start=1):
        e["seq"] = i
    now = T0 + timedelta(minutes=1)
    state = fold(campaign, events, now)
    assert state.runs["train"].stop is None  # the latest attempt ran to its end
    assert "run train (an earlier attempt) was stopped by finite-loss at step 8: loss nan" \
        in uncertainties(campaign, state)


def test_plan_overrun_names_interchangeable_stages_as_one_option(tmp_path: Path) -> None:
    """D11, none twice: two sweeps alike (duration, resource, before and after) are one
    way out, "drop one of sweep-1, sweep-2", never two mirror-image options; a third
    sweep of another length stays an option of its own."""
    sweep = {"resource": "gpu", "category": "exploratory", "after": ["control"]}
    path = write_campaign(tmp_path, [
        {"id": "control", "hours": 20, "resource": "gpu", "run": "control"},
        {"id": "sweep-1", "hours": 20, "run": "sweep-1", **sweep},
        {"id": "sweep-2", "hours": 20, "run": "sweep-2", **sweep},
        {"id": "sweep-3", "hours": 8, "run": "sweep-3", **sweep},
        {"id": "report", "hours": 4, "resource": "human",
         "after": ["sweep-1", "sweep-2", "sweep-3"]},
    ], extra={"conclusion": {"metric": "val/accuracy", "baseline": "control",
                             "variants": ["sweep-1", "sweep-2", "sweep-3"]}},
        start=FIXED_START)
    # 20 + 20 + 20 + 8 + 4 = 72 h, with a 10 h overrun 82 h: dropping a 20 h sweep fits.
    out = run_cockpit("plan", str(path), "--overrun", "10h")
    assert out.returncode == 0, out.stderr
    shorten = [line.strip() for line in out.stdout.splitlines() if "shorten:" in line]
    assert "- shorten: drop one of sweep-1, sweep-2 (saves 20 h: reserved 62 h, then fits)" \
        in shorten, out.stdout
    assert not any(line.startswith("- shorten: drop sweep-2") for line in shorten), shorten
    assert len(shorten) == len(set(shorten)), shorten
    options = json.loads(run_cockpit("plan", str(path), "--overrun", "10h", "--json").stdout
                         )["options"]
    (alike,) = [o for o in options if o["one_of"]]
    assert alike["drops"] == ["sweep-1"] and alike["one_of"] == [
        {"count": 1, "of": ["sweep-1", "sweep-2"]}]
    assert not any(o["drops"] == ["sweep-2"] for o in options)
