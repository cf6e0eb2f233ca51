"""Reload one checkpoint in this (fresh) process and say what a restart would get (D16/D17).

Run as ``python -m cockpit.runs.reload_worker PATH --kind train|inference|adapter
[--allow-unsafe] [--base-model ID] [--base-revision REV]``. It prints exactly one JSON
object on stdout (whatever the loaded code prints goes to stderr) and exits 0 even when
the checkpoint is broken: the report says why in words.

This module owns the recognition of checkpoint layouts (torch dicts in their usual
spellings, ``cockpit.resume``, Lightning, HF Trainer, accelerate, safetensors, PEFT
adapters) and the per-kind requirements. It imports only the standard library at the
top so it runs in a training environment that lacks the cockpit's own dependencies;
torch is imported only when a file needs it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

COMPONENTS = (
    "model", "optimizer", "progress", "scheduler", "scaler",
    "rng_python", "rng_numpy", "rng_torch", "rng_cuda", "data_position",
)
REQUIRED = {
    "train": ("model", "optimizer", "progress"),
    "inference": ("model",),
    "adapter": ("model",),
}
WORDS = {
    "model": "model parameters",
    "optimizer": "optimizer state",
    "progress": "progress (step/epoch)",
    "scheduler": "scheduler state",
    "scaler": "AMP scaler state",
    "rng_python": "python RNG state",
    "rng_numpy": "numpy RNG state",
    "rng_torch": "torch CPU RNG state",
    "rng_cuda": "CUDA RNG state",
    "data_position": "data position",
}
UNSAFE_WORDS = "needs unsafe unpickling (allow_unsafe_pickle: true in the campaign to load it)"
HF_RNG_WARNING = "HF Trainer and accelerate only log at INFO when RNG restore fails"
LIGHTNING_RNG_WARNING = "Lightning stores no RNG state"

_MODEL_KEYS = ("model_state_dict", "model_state", "model", "state_dict", "net", "network",
               "module", "weights", "params", "model_ema", "ema")
_OPT_KEYS = ("optimizer_state_dict", "optimizer_state", "optimizer", "optim", "opt",
             "optimizers", "optimizer_states")
_STEP_KEYS = ("step", "global_step", "iteration", "iter", "it", "steps", "num_updates",
              "current_step", "total_steps", "update")
_EPOCH_KEYS = ("epoch", "epochs", "current_epoch")
_SCHED_KEYS = ("scheduler", "lr_scheduler", "sched", "scheduler_state_dict",
               "lr_scheduler_state_dict", "lr_schedulers", "schedulers")
_SCALER_KEYS = ("scaler", "grad_scaler", "amp", "amp_scaler", "scaler_state_dict",
                "gradscaler", "native_amp_scaling_state")
_RNG_KEYS = ("rng", "rng_state", "rng_states", "random_state", "random_states", "rngs",
             "torch_rng_state", "cuda_rng_state", "numpy_rng_state", "np_rng_state",
             "python_rng_state", "py_rng_state", "cpu_rng_state", "torch_cuda_rng_state")
_DATA_KEYS = ("data_position", "sampler", "sampler_state", "data", "data_state",
              "dataloader", "dataloader_state", "dl_state", "data_index", "batch_idx",
              "consumed_samples", "samples_seen", "data_iter", "data_loader")


class _Unsafe(Exception):
    def __init__(self, globals_needed: list[str]) -> None:
        super().__init__(", ".join(globals_needed))
        self.globals_needed = globals_needed


class _Broken(Exception):
    """The file cannot be read: the message says why, in words."""


# --------------------------------------------------------------------- entry point


def inspect_checkpoint(
    path: str | os.PathLike[str],
    kind: str = "train",
    *,
    allow_unsafe: bool = False,
    base_model: str | None = None,
    base_revision: str | None = None,
) -> dict[str, Any]:
    """The report as a plain dict (see :class:`cockpit.runs.reload_check.VerifyReport`)."""
    target = Path(path)
    result: dict[str, Any] = {
        "ok": False, "kind": kind, "path": os.fspath(target), "layout": None,
        "present": {c: False for c in COMPONENTS}, "missing_required": [],
        "warnings": [], "error": None, "load_seconds": None, "step": None,
        "unsafe_pickle": False,
    }
    if kind not in REQUIRED:
        result["error"] = f"unknown kind {kind!r} (train, inference or adapter)"
        return result
    ctx = _Ctx(result, allow_unsafe)
    if target.is_dir() or target.suffix != ".safetensors":
        # Import before timing: load_seconds is the restore cost, not python's start-up.
        try:
            import torch  # noqa: F401
        except ImportError:
            pass
    started = time.perf_counter()
    try:
        if not target.exists():
            raise _Broken(f"{target} does not exist")
        if target.is_dir():
            _inspect_folder(target, ctx, kind, base_model, base_revision)
        else:
            _inspect_file(target, ctx, kind)
            if kind == "adapter":
                _check_base(ctx, base_model, base_revision)
    except _Unsafe as exc:
        result["unsafe_pickle"] = True
        needed = f" ({', '.join(exc.globals_needed)})" if exc.globals_needed else ""
        result["error"] = UNSAFE_WORDS + needed
    except _Broken as exc:
        result["error"] = str(exc)
    except Exception as exc:  # never crash: a verifier that dies says nothing
        result["error"] = f"could not load: {type(exc).__name__}: {_short(exc)}"
    result["load_seconds"] = round(time.perf_counter() - started, 6)
    if result["error"] is None:
        present = result["present"]
        missing = [ctx.explain.get(c, WORDS[c]) for c in REQUIRED[kind] if not present[c]]
        result["missing_required"] = missing + result["missing_required"]
        if kind == "train":
            for component in COMPONENTS:
                if component in REQUIRED["train"] or present[component]:
                    continue
                if component == "rng_cuda" and ctx.cuda_irrelevant:
                    continue
                result["warnings"].append(f"{WORDS[component]} not saved")
    result["ok"] = result["error"] is None and not result["missing_required"]
    return result


class _Ctx:
    def __init__(self, result: dict[str, Any], allow_unsafe: bool) -> None:
        self.result = result
        self.allow_unsafe = allow_unsafe
        self.cuda_irrelevant = False  # the run had no CUDA: its RNG cannot be missing
        self.explain: dict[str, str] = {}  # component -> why it is missing, in words

    @property
    def present(self) -> dict[str, bool]:
        return self.result["present"]

    def warn(self, words: str) -> None:
        if words not in self.result["warnings"]:
            self.result["warnings"].append(words)

    def set_step(self, value: Any) -> None:
        if self.result["step"] is None and _is_int(value):
            self.result["step"] = int(value)


# ---------------------------------------------------------------------- one file


def _inspect_file(path: Path, ctx: _Ctx, kind: str) -> None:
    size = path.stat().st_size
    if size == 0:
        raise _Broken(f"empty file (0 bytes): {path.name} was never written or was cut short")
    if path.suffix == ".safetensors":
        ctx.result["layout"] = "safetensors"
        _check_safetensors(path)
        ctx.present["model"] = True
        if kind == "train":
            ctx.warn("a safetensors file holds weights only: it restarts inference, not training")
        return
    obj = _torch_load(path, ctx)
    _classify_object(obj, ctx, path)


def _classify_object(obj: Any, ctx: _Ctx, path: Path) -> None:
    if not isinstance(obj, Mapping):
        if hasattr(obj, "state_dict") and hasattr(obj, "parameters"):
            ctx.result["layout"] = "torch-module"
            ctx.present["model"] = True
            return
        raise _Broken(f"{path.name} holds a {type(obj).__name__}, not a checkpoint dict")
    if obj.get("format") == "cockpit.resume/1":
        _classify_cockpit(obj, ctx)
    elif "pytorch-lightning_version" in obj or (
        "state_dict" in obj and ("loops" in obj or "optimizer_states" in obj)
    ):
        _classify_lightning(obj, ctx)
    elif _is_state_dict(obj):
        ctx.result["layout"] = "torch-state-dict"
        ctx.present["model"] = True
    else:
        ctx.result["layout"] = "torch-dict"
        _classify_dict(obj, ctx)


def _classify_cockpit(obj: Mapping[str, Any], ctx: _Ctx) -> None:
    ctx.result["layout"] = "cockpit.resume"
    present = ctx.present
    present["model"] = _is_state_dict(obj.get("model"))
    present["optimizer"] = obj.get("optimizer") is not None
    progress = obj.get("progress") or {}
    present["progress"] = progress.get("step") is not None
    ctx.set_step(progress.get("step"))
    present["scheduler"] = obj.get("scheduler") is not None
    present["scaler"] = obj.get("scaler") is not None
    present["data_position"] = obj.get("data_position") is not None
    rng = obj.get("rng") or {}
    for name in ("python", "numpy", "torch", "cuda"):
        present[f"rng_{name}"] = rng.get(name) is not None
    ctx.cuda_irrelevant = not obj.get("cuda_available", True)
    _check_optimizer(obj.get("optimizer"), ctx)


def _classify_lightning(obj: Mapping[str, Any], ctx: _Ctx) -> None:
    ctx.result["layout"] = "lightning"
    present = ctx.present
    present["model"] = isinstance(obj.get("state_dict"), Mapping)
    states = obj.get("optimizer_states")
    present["optimizer"] = bool(states)
    present["progress"] = _is_int(obj.get("global_step")) or _is_int(obj.get("epoch"))
    ctx.set_step(obj.get("global_step"))
    present["scheduler"] = bool(obj.get("lr_schedulers"))
    present["scaler"] = any(
        "scaler" in str(k).lower() or "mixedprecision" in str(k).lower()
        or "amp_scaling" in str(k).lower() for k in obj
    )
    # Loops hold the batch counters Lightning uses to position itself in the epoch.
    present["data_position"] = "loops" in obj
    ctx.warn(LIGHTNING_RNG_WARNING)
    if isinstance(states, list) and states:
        _check_optimizer(states[0], ctx)


def _classify_dict(obj: Mapping[str, Any], ctx: _Ctx) -> None:
    present = ctx.present
    lower = {str(k).lower(): k for k in obj}

    def pick(keys: tuple[str, ...]) -> Any:
        for key in keys:
            if key in lower and obj[lower[key]] is not None:
                return obj[lower[key]]
        return None

    model = pick(_MODEL_KEYS)
    present["model"] = model is not None and (
        _is_state_dict(model) or hasattr(model, "state_dict") or isinstance(model, Mapping)
    )
    optimizer = pick(_OPT_KEYS)
    present["optimizer"] = optimizer is not None and bool(optimizer)
    _check_optimizer(optimizer, ctx)
    progress = dict(obj)
    for nested in ("progress", "state", "trainer_state", "meta", "metadata"):
        if isinstance(obj.get(nested), Mapping):
            progress.update(obj[nested])
    plower = {str(k).lower(): v for k, v in progress.items()}
    steps = [plower[k] for k in _STEP_KEYS if _is_int(plower.get(k))]
    epochs = [plower[k] for k in _EPOCH_KEYS if _is_int(plower.get(k))]
    present["progress"] = bool(steps or epochs)
    if steps:
        ctx.set_step(steps[0])
    present["scheduler"] = pick(_SCHED_KEYS) is not None
    present["scaler"] = pick(_SCALER_KEYS) is not None
    present["data_position"] = pick(_DATA_KEYS) is not None
    for key in _RNG_KEYS:
        if key in lower:
            _mark_rng(key, obj[lower[key]], ctx)


def _mark_rng(key: str, value: Any, ctx: _Ctx) -> None:
    """Which generators an RNG entry covers, from its key and (nested) sub-keys."""
    if value is None:
        return
    name = key.lower()
    if isinstance(value, Mapping):
        for sub, item in value.items():
            _mark_rng(f"{name}.{sub}", item, ctx)
        return
    leaf = name.rsplit(".", 1)[-1]
    if "cuda" in leaf or "gpu" in leaf:
        ctx.present["rng_cuda"] = True
    elif "numpy" in leaf or leaf.startswith("np"):
        ctx.present["rng_numpy"] = True
    elif "python" in leaf or leaf.startswith("py") or leaf in ("random", "random_state"):
        ctx.present["rng_python"] = True
    elif "torch" in leaf or "cpu" in leaf or leaf in ("rng", "rng_state"):
        ctx.present["rng_torch"] = True


def _check_optimizer(optimizer: Any, ctx: _Ctx) -> None:
    if isinstance(optimizer, Mapping) and "state" in optimizer and not optimizer["state"]:
        ctx.warn("optimizer state is empty (saved before the first step?): "
                 "momentum/Adam moments restart from zero")


# ---------------------------------------------------------------------- folders


def _inspect_folder(
    folder: Path, ctx: _Ctx, kind: str, base_model: str | None, base_revision: str | None
) -> None:
    names = {p.name for p in folder.iterdir()}
    if not names:
        raise _Broken(f"{folder.name}/ is empty: still being written, or the save failed")
    has_adapter = "adapter_config.json" in names
    if "trainer_state.json" in names or re.match(r"^(tmp-)?checkpoint-\d+$", folder.name):
        ctx.result["layout"] = "hf-trainer"
        _inspect_hf_trainer(folder, names, ctx)
    elif "optimizer.bin" in names or any(n.startswith("random_states_") for n in names):
        ctx.result["layout"] = "accelerate"
        _inspect_accelerate(folder, names, ctx)
    elif has_adapter:
        ctx.result["layout"] = "peft-adapter"
        _check_weights(folder, names, ctx, adapter=True)
    elif any(n in names for n in ("model.safetensors", "pytorch_model.bin",
                                   "model.safetensors.index.json",
                                   "pytorch_model.bin.index.json")):
        ctx.result["layout"] = "hf-model"
        _check_weights(folder, names, ctx, adapter=False)
    else:
        shown = ", ".join(sorted(names)[:8])
        raise _Broken(f"no checkpoint files recognised in {folder.name}/ (has: {shown})")
    if folder.name.startswith("tmp-checkpoint-"):
        ctx.warn("folder is still named tmp-checkpoint-*: HF Trainer had not finished it")
    if kind == "adapter":
        _check_adapter(folder, names, ctx, base_model, base_revision)


def _inspect_hf_trainer(folder: Path, names: set[str], ctx: _Ctx) -> None:
    present = ctx.present
    ctx.warn(HF_RNG_WARNING)
    adapter = "adapter_config.json" in names
    _check_weights(folder, names, ctx, adapter=adapter)
    if "trainer_state.json" in names:
        try:
            state = json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise _Broken(f"trainer_state.json unreadable: {_short(exc)}") from exc
        present["progress"] = _is_int(state.get("global_step"))
        ctx.set_step(state.get("global_step"))
        # The Trainer skips global_step batches on resume: the position follows progress.
        present["data_position"] = present["progress"]
    else:
        ctx.explain["progress"] = "progress (trainer_state.json missing)"
    if "optimizer.pt" in names:
        _check_optimizer(_torch_load(folder / "optimizer.pt", ctx), ctx)
        present["optimizer"] = True
    elif any(n.startswith("global_step") for n in names):
        present["optimizer"] = _deepspeed_optimizer(folder, names)
    present["scheduler"] = "scheduler.pt" in names
    present["scaler"] = "scaler.pt" in names
    rng_files = sorted(n for n in names if re.match(r"^rng_state(_\d+)?\.pth$", n))
    for name in rng_files[:1]:
        _read_rng_file(folder / name, ctx, {"python": "rng_python", "numpy": "rng_numpy",
                                            "cpu": "rng_torch", "cuda": "rng_cuda"})


def _inspect_accelerate(folder: Path, names: set[str], ctx: _Ctx) -> None:
    present = ctx.present
    ctx.warn(HF_RNG_WARNING)
    model_files = sorted(
        n for n in names
        if re.match(r"^(model|pytorch_model)(_\d+)?\.(safetensors|bin)$", n)
    )
    if model_files:
        for name in model_files:
            _check_weight_file(folder / name, ctx)
        present["model"] = True
    opt_files = sorted(n for n in names if re.match(r"^optimizer(_\d+)?\.bin$", n))
    for name in opt_files:
        _check_optimizer(_torch_load(folder / name, ctx), ctx)
    present["optimizer"] = bool(opt_files)
    present["scheduler"] = any(re.match(r"^scheduler(_\d+)?\.bin$", n) for n in names)
    present["scaler"] = "scaler.pt" in names
    present["data_position"] = any(
        re.match(r"^(sampler|dl_state_dict)(_\d+)?\.bin$", n) for n in names
    )
    rng_files = sorted(n for n in names if re.match(r"^random_states_\d+\.pkl$", n))
    for name in rng_files[:1]:
        _read_rng_file(folder / name, ctx, {"random_state": "rng_python",
                                            "numpy_random_seed": "rng_numpy",
                                            "torch_manual_seed": "rng_torch",
                                            "torch_cuda_manual_seed": "rng_cuda"})
    # accelerate saves no step: it comes from custom state or the folder's name.
    for name in sorted(n for n in names if re.match(r"^custom_checkpoint_\d+\.pkl$", n)):
        try:
            custom = _torch_load(folder / name, ctx)
        except _Unsafe:
            continue
        if isinstance(custom, Mapping):
            for key in (*_STEP_KEYS, *_EPOCH_KEYS):
                if _is_int(custom.get(key)):
                    present["progress"] = True
                    if key in _STEP_KEYS:
                        ctx.set_step(custom[key])
    found = re.search(r"(?:step|iter)[-_=]?(\d+)", folder.name, re.IGNORECASE)
    if not present["progress"] and found:
        present["progress"] = True
        ctx.set_step(int(found.group(1)))
        ctx.warn(f"step taken from the folder name ({folder.name})")


def _deepspeed_optimizer(folder: Path, names: set[str]) -> bool:
    for name in names:
        sub = folder / name
        if name.startswith("global_step") and sub.is_dir():
            return any(p.name.endswith("optim_states.pt") and p.stat().st_size > 0
                       for p in sub.iterdir())
    return False


def _check_weights(folder: Path, names: set[str], ctx: _Ctx, *, adapter: bool) -> None:
    candidates = (
        ("adapter_model.safetensors", "adapter_model.bin") if adapter else
        ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
         "pytorch_model.bin.index.json")
    )
    for name in candidates:
        if name in names:
            if name.endswith(".index.json"):
                _check_index(folder / name, ctx)
            else:
                _check_weight_file(folder / name, ctx)
            ctx.present["model"] = True
            return
    what = " or ".join(candidates[:2])
    ctx.explain["model"] = (
        f"{'adapter' if adapter else 'model'} weights ({what}) not in {folder.name}/"
    )


def _check_index(index: Path, ctx: _Ctx) -> None:
    try:
        mapping = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _Broken(f"{index.name} unreadable: {_short(exc)}") from exc
    shards = sorted(set(mapping.values()))
    missing = [s for s in shards if not (index.parent / s).exists()]
    if missing:
        raise _Broken(f"{index.name} names shards that are missing: {', '.join(missing[:5])}")
    for shard in shards:
        _check_weight_file(index.parent / shard, ctx)


def _check_weight_file(path: Path, ctx: _Ctx) -> None:
    if path.stat().st_size == 0:
        raise _Broken(f"empty file (0 bytes): {path.name}")
    if path.suffix == ".safetensors":
        _check_safetensors(path)
    else:
        _torch_load(path, ctx)


def _read_rng_file(path: Path, ctx: _Ctx, keys: dict[str, str]) -> None:
    # These files hold numpy arrays: allow numpy's array globals (data, not code).
    try:
        state = _torch_load(path, ctx, numpy_ok=True)
    except _Unsafe:
        ctx.warn(f"{path.name} needs unsafe unpickling: RNG parts assumed from its name")
        for component in keys.values():
            if component != "rng_cuda":
                ctx.present[component] = True
        return
    if isinstance(state, Mapping):
        for key, component in keys.items():
            if state.get(key) is not None:
                ctx.present[component] = True


def _check_adapter(
    folder: Path, names: set[str], ctx: _Ctx, base_model: str | None, base_revision: str | None
) -> None:
    if "adapter_config.json" not in names:
        ctx.result["missing_required"].append(
            "adapter_config.json (adapter weights need their base model id and revision)")
        return
    if not any(n in names for n in ("adapter_model.safetensors", "adapter_model.bin")):
        ctx.present["model"] = False  # full-model weights beside it are not the adapter
        ctx.explain["model"] = "adapter weights (adapter_model.safetensors or adapter_model.bin)"
    try:
        config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _Broken(f"adapter_config.json unreadable: {_short(exc)}") from exc
    _check_base(ctx, base_model or config.get("base_model_name_or_path"),
                base_revision or config.get("revision"))


def _check_base(ctx: _Ctx, base: str | None, revision: str | None) -> None:
    if not base:
        ctx.result["missing_required"].append("base model id (base_model_name_or_path)")
    if not revision:
        ctx.result["missing_required"].append("base model revision not pinned")
    elif revision in ("main", "master"):
        ctx.result["missing_required"].append(
            f"base model revision not pinned ({revision!r} is a branch, not a commit)")
    elif not re.fullmatch(r"[0-9a-f]{40}", str(revision)):
        ctx.warn(f"base model revision {revision!r} is not a commit hash: tags can move")
    if base and revision:
        ctx.warn(f"base model: {base}@{revision}")


# ----------------------------------------------------------------- raw readers


def _check_safetensors(path: Path) -> None:
    """Header parse and size check (8-byte little-endian length, JSON, then the data)."""
    size = path.stat().st_size
    with path.open("rb") as stream:
        head = stream.read(8)
        if len(head) < 8:
            raise _Broken(f"truncated safetensors file: {path.name} is {size} bytes")
        (length,) = struct.unpack("<Q", head)
        if length > size - 8 or length > 100_000_000:
            raise _Broken(f"truncated or corrupt safetensors file: header of {length} bytes "
                          f"in a file of {size} bytes ({path.name})")
        try:
            header = json.loads(stream.read(length))
        except ValueError as exc:
            raise _Broken(f"corrupt safetensors header in {path.name}: {_short(exc)}") from exc
        end = 0
        for name, info in header.items():
            if name == "__metadata__":
                continue
            try:
                start, stop = info["data_offsets"]
            except (KeyError, TypeError, ValueError) as exc:
                raise _Broken(f"corrupt safetensors header in {path.name}: {name}") from exc
            end = max(end, int(stop))
        expected = 8 + length + end
        if size < expected:
            raise _Broken(f"truncated safetensors file: {path.name} is {size} bytes, its "
                          f"header needs {expected} (cut short in writing or transfer?)")
        # Read the data through once: the restore cost is part of the answer (D17).
        while stream.read(1 << 24):
            pass


def _torch_load(path: Path, ctx: _Ctx, *, numpy_ok: bool = False) -> Any:
    try:
        import torch
    except ImportError as exc:
        raise _Broken(f"torch is not installed in {sys.executable}: cannot reload "
                      f"{path.name}") from exc
    import pickle

    if path.stat().st_size == 0:
        raise _Broken(f"empty file (0 bytes): {path.name}")
    try:
        if numpy_ok:
            with torch.serialization.safe_globals(_numpy_globals()):
                return torch.load(path, map_location="cpu", weights_only=True)
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "Weights only load failed" not in str(exc):
            raise _Broken(f"corrupt pickle in {path.name}: {_short(exc)}") from exc
        if not ctx.allow_unsafe:
            ctx.result["unsafe_pickle"] = True
            raise _Unsafe(_unsafe_globals(path)) from exc
        ctx.result["unsafe_pickle"] = True
        ctx.warn(f"{path.name} was loaded with unsafe unpickling (allow_unsafe_pickle)")
        return _unsafe_load(torch, path)
    except (RuntimeError, EOFError, ValueError, OSError) as exc:
        raise _Broken(_load_words(path, exc)) from exc


def _unsafe_load(torch: Any, path: Path) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise _Broken(_load_words(path, exc)) from exc


def _load_words(path: Path, exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, EOFError) or "central directory" in text or "unexpected EOF" in text \
            or "truncated" in text.lower():
        return (f"truncated or corrupt file: {path.name} ({path.stat().st_size} bytes) "
                "was cut short in writing or transfer")
    return f"could not load {path.name}: {type(exc).__name__}: {_short(exc)}"


def _unsafe_globals(path: Path) -> list[str]:
    try:
        import torch

        return list(torch.serialization.get_unsafe_globals_in_checkpoint(path))[:6]
    except Exception:  # legacy or raw pickle: torch cannot list them
        return []


def _numpy_globals() -> list[Any]:
    try:
        import numpy as np
    except ImportError:
        return []
    core = getattr(np, "_core", None) or np.core
    found: list[Any] = [core.multiarray._reconstruct, np.ndarray, np.dtype]
    found += [type(np.dtype(t)) for t in ("uint32", "float64", "int64", "uint8")]
    return found


# --------------------------------------------------------------------- helpers


def _is_state_dict(value: Any) -> bool:
    if not isinstance(value, Mapping) or not value:
        return False
    return all(isinstance(k, str) and hasattr(v, "dtype") and hasattr(v, "shape")
               for k, v in value.items())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) or (
        hasattr(value, "item") and hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0
    )


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cockpit.runs.reload_worker")
    parser.add_argument("path")
    parser.add_argument("--kind", default="train", choices=sorted(REQUIRED))
    parser.add_argument("--allow-unsafe", action="store_true")
    parser.add_argument("--base-model")
    parser.add_argument("--base-revision")
    args = parser.parse_args(argv)
    # Keep stdout for the one JSON object: whatever loading prints goes to stderr.
    real_stdout = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    result = inspect_checkpoint(
        args.path, args.kind, allow_unsafe=args.allow_unsafe,
        base_model=args.base_model, base_revision=args.base_revision,
    )
    real_stdout.write(json.dumps(result, default=str) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
