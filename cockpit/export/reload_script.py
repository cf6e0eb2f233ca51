"""The bag's ``reload.py``: rebuild each accepted run's model from what the bag holds and
load its accepted checkpoint into it (D19, D22, D23, issue 42).

This module owns the script's text (:func:`reload_script`). The script imports nothing of
the cockpit and rebuilds three kinds of saves (its table's ``rebuild``):

- ``factory``: a single checkpoint file (a ``cockpit.resume`` checkpoint's ``model``, a
  Lightning ``.ckpt``'s ``state_dict``, a plain state dict, safetensors) loaded into the
  run's ``model: "module:function"`` called with the run's params (those the function
  takes), from the bag's ``code/`` put first on ``sys.path``. Read with
  ``weights_only=True`` (``weights_only=False`` only for a run the campaign marks
  ``allow_unsafe_pickle``, and said so); loaded with ``strict=True``. When the keys do
  not fit and every key carries one common leading module (``model.`` of a
  LightningModule holding ``self.model``, ``module.`` of DataParallel) whose removal
  makes them fit exactly, the stripped state dict is loaded, strictly, and the output
  says so; keys under several leading modules, or a strip that fits only in part, are
  refused: never a non-strict load.
- ``hf``: a Hugging Face checkpoint folder (``config.json`` + weights): the class its
  ``config.json`` names in ``architectures`` through ``transformers``,
  ``from_pretrained(folder, local_files_only=True)`` (never the hub), every weight
  accounted for; without ``transformers`` or with a class it does not have, the run's
  ``model:`` when it declares one, else a message saying what is needed.
- ``adapter``: a PEFT adapter folder on its base model at the exact revision the
  campaign pinned (D23), through ``peft`` and ``transformers``, the base read from the
  local Hugging Face cache (``--allow-download`` lets it be fetched at that revision);
  what is missing (peft, the base at that revision) is said in words.

Each file's sha256 is checked against the bag first. A landing's resume point is rebuilt
the same way and said to be *a resume point, not an accepted result*.
``python reload.py RUN`` exits 0 when the model was rebuilt and the checkpoint loaded,
1 otherwise; ``--json`` prints one JSON object. From Python::

    import reload
    model = reload.load("control")
"""

from __future__ import annotations

import json
from typing import Any

