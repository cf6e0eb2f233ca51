"""Benchmark: the in-process integrations' cost per logged step (issue 42).

The same training run twice, alternately, in one process: the Hugging Face Trainer
(a tiny GPT-2 from a config, CPU, ``logging_steps=1`` so every step is a logged step)
and a PyTorch Lightning run (a tiny LightningModule, ``log_every_n_steps=1``), each
without and with ``CockpitCallback`` writing to a real ``cockpit.report`` file. The
model is tiny on purpose: the callback's cost is a fixed amount per step, so this is its
worst case relative to a step. Reports the median seconds per step of each, the
difference per logged step and the ratio, and — steadier on a shared machine, where
the two medians drift more than their difference — the time spent inside the callback's
own hooks (the forward hook included) per logged step, measured in the same runs.

Usage: ``python bench/integration_bench.py [--steps 200] [--rounds 3] [--only hf|lightning]``
(needs the test extra: transformers, pytorch-lightning).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cockpit import report


def hf_run(folder: Path, steps: int, with_callback: bool) -> float:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from cockpit.integrations.hf import CockpitCallback

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=32)
    ids = [torch.randint(0, 64, (16,)) for _ in range(64)]
    data = [{"input_ids": i, "labels": i.clone()} for i in ids]
    args = TrainingArguments(output_dir=str(folder), max_steps=steps, report_to=[],
                             use_cpu=True, disable_tqdm=True, logging_steps=1,
                             save_strategy="no", per_device_train_batch_size=4)
    trainer = Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=data)
    if with_callback:
        trainer.add_callback(CockpitCallback())
    began = time.perf_counter()
    trainer.train()
    return (time.perf_counter() - began) / steps


def lightning_run(folder: Path, steps: int, with_callback: bool) -> float:
    import pytorch_lightning as pl
    import torch

    from cockpit.integrations.lightning import CockpitCallback

    class Tiny(pl.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(16, 1)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    x = torch.randn(256, 16)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x[:, :1]),
                                         batch_size=4)
    trainer = pl.Trainer(max_steps=steps, logger=False, enable_checkpointing=False,
                         accelerator="cpu", enable_progress_bar=False,
                         enable_model_summary=False, log_every_n_steps=1,
                         default_root_dir=str(folder),
                         callbacks=[CockpitCallback()] if with_callback else [])
    began = time.perf_counter()
    trainer.fit(Tiny(), loader)
    return (time.perf_counter() - began) / steps


HOOKED = {"hf": ("TrainerHooks", "LossWatch"), "lightning": ("LightningHooks",)}
spent = [0.0]  # seconds inside the callback's hooks


def time_hooks(module: Any, classes: tuple[str, ...]) -> None:
    """Wrap every hook method of the integration's classes with a timer (``spent``)."""
    for cls_name in classes:
        cls = getattr(module, cls_name)
        for name, fn in list(vars(cls).items()):
            if not callable(fn) or not (name.startswith("on_") or name == "_on_forward"):
                continue

            def timed(*args: Any, _fn: Any = fn, **kwargs: Any) -> Any:
                began = time.perf_counter()
                try:
                    return _fn(*args, **kwargs)
                finally:
                    spent[0] += time.perf_counter() - began

            setattr(cls, name, timed)


def compare(name: str, run: Callable[[Path, int, bool], float], steps: int,
            rounds: int) -> None:
    bare: list[float] = []
    with_it: list[float] = []
    inside: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        report.open_report(Path(tmp) / "report.jsonl")
        run(Path(tmp) / "warm", max(steps // 10, 5), True)  # imports, first-call caches
        for i in range(rounds):
            bare.append(run(Path(tmp) / f"bare{i}", steps, False))
            spent[0] = 0.0
            with_it.append(run(Path(tmp) / f"with{i}", steps, True))
            inside.append(spent[0] / steps)
        lines = sum(1 for _ in open(Path(tmp) / "report.jsonl"))
        report.open_report(None)
    b, w, h = statistics.median(bare), statistics.median(with_it), statistics.median(inside)
    print(f"{name}: {steps} logged steps x {rounds} rounds; without the callback "
          f"{b * 1e3:.2f} ms/step, with it {w * 1e3:.2f} ms/step: "
          f"{(w - b) * 1e6:+.0f} µs per logged step ({w / b:.2f}×); inside the callback "
          f"{h * 1e6:.0f} µs per logged step ({h / b:.1%} of a bare step); "
          f"{lines} report lines written")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("hf", "lightning"))
    args = parser.parse_args()
    os.environ.pop(report.SAVE_ENV_VAR, None)
    from cockpit.integrations import hf, lightning

    time_hooks(hf, HOOKED["hf"])
    time_hooks(lightning, HOOKED["lightning"])
    if args.only in (None, "hf"):
        compare("Hugging Face Trainer", hf_run, args.steps, args.rounds)
    if args.only in (None, "lightning"):
        compare("PyTorch Lightning", lightning_run, args.steps, args.rounds)


if __name__ == "__main__":
    main()
