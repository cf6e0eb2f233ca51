"""What another person needs to rebuild a result next month (D19, D22, D23): the code the
stages ran and the environment they ran in.

- :func:`code_files`: the scripts the stages' commands run and the Python modules they
  import from the campaign folder (found by reading their imports, never by running
  them), each with its sha256;
- :func:`git_state`: when the campaign folder is in a git work tree, the commit, the
  remote URL and the uncommitted changes as a patch;
- :func:`environment`: Python, every installed distribution (:func:`freeze_txt`: their
  full record), torch / CUDA / cuDNN (asked in a separate process, so the cockpit never
  imports torch), the NVIDIA driver and GPU names from NVML, the OS. What a user installs
  from is derived from the code's imports by :mod:`cockpit.export.requirements`.
"""

from __future__ import annotations

import ast
import hashlib
import json
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from cockpit.campaign.model import Campaign, model_module_file
from cockpit.common.fsutil import sha256_file

GIT_TIMEOUT_S = 20.0
TORCH_TIMEOUT_S = 60.0


# ---------------------------------------------------------------- code


def code_files(campaign: Campaign) -> list[Path]:
    """The campaign's own code, relative to its folder, in a stable order."""
    folder = campaign.folder.resolve()
    todo: list[Path] = []
    for stage in campaign.stages:
        words = stage.command.split() if isinstance(stage.command, str) else stage.command
        for word in words or ():
            _add_script(folder, stage.cwd or folder, word, todo)
    for run in campaign.runs.values():
        for argv in (run.verify_command, run.resume_check.command if run.resume_check else None):
            for word in argv or ():
                _add_script(folder, folder, word, todo)
    return _with_local_imports(folder, todo)


def _with_local_imports(folder: Path, todo: list[Path],
                        seen: dict[Path, None] | None = None) -> list[Path]:
    """``todo`` and every campaign module they import, relative to ``folder``, sorted."""
    seen = {} if seen is None else seen
    while todo:
        path = todo.pop(0)
        if path in seen:
            continue
        seen[path] = None
        todo.extend(_local_imports(folder, path))
    return sorted(p.relative_to(folder) for p in seen)


def _add_script(folder: Path, cwd: Path, word: str, todo: list[Path]) -> None:
    if not word.endswith(".py"):
        return
    candidate = (cwd / word).resolve()
    if candidate.is_file() and candidate.is_relative_to(folder):
        todo.append(candidate)


def _local_imports(folder: Path, path: Path) -> list[Path]:
    """Modules ``path`` imports that live in the campaign folder (or beside the script)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    found: list[Path] = []
    for name in names:
        parts = name.split(".")
        for base in (path.parent, folder):
            module = base.joinpath(*parts)
            for candidate in (module.with_suffix(".py"), module / "__init__.py"):
                if candidate.is_file() and candidate.resolve().is_relative_to(folder):
                    found.append(candidate.resolve())
    return found


def git_state(folder: Path) -> dict[str, Any] | None:
    """Commit, remote and uncommitted changes of the work tree holding ``folder``."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True,
                                  text=True, timeout=GIT_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    commit = git("rev-parse", "HEAD")
    if top is None or commit is None:
        return None
    remote = git("remote", "get-url", "origin")
    patch = git("diff", "HEAD", "--binary") or ""
    status = git("status", "--porcelain", "--untracked-files=all", "--", ".") or ""
    untracked = [line[3:] for line in status.splitlines() if line.startswith("?? ")]
    return {"top": top.strip(), "commit": commit.strip(),
            "remote": remote.strip() if remote else None,
            "dirty": bool(patch), "patch": patch, "untracked": untracked}


# ---------------------------------------------------------------- environment


_TORCH_PROBE = (
    "import json, torch\n"
    "cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None\n"
    "print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda,"
    " 'cudnn': cudnn, 'cuda_available': torch.cuda.is_available()}))\n"
)


def distributions() -> dict[str, str]:
    """Every installed distribution and its version, by normalized name."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found[name.lower().replace("_", "-")] = dist.version
    return dict(sorted(found.items()))


def torch_versions(python: str = sys.executable) -> dict[str, Any] | None:
    """torch, CUDA and cuDNN versions, asked in a fresh process (None: no torch)."""
    try:
        metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None
    try:
        done = subprocess.run([python, "-c", _TORCH_PROBE], capture_output=True, text=True,
                              timeout=TORCH_TIMEOUT_S)
        data = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return {"version": metadata.version("torch"), "error": "torch did not answer"}
    return data if isinstance(data, dict) else None


def nvidia() -> dict[str, Any] | None:
    """The driver and the GPUs' names from NVML (None: no NVML here)."""
    try:
        from cockpit.telemetry.nvml.adapter import load_pynvml

        nvml = load_pynvml()
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no library, no driver, no GPU: all mean "none here"
        return None
    try:
        driver = nvml.nvmlSystemGetDriverVersion()
        count = nvml.nvmlDeviceGetCount()
        names = [nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i))
                 for i in range(count)]
        return {"driver": _text(driver), "gpus": [_text(n) for n in names]}
    except Exception:  # noqa: BLE001 - a partial answer is still no answer
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def environment(*, with_torch: bool = True, with_nvml: bool = True) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": platform.system(), "os_release": platform.release(),
        "machine": platform.machine(),
        "distributions": distributions(),
        "torch": torch_versions() if with_torch else None,
        "nvidia": nvidia() if with_nvml else None,
    }


