"""The bag's ``requirements.txt``: what the campaign's code needs, installable from a plain
index (issue 42, D22).

This module owns the derivation: the top-level modules the bag's ``code/`` imports (read
with ``ast``, never run; the standard library and the campaign's own modules left out),
plus those ``reload.py`` needs for the runs it rebuilds; each mapped to the installed
distributions that provide it (``importlib.metadata.packages_distributions()``); then
their own dependencies, recursively, from the installed distributions' ``Requires-Dist``
with the markers evaluated for this environment (by ``packaging`` when it is installed;
without it, a requirement behind an ``extra`` is kept only for an extra asked for, and
any other marked one only when it is installed here, pip having evaluated its marker).
Each is pinned to the installed version. A local version label (``torch 2.13.0+cpu``) is
written as the public release a plain index serves (``torch==2.13.0``), with a comment
naming the label and the index that serves that exact build. The cockpit itself is a
comment. Every installed distribution stays on record in ``environment/pip-freeze.txt``
and ``environment.json``.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

# Where the local builds of a maker's own index come from (label -> index URL).
PYTORCH_INDEX = "https://download.pytorch.org/whl/"
PYTORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "torchtext", "triton",
                            "pytorch-triton"})

_REQUIREMENT = re.compile(
    r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*([^;]*?)\s*(?:;\s*(.*))?$")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def normalize(name: str) -> str:
    """A distribution's name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Requirement:
    """One ``Requires-Dist`` line, read without ``packaging``."""

    name: str
    extras: frozenset[str]
    marker: str | None


def parse_requirement(text: str) -> Requirement | None:
    found = _REQUIREMENT.match(text)
    if found is None:
        return None
    extras = frozenset(normalize(e.strip()) for e in (found.group(2) or "").split(",")
                       if e.strip())
    marker = (found.group(4) or "").strip() or None
    return Requirement(normalize(found.group(1)), extras, marker)


def _packaging_marker() -> Callable[[str], Any] | None:
    try:
        from packaging.markers import Marker
    except ImportError:
        return None
    return Marker


def marker_holds(marker: str | None, extras: Iterable[str], installed: bool,
                 evaluator: Callable[[str], Any] | None = None) -> bool:
    """Whether a requirement behind ``marker`` applies here, the requiring distribution
    asked for with ``extras``. ``evaluator``: ``packaging.markers.Marker`` when it is
    installed; without it, the simple case (see the module text)."""
    if marker is None:
        return True
    wanted = {normalize(e) for e in extras}
    if evaluator is not None:
        try:
            compiled = evaluator(marker)
            return any(bool(compiled.evaluate({"extra": extra}))
                       for extra in (sorted(wanted) or [""]))
        except Exception:  # noqa: BLE001 - an unreadable marker: fall back to the simple case
            pass
    named = {normalize(e) for e in _EXTRA.findall(marker)}
    if named:
        return bool(named & wanted)
    return installed


def imported_modules(files: Iterable[Path]) -> dict[str, list[str]]:
    """Top-level module -> the files (their names) that import it, absolute imports only."""
    found: dict[str, list[str]] = {}
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        for name in names:
            found.setdefault(name, []).append(path.name)
    return found


def local_modules(folder: Path, files: Iterable[Path]) -> set[str]:
    """The campaign's own top-level modules: the files and packages of ``folder``."""
    names: set[str] = set()
    for path in files:
        try:
            rel = path.resolve().relative_to(folder.resolve())
        except ValueError:
            rel = Path(path.name)
        names.add(rel.parts[0].removesuffix(".py"))
        names.add(path.stem)
    return names


@dataclass
class Derived:
    """The derivation's result: pins (normalized name -> version), why each is there,
    and what could not be pinned."""

    pins: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # normalized -> as published
    why: dict[str, str] = field(default_factory=dict)
    cockpit: str | None = None
    cockpit_by: list[str] = field(default_factory=list)
    not_installed: dict[str, list[str]] = field(default_factory=dict)  # module -> files


def installed_distributions() -> dict[str, metadata.Distribution]:
    """Each installed distribution by normalized name (the first on ``sys.path`` wins)."""
    found: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and normalize(name) not in found:
            found[normalize(name)] = dist
    return found


def derive(imports: Mapping[str, list[str]], local: set[str],
           installed: Mapping[str, metadata.Distribution] | None = None,
           providers: Mapping[str, list[str]] | None = None,
           evaluator: Callable[[str], Any] | None = None) -> Derived:
    """Pins for ``imports`` (module -> importing files) and their dependencies."""
    installed = installed_distributions() if installed is None else installed
    providers = metadata.packages_distributions() if providers is None else providers
    out = Derived()
    todo: list[tuple[str, frozenset[str], str]] = []
    stdlib = set(getattr(sys, "stdlib_module_names", ())) | {"__future__"}
    for module in sorted(imports):
        if module in local or module in stdlib:
            continue
        dists = [normalize(d) for d in providers.get(module, [])]
        dists = [d for d in dict.fromkeys(dists) if d in installed]
        if not dists:
            out.not_installed[module] = sorted(set(imports[module]))
            continue
        why = f"imported by {', '.join(sorted(set(imports[module])))}"
        todo.extend((dist, frozenset(), why) for dist in dists)
    _close(todo, installed, evaluator, out)
    return out


