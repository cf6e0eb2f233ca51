"""Reload one checkpoint in this (fresh) process and say what a restart would get (D16/D17).

Run as ``python -m cockpit.runs.checkpoints.reload_worker PATH --kind train|inference|adapter
[--allow-unsafe] [--base-model ID] [--base-revision REV]``. It prints exactly one JSON
object on stdout (whatever the loaded code prints goes to stderr) and exits 0 even when
the checkpoint is broken: the report says why in words.

This module owns the worker's entry point (``inspect_checkpoint``, ``main``) and the
verdict per kind. The recognition of checkpoint layouts lives beside it: one file
(torch dicts in their usual spellings, ``cockpit.resume``, Lightning, safetensors) in
``reload_file``, a folder (HF Trainer, accelerate, sharded weights, PEFT adapters) in
``reload_folder``, their shared vocabulary in ``reload_findings``. All import only the
standard library at the top so they run in a training environment that lacks the
cockpit's own dependencies; torch is imported only when a file needs it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from cockpit.runs.checkpoints.reload_file import inspect_file
from cockpit.runs.checkpoints.reload_findings import (
    COMPONENTS,
    REQUIRED,
    UNSAFE_WORDS,
    WORDS,
    Broken,
    Ctx,
    Unsafe,
    shorten,
)
from cockpit.runs.checkpoints.reload_findings import HF_RNG_WARNING as HF_RNG_WARNING  # re-exported
from cockpit.runs.checkpoints.reload_findings import (
    LIGHTNING_RNG_WARNING as LIGHTNING_RNG_WARNING,  # re-exported
)
from cockpit.runs.checkpoints.reload_folder import check_base, inspect_folder


def inspect_checkpoint(
    path: str | os.PathLike[str],
    kind: str = "train",
    *,
    allow_unsafe: bool = False,
    base_model: str | None = None,
    base_revision: str | None = None,
) -> dict[str, Any]:
    """The report as a plain dict (see
    :class:`cockpit.runs.checkpoints.reload_check.VerifyReport`)."""
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
    ctx = Ctx(result, allow_unsafe)
    if target.is_dir() or target.suffix != ".safetensors":
        # Import before timing: load_seconds is the restore cost, not python's start-up.
        try:
            import torch  # noqa: F401
        except ImportError:
            pass
    started = time.perf_counter()
    try:
        if not target.exists():
            raise Broken(f"{target} does not exist")
        if target.is_dir():
            inspect_folder(target, ctx, kind, base_model, base_revision)
        else:
            inspect_file(target, ctx, kind)
            if kind == "adapter":
                check_base(ctx, base_model, base_revision)
    except Unsafe as exc:
        result["unsafe_pickle"] = True
        needed = f" ({', '.join(exc.globals_needed)})" if exc.globals_needed else ""
        result["error"] = UNSAFE_WORDS + needed
    except Broken as exc:
        result["error"] = str(exc)
    except Exception as exc:  # never crash: a verifier that dies says nothing
        result["error"] = f"could not load: {type(exc).__name__}: {shorten(exc)}"
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


# --------------------------------------------------------------------- helpers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cockpit.runs.checkpoints.reload_worker")
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
