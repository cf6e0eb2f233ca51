"""Train an MLP on the 8×8 digits, the way a careful user would (D16).

- logs loss every step and val/accuracy every --eval-every steps with cockpit.report;
- saves the full state with cockpit.resume every --checkpoint-every steps (model,
  optimizer, step, RNG states, data position) and resumes from --resume;
- writes predictions for the test split at the end.
The loss is squared error on one-hot targets. Minibatches are drawn from torch's RNG,
so an exact resume needs the RNG state: --forget-rng saves like a careless script
(no RNG), for the resume check to catch.
Uses CUDA when present, so on a rented box the GPU panel moves too.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
from pathlib import Path

import torch
from common import load_split, make_model

from cockpit import report
from cockpit.resume import load_state, save_state


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--run", required=True)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--checkpoint-dir", default=None)
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--resume", default=None)
    p.add_argument("--stop-after", type=int, default=None, help="steps to run, then exit")
    p.add_argument("--forget-rng", action="store_true")
    p.add_argument("--out", default=None, help="folder for predictions (default out/RUN)")
    args = p.parse_args()

    # Tiny model: more threads only contend on a small CPU box (the GPU does the work there).
    torch.set_num_threads(int(os.environ.get("DIGITS_THREADS", "1")))
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = load_split()
    x_train, y_train, _ = (t.to(device) if hasattr(t, "to") else t for t in data["train"])
    x_val, y_val, _ = (t.to(device) if hasattr(t, "to") else t for t in data["val"])
    model = make_model(args.hidden).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    step = 0
    if args.resume:
        if args.forget_rng:
            state = torch.load(args.resume, map_location=device, weights_only=True)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            step = int(state["step"])
        else:
            step = load_state(args.resume, model=model, optimizer=optimizer,
                              map_location=device).step
        print(f"resumed from {args.resume} at step {step}")
    end = args.steps if args.stop_after is None else min(args.steps, step + args.stop_after)
    ckpt_dir = Path(args.checkpoint_dir) if args.checkpoint_dir else None
    def loss_fn(logits, target):
        # Squared error against one-hot targets (a Brier-style loss): its curvature is what
        # makes a too-high learning rate diverge geometrically, to inf and then NaN.
        return ((logits - torch.nn.functional.one_hot(target, 10).float()) ** 2).sum(1).mean()

    while step < end:
        step += 1
        model.train()
        idx = torch.randint(0, len(x_train), (args.batch,), device="cpu").to(device)
        loss = loss_fn(model(x_train[idx]), y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        value = float(loss.item())
        metrics = {"loss": value}
        if step % args.eval_every == 0 or step == end:
            metrics["val/accuracy"] = accuracy(model, x_val, y_val)
        report.log(step, **metrics)
        report.progress(step, args.steps)
        if not math.isfinite(value):
            # Keep going like a real loop would: the cockpit's finite-loss rule stops us.
            pass
        # The cockpit's landing asks for a checkpoint now (before the window ends).
        asked = report.save_requested()
        if asked:
            print(f"saving on request at step {step}", file=sys.stderr)
        if ckpt_dir is not None and (step % args.checkpoint_every == 0 or asked):
            path = ckpt_dir / f"step-{step:06d}.pt"
            if args.forget_rng:
                ckpt_dir.mkdir(parents=True, exist_ok=True)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "step": step}, path)
                report.checkpoint_written(path, step)
            else:
                save_state(path, model=model, optimizer=optimizer, step=step,
                           data_position={"sampler": "randint", "step": step})
    if args.stop_after is None:
        write_predictions(model, data["test"], Path(args.out or Path("out") / args.run), device)
    print(f"{args.run}: step {step} loss {value:.4f}")
    return 0


def accuracy(model, x, y) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(dim=1) == y).float().mean().item())


def write_predictions(model, split, out: Path, device: str) -> None:
    x, y, ids = split
    model.eval()
    with torch.no_grad():
        logits = model(x.to(device)).cpu()
    pred = logits.argmax(dim=1)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "predictions.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "label", "pred"])
        for i, label, guess in zip(ids, y.tolist(), pred.tolist(), strict=True):
            writer.writerow([i, label, guess])
    acc = float((pred == y).float().mean().item()) if torch.isfinite(logits).all() else 0.0
    report.log(None, **{"test/accuracy": acc})
    print(f"predictions: {out / 'predictions.csv'} (test accuracy {acc:.3f})", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
