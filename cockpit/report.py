"""Dependency-free helper for training scripts: write metrics and events the cockpit reads.

A training script calls ``report.log(step=120, loss=0.41)`` and, around a save,
``report.checkpoint_started(...)`` / ``report.checkpoint_written(...)``. Lines go to
the JSON-lines file named by the ``COCKPIT_REPORT`` environment variable (the cockpit
sets it when it starts a stage), or to the path given to :func:`open_report`. With
neither, calls do nothing, so a script runs the same outside the cockpit.

Format, one JSON object a line:
- metrics: ``{"t": 1733130000.5, "step": 120, "loss": 0.41, "val/accuracy": 0.83}``
- events:  ``{"t": ..., "event": "checkpoint_written", "path": "...", "step": 120,
  "seconds": 2.4}``
Non-finite floats are written as ``NaN`` / ``Infinity`` / ``-Infinity`` (Python's
json spelling); the cockpit's readers treat them as values.

Only the standard library is imported here: it runs inside the user's training process.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import IO, Any

ENV_VAR = "COCKPIT_REPORT"

_lock = threading.Lock()
_stream: IO[str] | None = None
_stream_path: str | None = None


def open_report(path: str | os.PathLike[str] | None) -> None:
    """Direct further lines to ``path`` (None: back to ``$COCKPIT_REPORT``)."""
    global _stream, _stream_path
    with _lock:
        if _stream is not None:
            _stream.close()
        _stream = None
        _stream_path = None if path is None else os.fspath(path)


def _target() -> IO[str] | None:
    global _stream, _stream_path
    path = _stream_path or os.environ.get(ENV_VAR)
    if not path:
        return None
    if _stream is None or _stream.name != path:
        if _stream is not None:
            _stream.close()
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        # Line buffering: each record reaches the file as one write, ending in "\n".
        _stream = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        _stream_path = path
    return _stream


def _write(record: dict[str, Any]) -> None:
    with _lock:
        stream = _target()
        if stream is None:
            return
        stream.write(json.dumps(record, default=str) + "\n")


def log(step: int | None = None, **metrics: Any) -> None:
    """Record metric values at ``step`` (names may contain '/', e.g. ``val/accuracy``)."""
    record: dict[str, Any] = {"t": time.time()}
    if step is not None:
        record["step"] = int(step)
    for name, value in metrics.items():
        record[name] = _plain(value)
    _write(record)


def metric(name: str, value: Any, step: int | None = None) -> None:
    """Record one metric whose name is not a Python identifier (``"val/accuracy"``)."""
    log(step, **{name: value})


def event(kind: str, **fields: Any) -> None:
    """Record a named event (``checkpoint_written``, ``progress``, ...)."""
    record: dict[str, Any] = {"t": time.time(), "event": kind}
    record.update({k: _plain(v) for k, v in fields.items()})
    _write(record)


def checkpoint_started(path: str | os.PathLike[str], step: int | None = None) -> None:
    event("checkpoint_started", path=os.fspath(path), step=step)


def checkpoint_written(
    path: str | os.PathLike[str], step: int | None = None, seconds: float | None = None
) -> None:
    """Tell the cockpit a checkpoint is complete (so it need not wait for it to settle)."""
    event("checkpoint_written", path=os.fspath(path), step=step, seconds=seconds)


def truncated(count: int, name: str = "data/truncated", step: int | None = None) -> None:
    """Report how many essential inputs were truncated (the ``truncation`` stop rule)."""
    log(step, **{name: int(count)})


def progress(step: int, max_steps: int) -> None:
    """Report progress so the forecast can use it."""
    log(step, max_steps=int(max_steps))


def _plain(value: Any) -> Any:
    """Turn tensors and numpy scalars into plain Python numbers without importing them."""
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except Exception:  # torch raises RuntimeError for a multi-element tensor
            return value  # json's default=str then writes it as text: never crash training
    return value