def freeze_txt(env: Mapping[str, Any]) -> str:
    """Every installed distribution, pinned exactly (local build labels kept): the
    environment's full record (``environment/pip-freeze.txt``). What to install from is
    the bag's ``requirements.txt`` (:mod:`cockpit.export.requirements`)."""
    lines = [f"# Every distribution installed at the export: Python {env.get('python')} "
             f"({env.get('implementation')}), {env.get('os')} {env.get('machine')}",
             "# (a record: install from requirements.txt beside it)"]
    torch = env.get("torch") or {}
    if torch.get("version"):
        lines.append(f"# torch {torch['version']}, CUDA {torch.get('cuda')}, "
                     f"cuDNN {torch.get('cudnn')}")
    for name, version in (env.get("distributions") or {}).items():
        if name == "cockpit":
            lines.append(f"# cockpit=={version} (install it from its own source)")
            continue
        lines.append(f"{name}=={version}")
    return "\n".join(lines) + "\n"


def environment_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What differs between two environments, in words (empty: the same)."""
    out: list[str] = []
    for key in ("python", "implementation", "os", "machine"):
        if before.get(key) != after.get(key):
            out.append(f"{key} {before.get(key)} -> {after.get(key)}")
    old, new = before.get("distributions") or {}, after.get("distributions") or {}
    out += [f"{n} {old[n]} -> {new[n]}" for n in sorted(set(old) & set(new)) if old[n] != new[n]]
    out += [f"{n} {new[n]} installed" for n in sorted(set(new) - set(old))]
    out += [f"{n} {old[n]} removed" for n in sorted(set(old) - set(new))]
    for key in ("torch", "nvidia"):
        if (before.get(key) or None) != (after.get(key) or None):
            out.append(f"{key}: {before.get(key)} -> {after.get(key)}")
    return out


def describe(files: Iterable[Path], folder: Path) -> list[dict[str, Any]]:
    """Each code file with its size and sha256."""
    return [{"path": str(p), "bytes": (folder / p).stat().st_size,
             "sha256": sha256_file(folder / p)} for p in files]


# ---------------------------------------------------------------- the journaled form

KEY_DISTRIBUTIONS = ("torch", "numpy", "transformers", "peft", "accelerate", "lightning",
                     "safetensors", "cockpit")


def distributions_sha256(dists: Mapping[str, str]) -> str:
    """One hash for every installed distribution and its version."""
    text = "".join(f"{name}=={version}\n" for name, version in sorted(dists.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def compact_environment(env: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A small form of :func:`environment` for the journal: the interpreter, the OS, a
    few key versions and one hash of every distribution. Without ``env`` it is
    collected here, without asking torch (its version comes from its metadata) or
    NVML, so a run's start stays fast (about 20 ms)."""
    if env is None:
        env = environment(with_torch=False, with_nvml=False)
    dists: Mapping[str, str] = env.get("distributions") or {}
    return {
        "python": env.get("python"), "implementation": env.get("implementation"),
        # "arch", not "machine": in the journal, "machine" is the fleet's machine number.
        "os": env.get("os"), "arch": env.get("machine"),
        "distributions": {n: dists[n] for n in KEY_DISTRIBUTIONS if n in dists},
        "distributions_sha256": distributions_sha256(dists), "count": len(dists),
    }


def compact_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What differs between two compact environments, in words (empty: the same)."""
    keep = ("python", "implementation", "os", "distributions")
    out = environment_changes({**{k: before.get(k) for k in keep}, "machine": before.get("arch")},
                              {**{k: after.get(k) for k in keep}, "machine": after.get("arch")})
    if before.get("distributions_sha256") != after.get("distributions_sha256") and \
            before.get("distributions") == after.get("distributions"):
        out.append(f"installed distributions changed ({before.get('count')} -> "
                   f"{after.get('count')} installed, other versions)")
    return out


def campaign_code(campaign: Campaign) -> list[Path]:
    """:func:`code_files` and the modules the runs' ``model:`` name, with their own
    local imports: everything the bag's ``reload.py`` needs from the campaign folder."""
    folder = campaign.folder.resolve()
    seen: dict[Path, None] = {folder / p: None for p in code_files(campaign)}
    todo = [m for run in campaign.runs.values() if run.model
            if (m := model_module_file(folder, run.model)) is not None]
    return _with_local_imports(folder, todo, seen)
