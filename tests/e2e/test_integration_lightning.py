"""PyTorch Lightning, first class (issue 42): a real Lightning run (a tiny
LightningModule, CPU) with ``cockpit.integrations.lightning``'s callback reports its
``train_loss`` under ``loss`` too and ``val_loss`` as ``eval_loss``, the step and max
steps (Lightning's own CSV has no max steps), saves when the cockpit asks and reports
each save with its measured cost; a rule on ``eval_loss`` sees the run's ``val_loss``."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

from cockpit.campaign.model import StopRule
from cockpit.runs.metrics.stream import MetricStream
from cockpit.runs.rules import check_points
from tests.helpers.report_file import report_lines


@pytest.fixture(scope="module")
def pl() -> Any:
    import pytorch_lightning

    return pytorch_lightning


def _module(pl: Any, nan_at: int | None = None) -> Any:
    import torch

    class Tiny(pl.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            if nan_at is not None and self.global_step >= nan_at:
                loss = loss * float("nan")
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Tiny()


def _loader() -> Any:
    import torch

    torch.manual_seed(0)
    x = torch.randn(32, 4)
    data = torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True))
    return torch.utils.data.DataLoader(data, batch_size=4)


def _fit(pl: Any, tmp_path: Path, module: Any, **extra: Any) -> Any:
    from cockpit.integrations.lightning import CockpitCallback

    trainer = pl.Trainer(max_steps=6, logger=False, enable_checkpointing=False,
                         accelerator="cpu", default_root_dir=str(tmp_path / "root"),
                         enable_progress_bar=False, enable_model_summary=False,
                         log_every_n_steps=2, val_check_interval=3, limit_val_batches=1,
                         num_sanity_val_steps=0, callbacks=[CockpitCallback()], **extra)
    trainer.fit(module, _loader(), _loader())
    return trainer


def test_a_lightning_run_reports_one_name_progress_and_a_save_on_request(
        pl: Any, reported: Path, tmp_path: Path) -> None:
    _fit(pl, tmp_path, _module(pl))
    lines = report_lines(reported)
    metrics = [line for line in lines if "event" not in line]
    losses = [m for m in metrics if "train_loss" in m]
    # every 2nd step (log_every_n_steps), and at step 3's validation what changed since
    assert [m["step"] for m in losses] == [2, 3, 4, 6], metrics
    assert all(m["loss"] == m["train_loss"] and m["max_steps"] == 6 for m in losses)
    evals = [m for m in metrics if "val_loss" in m]
    assert [m["step"] for m in evals] == [3, 6]
    assert all(m["eval_loss"] == m["val_loss"] for m in evals)
    # progress: the first report says max steps before any metric (the CSV never does)
    assert (metrics[0]["step"], metrics[0]["max_steps"]) == (0, 6)
    # the save on request at the first batch's end, into default_root_dir/checkpoints,
    # reported started and written with its measured time
    ckpt = tmp_path / "root" / "checkpoints" / "step=1-requested.ckpt"
    assert ckpt.is_file()
    saves = [line for line in lines if line.get("event") == "checkpoint_written"]
    assert [(s["path"], s["step"]) for s in saves] == [(str(ckpt), 1)]
    assert 0 < saves[0]["seconds"] < 60
    assert [line["event"] for line in lines if "event" in line] == [
        "checkpoint_started", "checkpoint_written"]
    # a rule on eval_loss sees the run's val_loss; one on loss its train_loss
    stream = MetricStream([reported])
    points = stream.poll()
    fired = check_points(StopRule(id="eval-cap", kind="threshold", metric="eval_loss",
                                  max=-1.0), points)
    assert fired is not None and fired.step == 3 and fired.value == evals[0]["val_loss"]
    assert stream.latest["loss"] == losses[-1]["train_loss"]


def test_a_non_finite_loss_is_reported_and_fires(pl: Any, reported: Path,
                                                 tmp_path: Path) -> None:
    _fit(pl, tmp_path, _module(pl, nan_at=3))
    metrics = [m for m in report_lines(reported) if "event" not in m and "train_loss" in m]
    assert math.isnan(metrics[-1]["loss"]) and metrics[-1]["step"] == 6
    points = MetricStream([reported]).poll()
    fired = check_points(StopRule(id="finite-loss", kind="non_finite", metric="loss"), points)
    assert fired is not None and fired.step == 4 and fired.reason == "loss is nan (non-finite)"


def test_the_callback_is_of_the_lightning_the_script_uses(pl: Any) -> None:
    from cockpit.integrations.lightning import CockpitCallback, callback_class, chosen_package

    assert "pytorch_lightning" in sys.modules
    if "lightning" not in sys.modules:
        assert chosen_package() == "pytorch_lightning"
    callback = CockpitCallback(package="pytorch_lightning")
    assert isinstance(callback, pl.Callback)
    assert type(callback) is callback_class("pytorch_lightning")
    with pytest.raises(ValueError, match="package must be one of lightning, pytorch_lightning"):
        CockpitCallback(package="keras")
