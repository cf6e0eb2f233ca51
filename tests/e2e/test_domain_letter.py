"""The domain to the letter (D3, D11, D12, D8): each fault found by the audit, on a
campaign file that shows it."""

from __future__ import annotations

import json
from pathlib import Path

from cockpit.campaign import load_campaign
from cockpit.planning.advice import role_of
from cockpit.planning.schedule import plan_campaign
from tests.helpers.campaigns import recent_start
from tests.helpers.process import run_cockpit

HEAD = ('campaign: letter\nquestion: "Does variant-x raise accuracy by 0.01 over the control?"\n'
        "package: {offer: OFFER, start: START, count: COUNT}\n")


def _file(tmp_path: Path, stages: str, offer: str = "rtx4090-3d", count: int = 1,
          extra: str = "") -> Path:
    path = tmp_path / "campaign.yaml"
    # The window is relative to now: `status` reads the file on the real clock.
    path.write_text(HEAD.replace("OFFER", offer).replace("COUNT", str(count))
                    .replace("START", recent_start()) + "stages:\n" + stages + extra)
    return path


def test_roles_come_from_the_role_key_or_an_exact_id(tmp_path: Path) -> None:
    path = _file(tmp_path, "  - {id: load-data, duration: 1h, resource: cpu}\n"
                           "  - {id: resume-writing, duration: 1h, resource: human}\n"
                           "  - {id: uncontrolled-sweep, duration: 1h, resource: gpu}\n"
                           "  - {id: data-check, duration: 1h, resource: cpu}\n"
                           "  - {id: baseline-a, duration: 1h, resource: gpu, role: control}\n")
    roles = {s.id: role_of(s) for s in load_campaign(path).stages}
    assert roles == {"load-data": None, "resume-writing": None, "uncontrolled-sweep": None,
                     "data-check": "data_check", "baseline-a": "control"}


def test_options_are_unique_save_something_and_are_not_dominated(tmp_path: Path) -> None:
    # notes runs beside the GPU work (dropping it saves nothing); variant-a is useful but
    # parallel to nothing it could shorten only with variant-x; nothing is listed twice.
    path = _file(tmp_path,
                 "  - {id: control, duration: 40h, resource: gpu}\n"
                 "  - {id: notes, duration: 5h, resource: human, category: exploratory}\n"
                 "  - {id: variant-x, duration: 40.0186h, resource: gpu, after: [control],"
                 " category: exploratory}\n")
    plan = plan_campaign(load_campaign(path))
    described = [o.describe() for o in plan.options]
    assert len(described) == len(set(described))
    shorten = [o for o in plan.options if o.kind == "shorten"]
    assert [o.drops for o in shorten] == [("variant-x",)]  # not "notes, variant-x", not "notes"
    assert all(o.saves_hours > 0 for o in plan.options if o.kind != "offer")
    assert "saves 40.02 h" in shorten[0].describe()  # rounded like every other figure


def test_no_options_says_so_and_why(tmp_path: Path) -> None:
    path = _file(tmp_path, "  - {id: control, duration: 60h, resource: gpu}\n"
                           "  - {id: variant-a, duration: 30h, resource: gpu, after: [control]}\n",
                 offer="b200-3d",
                 extra="offers:\n  - {id: b200-3d, gpu: B200, gpus: 2, days: 3, price: 500,"
                       " currency: USD}\n")
    out = run_cockpit("plan", str(path)).stdout
    assert "EXCEEDS" in out and "options (D11)" not in out
    assert "nothing fits: the catalog has no longer B200 package; every stage is essential" \
        in out
    status = run_cockpit("status", str(path)).stdout
    assert "see the options" not in status


def test_a_second_package_is_offered_for_independent_gpu_chains(tmp_path: Path) -> None:
    path = _file(tmp_path, "  - {id: control, duration: 40h, resource: gpu}\n"
                           "  - {id: variant-a, duration: 40h, resource: gpu}\n")
    plan = plan_campaign(load_campaign(path))
    (second,) = [o for o in plan.options if o.kind == "second-package"]
    assert second.moved == ("variant-a",) and second.saves_hours == 40 and second.fits
    text = second.describe()
    assert "47.14 USD more" in text and "environment allows" in text and "D12" in text


