"""The reload worker on a folder: HF Trainer, accelerate, sharded weights, PEFT adapters.

This module owns recognising a checkpoint folder's layout, reading the files of that
layout (weights, index, optimizer, RNG files) through :mod:`reload_file`, and an
adapter's pinned base model (D23).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from cockpit.runs.checkpoints.reload_file import check_optimizer, check_safetensors, torch_load
from cockpit.runs.checkpoints.reload_findings import (
    EPOCH_KEYS,
    HF_RNG_WARNING,
    STEP_KEYS,
    Broken,
    Ctx,
    Unsafe,
    is_int,
    shorten,
)


def inspect_folder(
    folder: Path, ctx: Ctx, kind: str, base_model: str | None, base_revision: str | None
) -> None:
    names = {p.name for p in folder.iterdir()}
    if not names:
        raise Broken(f"{folder.name}/ is empty: still being written, or the save failed")
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
        raise Broken(f"no checkpoint files recognised in {folder.name}/ (has: {shown})")
    if folder.name.startswith("tmp-checkpoint-"):
        ctx.warn("folder is still named tmp-checkpoint-*: HF Trainer had not finished it")
    if kind == "adapter":
        _check_adapter(folder, names, ctx, base_model, base_revision)


def _inspect_hf_trainer(folder: Path, names: set[str], ctx: Ctx) -> None:
    present = ctx.present
    ctx.warn(HF_RNG_WARNING)
    adapter = "adapter_config.json" in names
    _check_weights(folder, names, ctx, adapter=adapter)
    if "trainer_state.json" in names:
        try:
            state = json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise Broken(f"trainer_state.json unreadable: {shorten(exc)}") from exc
        present["progress"] = is_int(state.get("global_step"))
        ctx.set_step(state.get("global_step"))
        # The Trainer skips global_step batches on resume: the position follows progress.
        present["data_position"] = present["progress"]
    else:
        ctx.explain["progress"] = "progress (trainer_state.json missing)"
    if "optimizer.pt" in names:
        check_optimizer(torch_load(folder / "optimizer.pt", ctx), ctx)
        present["optimizer"] = True
    elif any(n.startswith("global_step") for n in names):
        present["optimizer"] = _deepspeed_optimizer(folder, names)
    present["scheduler"] = "scheduler.pt" in names
    present["scaler"] = "scaler.pt" in names
    rng_files = sorted(n for n in names if re.match(r"^rng_state(_\d+)?\.pth$", n))
    for name in rng_files[:1]:
        _read_rng_file(folder / name, ctx, {"python": "rng_python", "numpy": "rng_numpy",
                                            "cpu": "rng_torch", "cuda": "rng_cuda"})


def _inspect_accelerate(folder: Path, names: set[str], ctx: Ctx) -> None:
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
        check_optimizer(torch_load(folder / name, ctx), ctx)
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
            custom = torch_load(folder / name, ctx)
        except Unsafe:
            continue
        if isinstance(custom, Mapping):
            for key in (*STEP_KEYS, *EPOCH_KEYS):
                if is_int(custom.get(key)):
                    present["progress"] = True
                    if key in STEP_KEYS:
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


def _check_weights(folder: Path, names: set[str], ctx: Ctx, *, adapter: bool) -> None:
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


def _check_index(index: Path, ctx: Ctx) -> None:
    try:
        mapping = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise Broken(f"{index.name} unreadable: {shorten(exc)}") from exc
    if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
        raise Broken(f"{index.name} unreadable: weight_map must map names to shard files")
    shards = sorted(set(mapping.values()))
    # A shard is a file beside the index: never a path that leaves the checkpoint folder.
    astray = [s for s in shards if Path(s).name != s or s in (".", "..")]
    if astray:
        raise Broken(f"{index.name} names shards outside its folder: {', '.join(astray[:5])}")
    missing = [s for s in shards if not (index.parent / s).exists()]
    if missing:
        raise Broken(f"{index.name} names shards that are missing: {', '.join(missing[:5])}")
    for shard in shards:
        _check_weight_file(index.parent / shard, ctx)


def _check_weight_file(path: Path, ctx: Ctx) -> None:
    if path.stat().st_size == 0:
        raise Broken(f"empty file (0 bytes): {path.name}")
    if path.suffix == ".safetensors":
        check_safetensors(path)
    else:
        torch_load(path, ctx)


def _read_rng_file(path: Path, ctx: Ctx, keys: dict[str, str]) -> None:
    # These files hold numpy arrays: allow numpy's array globals (data, not code).
    try:
        state = torch_load(path, ctx, numpy_ok=True)
    except Unsafe:
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
    folder: Path, names: set[str], ctx: Ctx, base_model: str | None, base_revision: str | None
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
        raise Broken(f"adapter_config.json unreadable: {shorten(exc)}") from exc
    check_base(ctx, base_model or config.get("base_model_name_or_path"),
                base_revision or config.get("revision"))


def check_base(ctx: Ctx, base: str | None, revision: str | None) -> None:
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
