"""Train a small classifier with PyTorch Lightning: the template's training script.

Replace the corpus (``load_corpus`` in corpus.py) and the model (``make_model`` in
model.py) with yours and keep the rest: it is what lets the cockpit follow, stop, verify
and resume the run.

- ``callbacks=[CockpitCallback()]`` is the one line the cockpit needs: every metric the
  module logs (``train_loss`` each step, ``val_loss`` each epoch: the cockpit reads them
  as ``loss`` and ``eval_loss`` too), progress and ETA (Lightning's own logs have no max
  steps), each checkpoint with its measured cost, a non-finite loss at once, and a save
  when the cockpit's landing asks.
- ``ModelCheckpoint`` writes a ``.ckpt`` at the end of every epoch (model, optimizer,
  loop state and the step) into ``--checkpoint-dir``; ``--resume PATH`` restarts from one
  (``ckpt_path``). Why at epoch ends: a Lightning checkpoint holds no RNG state and no
  position inside the epoch's shuffled order, so a restart from the middle of an epoch
  is inexact (the cockpit's resume check says so). At an epoch end nothing of the epoch
  is left, and the next epoch's order comes from (seed, epoch) alone (``EpochShuffle``),
  so the restart is exact: the resume check compares the loss step by step (tolerance 0).
  ``--stop-after N`` trains N steps and exits, without predictions.
- ``report.truncated`` reports rows that lost part of their input (the ``no-truncation``
  stop rule).
- At the end it writes ``out/RUN/predictions.csv`` (``id,label,pred``) for the test split.

Works with ``pip install lightning`` (``lightning.pytorch``) or
``pip install pytorch-lightning``. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from corpus import load_corpus, truncated_rows
from model import make_model

try:
    import lightning.pytorch as pl
except ImportError:  # the older package name: pip install pytorch-lightning
    import pytorch_lightning as pl  # type: ignore[no-redef]

from cockpit import report
from cockpit.integrations.lightning import CockpitCallback

# One worker is right for tensors already in memory: Lightning's advice does not apply.
warnings.filterwarnings("ignore", ".*does not have many workers.*")


class Classifier(pl.LightningModule):
    """The model (``self.model``, what ``make_model`` builds) and how it learns. The
    export's reload.py rebuilds ``make_model`` and loads the ``.ckpt``'s ``model.``
    weights into it: no Lightning needed to use the result."""

    def __init__(self, hidden: int = 32, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = make_model(hidden)
        self.lr = lr

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", torch.nn.functional.cross_entropy(logits, y))
        self.log("val_accuracy", (logits.argmax(dim=1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


class EpochShuffle(torch.utils.data.Sampler[int]):
    """Each epoch's order from (seed, epoch) alone: Lightning calls ``set_epoch`` before
    each epoch, so a restart at an epoch boundary replays the original order."""

    def __init__(self, size: int, seed: int) -> None:
        self.size, self.seed, self.epoch = size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        gen = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        return iter(torch.randperm(self.size, generator=gen).tolist())

    def __len__(self) -> int:
        return self.size


class StopAfter(pl.Callback):
    """``--stop-after N``: N steps from where training starts (a resume), then stop."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.end: int | None = None

    def on_train_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        self.end = trainer.global_step + self.steps

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if self.end is not None and trainer.global_step >= self.end:
            trainer.should_stop = True


def write_predictions(model: torch.nn.Module, split: tuple, out: Path) -> float:
    """The test split's predictions, one row per id: what acceptance and export check."""
    x, y, ids = split
    model.eval()
    with torch.no_grad():
        pred = model(x).argmax(dim=1)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "predictions.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "label", "pred"])
        for row_id, label, guess in zip(ids, y.tolist(), pred.tolist(), strict=True):
            writer.writerow([row_id, label, guess])
    return float((pred == y).float().mean().item())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", required=True, help="the run id (predictions go to out/RUN)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--checkpoint-dir", required=True, help="a .ckpt at each epoch's end")
    p.add_argument("--resume", default=None, help="a .ckpt written by this script")
    p.add_argument("--stop-after", type=int, default=None, help="train N steps, then exit")
    args = p.parse_args()

    # A small model: more threads only contend on a small CPU box.
    torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "1")))
    pl.seed_everything(args.seed, verbose=False)
    data = load_corpus()
    x_train, y_train, _ = data["train"]
    x_val, y_val, _ = data["val"]
    report.truncated(truncated_rows(x_train) + truncated_rows(x_val))
    train = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x_train, y_train), batch_size=args.batch,
        sampler=EpochShuffle(len(x_train), args.seed))
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_val, y_val),
                                      batch_size=len(x_val))
    callbacks: list[pl.Callback] = [
        CockpitCallback(),  # the one line: metrics, progress, saves, NaN, landing
        pl.callbacks.ModelCheckpoint(dirpath=args.checkpoint_dir, filename="{epoch}-{step}",
                                     every_n_epochs=1, save_top_k=-1,
                                     save_on_train_epoch_end=True)]
    if args.stop_after is not None:
        callbacks.append(StopAfter(args.stop_after))
    trainer = pl.Trainer(
        max_epochs=args.epochs, callbacks=callbacks, log_every_n_steps=1,
        deterministic=True,  # deterministic kernels: on a GPU too a restart is exact
        logger=False,  # the callback reports every metric; no lightning_logs/ to inherit
        enable_progress_bar=False, enable_model_summary=False)  # no bars in the run's log
    module = Classifier(args.hidden, args.lr)
    trainer.fit(module, train, val, ckpt_path=args.resume)
    if args.stop_after is None:
        out = Path("out") / args.run
        test_accuracy = write_predictions(module.model, data["test"], out)
        report.log(None, **{"test/accuracy": test_accuracy})
        print(f"predictions: {out / 'predictions.csv'} (test accuracy {test_accuracy:.3f})",
              file=sys.stderr)
    print(f"{args.run}: step {trainer.global_step}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
