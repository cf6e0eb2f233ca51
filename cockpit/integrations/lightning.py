"""PyTorch Lightning, first class: one line in a training script::

    from cockpit.integrations.lightning import CockpitCallback
    trainer = Trainer(..., callbacks=[CockpitCallback()])

The callback is a Lightning ``Callback`` of the package the script uses — ``lightning``
(``lightning.pytorch``) or ``pytorch_lightning``: the one already imported, else
whichever is installed (``package=`` names one). It is built when first constructed, so
importing this module imports neither. It reports through :mod:`cockpit.report`:

- every metric the module logs (``trainer.callback_metrics``) at each logging step
  (``log_every_n_steps``), after each validation and at the end, under its own name and
  its canonical one (``train_loss`` also as ``loss``, ``val_loss`` as ``eval_loss``),
  with ``max_steps`` (``max_steps``, else the estimated stepping batches) — Lightning's
  CSV has no max steps, so without this no progress or ETA; the ``training_step``'s
  returned loss as ``loss`` when no logged metric is the loss;
- the step and max steps at most every second, and then a non-finite training loss at
  once (Lightning filters nothing, but a logger writes only every N steps);
- each ``trainer.save_checkpoint`` (``ModelCheckpoint``'s included) with its path and
  measured time;
- a save when the cockpit asks (:func:`cockpit.report.save_requested`, the landing):
  ``trainer.save_checkpoint`` at the next batch's end into ``dirpath`` (the option), else
  the ``ModelCheckpoint``'s folder, else ``default_root_dir/checkpoints``.

Only global rank 0 writes; every process takes a save request at the same step.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

from cockpit.common.metric_names import LOSS
from cockpit.integrations.reporting import PROGRESS_EVERY_S, Reporter, number, save_wanted

PACKAGES = ("lightning", "pytorch_lightning")
INSTALL = "python3 -m pip install lightning (or pytorch-lightning)"

_built: dict[str, type] = {}


class CockpitCallback:
    """``Trainer(callbacks=[CockpitCallback()])``: see the module text. Options:
    ``dirpath`` (where a save on request goes), ``progress_every_s`` (default 1 s),
    ``package`` ("lightning" or "pytorch_lightning": the Callback base to use)."""

    def __new__(cls, *, dirpath: str | os.PathLike[str] | None = None,
                progress_every_s: float = PROGRESS_EVERY_S,
                package: str | None = None) -> Any:
        return callback_class(package)(dirpath=dirpath, progress_every_s=progress_every_s)


def chosen_package() -> str:
    """The Lightning the script uses: the one imported already, else the installed one
    (``lightning`` first). A callback of the other package is refused by its Trainer."""
    imported = [name for name in PACKAGES if name in sys.modules]
    if len(imported) == 1:
        return imported[0]
    for name in PACKAGES:
        try:
            __import__(name)
        except ImportError:
            continue
        return name
    raise ImportError("cockpit.integrations.lightning.CockpitCallback needs PyTorch "
                      f"Lightning, not importable here: {INSTALL}")


def callback_class(package: str | None = None) -> type:
    """The ``Callback`` subclass for ``package`` (None: :func:`chosen_package`)."""
    name = package or chosen_package()
    if name not in PACKAGES:
        raise ValueError(f"package must be one of {', '.join(PACKAGES)}, not {name!r}")
    if name not in _built:
        try:
            module = __import__("lightning.pytorch" if name == "lightning" else name,
                                fromlist=["Callback"])
        except ImportError as exc:
            raise ImportError(f"cockpit.integrations.lightning: {name} is not importable "
                              f"here: {INSTALL}") from exc
        _built[name] = type("CockpitCallback", (LightningHooks, module.Callback),
                            {"__module__": __name__, "__doc__": CockpitCallback.__doc__})
    return _built[name]


def max_steps_of(trainer: Any) -> int | None:
    """The run's max steps: ``max_steps``, else the estimated stepping batches."""
    if getattr(trainer, "max_steps", -1) and trainer.max_steps > 0:
        return int(trainer.max_steps)
    try:
        estimate = number(trainer.estimated_stepping_batches)
    except Exception:  # noqa: BLE001 - Lightning raises when it cannot tell
        return None
    return int(estimate) if estimate is not None and estimate != float("inf") else None


