"""Save and restore the full training state a resume needs (D16), for training scripts.

This module owns the ``cockpit.resume/1`` checkpoint format: one ``torch.save``'d dict
holding model parameters, optimizer state, progress (step/epoch), and, when the loop
has them, the scheduler, the AMP scaler, the data position and every random number
generator (python, numpy, torch CPU, CUDA). Weights alone restart inference, not
learning: a resumed run only matches an uninterrupted one when all of it comes back.

The file is written atomically (temp file in the same folder, fsync, ``os.replace``,
fsync of the folder) so a crash or a full disk never leaves a half-written file at
the final path, and it loads with ``torch.load(..., weights_only=True)``: nothing in
it needs unsafe unpickling. Around the write the cockpit is told via
:mod:`cockpit.report` (``checkpoint_started`` / ``checkpoint_written``).

torch is imported lazily: ``import cockpit`` never pulls it in.
"""

from __future__ import annotations

import errno
import os
import random
import tempfile
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit import report
from cockpit.common.fsutil import fsync_dir

FORMAT = "cockpit.resume/1"

# Plain values torch's weights_only unpickler accepts; data_position/extra must be
# built from these (plus tensors) or the checkpoint could not be reloaded safely.
_PLAIN = (str, int, float, bool, bytes, type(None))


@dataclass(frozen=True)
class ResumeInfo:
    """What :func:`load_state` hands back besides the restored objects."""

    step: int
    epoch: int | None
    data_position: Any
    extra: Any
    rng_restored: bool = False


# ---------------------------------------------------------------------------- RNG


