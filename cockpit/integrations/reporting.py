"""What the in-process integrations share, framework-free: a :class:`Reporter` that
writes a framework's logged metrics (own and canonical names), throttled progress and
measured saves through :mod:`cockpit.report`, and decides a save on request the same way
in every process of a distributed run.

Standard library only at import (torch is imported inside functions, and only when the
training process already imported it): it runs inside the user's training process.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from cockpit import report
from cockpit.common.metric_names import MetricNames

PROGRESS_EVERY_S = 1.0  # progress (and a non-finite loss the framework hid) at most so often
# Processes of a distributed run agree on a save request every this many steps (one
# broadcast of a single number from rank 0): each process must save at the same step.
SAVE_AGREE_EVERY = 10


def number(value: Any) -> float | None:
    """A logged value as float (tensors and numpy scalars through ``.item()``), or None
    when it is not one number (a text, a list, a multi-element tensor)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item):
        try:
            got = item()
        except Exception:  # noqa: BLE001 - a multi-element tensor: not a metric
            return None
        return number(got) if not hasattr(got, "item") else None
    return None


class Reporter:
    """One training process's reports (only the main process of a distributed run
    writes: ``writes``). ``clock``: monotonic seconds, injectable for tests."""

    def __init__(self, *, progress_every_s: float = PROGRESS_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.progress_every_s = progress_every_s
        self.clock = clock
        self.names = MetricNames()
        self.writes = True
        self.max_steps: int | None = None
        self._progress_at: float | None = None

    def metrics(self, step: int | None, logs: Mapping[str, Any],
                not_aliases: Collection[str] = ()) -> dict[str, float]:
        """Report every number of ``logs`` under the framework's own name and its
        canonical name (``train_loss`` also as ``loss``), with max steps when known;
        returns what was written (empty: nothing numeric)."""
        values = {str(name): got for name, value in logs.items()
                  if (got := number(value)) is not None}
        if not values:
            return {}
        out = dict(self.names.expand(values, not_aliases))
        if self.max_steps:
            out["max_steps"] = float(self.max_steps)
        if self.writes:
            report.log(step, **out)
        return out

    def progress_due(self) -> bool:
        """Whether the throttled progress report (and look at the loss) is due now."""
        now = self.clock()
        if self._progress_at is not None and now - self._progress_at < self.progress_every_s:
            return False
        self._progress_at = now
        return True

    def progress(self, step: int, max_steps: int | None = None) -> None:
        if max_steps is not None and max_steps > 0:
            self.max_steps = int(max_steps)
        if self.writes and self.max_steps:
            report.progress(step, self.max_steps)
        elif self.writes:
            report.log(step)

    def non_finite(self, step: int, name: str, value: float, count: int) -> None:
        """A non-finite value the framework hid (or would log late): reported at once."""
        if self.writes:
            report.log(step, **{name: value, f"nonfinite/{name}": float(count)})

    def saved(self, path: str | os.PathLike[str], step: int | None, seconds: float) -> None:
        """A checkpoint written: its absolute path and measured save time."""
        if self.writes:
            report.checkpoint_written(os.path.abspath(os.fspath(path)), step,
                                      round(max(seconds, 0.0), 3))

    def save_started(self, path: str | os.PathLike[str], step: int | None) -> None:
        if self.writes:
            report.checkpoint_started(os.path.abspath(os.fspath(path)), step)


def save_wanted(step: int) -> bool:
    """Whether to save now on the cockpit's request (the landing): in one process,
    :func:`cockpit.report.save_requested`; in a distributed run, rank 0 reads it every
    :data:`SAVE_AGREE_EVERY` steps and broadcasts its answer, so every process saves at
    the same step (a sharded save is a collective)."""
    dist = _distributed()
    if dist is None:
        return report.save_requested()
    if step % SAVE_AGREE_EVERY:
        return False
    return _broadcast_flag(dist, report.save_requested() if dist.get_rank() == 0 else False)


def _distributed() -> Any:
    """``torch.distributed`` when this process is one of several, else None."""
    if "torch" not in sys.modules:
        return None
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return None
    return dist


def _broadcast_flag(dist: Any, flag: bool) -> bool:
    import torch

    device = (torch.device("cuda", torch.cuda.current_device())
              if dist.get_backend() == "nccl" else torch.device("cpu"))
    tensor = torch.tensor([1 if flag else 0], device=device)
    dist.broadcast(tensor, src=0)
    return bool(tensor.item())
