"""The Hugging Face Trainer, first class (issue 42): the real ``transformers`` Trainer
(a tiny GPT-2 from a config, CPU, no hub) with ``cockpit.integrations.hf``'s callback.
A run made to diverge (NaN weights from step K) hides its NaN from its own logs — the
default ``logging_nan_inf_filter`` — and the callback reports it anyway; a save on
request happens at the next step and every save is reported with its measured cost;
without the callback, the Trainer's ``trainer_state.json`` (loss 0.0, grad_norm nan)
still fires a ``non_finite`` rule on ``loss``; and an engine watching a real training
process stops it."""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cockpit.alerts.targets import Target
from cockpit.campaign import load_campaign
from cockpit.campaign.model import StopRule
from cockpit.engine import Engine
from cockpit.runs.metrics.stream import MetricStream
from cockpit.runs.rules import check_points
from tests.helpers.alert_server import AlertServer
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import wait_for
from tests.helpers.report_file import report_lines

# The training script: tiny GPT-2, default TrainingArguments but max_steps, report_to=[]
# and output_dir; the weights become NaN after step NAN_AT (a diverged run).
TRAIN = textwrap.dedent("""
    import sys
    import torch
    from transformers import (GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback,
                              TrainingArguments)

    def diverge_at(step):
        class Diverge(TrainerCallback):
            def on_step_end(self, args, state, control, model=None, **kwargs):
                if state.global_step == step:
                    with torch.no_grad():
                        model.transformer.wte.weight.fill_(float("nan"))
        return Diverge()

    def trainer(out, max_steps, nan_at, **extra):
        torch.manual_seed(0)
        config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=32)
        ids = [torch.randint(0, 64, (16,)) for _ in range(32)]
        data = [{"input_ids": i, "labels": i.clone()} for i in ids]
        args = TrainingArguments(output_dir=out, max_steps=max_steps, report_to=[],
                                 use_cpu=True, disable_tqdm=True, **extra)
        return Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=data,
                       callbacks=[diverge_at(nan_at)])

    if __name__ == "__main__":
        from cockpit.integrations.hf import CockpitCallback
        run = trainer(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
        run.add_callback(CockpitCallback())  # the one line
        run.train()
""")
NON_FINITE_LOSS = StopRule(id="finite-loss", kind="non_finite", metric="loss")


