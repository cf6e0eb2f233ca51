"""Train a small classifier on a synthetic corpus: the template's training script.

Replace the corpus (``load_corpus`` in corpus.py) and the model (``make_model`` in
model.py) with yours and keep the rest: it is what lets the cockpit follow, stop,
verify and resume the run.

- ``cockpit.report`` logs ``loss`` every step, ``val/accuracy`` every ``--eval-every``
  steps, progress (for the forecast) and ``data/truncated`` (for the ``no-truncation``
  stop rule, D14). Outside the cockpit these calls do nothing.
- ``cockpit.resume.save_state`` writes the full state every ``--checkpoint-every`` steps:
  model, optimizer, step, data position and the RNG states (D16). It also tells the
  cockpit the checkpoint is complete. ``--resume PATH`` restores all of it with
  ``load_state``, so a restart continues exactly (the resume check compares the loss
  step by step; ``--stop-after N`` runs N steps and exits, without predictions).
- At the end it writes ``predictions.csv`` (``id,label,pred``) for the test split.

The corpus is generated from fixed seeds: a random "teacher" network labels Gaussian
points, so the task is learnable but not trivial. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

import torch
from corpus import load_corpus, truncated_rows
from model import make_model

from cockpit import report
from cockpit.resume import load_state, save_state


def accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(dim=1) == y).float().mean().item())


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
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--checkpoint-dir", default=None)
    p.add_argument("--checkpoint-every", type=int, default=500)
    p.add_argument("--resume", default=None, help="a checkpoint written by this script")
    p.add_argument("--stop-after", type=int, default=None, help="run N steps, then exit")
    args = p.parse_args()

    # A small model: more threads only contend on a small CPU box.
    torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "1")))
    torch.manual_seed(args.seed)
    data = load_corpus()
    x_train, y_train, _ = data["train"]
    x_val, y_val, _ = data["val"]
    report.truncated(truncated_rows(x_train) + truncated_rows(x_val))

    model = make_model(args.hidden)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    step = 0
    if args.resume:
        # Model, optimizer, step and the RNG states: without them a restart is not exact.
        step = load_state(args.resume, model=model, optimizer=optimizer).step
        print(f"resumed from {args.resume} at step {step}")
    end = args.steps if args.stop_after is None else min(args.steps, step + args.stop_after)
    ckpt_dir = Path(args.checkpoint_dir) if args.checkpoint_dir else None
    loss_value = float("nan")
    while step < end:
        step += 1
        model.train()
        # Minibatches come from torch's RNG: an exact resume needs its state (D16).
        idx = torch.randint(0, len(x_train), (args.batch,))
        loss = torch.nn.functional.cross_entropy(model(x_train[idx]), y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_value = float(loss.item())
        metrics = {"loss": loss_value}
        if step % args.eval_every == 0 or step == end:
            metrics["val/accuracy"] = accuracy(model, x_val, y_val)
        report.log(step, **metrics)
        report.progress(step, args.steps)
        # The cockpit's landing asks for a checkpoint now (before the window ends).
        asked = report.save_requested()
        if asked:
            print(f"saving on request at step {step}", file=sys.stderr)
        if ckpt_dir is not None and (step % args.checkpoint_every == 0 or asked):
            save_state(ckpt_dir / f"step-{step:06d}.pt", model=model, optimizer=optimizer,
                       step=step, data_position={"sampler": "randint", "step": step})
    if args.stop_after is None:
        out = Path("out") / args.run
        test_accuracy = write_predictions(model, data["test"], out)
        report.log(None, **{"test/accuracy": test_accuracy})
        print(f"predictions: {out / 'predictions.csv'} (test accuracy {test_accuracy:.3f})",
              file=sys.stderr)
    print(f"{args.run}: step {step} loss {loss_value:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
