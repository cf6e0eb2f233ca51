"""The bag's ``reload.py``: rebuild each accepted run's model from the bag's own code and
load its accepted checkpoint into it, with only torch installed (D19, D22, D23).

This module owns the script's text (:func:`reload_script`). The script imports
nothing of the cockpit: it puts the bag's ``code/`` first on ``sys.path``, calls the
run's ``model: "module:function"`` with the run's params (those the function takes),
checks the checkpoint's sha256 against the bag, loads it with ``weights_only`` and
``strict=True``, and prints what it loaded (missing and unexpected keys, parameters). A
landing's resume point is rebuilt the same way and said to be *a resume point, not an
accepted result*.
``python reload.py RUN`` exits 0 when the model was rebuilt and the checkpoint loaded,
1 otherwise; ``--json`` prints one JSON object. From Python::

    import reload
    model = reload.load("control")
"""

from __future__ import annotations

import json
from typing import Any

SCRIPT = r'''"""Rebuild an accepted model of campaign __CAMPAIGN__ and load its checkpoint.

Written by the cockpit's export. Needs only torch (see RELOAD.md); run it from anywhere:

    python reload.py RUN            # prints what it loaded, exits 0 (loaded) or 1
    python reload.py RUN --json     # the same as one JSON object
    python reload.py --list         # the runs it can rebuild

From Python (this folder on sys.path):  import reload; model = reload.load("RUN")
"""

import argparse
import hashlib
import importlib
import inspect
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CAMPAIGN = __CAMPAIGN_REPR__
# run id -> model "module:function", params, checkpoint (relative to this folder), sha256
RUNS = json.loads(__RUNS_JSON__)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def build(run):
    """The run's model, freshly built from the bag's code (its weights not loaded)."""
    spec = RUNS[run]
    code = os.path.join(HERE, "code")
    if code not in sys.path:
        sys.path.insert(0, code)
    module_name, _, function_name = spec["model"].partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    params = dict(spec.get("params") or {})
    try:
        signature = inspect.signature(function)
        takes_all = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
        names = set(signature.parameters)
    except (TypeError, ValueError):
        takes_all, names = True, set()
    used = params if takes_all else {k: v for k, v in params.items() if k in names}
    return function(**used), used, sorted(set(params) - set(used))


def state_dict_of(checkpoint):
    """The model's state dict: a cockpit.resume checkpoint's "model", a "state_dict"
    entry, or the checkpoint itself when it is a plain state dict."""
    if isinstance(checkpoint, dict):
        for key in ("model", "state_dict", "model_state_dict"):
            if isinstance(checkpoint.get(key), dict):
                return checkpoint[key], key
    return checkpoint, None


def read_checkpoint(path):
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file
        return load_file(path, device="cpu")
    import torch
    return torch.load(path, map_location="cpu", weights_only=True)


def load(run, report=None):
    """Rebuild the run's model and load its accepted checkpoint (strict); the model."""
    spec = RUNS[run]
    out = report if report is not None else {}
    model, used, unused = build(run)
    out.update(model=spec["model"], params=used, params_not_taken=unused,
               model_class=type(model).__name__)
    path = os.path.join(HERE, *spec["checkpoint"].split("/"))
    out["checkpoint"] = spec["checkpoint"]
    if spec.get("sha256") and _sha256(path) != spec["sha256"]:
        raise RuntimeError(f"{spec['checkpoint']}: sha256 does not match the bag's manifest")
    state, key = state_dict_of(read_checkpoint(path))
    if not isinstance(state, dict):
        raise RuntimeError(f"{spec['checkpoint']} holds no state dict")
    expected, found = set(model.state_dict()), set(state)
    out["state_dict"] = key or "(the file itself)"
    out["missing_keys"] = sorted(expected - found)
    out["unexpected_keys"] = sorted(found - expected)
    model.load_state_dict(state, strict=True)
    model.eval()
    out["parameters"] = sum(p.numel() for p in model.parameters())
    out["tensors"] = len(state)
    out["resume_point"] = bool(spec.get("resume_point"))
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", help="the run id (one of --list)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--list", action="store_true", help="the runs this script rebuilds")
    args = parser.parse_args(argv)
    if args.list or not args.run:
        for run, spec in RUNS.items():
            mark = " (a resume point, not an accepted result)" if spec.get("resume_point") else ""
            print(f"{run}: {spec['model']} <- {spec['checkpoint']}{mark}")
        return 0 if args.list else 2
    if args.run not in RUNS:
        print(f"reload.py: no run {args.run!r} (runs: {', '.join(RUNS) or 'none'})",
              file=sys.stderr)
        return 2
    report = {"campaign": CAMPAIGN, "run": args.run, "ok": False}
    try:
        load(args.run, report)
        report["ok"] = True
    except Exception as exc:  # noqa: BLE001 - any failure is reported, exit 1
        report["error"] = f"{type(exc).__name__}: {exc}"
    if args.json:
        print(json.dumps(report))
    elif report["ok"]:
        used = ", ".join(f"{k}={v!r}" for k, v in report["params"].items())
        print(f"run {args.run}: model {report['model']}({used}) rebuilt "
              f"({report['model_class']}, {report['parameters']:,} parameters)")
        print(f"  checkpoint {report['checkpoint']} ({report['state_dict']}, "
              f"{report['tensors']} tensors) loaded with strict=True")
        print("  missing keys: none; unexpected keys: none")
        if report["resume_point"]:
            print("  a resume point, not an accepted result (the landing brought it home)")
    else:
        print(f"run {args.run}: NOT reloaded: {report['error']}", file=sys.stderr)
        for name in ("missing_keys", "unexpected_keys"):
            if report.get(name):
                print(f"  {name.replace('_', ' ')}: {', '.join(report[name][:20])}",
                      file=sys.stderr)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
'''


def reload_script(campaign_id: str, runs: dict[str, dict[str, Any]]) -> str:
    """The text of ``reload.py`` for ``runs`` (run id -> model, params, checkpoint path
    relative to the bag's ``data/``, sha256)."""
    table = json.dumps(runs, indent=1, sort_keys=True, default=str)
    return (SCRIPT.replace("__CAMPAIGN_REPR__", repr(campaign_id))
            .replace("__CAMPAIGN__", campaign_id)
            .replace("__RUNS_JSON__", repr(table)))
