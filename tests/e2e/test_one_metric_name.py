"""One metric, one name across frameworks, end to end (issue 42): a control whose metrics
are the Hugging Face Trainer's ``trainer_state.json`` (``loss``, ``eval_loss``) and a
variant whose metrics are Lightning's ``metrics.csv`` (``train_loss``, ``val_loss``),
each file written by the real library inside the run's own process. One rule, one
acceptance check, one conclusion and one chart name ``eval_loss`` and see both."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from cockpit.tui.chart_data import chart_metrics, run_series
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit

pytest.importorskip("transformers")
pytest.importorskip("lightning_fabric", reason="needs pytorch-lightning")

# The Trainer's state file, as the Trainer writes it at a save (its own class).
HF_RUN = textwrap.dedent("""
    from transformers import TrainerState
    state = TrainerState(global_step=3, max_steps=3)
    state.log_history = [{"loss": 2.1, "grad_norm": 1.0, "learning_rate": 1e-3, "step": 1},
                         {"loss": 1.8, "grad_norm": 0.9, "learning_rate": 1e-3, "step": 2},
                         {"eval_loss": 1.4, "step": 3}]
    import os; os.makedirs("out/hf", exist_ok=True)
    state.save_to_json("out/hf/trainer_state.json")
""")
# Lightning's CSV logger, as a LightningModule's self.log fills it.
PL_RUN = textwrap.dedent("""
    try:
        from lightning.pytorch.loggers import CSVLogger
    except ImportError:
        from pytorch_lightning.loggers import CSVLogger
    logger = CSVLogger("out/pl", name="logs", version=0)
    logger.log_metrics({"train_loss": 2.0, "epoch": 0}, step=0)
    logger.log_metrics({"train_loss": 1.6, "epoch": 0}, step=1)
    logger.log_metrics({"val_loss": 1.2, "epoch": 0}, step=2)
    logger.save()
""")
EVAL_LOSS_OK = {"metric": "eval_loss", "max": 2.0}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("one-name")
    (folder / "hf_run.py").write_text(HF_RUN)
    (folder / "pl_run.py").write_text(PL_RUN)
    path = write_campaign(folder, stages=[
        {"id": "control", "duration": "5m", "resource": "cpu", "run": "control",
         "command": [sys.executable, "hf_run.py"]},
        {"id": "variant-a", "duration": "5m", "resource": "cpu", "run": "variant-a",
         "after": ["control"], "category": "useful", "command": [sys.executable, "pl_run.py"]},
    ], runs={
        "control": {"metrics": "out/hf/trainer_state.json", "acceptance": [EVAL_LOSS_OK]},
        "variant-a": {"metrics": "out/pl/logs/version_0/metrics.csv",
                      "acceptance": [EVAL_LOSS_OK]},
    }, rules=[{"id": "eval-ceiling", "kind": "threshold", "metric": "eval_loss", "max": 5.0}],
        extra={"conclusion": {"metric": "eval_loss", "better": "lower", "baseline": "control",
                              "margin": 0.1, "variants": ["variant-a"]}})
    done = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return path


def test_one_acceptance_check_and_one_conclusion_name_both_frameworks(campaign: Path) -> None:
    budget = json.loads(run_cockpit("budget", str(campaign), "--json").stdout)
    text = budget["conclusion"]
    # the Trainer's eval_loss 1.4 against Lightning's val_loss 1.2: lower by 0.2 >= 0.1
    assert "variant-a" in text and "eval_loss" in text and "1.2" in text and "1.4" in text, text
    assert "cannot be closed" not in text, text
    status = json.loads(run_cockpit("status", str(campaign), "--json").stdout)
    verdicts = {r["id"]: r.get("verdict") for r in status["runs"]}
    assert verdicts == {"control": "accepted", "variant-a": "accepted"}, verdicts


def test_one_rule_and_one_chart_see_both_frameworks(campaign: Path) -> None:
    engine = Engine(load_campaign(campaign))
    try:
        snap = engine.tick()
    finally:
        engine.close()
    states = {r.run: r.state for r in snap.rules if r.rule == "eval-ceiling"}
    # one rule, watched on both runs (each reported eval_loss under its own spelling)
    assert set(states) == {"control", "variant-a"}, states
    assert not {"blind", "fired"} & set(states.values()), states
    assert "eval_loss" in chart_metrics(snap)
    for run_id, value in (("control", 1.4), ("variant-a", 1.2)):
        series = run_series(snap.run(run_id), "eval_loss", width=40)
        assert series is not None and value in series.ys, (run_id, series)
