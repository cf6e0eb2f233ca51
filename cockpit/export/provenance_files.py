"""What another person needs to rebuild a result next month, written into the bag (D19,
D22-D24): the code, the environment, the plan as decided and at the end, ``reload.py``.

This module owns the bag's ``data/code/`` (the campaign's code files, ``MANIFEST.json``
with their sha256, ``git.json`` + ``uncommitted.patch`` in a git work tree),
``data/environment/`` (``environment.json``, ``requirements.txt`` from
:mod:`cockpit.export.requirements`, ``pip-freeze.txt``), the plan copies
``data/plan/campaign.as-decided.yaml`` / ``campaign.at-end.yaml``, the environment
warnings (a change since the first run start, journaled by ``start``) and the
``reload.py`` table: for each accepted run (or a landing's resume point, marked so)
whose artifact reload.py can rebuild (a Hugging Face checkpoint folder, a PEFT adapter,
one file into the run's ``model:``), how, its params and checkpoint files; and RELOAD.md's
first section (per run, what rebuilds it and why). The facts come from
:mod:`cockpit.runs.provenance`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cockpit.campaign.model import Campaign, Run
from cockpit.export.payload import Payload
from cockpit.export.reload_script import reload_script
from cockpit.export.requirements import bag_requirements, local_indexes
from cockpit.journal.fields import Event
from cockpit.journal.plan_record import plan_versions
from cockpit.runs import provenance
from cockpit.runs.env_record import environment_warnings, recorded_environment

AS_DECIDED = "plan/campaign.as-decided.yaml"
AT_END = "plan/campaign.at-end.yaml"


@dataclass
class Provenance:
    """What was written, for the manifest and REPORT.md."""

    code: list[str] = field(default_factory=list)
    git: dict[str, Any] | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    environment_warnings: list[str] = field(default_factory=list)
    as_decided_from: str = ""
    requirements: int = 0  # pins in requirements.txt
    local_indexes: list[str] = field(default_factory=list)  # for the local builds pinned

    def as_json(self) -> dict[str, Any]:
        env = self.environment
        return {"code": self.code, "git": self.git,
                "environment": {"python": env.get("python"), "torch": env.get("torch"),
                                "nvidia": env.get("nvidia"),
                                "distributions": len(env.get("distributions") or {})},
                "environment_warnings": self.environment_warnings,
                "plan_as_decided_from": self.as_decided_from}


def add_provenance(payload: Payload, campaign: Campaign, events: list[Event],
                   env: Mapping[str, Any] | None = None,
                   table: Mapping[str, Mapping[str, Any]] | None = None) -> Provenance:
    """Write code/, environment/ and the two plan copies into the bag; ``table``: the
    reload.py table, whose needs join the code's imports in requirements.txt."""
    out = Provenance()
    folder = campaign.folder.resolve()
    files = provenance.campaign_code(campaign)
    for rel in files:
        entry = payload.add_file(f"code/{rel.as_posix()}", folder / rel)
        if entry is not None:
            out.code.append(entry.path)
    state = provenance.git_state(folder)
    if state is not None:
        top = Path(state["top"]).resolve()
        out.git = {"commit": state["commit"], "remote": state["remote"],
                   "dirty": state["dirty"], "untracked": state["untracked"],
                   "campaign_folder_in_repo": folder.relative_to(top).as_posix()
                   if folder.is_relative_to(top) else None,
                   "patch": "uncommitted.patch" if state["patch"] else None}
        payload.add_bytes("code/git.json", (json.dumps(out.git, indent=2) + "\n").encode())
        if state["patch"]:
            payload.add_bytes("code/uncommitted.patch", state["patch"].encode())
    manifest = {"campaign": campaign.id, "files": [
        {**f, "path": Path(f["path"]).as_posix()} for f in provenance.describe(files, folder)],
        "git": out.git is not None}
    payload.add_bytes("code/MANIFEST.json", (json.dumps(manifest, indent=2) + "\n").encode())

    environment = dict(env) if env is not None else provenance.environment()
    out.environment = environment
    payload.add_bytes("environment/environment.json",
                      (json.dumps(environment, indent=2, default=str) + "\n").encode())
    text, derived = bag_requirements(folder, [folder / p for p in files],
                                     reload_needs(table or {}), environment)
    payload.add_bytes("environment/requirements.txt", text.encode())
    payload.add_bytes("environment/pip-freeze.txt", provenance.freeze_txt(environment).encode())
    out.requirements = len(derived.pins)
    out.local_indexes = local_indexes(derived)
    out.environment_warnings = environment_warnings(
        recorded_environment(events), provenance.compact_environment(environment))

    versions = plan_versions(events)
    if versions and versions[0].text is not None:
        payload.add_bytes(AS_DECIDED, versions[0].text.encode("utf-8"))
        out.as_decided_from = f"the journal (recorded {versions[0].at.isoformat()})"
    else:
        payload.add_file(AS_DECIDED, campaign.path)
        out.as_decided_from = "the campaign file (no plan text in the journal yet)"
    payload.add_file(AT_END, campaign.path)
    return out