def test_prices_for_two_packages_say_so(tmp_path: Path) -> None:
    path = _file(tmp_path, "  - {id: control, duration: 90h, resource: gpu}\n", count=2)
    out = run_cockpit("plan", str(path)).stdout
    assert "94.28 USD for 2 packages" in out and "for the package" not in out
    assert "take rtx4090-7d (220 USD for 2 packages)" in out


def _warnings(path: Path) -> list[str]:
    result = run_cockpit("check", str(path))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
    # Other lines are notes (the default stalled rule, tests/engine/test_stalled.py).
    return [line.split("warning: ", 1)[1] for line in result.stderr.splitlines()
            if ": warning: " in line]


GUIDED = ("  - {id: data-check, duration: 1h, resource: cpu}\n"
          "  - {id: pilot, duration: 2h, resource: gpu, decision_point: true, run: pilot,"
          " after: [data-check]}\n"
          "  - {id: resume-check, duration: 1h, resource: gpu, after: [pilot]}\n"
          "  - {id: control, duration: 5h, resource: gpu, run: control, after: [resume-check]}\n")
RULES = ("stop_rules:\n  - {id: finite-loss, kind: non_finite, metric: loss}\n"
         "conclusion: {metric: val/accuracy, baseline: control, margin: 0.01}\n")


def test_a_guided_campaign_checks_clean(tmp_path: Path) -> None:
    path = _file(tmp_path, GUIDED + "  - {id: variant-a, duration: 5h, resource: gpu,"
                 " run: variant-a, after: [control], category: useful}\n",
                 extra=RULES + "runs:\n  control: {params: {lr: 0.1, hidden: 64}}\n"
                       "  variant-a: {params: {lr: 0.1, hidden: 128}}\n")
    assert _warnings(path) == []


def test_no_stop_rules_no_question_unknown_price_are_warned(tmp_path: Path) -> None:
    path = _file(tmp_path, GUIDED, offer="b200-3d")
    path.write_text(path.read_text().replace(
        'question: "Does variant-x raise accuracy by 0.01 over the control?"', 'question: ""'))
    warnings = " | ".join(_warnings(path))
    assert "no stop rules (D14" in warnings
    assert "names no question (D1" in warnings
    assert "price of b200-3d is unknown (D10)" in warnings


def test_a_variant_before_the_decision_point_is_warned(tmp_path: Path) -> None:
    path = _file(tmp_path, GUIDED + "  - {id: variant-a, duration: 5h, resource: gpu,"
                 " run: variant-a, after: [data-check], category: useful}\n", extra=RULES)
    assert ["variant 'variant-a' (useful) is scheduled before the pilot's decision point "
            "(D4: the pilot exists to decide it)"] == _warnings(path)


def test_variant_params_that_test_nothing_or_too_much_are_warned(tmp_path: Path) -> None:
    path = _file(tmp_path, GUIDED
                 + "  - {id: variant-a, duration: 5h, resource: gpu, run: variant-a,"
                   " after: [control], category: useful}\n"
                 + "  - {id: variant-b, duration: 5h, resource: gpu, run: variant-b,"
                   " after: [control], category: useful}\n",
                 extra=RULES + "runs:\n  control: {params: {lr: 0.1, hidden: 64, wd: 0}}\n"
                       "  variant-a: {params: {lr: 0.1, hidden: 64, wd: 0}}\n"
                       "  variant-b: {params: {lr: 0.3, hidden: 128, wd: 0}}\n")
    assert _warnings(path) == [
        "variant 'variant-a' has the same params as the control 'control': it tests nothing",
        "variant 'variant-b' differs from the control 'control' in 2 params (hidden, lr): it "
        "changes several causes at once; a variant that isolates one cause says more"]


# ---------------------------------------------------------------- what counts as a result

