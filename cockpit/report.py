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

Asking a run to save (the landing before the window ends, issue 26): the cockpit writes
a request token to the file named by ``COCKPIT_SAVE_REQUEST``; :func:`save_requested`
is true once per token. A training loop honours it in two lines::

    if report.save_requested():
        save_checkpoint(...)  # then report.checkpoint_written(path, step) as usual

A file, not a signal: SIGUSR1's default action kills a process that never set a
handler, and a flag read by a polling loop needs no handler at all.

Only the standard library is imported here: it runs inside the user's training process.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import threading
import time
from typing import Any

ENV_VAR = "COCKPIT_REPORT"
SAVE_ENV_VAR = "COCKPIT_SAVE_REQUEST"
SAVE_CHECK_S = 1.0  # the request file is read at most once a second

_lock = threading.Lock()
_fd: int | None = None
_fd_path: str | None = None
_chosen_path: str | None = None
_dropped = 0
_torn = False  # the last write was cut short: the next record starts on a new line
_save_answered: str | None = None  # the request token save_requested() last returned for
_save_checked_at: float | None = None


def open_report(path: str | os.PathLike[str] | None) -> None:
    """Direct further lines to ``path`` (None: back to ``$COCKPIT_REPORT``)."""
    global _chosen_path
    with _lock:
        _close()
        _chosen_path = None if path is None else os.fspath(path)


def dropped() -> int:
    """How many records could not be written (a full disk, a folder that went away)."""
    return _dropped


def _close() -> None:
    global _fd, _fd_path
    if _fd is not None:
        with contextlib.suppress(OSError):
            os.close(_fd)
    _fd = None
    _fd_path = None


def _target() -> int | None:
    global _fd, _fd_path
    path = _chosen_path or os.environ.get(ENV_VAR)
    if not path:
        return None
    if _fd is None or _fd_path != path:
        _close()
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        # O_APPEND and one write() per record: each line lands whole or is cut short,
        # never interleaved with another writer's.
        _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        _fd_path = path
    return _fd


def _write(record: dict[str, Any]) -> None:
    """Append one record; never raises into the training (a dropped line is counted)."""
    global _dropped, _torn
    data = (json.dumps(record, default=str) + "\n").encode("utf-8")
    with _lock:
        try:
            fd = _target()
            if fd is None:
                return
            if _torn:
                data = b"\n" + data  # the cut-short line stands alone; readers skip it
            written = os.write(fd, data)
            _torn = written < len(data)
            if _torn:
                raise OSError(errno.ENOSPC, "short write")
        except (OSError, ValueError) as exc:
            _dropped += 1
            if _dropped == 1:
                # Once: the training goes on; the cockpit sees the gap in the metrics.
                sys.stderr.write(f"cockpit.report: a metric line was dropped ({exc}); "
                                 "further drops are counted silently (report.dropped())\n")


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


def save_requested() -> bool:
    """True once each time the cockpit asks this run to save a checkpoint now; then
    save, report it with :func:`checkpoint_written` and carry on (the cockpit stops the
    run once it has verified the checkpoint). Cheap enough to call every step: the
    request file is read at most every :data:`SAVE_CHECK_S`. Outside the cockpit:
    always False."""
    global _save_answered, _save_checked_at
    path = os.environ.get(SAVE_ENV_VAR)
    if not path:
        return False
    now = time.monotonic()
    with _lock:
        if _save_checked_at is not None and now - _save_checked_at < SAVE_CHECK_S:
            return False
        _save_checked_at = now
        try:
            with open(path, "rb") as handle:
                token = handle.read(200).decode("utf-8", "replace").strip()
        except OSError:
            return False  # no request (or none readable): keep training
        if not token or token == _save_answered:
            return False
        _save_answered = token
        return True


def _plain(value: Any) -> Any:
    """Turn tensors and numpy scalars into plain Python numbers without importing them."""
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except Exception:  # torch raises RuntimeError for a multi-element tensor
            return value  # json's default=str then writes it as text: never crash training
    return value
