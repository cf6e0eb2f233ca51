"""Reload recipes: how each exported artifact reloads (``reload.json``, ``RELOAD.md``).

This module owns the per-artifact entry (layout, loader, snippet, the
``python -m cockpit.runs.checkpoints.reload_worker`` check command, the pinned base of an adapter,
D23) and the human RELOAD.md written from those entries: the accepted artifacts, then the
resume points a landing brought home (each said to be *a resume point, not an accepted
result*), then any other checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

import cockpit
from cockpit.campaign.model import Campaign, Run
from cockpit.export.payload import FileEntry
from cockpit.runs.checkpoints.discovery import CheckpointInfo

LOADER_PACKAGES = ("torch", "safetensors", "transformers", "peft", "accelerate", "lightning",
                   "numpy")


def installed_packages() -> dict[str, str]:
    found = {"cockpit": cockpit.__version__}
    for name in LOADER_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def hf_architecture(folder: Path) -> str | None:
    """The class a Hugging Face checkpoint folder's ``config.json`` names first in
    ``architectures`` (None: no config.json, or it names none)."""
    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    names = data.get("architectures") if isinstance(data, dict) else None
    if isinstance(names, list) and names and isinstance(names[0], str) \
            and names[0].isidentifier():
        return names[0]
    return None


def rebuild_kind(path: Path, files: list[str], model: str | None) -> str | None:
    """How the bag's reload.py rebuilds an artifact: "adapter" (a PEFT adapter folder),
    "hf" (a Hugging Face checkpoint folder with its config.json and weights), "factory"
    (one file into the run's ``model:``), or None (it cannot)."""
    inner = {Path(f).name for f in files}
    if path.is_dir():
        if "adapter_config.json" in inner:
            return "adapter"
        if "config.json" in inner and inner & {"model.safetensors", "pytorch_model.bin",
                                               "model.safetensors.index.json",
                                               "pytorch_model.bin.index.json"}:
            return "hf"
        return None
    return "factory" if model else None


def artifact_layout(path: Path, files: list[str], hf_class: str | None = None
                    ) -> tuple[str, str]:
    """(loader, python snippet) for an artifact at bag-relative ``path``."""
    name = path.name.lower()
    if name.endswith(".safetensors"):
        return ("safetensors.torch.load_file",
                f"from safetensors.torch import load_file; sd = load_file({str(path)!r})")
    if name.endswith((".pt", ".pth", ".ckpt", ".bin")):
        return ("torch.load",
                f"import torch; ckpt = torch.load({str(path)!r}, map_location='cpu', "
                "weights_only=True)")
    inner = {Path(f).name for f in files}
    if "adapter_config.json" in inner:
        return ("peft.PeftModel.from_pretrained", "")
    if "config.json" in inner:
        # The class config.json names (GPT2LMHeadModel keeps its LM head; AutoModel
        # would drop it).
        cls = hf_class or "AutoModel"
        return (f"transformers.{cls}.from_pretrained",
                f"from transformers import {cls}; m = {cls}.from_pretrained("
                f"{str(path)!r}, local_files_only=True)")
    return ("cockpit.runs.checkpoints.reload_worker", "")


def adapter_pin(run: Run, artifact: Path) -> tuple[str | None, str | None, list[str]]:
    """Base model id and exact revision for an adapter (D23): the campaign's, checked
    against the adapter's own adapter_config.json."""
    warnings: list[str] = []
    base, rev = run.base_model, run.base_revision
    config = artifact / "adapter_config.json" if artifact.is_dir() else None
    if config is not None and config.is_file():
        try:
            data = json.loads(config.read_text())
        except (OSError, ValueError):
            data = {}
        named = data.get("base_model_name_or_path")
        if base is None and isinstance(named, str):
            base = named
        elif isinstance(named, str) and base is not None and named != base:
            warnings.append(f"run {run.id}: adapter_config.json names base {named!r}, the "
                            f"campaign {base!r}")
        if rev is None and isinstance(data.get("revision"), str):
            rev = data["revision"]
    return base, rev, warnings


# A PEFT adapter's task_type -> the transformers Auto class that keeps its head.
TASK_AUTO = {"CAUSAL_LM": "AutoModelForCausalLM", "SEQ_2_SEQ_LM": "AutoModelForSeq2SeqLM",
             "SEQ_CLS": "AutoModelForSequenceClassification",
             "TOKEN_CLS": "AutoModelForTokenClassification",
             "QUESTION_ANS": "AutoModelForQuestionAnswering"}


def adapter_auto_class(folder: Path) -> str:
    """The Auto class for an adapter's base, from its adapter_config.json task_type."""
    try:
        data = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return "AutoModel"
    task = data.get("task_type") if isinstance(data, dict) else None
    return TASK_AUTO.get(task, "AutoModel") if isinstance(task, str) else "AutoModel"


def reload_entry(run: Run, art: CheckpointInfo, rel: str, files: list[FileEntry],
                  result: bool, warnings: list[str]) -> dict[str, Any]:
    rel_path = Path(rel)
    names = [f.path for f in files]
    hf_class = hf_architecture(art.path) if art.path.is_dir() else None
    loader, snippet = artifact_layout(rel_path, names, hf_class)
    check = (f"python -m cockpit.runs.checkpoints.reload_worker {rel} --kind {run.kind}"
             + (" --allow-unsafe" if run.allow_unsafe_pickle else ""))
    entry: dict[str, Any] = {
        "run": run.id, "result": run.result_id, "kind": run.kind, "path": rel,
        "chosen_for_result": result, "step": art.step, "layout": art.kind, "loader": loader,
        "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in files],
        "allow_unsafe_pickle": run.allow_unsafe_pickle,
        "verify_command": list(run.verify_command) if run.verify_command else None,
        "rebuild": rebuild_kind(art.path, names, run.model), "hf_class": hf_class,
    }
    if run.kind == "adapter":
        base, rev, notes = adapter_pin(run, art.path)
        warnings.extend(notes)
        entry["base_model"], entry["base_revision"] = base, rev
        check += f" --base-model {base} --base-revision {rev}"
        auto = adapter_auto_class(art.path)
        snippet = (f"from transformers import {auto}; from peft import PeftModel; "
                   f"base = {auto}.from_pretrained({base!r}, revision={rev!r}); "
                   f"m = PeftModel.from_pretrained(base, {rel!r})")
    entry["command"] = f"cd BAG && python -c \"{snippet}\"" if snippet else None
    entry["check_command"] = f"cd BAG && {check}"
    return entry


def reload_md(campaign: Campaign, entries: list[dict[str, Any]], info: dict[str, Any],
              rebuild: str = "") -> str:
    lines = [f"# Reloading the results of campaign {campaign.id}", ""]
    if rebuild:
        lines += [rebuild, "## Each artifact", ""]
    lines += ["Run these from the bag's folder (`cd BAG`, the folder holding `bagit.txt`).",
              f"Exported with Python {info['python']} and: "
              + ", ".join(f"{k} {v}" for k, v in info["packages"].items()), ""]
    chosen = [e for e in entries if e["chosen_for_result"]]
    if not chosen:
        lines.append("No accepted artifact is in this export.")
    for e in chosen:
        lines += [f"## Run {e['run']} (result {e['result']}, {e['kind']})", "",
                  f"- artifact: `{e['path']}` (layout {e['layout']}, step {e['step']})",
                  f"- loader: `{e['loader']}`"]
        if e["kind"] == "adapter":
            lines.append(f"- base model: `{e.get('base_model')}` at revision "
                         f"`{e.get('base_revision')}` (pinned, D23)")
        lines.append("")
        if e["command"]:
            lines += ["```sh", e["command"], "```", ""]
        lines += ["Check that it reloads in a fresh process (what verify-export does):", "",
                  "```sh", e["check_command"], "```", ""]
    lines += _resume_md(e for e in entries if e.get("resume_point"))
    others = [e for e in entries if not e["chosen_for_result"] and not e.get("resume_point")]
    if others:
        lines += ["## Other checkpoints in this export", ""]
        lines += [f"- `{e['path']}` (run {e['run']}, step {e['step']})" for e in others]
    return "\n".join(lines).rstrip() + "\n"


def _resume_md(entries: Iterable[dict[str, Any]]) -> list[str]:
    """RELOAD.md's resume points: what the landing brought home, never a result."""
    lines: list[str] = []
    for e in entries:
        if not lines:
            lines += ["", "## Resume points (not accepted results)", "",
                      "What the landing brought home to go on from: each is a *resume "
                      "point, not an accepted result* (the run was stopped, or ended "
                      "without a verdict). Resume training from it, or judge the run; do "
                      "not count it as a result.", ""]
        lines += [f"### Run {e['run']}: a resume point, not an accepted result", "",
                  f"- checkpoint: `{e['path']}` (layout {e['layout']}, step {e['step']})",
                  f"- why this one: {e.get('why')}", f"- loader: `{e['loader']}`", ""]
        if e["command"]:
            lines += ["```sh", e["command"], "```", ""]
        lines += ["Check that it reloads in a fresh process (what verify-export does):", "",
                  "```sh", e["check_command"], "```", ""]
    return lines