def _close(todo: list[tuple[str, frozenset[str], str]],
           installed: Mapping[str, metadata.Distribution],
           evaluator: Callable[[str], Any] | None, out: Derived) -> None:
    """Follow each distribution's own requirements (with the extras asked of it)."""
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras, why = todo.pop(0)
        dist = installed.get(name)
        if dist is None or (name, extras) in done:
            continue
        done.add((name, extras))
        if name == "cockpit":  # the cockpit itself: a comment, never its dependencies
            out.cockpit = dist.version
            out.cockpit_by.append(why)
            continue
        if name not in out.pins:
            out.pins[name] = dist.version
            out.names[name] = str(dist.metadata["Name"])
            out.why[name] = why
        for text in dist.requires or []:
            req = parse_requirement(text)
            if req is None or req.name == name:
                continue
            if marker_holds(req.marker, extras, req.name in installed, evaluator):
                todo.append((req.name, req.extras, f"needed by {out.names[name]}"))


def public_version(version: str) -> tuple[str, str | None]:
    """(the public release, the local label or None): ``2.13.0+cpu`` -> (2.13.0, cpu)."""
    public, _, label = version.partition("+")
    return public, label or None


def label_index(name: str, label: str) -> str | None:
    """The index that serves a local build, when it is known (PyTorch's own)."""
    if normalize(name) in PYTORCH_FAMILY and re.fullmatch(r"cpu|cu\d+|rocm[\d.]+|xpu", label):
        return f"{PYTORCH_INDEX}{label}"
    return None


def requirements_text(derived: Derived, env: Mapping[str, Any]) -> str:
    """``requirements.txt``: a header saying what it is, then one pin a line."""
    lines = ["# What the campaign's code imports (data/code/, read without running it) and "
             "what reload.py needs,",
             "# with their own dependencies, pinned to the versions installed at the export.",
             f"# Python {env.get('python')} ({env.get('implementation')}), "
             f"{env.get('os')} {env.get('machine')}."]
    torch = env.get("torch") or {}
    if torch.get("version"):
        lines.append(f"# torch {torch['version']}, CUDA {torch.get('cuda')}, "
                     f"cuDNN {torch.get('cudnn')}.")
    lines.append("# Every installed distribution: pip-freeze.txt beside this file "
                 "(and environment.json).")
    if derived.cockpit:
        lines.append(f"# cockpit=={derived.cockpit}: the cockpit itself "
                     f"({'; '.join(derived.cockpit_by)}), install it from its own source.")
    for module, files in sorted(derived.not_installed.items()):
        lines.append(f"# {module}: imported by {', '.join(files)}, not installed here "
                     "(an optional import?): not pinned.")
    pins: list[str] = []
    for name in sorted(derived.pins):
        shown = derived.names.get(name, name)
        public, label = public_version(derived.pins[name])
        if label is not None:
            index = label_index(name, label)
            lines.append(f"# {shown} {derived.pins[name]} was installed: '+{label}' is a local "
                         "build label a plain index does not serve; the pin below is its "
                         "public release.")
            if index:
                lines.append(f"#   that exact build: pip install -r requirements.txt "
                             f"--extra-index-url {index}")
            else:
                lines.append("#   that exact build comes from its maker's own package index.")
        pins.append(f"{shown}=={public}  # {derived.why[name]}")
    return "\n".join(lines + pins) + "\n"


def local_indexes(derived: Derived) -> list[str]:
    """The indexes that serve the local builds that were installed (PyTorch's)."""
    found: list[str] = []
    for name, version in sorted(derived.pins.items()):
        _public, label = public_version(version)
        index = label_index(name, label) if label else None
        if index and index not in found:
            found.append(index)
    return found


def bag_requirements(folder: Path, code: Iterable[Path], needed: Mapping[str, str],
                     env: Mapping[str, Any]) -> tuple[str, Derived]:
    """The text of the bag's ``requirements.txt`` and its derivation: the imports of
    ``code`` (files of the campaign ``folder``) and ``needed`` (module -> why, what
    ``reload.py`` imports for the runs it rebuilds)."""
    files = list(code)
    imports = imported_modules(files)
    for module, why in needed.items():
        imports.setdefault(module, []).append(why)
    derived = derive(imports, local_modules(folder, files), evaluator=_packaging_marker())
    return requirements_text(derived, env), derived
