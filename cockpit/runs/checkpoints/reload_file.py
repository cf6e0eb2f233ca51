"""The reload worker on one file: torch dicts, Lightning, ``cockpit.resume``, safetensors.

This module owns loading one checkpoint file (``torch.load`` with weights_only, the
unsafe path only when the campaign allows it, the safetensors header check) and
classifying what it holds into the components of :mod:`reload_findings`. torch is
imported only when a file needs it.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cockpit.runs.checkpoints.reload_findings import (
    DATA_KEYS,
    EPOCH_KEYS,
    LIGHTNING_RNG_WARNING,
    MODEL_KEYS,
    OPT_KEYS,
    RNG_KEYS,
    SCALER_KEYS,
    SCHED_KEYS,
    STEP_KEYS,
    Broken,
    Ctx,
    Unsafe,
    is_int,
    is_state_dict,
    shorten,
)


def inspect_file(path: Path, ctx: Ctx, kind: str) -> None:
    size = path.stat().st_size
    if size == 0:
        raise Broken(f"empty file (0 bytes): {path.name} was never written or was cut short")
    if path.suffix == ".safetensors":
        ctx.result["layout"] = "safetensors"
        check_safetensors(path)
        ctx.present["model"] = True
        if kind == "train":
            ctx.warn("a safetensors file holds weights only: it restarts inference, not training")
        return
    obj = torch_load(path, ctx)
    _classify_object(obj, ctx, path)


def _classify_object(obj: Any, ctx: Ctx, path: Path) -> None:
    if not isinstance(obj, Mapping):
        if hasattr(obj, "state_dict") and hasattr(obj, "parameters"):
            ctx.result["layout"] = "torch-module"
            ctx.present["model"] = True
            return
        raise Broken(f"{path.name} holds a {type(obj).__name__}, not a checkpoint dict")
    if obj.get("format") == "cockpit.resume/1":
        _classify_cockpit(obj, ctx)
    elif "pytorch-lightning_version" in obj or (
        "state_dict" in obj and ("loops" in obj or "optimizer_states" in obj)
    ):
        _classify_lightning(obj, ctx)
    elif is_state_dict(obj):
        ctx.result["layout"] = "torch-state-dict"
        ctx.present["model"] = True
    else:
        ctx.result["layout"] = "torch-dict"
        _classify_dict(obj, ctx)


def _classify_cockpit(obj: Mapping[str, Any], ctx: Ctx) -> None:
    ctx.result["layout"] = "cockpit.resume"
    present = ctx.present
    present["model"] = is_state_dict(obj.get("model"))
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
    check_optimizer(obj.get("optimizer"), ctx)


def _classify_lightning(obj: Mapping[str, Any], ctx: Ctx) -> None:
    ctx.result["layout"] = "lightning"
    present = ctx.present
    present["model"] = isinstance(obj.get("state_dict"), Mapping)
    states = obj.get("optimizer_states")
    present["optimizer"] = bool(states)
    present["progress"] = is_int(obj.get("global_step")) or is_int(obj.get("epoch"))
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
        check_optimizer(states[0], ctx)


def _classify_dict(obj: Mapping[str, Any], ctx: Ctx) -> None:
    present = ctx.present
    lower = {str(k).lower(): k for k in obj}

    def pick(keys: tuple[str, ...]) -> Any:
        for key in keys:
            if key in lower and obj[lower[key]] is not None:
                return obj[lower[key]]
        return None

    model = pick(MODEL_KEYS)
    present["model"] = model is not None and (
        is_state_dict(model) or hasattr(model, "state_dict") or isinstance(model, Mapping)
    )
    optimizer = pick(OPT_KEYS)
    present["optimizer"] = optimizer is not None and bool(optimizer)
    check_optimizer(optimizer, ctx)
    progress = dict(obj)
    for nested in ("progress", "state", "trainer_state", "meta", "metadata"):
        if isinstance(obj.get(nested), Mapping):
            progress.update(obj[nested])
    plower = {str(k).lower(): v for k, v in progress.items()}
    steps = [plower[k] for k in STEP_KEYS if is_int(plower.get(k))]
    epochs = [plower[k] for k in EPOCH_KEYS if is_int(plower.get(k))]
    present["progress"] = bool(steps or epochs)
    if steps:
        ctx.set_step(steps[0])
    present["scheduler"] = pick(SCHED_KEYS) is not None
    present["scaler"] = pick(SCALER_KEYS) is not None
    present["data_position"] = pick(DATA_KEYS) is not None
    for key in RNG_KEYS:
        if key in lower:
            _mark_rng(key, obj[lower[key]], ctx)


def _mark_rng(key: str, value: Any, ctx: Ctx) -> None:
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


def check_optimizer(optimizer: Any, ctx: Ctx) -> None:
    if isinstance(optimizer, Mapping) and "state" in optimizer and not optimizer["state"]:
        ctx.warn("optimizer state is empty (saved before the first step?): "
                 "momentum/Adam moments restart from zero")


# Bits per element of each dtype the safetensors format names (safetensors >= 0.6 spelling).
SAFETENSORS_DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64,
    "I64": 64, "U64": 64, "F64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}
SAFETENSORS_HEADER_LIMIT = 100_000_000  # what the safetensors library accepts


def check_safetensors(path: Path) -> None:
    """The whole layout against the file, as the safetensors library checks it: an
    8-byte little-endian header length, a JSON object of tensors (known dtype, shape of
    non-negative whole numbers, ``data_offsets`` [begin, end] within the data section,
    sized shape x dtype), tensors sorted and contiguous from 0 to the end of the file.
    Standard library only (the worker must start without heavy imports)."""
    size = path.stat().st_size
    name = path.name
    with path.open("rb") as stream:
        head = stream.read(8)
        if len(head) < 8:
            raise Broken(f"truncated safetensors file: {name} is {size} bytes")
        (length,) = struct.unpack("<Q", head)
        if length > size - 8 or length > SAFETENSORS_HEADER_LIMIT:
            raise Broken(f"truncated or corrupt safetensors file: header of {length} bytes "
                          f"in a file of {size} bytes ({name})")
        try:
            header = json.loads(stream.read(length))
        except (ValueError, RecursionError) as exc:
            raise Broken(f"corrupt safetensors header in {name}: {shorten(exc)}") from exc
        if not isinstance(header, dict):
            raise Broken(f"corrupt safetensors header in {name}: not a JSON object")
        data_size = size - 8 - length
        spans = sorted((_tensor_span(name, key, info), key) for key, info in header.items()
                       if key != "__metadata__")
        _check_metadata(name, header.get("__metadata__"))
        end = 0
        for (begin, stop), key in spans:
            if begin != end:
                what = "overlaps the one before it" if begin < end else \
                    f"leaves a gap of {begin - end} bytes before it"
                raise Broken(f"corrupt safetensors header in {name}: tensor {key!r} at "
                              f"bytes {begin}-{stop} {what} (offsets must be contiguous)")
            end = stop
        if end > data_size:
            raise Broken(f"truncated safetensors file: {name} is {size} bytes, its header "
                          f"needs {8 + length + end} (cut short in writing or transfer?)")
        if end < data_size:
            raise Broken(f"corrupt safetensors file: {name} has {data_size - end} bytes after "
                          "its last tensor that no tensor of the header covers")
        # Read the data through once: the restore cost is part of the answer (D17).
        while stream.read(1 << 24):
            pass


def _tensor_span(name: str, key: str, info: Any) -> tuple[int, int]:
    """(begin, end) of one tensor, after checking its dtype, shape and offsets agree."""
    where = f"corrupt safetensors header in {name}: tensor {key!r}"
    if not isinstance(info, dict):
        raise Broken(f"{where} is not described by a mapping")
    dtype = info.get("dtype")
    if not isinstance(dtype, str) or dtype not in SAFETENSORS_DTYPE_BITS:
        raise Broken(f"{where} has an unknown dtype {dtype!r}")
    shape = info.get("shape")
    if not isinstance(shape, list) or not all(_whole(d) and d >= 0 for d in shape):
        raise Broken(f"{where} has shape {shape!r}: a list of whole numbers >= 0 is needed")
    offsets = info.get("data_offsets")
    if not isinstance(offsets, list) or len(offsets) != 2 \
            or not all(_whole(o) and o >= 0 for o in offsets):
        raise Broken(f"{where} has data_offsets {offsets!r}: [begin, end] in bytes is needed")
    begin, stop = offsets
    if stop < begin:
        raise Broken(f"{where} has inverted data_offsets [{begin}, {stop}]")
    count = 1
    for d in shape:
        count *= d
    bits = count * SAFETENSORS_DTYPE_BITS[dtype]
    if bits % 8 or bits // 8 != stop - begin:
        raise Broken(f"{where}: shape {shape} of {dtype} needs {bits / 8:g} bytes, its "
                      f"data_offsets [{begin}, {stop}] hold {stop - begin}")
    return begin, stop


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_metadata(name: str, metadata: Any) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise Broken(f"corrupt safetensors header in {name}: __metadata__ must map texts "
                      "to texts")


def torch_load(path: Path, ctx: Ctx, *, numpy_ok: bool = False) -> Any:
    try:
        import torch
    except ImportError as exc:
        raise Broken(f"torch is not installed in {sys.executable}: cannot reload "
                      f"{path.name}") from exc
    import pickle

    if path.stat().st_size == 0:
        raise Broken(f"empty file (0 bytes): {path.name}")
    try:
        if numpy_ok:
            with torch.serialization.safe_globals(_numpy_globals()):
                return torch.load(path, map_location="cpu", weights_only=True)
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "Weights only load failed" not in str(exc):
            raise Broken(f"corrupt pickle in {path.name}: {shorten(exc)}") from exc
        if not ctx.allow_unsafe:
            ctx.result["unsafe_pickle"] = True
            raise Unsafe(_unsafe_globals(path)) from exc
        ctx.result["unsafe_pickle"] = True
        ctx.warn(f"{path.name} was loaded with unsafe unpickling (allow_unsafe_pickle)")
        return _unsafe_load(torch, path)
    except (RuntimeError, EOFError, ValueError, OSError) as exc:
        raise Broken(_load_words(path, exc)) from exc


def _unsafe_load(torch: Any, path: Path) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise Broken(_load_words(path, exc)) from exc


def _load_words(path: Path, exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, EOFError) or "central directory" in text or "unexpected EOF" in text \
            or "truncated" in text.lower():
        return (f"truncated or corrupt file: {path.name} ({path.stat().st_size} bytes) "
                "was cut short in writing or transfer")
    return f"could not load {path.name}: {type(exc).__name__}: {shorten(exc)}"


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
