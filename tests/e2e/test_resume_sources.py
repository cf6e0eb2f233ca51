"""Issue 42: the resume check reads what the resumed process wrote where it writes it —
the run's own kind of metric source in its scratch folder (a Lightning ``metrics.csv``,
a Trainer's ``trainer_state.json``), the paths ``resume_check.metrics`` names, or its
report — with the canonical metric names on both sides; and when the resumed process
reported nothing, the failure names that process, not the original run. Real processes
(a stand-in for a training script that writes what a framework writes), real files."""

from __future__ import annotations

import json
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cockpit.campaign import load_campaign
from cockpit.common.errors import InputError
from cockpit.runs.checkpoints.resume_check import ResumeResult, resume_equivalence
from tests.helpers.campaigns import write_campaign

LOSSES = {1: 2.0, 2: 1.5, 3: 1.25, 4: 1.0, 5: 0.75, 6: 0.5}

# The resumed process: writes steps 4-6 of the run as a framework would, under its
# scratch folder (argv: checkpoint, scratch, how); "off" writes step 5 wrong.
RESUME = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    LOSSES = {1: 2.0, 2: 1.5, 3: 1.25, 4: 1.0, 5: 0.75, 6: 0.5}
    checkpoint, scratch, how = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    assert checkpoint.is_file()
    if how in ("csv", "off"):
        out = scratch / "lightning_logs" / "version_0"
        out.mkdir(parents=True)
        rows = "".join(f"{s},{LOSSES[s] + (0.01 if how == 'off' and s == 5 else 0)}\\n"
                       for s in (4, 5, 6))
        (out / "metrics.csv").write_text("step,train_loss\\n" + rows)
    elif how == "trainer":  # its state carries the history before the checkpoint
        out = scratch / "out" / "checkpoint-6"
        out.mkdir(parents=True)
        history = [{"step": s, "loss": LOSSES[s]} for s in range(1, 7)]
        (out / "trainer_state.json").write_text(json.dumps(
            {"global_step": 6, "max_steps": 6, "log_history": history}))
    elif how == "custom":
        out = scratch / "custom"
        out.mkdir()
        (out / "log.csv").write_text("step,valid_nll\\n" + "".join(
            f"{s},{LOSSES[s]}\\n" for s in (4, 5, 6)))
    elif how == "truncated":  # only what came before the checkpoint
        out = scratch / "out" / "checkpoint-3"
        out.mkdir(parents=True)
        (out / "trainer_state.json").write_text(json.dumps(
            {"global_step": 3, "log_history": [{"step": s, "loss": LOSSES[s]} for s in (1, 2, 3)]}))
""")


def _resume(how: str) -> list[str]:
    return [sys.executable, "resume.py", "{checkpoint}", "{scratch}", how]


@pytest.fixture(scope="module")
def campaign_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs that logged steps 1-6 in a Lightning CSV (``train_loss``), in a Trainer's
    output folder (``loss``) and in a CSV of their own names (``valid_nll``, mapped)."""
    folder = tmp_path_factory.mktemp("resume") / "c"
    csv_run = {"metrics": ["logs/lightning_logs/version_0/metrics.csv"], "checkpoints": "ckpt"}
    runs = {
        "lit": {**csv_run, "resume_check": {"command": _resume("csv"), "steps": 3}},
        "lit_off": {**csv_run, "resume_check": {"command": _resume("off"), "steps": 3}},
        "silent": {**csv_run, "resume_check": {"command": _resume("nothing"), "steps": 3}},
        "hf": {"metrics": ["out"], "checkpoints": "ckpt",
               "resume_check": {"command": _resume("trainer"), "steps": 3}},
        "hf_short": {"metrics": ["out"], "checkpoints": "ckpt",
                     "resume_check": {"command": _resume("truncated"), "steps": 3}},
        "own": {"metrics": ["logs/own.csv"], "checkpoints": "ckpt",
                "metric_names": {"valid_nll": "eval_loss"},
                "resume_check": {"command": _resume("custom"), "steps": 3,
                                 "metric": "eval_loss",
                                 "metrics": ["{scratch}/custom/log.csv"]}},
    }
    path = write_campaign(folder, [{"id": r, "duration": "5m", "resource": "cpu", "run": r,
                                    "command": ["true"]} for r in runs], runs=runs)
    (folder / "resume.py").write_text(RESUME)
    logs = folder / "logs" / "lightning_logs" / "version_0"
    logs.mkdir(parents=True)
    (logs / "metrics.csv").write_text("step,train_loss\n" + "".join(
        f"{s},{v}\n" for s, v in LOSSES.items()))
    (folder / "logs" / "own.csv").write_text("step,valid_nll\n" + "".join(
        f"{s},{v}\n" for s, v in LOSSES.items()))
    state = folder / "out" / "checkpoint-6"
    state.mkdir(parents=True)
    (state / "trainer_state.json").write_text(json.dumps(
        {"global_step": 6, "log_history": [{"step": s, "loss": v} for s, v in LOSSES.items()]}))
    (folder / "ckpt").mkdir()
    (folder / "ckpt" / "step=3.ckpt").write_bytes(b"weights")
    return path