def _ran(tmp_path: Path, runs: dict, conclusion: dict | None = None,
         stages: list[dict] | None = None) -> Path:
    from tests.helpers.campaigns import FINITE, step_command, write_campaign

    stages = stages or [
        {"id": "pilot", "duration": "5m", "resource": "cpu", "run": "pilot",
         "command": step_command(3, 0.01)},
        {"id": "control", "duration": "5m", "resource": "cpu", "run": "control",
         "after": ["pilot"], "command": step_command(3, 0.01)},
        {"id": "variant-a", "duration": "5m", "resource": "cpu", "run": "variant-a",
         "after": ["control"], "command": step_command(3, 0.01)},
    ]
    extra = {"conclusion": conclusion} if conclusion else None
    path = write_campaign(tmp_path, stages=stages, runs=runs, rules=[FINITE], extra=extra)
    done = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       timeout=120)
    path.with_name("until_done.txt").write_text(f"{done.returncode}\n{done.stdout}{done.stderr}")
    return path


def _exit(path: Path) -> tuple[int, str]:
    code, text = path.with_name("until_done.txt").read_text().split("\n", 1)
    return int(code), text


# val/accuracy ends at 1.0 in the step script: min 1.1 fails, min 0.6 passes.
FAILS = [{"metric": "val/accuracy", "min": 1.1}]
PASSES = [{"metric": "val/accuracy", "min": 0.6}]


def test_the_pilot_produces_no_result_and_needs_no_verdict(tmp_path: Path) -> None:
    path = _ran(tmp_path, {"control": {"acceptance": PASSES},
                           "variant-a": {"acceptance": PASSES}})
    refused = run_cockpit("accept", str(path), "pilot")
    assert refused.returncode == 1 and "produces no result" in refused.stderr
    budget = json.loads(run_cockpit("budget", str(path), "--json").stdout)
    assert budget["accepted"] == 2 and budget["share_per_accepted"]["amount"] == "23.57"
    assert all(r["run"] != "pilot" for r in budget["rejections"])


def test_accept_over_failed_checks_needs_override_with_a_note(tmp_path: Path) -> None:
    path = _ran(tmp_path, {"control": {"acceptance": PASSES},
                           "variant-a": {"acceptance": FAILS}})
    plain = run_cockpit("accept", str(path), "variant-a")
    assert plain.returncode == 1 and "--override" in plain.stderr
    no_note = run_cockpit("accept", str(path), "variant-a", "--override")
    assert no_note.returncode == 2 and "needs a --note" in no_note.stderr
    forced = run_cockpit("accept", str(path), "variant-a", "--override", "--note",
                         "the floor was set before the corpus was cleaned")
    assert forced.returncode == 0 and "BY OVERRIDE" in forced.stdout
    again = run_cockpit("accept", str(path), "variant-a")
    assert again.returncode == 0 and "already accepted: nothing written" in again.stdout
    budget = run_cockpit("budget", str(path)).stdout
    assert "run variant-a accepted by override" in budget and "accepted results: 2" in budget


def test_a_later_verdict_replaces_an_earlier_one(tmp_path: Path) -> None:
    path = _ran(tmp_path, {"control": {"acceptance": PASSES},
                           "variant-a": {"acceptance": PASSES}})
    budget = json.loads(run_cockpit("budget", str(path), "--json").stdout)
    assert budget["accepted"] == 2
    rejected = run_cockpit("reject", str(path), "variant-a", "--note", "leaked test ids")
    assert rejected.returncode == 0 and "rejected: leaked test ids" in rejected.stdout
    budget = json.loads(run_cockpit("budget", str(path), "--json").stdout)
    assert budget["accepted"] == 1 and budget["share_per_accepted"]["amount"] == "47.14"
    assert {"run": "variant-a", "kind": "rejected", "reason": "leaked test ids"} \
        in budget["rejections"]
    assert run_cockpit("reject", str(path), "variant-a", "--note", "x").stdout.startswith(
        "run variant-a is already rejected")
    assert run_cockpit("accept", str(path), "variant-a").returncode == 0
    assert json.loads(run_cockpit("budget", str(path), "--json").stdout)["accepted"] == 2