def run_params(campaign: Campaign, run: Run) -> dict[str, Any]:
    """The run's params: inline, or read from its params file (JSON or YAML)."""
    if run.params_file is None:
        return dict(run.params)
    try:
        data = yaml.safe_load(campaign.resolve(run.params_file).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return dict(data) if isinstance(data, dict) else {}


def reload_table(campaign: Campaign, entries: list[dict[str, Any]],
                 warnings: list[str]) -> dict[str, dict[str, Any]]:
    """run id -> what reload.py needs, for each accepted artifact or resume point
    (``resume_point``: true) that it can rebuild: a Hugging Face checkpoint folder (the
    class its config.json names), a PEFT adapter folder (on its pinned base), a single
    file into the run's ``model:``."""
    table: dict[str, dict[str, Any]] = {}
    for e in entries:
        run = campaign.runs.get(str(e.get("run")))
        if run is None or not (e.get("chosen_for_result") or e.get("resume_point")):
            continue
        kind = e.get("rebuild")
        if kind is None:
            if run.model:
                warnings.append(f"run {run.id} declares model {run.model!r} but its "
                                f"checkpoint {e.get('path')} is a folder that is neither a "
                                "Hugging Face checkpoint (config.json + weights) nor a PEFT "
                                "adapter: reload.py cannot rebuild it")
            continue
        files = e.get("files") or []
        spec: dict[str, Any] = {
            "rebuild": kind, "model": run.model, "params": run_params(campaign, run),
            "checkpoint": str(e["path"]).removeprefix("data/"),
            "files": {str(f.get("path")).removeprefix("data/"): f.get("sha256")
                      for f in files},
            "resume_point": bool(e.get("resume_point")),
            "allow_unsafe_pickle": run.allow_unsafe_pickle}
        if kind == "hf":
            spec["hf_class"] = e.get("hf_class")
        if kind == "adapter":
            spec["base_model"] = e.get("base_model") or run.base_model
            spec["base_revision"] = e.get("base_revision") or run.base_revision
        table[run.id] = spec
        e["model"] = run.model or rebuilt_with(spec)
        e["rebuild_command"] = f"cd BAG/data && python reload.py {run.id}"
    return table


def rebuilt_with(spec: Mapping[str, Any]) -> str:
    """What rebuilds a run's model, in a few words (RELOAD.md, the rebuild check)."""
    if spec.get("rebuild") == "hf":
        return f"transformers.{spec.get('hf_class') or '(no class in config.json)'}"
    if spec.get("rebuild") == "adapter":
        return f"peft adapter on {spec.get('base_model')}@{spec.get('base_revision')}"
    return str(spec.get("model"))


def reload_needs(table: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The modules reload.py imports for ``table`` (module -> "reload.py")."""
    needs: dict[str, str] = {}
    for spec in table.values():
        kind = spec.get("rebuild")
        names = ["torch"] + (["transformers"] if kind in ("hf", "adapter") else []) \
            + (["peft"] if kind == "adapter" else [])
        if kind != "factory" or str(spec.get("checkpoint")).endswith(".safetensors"):
            names.append("safetensors")
        needs.update({n: "reload.py" for n in names})
    return needs


def add_reload_script(payload: Payload, campaign: Campaign,
                      table: dict[str, dict[str, Any]]) -> str | None:
    """``data/reload.py`` when a run can be rebuilt (its bag path), else None."""
    if not table:
        return None
    return payload.add_bytes("reload.py", reload_script(campaign.id, table).encode()).path


def environment_section(prov: Provenance, reload_path: str | None,
                        table: Mapping[str, Any]) -> str:
    """REPORT.md's section on code, environment and rebuilding."""
    env = prov.environment
    torch = env.get("torch") or {}
    lines = ["", "## Code and environment", "",
             f"- code: {len(prov.code)} file(s) in `data/code/` (sha256 in "
             "`data/code/MANIFEST.json`)"]
    if prov.git:
        lines.append(f"- git: commit `{prov.git['commit']}`"
                     + (f" of {prov.git['remote']}" if prov.git.get("remote") else "")
                     + (", uncommitted changes in `data/code/uncommitted.patch`"
                        if prov.git.get("patch") else ", no uncommitted change"))
    lines.append(f"- Python {env.get('python')} ({env.get('implementation')}), "
                 f"{env.get('os')} {env.get('machine')}"
                 + (f", torch {torch.get('version')} (CUDA {torch.get('cuda')}, cuDNN "
                    f"{torch.get('cudnn')})" if torch.get("version") else ""))
    lines.append(f"- requirements: `data/environment/requirements.txt` ({prov.requirements} "
                 "distributions: what the code imports and their dependencies, pinned); "
                 "every installed one in `data/environment/pip-freeze.txt`")
    nvidia = env.get("nvidia") or {}
    if nvidia:
        lines.append(f"- NVIDIA driver {nvidia.get('driver')}: "
                     + ", ".join(nvidia.get("gpus") or []))
    lines.append(f"- plan as decided: `data/{AS_DECIDED}` (from {prov.as_decided_from}); "
                 f"at the end: `data/{AT_END}`")
    if reload_path:
        lines.append(f"- rebuild: `{reload_path}` rebuilds the model of "
                     + ", ".join(sorted(table)) + " (see RELOAD.md)")
    for warning in prov.environment_warnings:
        lines.append(f"- **warning**: {warning}")
    return "\n".join(lines) + "\n"


def rebuild_md(campaign: Campaign, table: Mapping[str, Any], env: Mapping[str, Any],
               indexes: list[str] | None = None) -> str:
    """RELOAD.md's first section: from the fetched tar alone to the model, exactly, and
    per run what rebuilds it and why."""
    if not table:
        return ""
    first = sorted(table)[0]
    lines = ["## Rebuild the model from this bag alone", "",
             "With only the fetched tar, on any machine (Python "
             f"{env.get('python')} was used):", "",
             "```sh",
             f"sha256sum -c {campaign.id}.tar.sha256 && tar -xf {campaign.id}.tar",
             f"cd {campaign.id}/data",
             "python3 -m venv .venv && . .venv/bin/activate",
             "pip install -r environment/requirements.txt   # what the code imports, pinned"]
    for index in indexes or ():
        lines.append(f"#   the exact local builds that were used: add --extra-index-url {index}")
    lines += [f"python reload.py {first}", "```", "",
              "`environment/requirements.txt` holds the distributions the campaign's code "
              "imports (and what `reload.py` needs), with their own dependencies, pinned; "
              "`environment/pip-freeze.txt` every distribution that was installed. "
              "`reload.py` rebuilds each model below, checks each file's sha256, loads the "
              "weights strictly (no missing or unexpected key) and prints what it loaded; it "
              "exits 0 when the model is back, 1 otherwise. In Python, from this folder: "
              f"`import reload; model = reload.load({first!r})`.", "",
              "| run | rebuilt with | why | checkpoint |", "|---|---|---|---|"]
    for run_id in sorted(table):
        spec = table[run_id]
        mark = " (a resume point, not an accepted result)" if spec.get("resume_point") else ""
        lines.append(f"| {run_id} | `{_rebuilt_call(spec)}` | {_why(spec)} | "
                     f"`{spec['checkpoint']}`{mark} |")
    lines += ["", "The code's git commit and uncommitted patch, when the campaign was in a git "
              "work tree, are in `code/git.json` and `code/uncommitted.patch`; the full "
              "environment (every distribution, torch / CUDA / cuDNN, the NVIDIA driver) in "
              "`environment/environment.json`.", ""]
    return "\n".join(lines)


def _rebuilt_call(spec: Mapping[str, Any]) -> str:
    if spec.get("rebuild") == "hf":
        return f"transformers.{spec.get('hf_class')}.from_pretrained(folder, " \
               "local_files_only=True)"
    if spec.get("rebuild") == "adapter":
        return (f"peft.PeftModel.from_pretrained(base, folder), base "
                f"{spec.get('base_model')} at revision {spec.get('base_revision')}")
    params = ", ".join(f"{k}={v!r}" for k, v in (spec.get("params") or {}).items())
    return f"{spec.get('model')}({params})"


def _why(spec: Mapping[str, Any]) -> str:
    if spec.get("rebuild") == "hf":
        return ("the class the folder's `config.json` names in `architectures` (it keeps "
                "the model's head; `AutoModel` would drop it)"
                + ("; the run's `model:` if transformers lacks it" if spec.get("model") else ""))
    if spec.get("rebuild") == "adapter":
        return ("a PEFT adapter (`adapter_config.json`) on the base model and exact revision "
                "the campaign pinned (D23); the base is read from the local Hugging Face "
                "cache (`reload.py RUN --allow-download` fetches it at that revision)")
    why = "the run's `model:` in the campaign file, called with the run's params it takes"
    if str(spec.get("checkpoint")).endswith(".ckpt"):
        why += ("; the Lightning checkpoint's `state_dict`, a leading module common to "
                "every key (`model.` of a LightningModule holding `self.model`) stripped "
                "only when that makes the keys fit exactly (said so)")
    return why