def training_loss(outputs: Any) -> Any:
    """The ``training_step``'s loss: a tensor, or a dict's ``loss``."""
    return outputs.get("loss") if isinstance(outputs, Mapping) else outputs


class LightningHooks:
    """The callback's behaviour, framework-free (the built class adds Callback)."""

    def __init__(self, *, dirpath: str | os.PathLike[str] | None = None,
                 progress_every_s: float = PROGRESS_EVERY_S) -> None:
        self.dirpath = None if dirpath is None else os.fspath(dirpath)
        self.reporter = Reporter(progress_every_s=progress_every_s)
        self._last: dict[str, tuple[int, float]] = {}  # name -> (id, value) last reported
        self._wrapped: Any = None  # the trainer whose save_checkpoint is timed

    # ---------------------------------------------------------------- lifecycle
    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self.reporter.writes = bool(getattr(trainer, "is_global_zero", True))
        if self._wrapped is None:
            self._time_saves(trainer)

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self._wrapped is trainer and "save_checkpoint" in vars(trainer):
            del trainer.save_checkpoint  # the class's method again
        self._wrapped = None

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.reporter.progress(trainer.global_step, max_steps_of(trainer))

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._report_metrics(trainer, None)
        self.reporter.progress(trainer.global_step)

    # ---------------------------------------------------------------- steps
    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        step = trainer.global_step
        if save_wanted(step):
            self.save_now(trainer)
        if self.reporter.progress_due():
            self.reporter.progress(step)
            value = number(training_loss(outputs))  # one device sync a second at most
            if value is not None and not math.isfinite(value):
                self.reporter.non_finite(step, LOSS, value, 1)
        every = int(getattr(trainer, "log_every_n_steps", 0) or 0)
        if (every and step % every == 0) or step == self.reporter.max_steps:
            self._report_metrics(trainer, outputs)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if not getattr(trainer, "sanity_checking", False):
            self._report_metrics(trainer, None)

    def _report_metrics(self, trainer: Any, outputs: Any) -> None:
        """The logged metrics that changed since the last report (a tensor not logged
        again stays in callback_metrics: not said twice)."""
        changed: dict[str, float] = {}
        for name, value in dict(trainer.callback_metrics).items():
            got = number(value)
            if got is None or self._last.get(name) == (id(value), got):
                continue
            self._last[name] = (id(value), got)
            changed[name] = got
        names = self.reporter.names
        if outputs is not None and not any(names.canonical(n) == LOSS
                                           for n in trainer.callback_metrics):
            loss = number(training_loss(outputs))
            if loss is not None:
                changed[LOSS] = loss  # the module logs no loss: the step's own
        if changed:
            self.reporter.metrics(trainer.global_step, changed)

    # ---------------------------------------------------------------- saves
    def save_now(self, trainer: Any) -> str:
        """Save at once, on the cockpit's request (every process calls it: a sharded
        save is a collective); the timed save reports it. Returns the path."""
        folder = self.dirpath or getattr(getattr(trainer, "checkpoint_callback", None),
                                         "dirpath", None) \
            or os.path.join(str(trainer.default_root_dir), "checkpoints")
        path = os.path.join(str(folder), f"step={trainer.global_step}-requested.ckpt")
        trainer.save_checkpoint(path)
        return path

    def _time_saves(self, trainer: Any) -> None:
        """Wrap this trainer's ``save_checkpoint`` (what ModelCheckpoint calls): each
        save is reported started, then written with its measured time."""
        original = trainer.save_checkpoint
        reporter = self.reporter

        def timed(filepath: Any, *args: Any, **kwargs: Any) -> Any:
            step = trainer.global_step
            reporter.save_started(filepath, step)
            began = time.monotonic()
            result = original(filepath, *args, **kwargs)
            reporter.saved(filepath, step, time.monotonic() - began)
            return result

        trainer.save_checkpoint = timed
        self._wrapped = trainer


__all__ = ["CockpitCallback", "callback_class", "chosen_package"]
