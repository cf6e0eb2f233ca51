"""`cockpit init DIR`: the template a newcomer edits, through the real CLI.

The template must pass `cockpit check` with no warning, never overwrite a campaign,
refuse a bad offer or start with one line, and run end to end as written: headless
to the pilot's decision (exit 3), the decision, headless to the close (exit 0), and
an export that `verify-export` accepts.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.helpers.process import run_cockpit

TEMPLATE_FILES = {"README.md", "campaign.yaml", "train.py", "model.py", "corpus.py",
                  "data_check.py", "error_analysis.py"}


def events(folder: Path) -> list[dict]:
    text = (folder / ".cockpit" / "journal.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_init_writes_a_campaign_that_checks_ok_without_warning(tmp_path):
    folder = tmp_path / "nested" / "My Campaign"
    result = run_cockpit("init", str(folder))
    assert result.returncode == 0, result.stderr
    assert set(snapshot(folder)) == TEMPLATE_FILES
    text = (folder / "campaign.yaml").read_text()
    assert "{{" not in text and "}}" not in text
    assert "offer: rtx4090-3d" in text
    assert "campaign: my-campaign" in text
    # What it wrote and what comes next, in commands a newcomer can paste.
    for words in ("campaign.yaml", "train.py", "cockpit check", "--auto --until-done",
                  "cockpit decide", "continue --stage pilot"):
        assert words in result.stdout, words
    check = run_cockpit("check", str(folder / "campaign.yaml"))
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == "ok"
    assert "warning" not in check.stderr.lower(), check.stderr
    plan = run_cockpit("plan", str(folder / "campaign.yaml"))
    assert plan.returncode == 0 and "fits" in plan.stdout, plan.stdout + plan.stderr
    # `next` with no run yet: the plan as it stands, a file `check` reads (D24).
    made = run_cockpit("next", str(folder / "campaign.yaml"), "--out", str(tmp_path / "n.yaml"))
    assert made.returncode == 0, made.stderr
    again = run_cockpit("check", str(tmp_path / "n.yaml"))
    assert again.returncode == 0, again.stdout + again.stderr


def test_init_fills_in_the_offer_and_start(tmp_path):
    folder = tmp_path / "camp"
    result = run_cockpit("init", str(folder), "--offer", "rtx4090-7d",
                         "--start", "2027-01-04T09:30:00+01:00")
    assert result.returncode == 0, result.stderr
    text = (folder / "campaign.yaml").read_text()
    assert "offer: rtx4090-7d" in text
    assert "start: 2027-01-04T09:30:00+01:00" in text
    check = run_cockpit("check", str(folder / "campaign.yaml"))
    assert check.returncode == 0 and "warning" not in check.stderr.lower(), check.stderr


@pytest.mark.parametrize("existing", ["campaign.yaml", "train.py"])
def test_init_never_overwrites_a_campaign(tmp_path, existing):
    folder = tmp_path / "camp"
    if existing == "campaign.yaml":
        assert run_cockpit("init", str(folder)).returncode == 0
    else:
        folder.mkdir()
        (folder / "train.py").write_text("# my own training script\n")
    before = snapshot(folder)
    again = run_cockpit("init", str(folder))
    assert again.returncode == 2
    assert str(folder / existing) in again.stderr
    assert "already exists" in again.stderr
    assert "Traceback" not in again.stderr
    assert snapshot(folder) == before


@pytest.mark.parametrize(("option", "value", "words"), [
    ("--offer", "h100-3d", "known offers: rtx4090-3d"),
    ("--start", "tomorrow", "not a time like"),
    ("--start", "2026-12-02T08:00:00", "has no timezone"),
])
def test_bad_offer_or_start_is_one_line_and_exit_2(tmp_path, option, value, words):
    folder = tmp_path / "camp"
    result = run_cockpit("init", str(folder), option, value)
    assert result.returncode == 2
    assert words in result.stderr
    assert value in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert not folder.exists()


@pytest.mark.slow
def shorten_training(campaign: Path) -> None:
    """The template as written, its training a tenth as long: the stages, checkpoints,
    resume check, verdicts and export are the flow under test, not 1,500 steps of SGD
    (the demo trains for real once per run). Only the step counts change: a checkpoint
    at each run's end, the pilot's two for its resume check."""
    text = campaign.read_text()
    short = (text.replace('"--steps", "1500"', '"--steps", "150", "--checkpoint-every", "150"')
             .replace('"--steps", "600"', '"--steps", "60"')
             .replace('"--checkpoint-every", "200"', '"--checkpoint-every", "30"'))
    assert short.count('"--steps", "150"') == 3 and '"--steps", "60"' in short, \
        "the template's step counts changed: update shorten_training"
    campaign.write_text(short)


def test_the_template_runs_end_to_end(tmp_path):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the template trains a real PyTorch model")
    folder = tmp_path / "camp"
    assert run_cockpit("init", str(folder)).returncode == 0
    file = str(folder / "campaign.yaml")
    shorten_training(folder / "campaign.yaml")
    headless = ("headless", file, "--auto", "--until-done", "--interval", "0.2")

    first = run_cockpit(*headless, timeout=300)
    assert first.returncode == 3, first.stdout[-3000:] + first.stderr[-3000:]
    assert "waiting for a decision at pilot" in first.stdout

    decide = run_cockpit("decide", file, "continue", "--stage", "pilot",
                         "--note", "the pilot is above the floor; go on with the plan")
    assert decide.returncode == 0, decide.stderr

    second = run_cockpit(*headless, timeout=300)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]

    journal = events(folder)
    resume = [e for e in journal if e["kind"] == "resume_verified"]
    assert resume and resume[-1]["run"] == "pilot" and resume[-1]["ok"] is True, resume
    verdicts = {e["run"]: e["kind"] for e in journal
                if e["kind"] in ("result_accepted", "result_rejected")}
    assert verdicts.get("control") == "result_accepted", verdicts
    assert not [e for e in journal if e["kind"] == "rule_fired"]
    for name in ("predictions.csv", "confusion.csv", "errors.md"):
        assert (folder / "out" / "control" / name).stat().st_size > 0, name

    done = [e for e in journal if e["kind"] == "export_done"]
    # The export stage verified its bag with each checkpoint reloaded in a fresh
    # process; the command a person runs checks the bag again (its reloads are the
    # demo's test: one torch process less per run here).
    assert done and done[-1]["verified"] is True and done[-1]["reload_checked"], done
    verify = run_cockpit("verify-export", done[-1]["path"], "--no-reload", timeout=300)
    assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-3000:]
    # `next` after the runs: measured durations of seconds, a file `check` reads (D24).
    made = run_cockpit("next", file, "--out", str(tmp_path / "next.yaml"))
    assert made.returncode == 0, made.stderr
    checked = run_cockpit("check", str(tmp_path / "next.yaml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