def _check(path: Path, run: str) -> ResumeResult:
    campaign = load_campaign(path)
    return resume_equivalence(campaign, campaign.runs[run], path.parent / "ckpt" / "step=3.ckpt",
                              3, datetime.now(timezone.utc))


@pytest.mark.parametrize("run", ["lit", "hf", "own"])
def test_a_resumed_process_that_writes_only_the_runs_own_source_passes(
        campaign_file: Path, run: str) -> None:
    result = _check(campaign_file, run)
    assert result.ok, result.message
    assert result.compared == 3 and "the restart is exact" in result.message


def test_the_first_step_that_differs_is_named(campaign_file: Path) -> None:
    result = _check(campaign_file, "lit_off")
    assert not result.ok and result.diverged_step == 5
    assert "loss diverged at step 5: original 0.75, resumed 0.76" in result.message


def test_a_resumed_process_that_wrote_nothing_is_named(campaign_file: Path) -> None:
    result = _check(campaign_file, "silent")
    assert not result.ok and result.compared == 0
    scratch = campaign_file.parent / ".cockpit"
    message = result.message
    assert message.startswith("the resumed process reported no loss after step 3: ")
    assert "resume.py" in message and "step=3.ckpt" in message and " nothing` exited 0" in message
    assert str(scratch) in message and "report.jsonl" in message  # where it was to write
    assert "own kind of source (metrics.csv; give the command {scratch} as its output " \
           "folder); it wrote none of them" in message
    assert "original" not in message  # not the original run's fault


def test_a_resumed_state_holding_only_the_history_before_the_checkpoint_is_named(
        campaign_file: Path) -> None:
    result = _check(campaign_file, "hf_short")
    assert not result.ok
    assert result.message.startswith("the resumed process reported no loss after step 3")
    assert "it wrote trainer_state.json but no loss with a step after step 3" in result.message


def test_resume_check_metrics_must_be_under_the_scratch_folder(tmp_path: Path) -> None:
    runs = {"r1": {"resume_check": {"command": ["python", "t.py"], "steps": 2,
                                    "metrics": ["out/metrics.csv", "{scratch}/../x.csv"]}}}
    path = write_campaign(tmp_path, [{"id": "s", "duration": "5m", "resource": "cpu",
                                      "run": "r1", "command": ["true"]}], runs=runs)
    with pytest.raises(InputError) as raised:
        load_campaign(path)
    text = str(raised.value)
    assert f"{path}:" in text  # located
    assert "'out/metrics.csv' is not under the resumed process's scratch folder: start it " \
           "with {scratch}" in text
    assert "'{scratch}/../x.csv' leaves the scratch folder" in text
