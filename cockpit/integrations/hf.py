"""The Hugging Face Trainer, first class: one line in a training script::

    from cockpit.integrations.hf import CockpitCallback
    trainer.add_callback(CockpitCallback())

The callback (a ``transformers.TrainerCallback``, built when first constructed, so that
importing this module never imports ``transformers``) reports through
:mod:`cockpit.report`:

- every logged metric under the Trainer's name and its canonical one (the end-of-training
  ``train_loss``, a mean over the run, as ``mean_train_loss``), with ``max_steps``;
- the step and max steps at most every second (progress, ETA, the stalled rule);
- each save (``checkpoint-N`` under ``output_dir``) with its path and measured time;
- a save at this step's end when the cockpit asks (:func:`cockpit.report.save_requested`,
  the landing): ``control.should_save = True``;
- the **unfiltered** training loss: with ``logging_nan_inf_filter`` (the default) the
  Trainer logs a NaN loss as 0.0 or as the mean of the finite ones. A forward hook on
  the model sees each training forward's ``loss`` (a model output's ``loss``, as the
  Trainer's default ``compute_loss`` uses it); a non-finite one is reported at once
  (within a second: ``loss`` and ``nonfinite/loss``, the count) and replaces the
  filtered value in the next log (the Trainer's own as ``loss_filtered``). What it cannot
  see — a loss computed outside the model's forward (a custom ``compute_loss`` on
  outputs without ``loss``) — the cockpit still catches from the log: a ``loss`` of 0.0
  beside a non-finite ``grad_norm`` (:mod:`cockpit.runs.metrics.stream`).

Only the main process writes (``state.is_world_process_zero``); every process takes a
save request at the same step (:func:`cockpit.integrations.reporting.save_wanted`).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

from cockpit.integrations.reporting import PROGRESS_EVERY_S, Reporter, save_wanted

INSTALL = "python3 -m pip install transformers"
RUN_MEAN = "mean_train_loss"  # the Trainer's end-of-training train_loss, renamed

_built: type | None = None


class CockpitCallback:
    """``trainer.add_callback(CockpitCallback())``: see the module text. Options:
    ``progress_every_s`` (how often progress and the loss watch report, default 1 s),
    ``watch_loss`` (the forward hook that sees the unfiltered loss, default on)."""

    def __new__(cls, *, progress_every_s: float = PROGRESS_EVERY_S,
                watch_loss: bool = True) -> Any:
        return callback_class()(progress_every_s=progress_every_s, watch_loss=watch_loss)


def callback_class() -> type:
    """The ``TrainerCallback`` subclass (``transformers`` imported here, once)."""
    global _built
    if _built is None:
        try:
            from transformers import TrainerCallback
        except ImportError as exc:
            raise ImportError("cockpit.integrations.hf.CockpitCallback needs the "
                              f"transformers package, not importable here: {INSTALL}"
                              ) from exc
        _built = type("CockpitCallback", (TrainerHooks, TrainerCallback),
                      {"__module__": __name__, "__doc__": CockpitCallback.__doc__})
    return _built


class LossWatch:
    """A forward hook on the model: counts training forwards whose ``loss`` is not
    finite and keeps the last such value, on the loss's device (no sync per step; the
    counts are read when the callback reports)."""

    def __init__(self) -> None:
        self.count: Any = None  # a tensor: non-finite losses seen so far
        self.last: Any = None  # the last loss seen (a tensor; what a report says)
        self.seen = 0  # forwards whose loss was seen
        self.broken: str | None = None  # why the watch stopped (never crash training)
        self._handle: Any = None

    def attach(self, model: Any) -> None:
        if self._handle is None and hasattr(model, "register_forward_hook"):
            self._handle = model.register_forward_hook(self._on_forward)

    def detach(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _on_forward(self, module: Any, args: Any, output: Any) -> None:
        if not getattr(module, "training", False) or self.broken is not None:
            return  # an evaluation forward's loss is eval_loss, logged as is
        loss = loss_of(output)
        if loss is None:
            return
        try:
            value = loss.detach()
            if value.dim():
                value = value.mean()
            bad = value.isfinite().logical_not_()  # three small kernels, no sync
            if self.count is None:
                self.count = bad.long().zero_()  # an int64 counter on the loss's device
            self.count.add_(bad.to(self.count.device))
            self.last = value
            self.seen += 1
        except Exception as exc:  # noqa: BLE001 - a watch must never stop the training
            self.broken = f"{type(exc).__name__}: {exc}"

    def read(self) -> tuple[int, float]:
        """(non-finite losses so far, the value to report: the last loss when it is
        not finite, else NaN): one device sync, two when there is news."""
        if self.count is None:
            return 0, math.nan
        count = int(self.count.item())
        last = float(self.last.item()) if count else math.nan
        return count, last if not math.isfinite(last) else math.nan


def loss_of(output: Any) -> Any:
    """A model output's ``loss`` tensor (a ``ModelOutput`` or a dict), else None."""
    loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    return loss if hasattr(loss, "detach") else None


class TrainerHooks:
    """The callback's behaviour, framework-free (the built class adds TrainerCallback)."""

    def __init__(self, *, progress_every_s: float = PROGRESS_EVERY_S,
                 watch_loss: bool = True) -> None:
        self.reporter = Reporter(progress_every_s=progress_every_s)
        self.watch = LossWatch() if watch_loss else None
        self._checked = 0  # non-finite losses already reported at once
        self._logged = 0  # ... already put into a log line
        self._mark = time.monotonic()  # the last hook before a save: its cost starts here

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       **kwargs: Any) -> Any:
        self.reporter.writes = bool(getattr(state, "is_world_process_zero", True))
        self.reporter.progress(state.global_step, state.max_steps)
        if self.watch is not None and model is not None:
            self.watch.attach(model)
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self._say_hidden(state.global_step)
        if self.watch is not None:
            self.watch.detach()
        self.reporter.progress(state.global_step, state.max_steps)
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        step = state.global_step
        if save_wanted(step):
            control.should_save = True  # saved at this step's end, then on_save reports it
        if self.reporter.progress_due():
            self.reporter.progress(step, state.max_steps)
            self._say_hidden(step)
        self._mark = time.monotonic()
        return control

    def _say_hidden(self, step: int) -> None:
        """Report the non-finite training losses seen since the last time, at once."""
        count, value = self.watch.read() if self.watch is not None else (0, 0.0)
        if count > self._checked:
            self.reporter.non_finite(step, "loss", value, count - self._checked)
            self._checked = count

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
               **kwargs: Any) -> Any:
        values = dict(logs or {})
        if "train_runtime" in values and "train_loss" in values:
            values[RUN_MEAN] = values.pop("train_loss")  # a mean over the run, not `loss`
        if "loss" in values and self.watch is not None:
            count, value = self.watch.read()
            if count > self._logged:  # the Trainer's filter hid these: say them
                values["loss_filtered"] = values["loss"]
                values["loss"] = value
                values["nonfinite/loss"] = count - self._logged
                self._logged = self._checked = count
        else:
            self._say_hidden(state.global_step)
        self.reporter.metrics(state.global_step, values)
        self._mark = time.monotonic()
        return control

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self._mark = time.monotonic()
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        path = os.path.join(str(args.output_dir), f"checkpoint-{state.global_step}")
        self.reporter.saved(path, state.global_step, time.monotonic() - self._mark)
        self._mark = time.monotonic()
        return control


__all__ = ["CockpitCallback", "callback_class", "loss_of"]
