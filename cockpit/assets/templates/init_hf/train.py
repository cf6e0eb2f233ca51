"""Train a tiny GPT-2 with the Hugging Face Trainer: the template's training script.

Replace the corpus (``load_corpus`` in corpus.py) and the model (``make_model`` in
model.py) with yours and keep the rest: it is what lets the cockpit follow, stop, verify
and resume the run.

- ``trainer.add_callback(CockpitCallback())`` is the one line the cockpit needs: every
  logged metric (``loss`` each step here, ``eval_loss`` every ``--eval-every`` steps),
  progress and ETA, each ``checkpoint-N/`` save with its measured cost, the unfiltered
  loss (the Trainer logs a NaN loss as 0.0), and a save when the cockpit's landing asks.
- The Trainer's own checkpoints (``--output-dir``, every ``--save-every`` steps) hold the
  model, optimizer, scheduler, RNG states and the step: ``--resume checkpoint-N`` restarts
  exactly (``resume_from_checkpoint``; the resume check compares the loss step by step;
  ``--stop-after N`` trains N steps and exits, without predictions).
- ``report.truncated`` reports sequences the model's context would cut (the
  ``no-truncation`` stop rule).
- At the end it writes ``out/RUN/predictions.csv`` (per test sequence: ``id``, loss,
  next-token accuracy) and ``out/RUN/token_losses.csv`` (per test token), which the error
  analysis reads.

A tiny model from a config on a synthetic corpus: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path
from typing import Any

import torch
from corpus import load_corpus, truncated_rows
from model import CONTEXT, make_model
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.utils import logging as hf_logging

from cockpit import report
from cockpit.integrations.hf import CockpitCallback


def examples(rows: list[list[int]]) -> list[dict[str, torch.Tensor]]:
    """A causal LM's examples: the labels are the inputs (the model shifts them)."""
    return [{"input_ids": torch.tensor(row), "labels": torch.tensor(row)} for row in rows]


class StopAfter(TrainerCallback):
    """``--stop-after N``: N steps from where training starts (a resume), then stop.
    The schedule stays the one of ``--steps``, so the resumed steps are the run's own."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.end: int | None = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.end is None:
            self.end = state.global_step + self.steps
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.end is not None and state.global_step >= self.end:
            control.should_training_stop = True
        return control


def write_predictions(model: Any, rows: list[list[int]], ids: list[str], out: Path) -> float:
    """Per test sequence its loss and next-token accuracy (``predictions.csv``, one row
    per id: what acceptance and the export check), per token its loss
    (``token_losses.csv``: the error analysis). Returns the mean test loss."""
    model.eval()
    device = next(model.parameters()).device
    with torch.no_grad():
        tokens = torch.tensor(rows, device=device)
        logits = model(input_ids=tokens).logits[:, :-1]
        target = tokens[:, 1:]
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target,
                                                 reduction="none").cpu()
        correct = (logits.argmax(dim=-1) == target).cpu()
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "predictions.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "tokens", "loss", "accuracy"])
        for i, row_id in enumerate(ids):
            writer.writerow([row_id, len(rows[i]), f"{loss[i].mean().item():.5f}",
                             f"{correct[i].float().mean().item():.4f}"])
    with open(out / "token_losses.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "position", "token", "target", "loss", "correct"])
        for i, row_id in enumerate(ids):
            for pos in range(len(rows[i]) - 1):
                writer.writerow([row_id, pos + 1, rows[i][pos], rows[i][pos + 1],
                                 f"{loss[i, pos].item():.5f}", int(correct[i, pos])])
    return float(loss.mean().item())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", required=True, help="the run id (predictions go to out/RUN)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--n-embd", type=int, default=32)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--output-dir", required=True, help="the Trainer's checkpoint-N/ go here")
    p.add_argument("--save-every", type=int, default=100)
    p.add_argument("--resume", default=None, help="a checkpoint-N folder of this script")
    p.add_argument("--stop-after", type=int, default=None, help="train N steps, then exit")
    args = p.parse_args()

    # A small model: more threads only contend on a small CPU box.
    torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "1")))
    hf_logging.disable_progress_bar()  # no "Writing model shards" bars in the run's log
    data = load_corpus()
    report.truncated(truncated_rows(data["train"][0], CONTEXT)
                     + truncated_rows(data["val"][0], CONTEXT))
    training = TrainingArguments(
        output_dir=args.output_dir, max_steps=args.steps, learning_rate=args.lr,
        per_device_train_batch_size=args.batch, per_device_eval_batch_size=100,
        seed=args.seed, logging_steps=1, eval_strategy="steps", eval_steps=args.eval_every,
        save_strategy="steps", save_steps=args.save_every,
        # Deterministic kernels: on a GPU too a restart reproduces the loss exactly.
        full_determinism=True,
        report_to=[], disable_tqdm=True)  # no other logger, no progress bars in the log
    trainer = Trainer(model=make_model(args.n_embd, args.n_layer), args=training,
                      train_dataset=examples(data["train"][0]),
                      eval_dataset=examples(data["val"][0]))
    trainer.add_callback(CockpitCallback())  # the one line: metrics, saves, NaN, landing
    if args.stop_after is not None:
        trainer.add_callback(StopAfter(args.stop_after))
    trainer.train(resume_from_checkpoint=args.resume)
    if args.stop_after is None:
        out = Path("out") / args.run
        rows, ids = data["test"]
        test_loss = write_predictions(trainer.model, rows, ids, out)
        report.log(None, **{"test/loss": test_loss})
        print(f"predictions: {out / 'predictions.csv'} (test loss {test_loss:.4f})",
              file=sys.stderr)
    print(f"{args.run}: step {trainer.state.global_step}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