def test_all_results_failing_beat_baseline_is_not_closed_exit_4(tmp_path: Path) -> None:
    path = _ran(tmp_path, {"control": {"acceptance": FAILS}, "variant-a": {"acceptance": FAILS}},
                conclusion={"metric": "val/accuracy", "baseline": "control"})
    code, text = _exit(path)
    assert code == 4, text
    assert "the question is not closed" in text and "baseline control is not an accepted" in text
    assert "rule: reach_threshold" in text


def test_all_results_failing_reach_threshold_is_a_negative_answer_exit_0(tmp_path: Path) -> None:
    path = _ran(tmp_path, {"control": {"acceptance": FAILS}, "variant-a": {"acceptance": FAILS}},
                conclusion={"metric": "val/accuracy", "rule": "reach_threshold",
                            "threshold": 1.1})
    code, text = _exit(path)
    assert code == 0, text
    assert "no variant reaches val/accuracy >= 1.1" in text and "closes the question (D2)" in text


# ---------------------------------------------------------------- one deadline (D19)

def test_one_deadline_from_the_export_stage_and_the_transfer_rate(tmp_path: Path) -> None:
    from datetime import timedelta

    from cockpit.planning.deadline import closing_times, retrieve_by

    path = _file(tmp_path, "  - {id: control, duration: 10h, resource: gpu}\n"
                           "  - {id: export, duration: 2h, resource: cpu, after: [control]}\n",
                 extra="settings: {transfer_rate_mb_s: 10}\n"
                       "deadline: {export_hours: 5, retrieve_hours: 4}\n")
    campaign = load_campaign(path)
    # The plan's export stage (2 h), not deadline.export_hours; 36,000 MiB at 10 MB/s = 1 h.
    times = closing_times(campaign, expected_bytes=36_000 * 2**20)
    assert (times.export_s, times.retrieve_s) == (7200.0, 3600.0)
    assert retrieve_by(campaign, times) == campaign.package.end - timedelta(hours=3)
    # Unknown size: deadline.retrieve_hours.
    assert closing_times(campaign).retrieve_s == 4 * 3600.0
    status = json.loads(run_cockpit("status", str(path), "--json").stdout)
    assert status["window"]["retrieval_deadline"].startswith(
        (campaign.package.end - timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M"))


# ---------------------------------------------------------------- the plan as decided (D24)

def test_the_plan_as_decided_survives_an_edit_of_the_campaign_file(tmp_path: Path) -> None:
    from cockpit.journal.log import Journal
    from cockpit.journal.plan_record import plan_versions
    from tests.helpers.campaigns import step_command, write_campaign

    path = write_campaign(tmp_path, stages=[
        {"id": "control", "duration": "5m", "resource": "cpu", "run": "control",
         "command": step_command(2, 0.01)}])
    done = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1")
    assert done.returncode == 0, done.stderr
    decided_text = path.read_text()
    path.write_text(decided_text.replace('"5m"', '"50m"'))  # edited after the run
    assert run_cockpit("headless", str(path), "--until-done", "--interval", "0.1"
                       ).returncode == 0
    events = Journal(tmp_path / ".cockpit" / "journal.jsonl").events()
    versions = plan_versions(events)
    assert [v.text for v in versions] == [decided_text, path.read_text()]
    assert [e["kind"] for e in events].count("plan_changed") == 1
    status = json.loads(run_cockpit("status", str(path), "--json").stdout)
    (stage,) = status["stages"]
    assert stage["planned_s"] == 300  # the decided 5 minutes, not the edited 50
    assert any("measured against the plan as decided" in w for w in status["warnings"])
    exported = run_cockpit("export", str(path))
    assert exported.returncode == 0, exported.stderr
    (report,) = (tmp_path / ".cockpit" / "export").glob("*/*/data/REPORT.md")
    text = report.read_text()
    assert f"sha256 `{versions[0].sha256[:12]}`" in text
    assert "## Changes to the plan after it was decided" in text
    assert '-      "duration": "5m",' in text and '+      "duration": "50m",' in text
    assert "| control | essential |" in text and "| 0.08 |" in text  # 5 min planned