def capture_rng_state() -> dict[str, Any]:
    """Every global RNG state, in forms ``weights_only`` loading accepts."""
    import torch

    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {
        # getstate() is (int, tuple[int, ...], float|None); lists/ints load safely.
        "python": {"version": version, "state": list(internal), "gauss": gauss},
        "torch": torch.get_rng_state(),
    }
    try:
        import numpy as np
    except ImportError:
        np = None  # type: ignore[assignment]  # optional: numpy's RNG is saved when present
    if np is not None:
        name, keys, pos, has_gauss, cached = np.random.get_state()
        # keys is a uint32 ndarray: numpy arrays need unsafe globals, so keep ints.
        state["numpy"] = {
            "name": str(name),
            "keys": [int(k) for k in keys],
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Put back what :func:`capture_rng_state` took; missing parts are left alone (warned)."""
    import torch

    py = state.get("python")
    if py is not None:
        random.setstate((int(py["version"]), tuple(int(v) for v in py["state"]), py["gauss"]))
    else:
        warnings.warn("checkpoint has no python RNG state", stacklevel=2)
    if state.get("torch") is not None:
        torch.set_rng_state(state["torch"])
    else:
        warnings.warn("checkpoint has no torch CPU RNG state", stacklevel=2)
    npst = state.get("numpy")
    if npst is not None:
        try:
            import numpy as np
        except ImportError:
            warnings.warn("checkpoint has a numpy RNG state but numpy is missing", stacklevel=2)
        else:
            keys = np.asarray(npst["keys"], dtype=np.uint32)
            np.random.set_state(
                (npst["name"], keys, npst["pos"], npst["has_gauss"], npst["cached_gaussian"])
            )
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        count = torch.cuda.device_count()
        if len(cuda) != count:
            warnings.warn(
                f"checkpoint has CUDA RNG states for {len(cuda)} devices, this machine has "
                f"{count}: restoring the first {min(len(cuda), count)}",
                stacklevel=2,
            )
        for index, device_state in enumerate(cuda[:count]):
            torch.cuda.set_rng_state(device_state, index)
    elif cuda is not None:
        warnings.warn("checkpoint has CUDA RNG states but CUDA is not available", stacklevel=2)


# ---------------------------------------------------------------------- save/load


def save_state(
    path: str | os.PathLike[str],
    *,
    model: Any,
    optimizer: Any = None,
    scheduler: Any = None,
    scaler: Any = None,
    step: int,
    epoch: int | None = None,
    data_position: Any = None,
    extra: Any = None,
) -> Path:
    """Write the full resume state to ``path`` atomically; returns the final path.

    ``data_position`` and ``extra`` must be plain data (dict/list/tuple of str, int,
    float, bool, bytes, None, tensors) so the file reloads with ``weights_only=True``.
    Raises ``OSError`` (errno kept, e.g. ENOSPC) when the write fails; then neither a
    partial file at ``path`` nor a temp file is left behind.
    """
    import torch

    target = Path(path)
    _check_plain(data_position, "data_position")
    _check_plain(extra, "extra")
    payload: dict[str, Any] = {
        "format": FORMAT,
        "model": model.state_dict(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "scaler": None if scaler is None else scaler.state_dict(),
        "progress": {"step": int(step), "epoch": None if epoch is None else int(epoch)},
        "data_position": data_position,
        "rng": capture_rng_state(),
        # Lets a verifier tell "CUDA RNG not saved" from "trained without CUDA".
        "cuda_available": bool(torch.cuda.is_available()),
        "extra": extra,
        "saved_at": time.time(),
    }

    report.checkpoint_started(target, step=int(step))
    started = time.perf_counter()
    folder = target.parent
    folder.mkdir(parents=True, exist_ok=True)
    # Dot-prefixed temp name: checkpoint scanners skip it, and it sits on the same
    # filesystem so os.replace is an atomic rename.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    writer: _ErrorKeepingWriter | None = None
    try:
        with os.fdopen(fd, "wb") as stream:
            writer = _ErrorKeepingWriter(stream)
            torch.save(payload, writer)  # a duck-typed stream (torch.save takes any file-like)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp_name, target)
    except BaseException as exc:
        # torch turns a failed write into "unexpected pos N vs M": report the OS's words.
        if writer is not None and writer.error is not None and not isinstance(exc, OSError):
            exc = writer.error
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            raise OSError(
                errno.ENOSPC,
                f"checkpoint not saved, no space left on device writing {target} "
                f"(free space: {_free_words(folder)}); the previous file at that path, "
                "if any, is untouched",
            ) from exc
        if isinstance(exc, OSError):
            raise OSError(exc.errno, f"checkpoint not saved to {target}: {exc}") from exc
        raise
    fsync_dir(folder)
    seconds = time.perf_counter() - started
    report.checkpoint_written(target, step=int(step), seconds=round(seconds, 6))
    return target


class _ErrorKeepingWriter:
    """A binary stream for torch.save that keeps the first OSError its writes raised."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return int(self._stream.write(data))
        except OSError as exc:
            if self.error is None:
                self.error = exc
            raise

    def flush(self) -> None:
        self._stream.flush()


def load_state(
    path: str | os.PathLike[str],
    *,
    model: Any,
    optimizer: Any = None,
    scheduler: Any = None,
    scaler: Any = None,
    map_location: Any = "cpu",
    restore_rng: bool = True,
) -> ResumeInfo:
    """Restore what :func:`save_state` wrote into the given objects.

    Asking for a part the file lacks (an optimizer when none was saved) raises
    ``ValueError``: resuming learning without it would silently diverge.
    """
    import torch

    state = torch.load(os.fspath(path), map_location=map_location, weights_only=True)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} checkpoint")
    model.load_state_dict(state["model"])
    for name, target in (("optimizer", optimizer), ("scheduler", scheduler), ("scaler", scaler)):
        if target is None:
            continue
        saved = state.get(name)
        if saved is None:
            raise ValueError(f"{path} holds no {name} state, but a {name} was given to restore")
        target.load_state_dict(saved)
    rng = state.get("rng")
    if restore_rng and rng is not None:
        restore_rng_state(rng)
    progress = state.get("progress") or {}
    return ResumeInfo(
        step=int(progress.get("step", 0)),
        epoch=progress.get("epoch"),
        data_position=state.get("data_position"),
        extra=state.get("extra"),
        rng_restored=bool(restore_rng and rng is not None),
    )


# ------------------------------------------------------------------------ helpers


def _check_plain(value: Any, name: str, depth: int = 0) -> None:
    if depth > 50:
        raise TypeError(f"{name} is nested too deeply to save")
    if isinstance(value, _PLAIN):
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_plain(key, name, depth + 1)
            _check_plain(item, name, depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_plain(item, name, depth + 1)
        return
    module = type(value).__module__
    if module.startswith("torch") and hasattr(value, "dtype"):  # a tensor
        return
    raise TypeError(
        f"{name} contains a {type(value).__qualname__}: only dict/list/tuple of str, int, "
        "float, bool, bytes, None and tensors reload with weights_only=True"
    )


def _free_words(folder: Path) -> str:
    import shutil

    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return "unknown"
    return f"{free / 1e6:.1f} MB"