@pytest.fixture(scope="module")
def hf(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The training script as a module (transformers imported once for the module)."""
    folder = tmp_path_factory.mktemp("hf")
    (folder / "train_hf.py").write_text(TRAIN)
    sys.path.insert(0, str(folder))
    try:
        import train_hf
    finally:
        sys.path.remove(str(folder))
    return train_hf


def _points(*paths: Path) -> list[Any]:
    stream = MetricStream(list(paths))
    points: list[Any] = []
    while batch := stream.poll():
        points.extend(batch)
    return points


def test_a_diverged_trainer_run_is_reported_unfiltered(hf: Any, reported: Path,
                                                       tmp_path: Path) -> None:
    from cockpit.integrations.hf import CockpitCallback

    trainer = hf.trainer(str(tmp_path / "out"), 8, 4)  # default logging: every 500 steps
    trainer.add_callback(CockpitCallback())
    trainer.train()
    lines = report_lines(reported)
    metrics = [line for line in lines if "event" not in line]
    # the Trainer hid it: its end-of-training mean loss is finite
    (summary,) = [m for m in metrics if "train_runtime" in m]
    assert math.isfinite(summary["mean_train_loss"]) and "train_loss" not in summary
    # the callback did not: the unfiltered loss, NaN, with how many steps had one (in
    # one line at the end, or more when a second passed: the watch reports once a second)
    nans = [m for m in metrics if "nonfinite/loss" in m]
    assert nans and all(math.isnan(m["loss"]) for m in nans), metrics
    assert sum(m["nonfinite/loss"] for m in nans) == 4 and nans[0]["step"] >= 5
    # progress: the step and max steps
    assert {(m["step"], m["max_steps"]) for m in metrics if "loss" not in m
            and "train_runtime" not in m} >= {(0, 8), (8, 8)}
    # the save on request at step 1's end, and the final save, each with its cost
    saves = {line["step"]: line for line in lines if line.get("event") == "checkpoint_written"}
    assert sorted(saves) == [1, 8], lines
    for step, save in saves.items():
        assert save["path"] == str(tmp_path / "out" / f"checkpoint-{step}")
        assert Path(save["path"], "trainer_state.json").is_file()
        assert 0 < save["seconds"] < 60
    # and a non_finite rule on the loss fires on the file
    fired = check_points(NON_FINITE_LOSS, _points(reported))
    assert fired is not None and fired.step == nans[0]["step"], fired
    assert fired.reason == "loss is nan (non-finite)"


def test_logged_every_step_the_filtered_value_is_kept_beside(hf: Any, reported: Path,
                                                             tmp_path: Path) -> None:
    from cockpit.integrations.hf import CockpitCallback

    out = tmp_path / "out"
    trainer = hf.trainer(str(out), 6, 3, logging_steps=1, save_steps=6)
    trainer.add_callback(CockpitCallback())
    trainer.train()
    # the Trainer's own trainer_state.json: loss 0.0 beside grad_norm nan from step 4
    history = json.loads((out / "checkpoint-6" / "trainer_state.json").read_text())
    at4 = next(e for e in history["log_history"] if e.get("step") == 4)
    assert at4["loss"] == 0.0 and math.isnan(at4["grad_norm"])
    # the callback's line for that step: the unfiltered NaN, the Trainer's value beside
    logged = {m["step"]: m for m in report_lines(reported) if "loss_filtered" in m}
    assert min(logged) == 4 and math.isnan(logged[4]["loss"])
    assert logged[4]["loss_filtered"] == 0.0 and math.isnan(logged[4]["grad_norm"])
    assert logged[4]["max_steps"] == 6 and "learning_rate" in logged[4]


def test_without_the_callback_the_trainers_zero_loss_still_fires(hf: Any,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "out"
    trainer = hf.trainer(str(out), 6, 3, logging_steps=1, save_steps=1)
    trainer.train()
    # the run's output folder, read as the cockpit reads it (newest checkpoint's state)
    fired = check_points(NON_FINITE_LOSS, _points(out))
    assert fired is not None and fired.step == 4, fired
    assert "loss is 0.0 while grad_norm is non-finite at step 4" in fired.reason
    assert fired.action == "stop"


def test_an_engine_stops_a_diverging_trainer_run(hf: Any, tmp_path: Path) -> None:
    """Default TrainingArguments (its NaN filter on), the template's finite-loss rule: the
    run is stopped and the phone (a local webhook) hears why."""
    (tmp_path / "train_hf.py").write_text(TRAIN)
    path = write_campaign(tmp_path, [
        {"id": "train", "run": "r1", "duration": "10m", "resource": "cpu",
         "command": [sys.executable, "train_hf.py", "out", "100000", "3"]},
    ], rules=[{"id": "finite-loss", "kind": "non_finite", "metric": "loss"}])
    with AlertServer() as phone:
        engine = Engine(load_campaign(path),
                        alerts=[Target("phone", f"json://127.0.0.1:{phone.port}/hook")])
        engine.start("train")

        def fired() -> Any:
            snap = engine.tick()
            (rule,) = [r for r in snap.rules if r.rule == "finite-loss"]
            return rule if rule.state == "fired" and snap.run("r1").state != "running" \
                else None

        try:
            rule = wait_for(fired, timeout=180, what="the non_finite rule to stop the run")
            assert rule.reason == "loss is nan (non-finite)", rule
            snap = engine.tick()
            assert snap.run("r1").state == "stopped" and (snap.run("r1").step or 0) < 100000

            def heard() -> Any:
                engine.tick()
                return [r for r in phone.requests if b"finite-loss" in r.body]

            (alert,) = wait_for(heard, timeout=60, what="the rule's alert at the webhook")
            assert b"loss is nan" in alert.body, alert.body
        finally:
            engine.close()