SCRIPT = r'''"""Rebuild an accepted model of campaign __CAMPAIGN__ and load its checkpoint.

Written by the cockpit's export. Needs torch, and transformers (peft) for a Hugging Face
checkpoint folder (adapter): see RELOAD.md and environment/requirements.txt. Run it
from anywhere:

    python reload.py RUN            # prints what it loaded, exits 0 (loaded) or 1
    python reload.py RUN --json     # the same as one JSON object
    python reload.py --list         # the runs it can rebuild, and with what

From Python (this folder on sys.path):  import reload; model = reload.load("RUN")
"""

import argparse
import hashlib
import importlib
import inspect
import json
import os
import re
import sys

# Nothing written into the bag (a __pycache__ of code/ would break its manifest).
sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
CAMPAIGN = __CAMPAIGN_REPR__
# run id -> rebuild ("factory", "hf", "adapter"), model "module:function", params,
# checkpoint (relative to this folder), sha256 of each of its files, base model + revision
RUNS = json.loads(__RUNS_JSON__)
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_files(spec):
    """Each file of the checkpoint against the sha256 the bag recorded."""
    files = spec.get("files") or ({spec["checkpoint"]: spec["sha256"]} if spec.get("sha256")
                                  else {})
    for rel, expected in sorted(files.items()):
        if expected and _sha256(os.path.join(HERE, *rel.split("/"))) != expected:
            raise RuntimeError(f"{rel}: sha256 does not match the bag's manifest")


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
    """The model's state dict: a cockpit.resume checkpoint's "model", a Lightning
    checkpoint's "state_dict", or the checkpoint itself when it is a plain state dict."""
    if isinstance(checkpoint, dict):
        for key in ("model", "state_dict", "model_state_dict"):
            if isinstance(checkpoint.get(key), dict):
                return checkpoint[key], key
    return checkpoint, None


def read_checkpoint(path, allow_unsafe=False, out=None):
    """A checkpoint file's content: safetensors, else torch.load with weights_only=True
    (weights_only=False only when the campaign allowed it for this run, and said so)."""
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file
        return load_file(path, device="cpu")
    import torch
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # an object weights_only refuses (UnpicklingError)
        if not allow_unsafe:
            raise RuntimeError(f"{os.path.basename(path)} does not load with weights_only=True "
                               f"({type(exc).__name__}: {str(exc)[:300]}); the campaign does "
                               "not allow unsafe unpickling for this run "
                               "(allow_unsafe_pickle)") from exc
    if out is not None:
        out["weights_only"] = False
    return torch.load(path, map_location="cpu", weights_only=False)


def strip_prefix(state, expected):
    """(prefix, state without it) when every key of ``state`` starts with one common
    leading module and removing it gives exactly the keys ``expected``; else (None, why)."""
    keys = list(state)
    if not keys or any("." not in k for k in keys):
        return None, "some keys carry no leading module"
    firsts = sorted({k.split(".", 1)[0] for k in keys})
    if len(firsts) > 1:
        shown = ", ".join(f + "." for f in firsts[:6])
        return None, f"the keys are under several leading modules ({shown}): ambiguous"
    prefix = firsts[0] + "."
    stripped = {k[len(prefix):]: v for k, v in state.items()}
    if set(stripped) != set(expected):
        missing = len(set(expected) - set(stripped))
        extra = len(set(stripped) - set(expected))
        return None, (f"without {prefix!r} the keys fit only in part ({missing} missing, "
                      f"{extra} unexpected)")
    return prefix, stripped


def load_state(model, state, out):
    """``state`` into ``model`` with strict=True, a common leading module stripped when
    that alone makes the keys fit exactly (said in ``out``); never a non-strict load."""
    expected, found = set(model.state_dict()), set(state)
    out["missing_keys"] = sorted(expected - found)
    out["unexpected_keys"] = sorted(found - expected)
    if expected != found:
        prefix, stripped = strip_prefix(state, expected)
        if prefix is None:
            out["prefix_refused"] = stripped
        else:
            state = stripped
            out["prefix_stripped"] = prefix
            out["missing_keys"], out["unexpected_keys"] = [], []
    model.load_state_dict(state, strict=True)
    out["tensors"] = len(state)
    return model


def load_factory(run, path, spec, out):
    """The run's model: "module:function" with a single checkpoint file loaded into it."""
    model, used, unused = build(run)
    out.update(model=spec["model"], params=used, params_not_taken=unused,
               model_class=type(model).__name__, rebuilt_with=f"model {spec['model']}")
    state, key = state_dict_of(read_checkpoint(path, spec.get("allow_unsafe_pickle"), out))
    if not isinstance(state, dict):
        raise RuntimeError(f"{spec['checkpoint']} holds no state dict")
    out["state_dict"] = key or "(the file itself)"
    return load_state(model, state, out)


def hf_class(folder):
    """(the class name config.json's architectures gives, the transformers module)."""
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    names = config.get("architectures") if isinstance(config, dict) else None
    name = names[0] if isinstance(names, list) and names else None
    try:
        import transformers
    except ImportError:
        return name, None
    return name, transformers


def load_hf(run, folder, spec, out):
    """A Hugging Face checkpoint folder: the class its config.json names, from_pretrained
    locally; without transformers or that class, the run's model: when it has one."""
    name, transformers = hf_class(folder)
    cls = getattr(transformers, name, None) if transformers and name else None
    if cls is None:
        why = ("transformers is not installed (pip install -r environment/requirements.txt)"
               if transformers is None else
               "its config.json names no architectures" if not name else
               f"transformers {transformers.__version__} has no class {name}")
        weights = next((w for w in HF_WEIGHTS if os.path.isfile(os.path.join(folder, w))), None)
        if not spec.get("model") or weights is None:
            raise RuntimeError(f"{spec['checkpoint']} is a Hugging Face checkpoint folder "
                               f"(config.json names {name or 'no class'}) and {why}; the run "
                               "declares no model: to build it with instead")
        out["fallback"] = why
        return load_factory(run, os.path.join(folder, weights), spec, out)
    model, info = cls.from_pretrained(folder, local_files_only=True, output_loading_info=True)
    out.update(model=f"transformers.{name}", model_class=name, params={},
               rebuilt_with=f"transformers.{name}.from_pretrained (config.json architectures)")
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        out[key] = sorted(str(k) for k in (info.get(key) or []))
    if out["missing_keys"] or out["unexpected_keys"] or out["mismatched_keys"]:
        raise RuntimeError(f"{name}.from_pretrained did not account for every weight")
    out["state_dict"] = next((w for w in HF_WEIGHTS if os.path.isfile(
        os.path.join(folder, w))), "sharded weights")
    out["tensors"] = len(model.state_dict())
    return model


def load_adapter(run, folder, spec, out, allow_download=False):
    """A PEFT adapter on its base model at the exact revision the campaign pinned (D23)."""
    base, revision = spec.get("base_model"), spec.get("base_revision")
    if not base or not isinstance(revision, str) or not re.fullmatch(r"[0-9a-f]{40}", revision):
        raise RuntimeError(f"the adapter's base model {base!r} is not pinned to an exact "
                           f"revision (a 40-hex commit; got {revision!r}): not rebuilt (D23)")
    needs = (f"the base model {base} at revision {revision} in this machine's Hugging Face "
             f"cache (hf download {base} --revision {revision}), or reload.py "
             "--allow-download")
    out.update(base_model=base, base_revision=revision)
    try:
        import peft
        import transformers
    except ImportError as exc:
        raise RuntimeError(f"rebuilding this adapter needs peft and transformers (pip install "
                           f"-r environment/requirements.txt) and {needs}; {exc}") from exc
    local = not allow_download
    try:
        config = transformers.AutoConfig.from_pretrained(base, revision=revision,
                                                         local_files_only=local)
        name = (getattr(config, "architectures", None) or ["AutoModel"])[0]
        cls = getattr(transformers, name, None) or transformers.AutoModel
        base_model = cls.from_pretrained(base, revision=revision, local_files_only=local)
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"rebuilding this adapter needs {needs}; "
                           f"{type(exc).__name__}: {str(exc)[:300]}") from exc
    model = peft.PeftModel.from_pretrained(base_model, folder, is_trainable=False)
    out.update(model=f"peft.PeftModel on transformers.{cls.__name__}", params={},
               model_class=type(model).__name__,
               rebuilt_with=f"peft.PeftModel.from_pretrained on {cls.__name__} {base}@{revision}")
    expected = set(peft.get_peft_model_state_dict(model))
    found = set(adapter_weights(folder))
    out["missing_keys"] = sorted(expected - found)
    out["unexpected_keys"] = sorted(found - expected)
    if out["missing_keys"] or out["unexpected_keys"]:
        raise RuntimeError("the adapter's weights do not fit its base model")
    out["state_dict"], out["tensors"] = "adapter weights", len(found)
    return model


def adapter_weights(folder):
    for name in ("adapter_model.safetensors", "adapter_model.bin"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return read_checkpoint(path)
    raise RuntimeError("the adapter folder holds no adapter_model.safetensors or .bin")


def load(run, report=None, allow_download=False):
    """Rebuild the run's model and load its accepted checkpoint (strict); the model."""
    spec = RUNS[run]
    out = report if report is not None else {}
    path = os.path.join(HERE, *spec["checkpoint"].split("/"))
    out["checkpoint"], out["rebuild"] = spec["checkpoint"], spec.get("rebuild", "factory")
    out.setdefault("weights_only", True)
    check_files(spec)
    if out["rebuild"] == "hf":
        model = load_hf(run, path, spec, out)
    elif out["rebuild"] == "adapter":
        model = load_adapter(run, path, spec, out, allow_download)
    else:
        model = load_factory(run, path, spec, out)
    model.eval()
    out["parameters"] = sum(p.numel() for p in model.parameters())
    out["resume_point"] = bool(spec.get("resume_point"))
    return model


def describe(spec):
    kind = spec.get("rebuild", "factory")
    if kind == "hf":
        return f"transformers.{spec.get('hf_class')} (config.json)"
    if kind == "adapter":
        return f"peft adapter on {spec.get('base_model')}@{spec.get('base_revision')}"
    return spec["model"]


def say(run, report):
    if not report["ok"]:
        print(f"run {run}: NOT reloaded: {report['error']}", file=sys.stderr)
        if report.get("prefix_refused"):
            print(f"  no common module prefix to strip: {report['prefix_refused']}",
                  file=sys.stderr)
        for name in ("missing_keys", "unexpected_keys", "mismatched_keys"):
            if report.get(name):
                print(f"  {name.replace('_', ' ')}: {', '.join(report[name][:20])}",
                      file=sys.stderr)
        return
    used = ", ".join(f"{k}={v!r}" for k, v in report["params"].items())
    call = f"model {report['model']}({used})" if report["rebuilt_with"].startswith("model ") \
        else report["model"]
    print(f"run {run}: {call} rebuilt ({report['model_class']}, "
          f"{report['parameters']:,} parameters) with {report['rebuilt_with']}")
    if report.get("fallback"):
        print(f"  (not the class config.json names: {report['fallback']})")
    print(f"  checkpoint {report['checkpoint']} ({report['state_dict']}, {report['tensors']} "
          f"tensors) loaded with strict=True"
          + ("" if report["weights_only"] else ", read with weights_only=False "
             "(the campaign's allow_unsafe_pickle)"))
    if report.get("prefix_stripped"):
        print(f"  every key of the checkpoint began with {report['prefix_stripped']!r}: "
              "stripped, then loaded strictly (the model's keys fit exactly)")
    print("  missing keys: none; unexpected keys: none")
    if report["resume_point"]:
        print("  a resume point, not an accepted result (the landing brought it home)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", help="the run id (one of --list)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--list", action="store_true", help="the runs this script rebuilds")
    parser.add_argument("--allow-download", action="store_true",
                        help="an adapter's base model may be fetched from the hub at its "
                             "pinned revision (default: the local cache only)")
    args = parser.parse_args(argv)
    if args.list or not args.run:
        for run, spec in RUNS.items():
            mark = " (a resume point, not an accepted result)" if spec.get("resume_point") else ""
            print(f"{run}: {describe(spec)} <- {spec['checkpoint']}{mark}")
        return 0 if args.list else 2
    if args.run not in RUNS:
        print(f"reload.py: no run {args.run!r} (runs: {', '.join(RUNS) or 'none'})",
              file=sys.stderr)
        return 2
    report = {"campaign": CAMPAIGN, "run": args.run, "ok": False}
    try:
        load(args.run, report, args.allow_download)
        report["ok"] = True
    except Exception as exc:  # noqa: BLE001 - any failure is reported, exit 1
        report["error"] = f"{type(exc).__name__}: {exc}"
    if args.json:
        print(json.dumps(report, default=str))
    else:
        say(args.run, report)
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
