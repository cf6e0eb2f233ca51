"""``verify-export --rebuild --fresh-venv``: the bag's ``requirements.txt`` installed into a
new virtual environment in a temporary folder, whose interpreter then runs ``reload.py``
(issue 42): does the model come back from what the bag says to install, not from what
the verifier happens to have?

This module owns reading the requirements as data (every line a comment or a plain
``name==version`` pin; an option, a URL or a path is refused, nothing installed), the
venv (``python -m venv`` with the base interpreter), ``pip install -r`` in it (the
person's own pip configuration and indexes, plus ``--extra-index-url`` for each index
given: the one that serves a local build such as ``torch 2.13.0+cpu``), within a time
limit, the temporary folder removed after, and what got installed against what the bag
records (a local build label exported but not installed is a warning naming the index).
Running ``reload.py`` in it is :func:`cockpit.export.rebuild_check.run_rebuild`'s job,
contained as there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cockpit.common.printable import printable
from cockpit.common.safe_json import loads_bounded
from cockpit.export.requirements import label_index, normalize, public_version

INSTALL_TIMEOUT_S = 1800.0
REQUIREMENTS = "data/environment/requirements.txt"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.!+_-]*)$")
_LIST = ("import json, importlib.metadata as m; print(json.dumps({d.metadata['Name']: d.version "
         "for d in m.distributions() if d.metadata['Name']}))")


@dataclass(frozen=True)
class VenvOptions:
    """What ``--fresh-venv`` was given: extra indexes and the install's time limit."""

    extra_indexes: tuple[str, ...] = ()
    install_timeout_s: float = INSTALL_TIMEOUT_S


@dataclass
class FreshVenv:
    """A venv built from the bag's requirements: its interpreter, or why there is none."""

    python: str | None = None
    problem: str | None = None
    pins: dict[str, str] = field(default_factory=dict)  # normalized name -> version
    installed: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        key = [f"{n} {self.installed[n]}" for n in ("torch", "transformers", "peft",
                                                     "pytorch-lightning", "lightning")
               if n in self.installed]
        return (f"a fresh virtual environment, {len(self.pins)} pins of the bag's "
                f"requirements.txt installed" + (f" ({', '.join(key)})" if key else ""))


def read_pins(text: str) -> tuple[dict[str, str], str | None]:
    """(normalized name -> version, None) or ({}, why the file is refused)."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        found = _PIN.match(line)
        if found is None:
            return {}, (f"{REQUIREMENTS} line {number} is not a plain pin (name==version): "
                        f"{printable(line, 120)}; nothing was installed (a bag is data: "
                        "no option, URL or path from it is given to pip)")
        pins[normalize(found.group(1))] = found.group(2)
    return pins, None


def recorded_versions(bag: Path) -> dict[str, str]:
    """The versions the bag's environment.json records (normalized names)."""
    try:
        env = loads_bounded((bag / "data" / "environment" / "environment.json").read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    dists = env.get("distributions") if isinstance(env, dict) else None
    return {normalize(str(k)): str(v) for k, v in dists.items()} \
        if isinstance(dists, dict) else {}


def _tail(text: str, lines: int = 6) -> str:
    return printable(" | ".join(text.strip().splitlines()[-lines:]), 1200)


@contextmanager
def fresh_venv(bag: Path, python: str, options: VenvOptions) -> Iterator[FreshVenv]:
    """A venv in a temporary folder with the bag's requirements installed (removed when
    the block ends, also on a signal); ``python``: the interpreter that makes it."""
    out = FreshVenv()
    try:
        text = (bag / REQUIREMENTS).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        out.problem = f"the bag has no readable {REQUIREMENTS}: no fresh environment to build"
        yield out
        return
    out.pins, why = read_pins(text)
    if why is not None:
        out.problem = why
        yield out
        return
    with tempfile.TemporaryDirectory(prefix="cockpit-venv-") as tmp:
        _build(Path(tmp), bag, python, options, out)
        yield out


def _build(root: Path, bag: Path, python: str, options: VenvOptions, out: FreshVenv) -> None:
    venv = root / "venv"
    requirements = root / "requirements.txt"
    # The pins alone, as read (never the bag's file itself: a comment is all it adds).
    requirements.write_text("".join(f"{n}=={v}\n" for n, v in sorted(out.pins.items())))
    target = venv / "bin" / "python"
    steps = [([python, "-m", "venv", str(venv)], "python -m venv"),
             ([str(target), "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
               "--no-compile", "-r", str(requirements),
               *[arg for url in options.extra_indexes for arg in ("--extra-index-url", url)]],
              "pip install -r requirements.txt")]
    for argv, name in steps:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, cwd=root,
                                  env=venv_env(), timeout=options.install_timeout_s,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            out.problem = f"{name} did not finish within {options.install_timeout_s:g} s"
            return
        except OSError as exc:
            out.problem = f"{name} could not be run: {printable(str(exc), 300)}"
            return
        if done.returncode != 0:
            out.problem = f"{name} exited {done.returncode}: {_tail(done.stderr or done.stdout)}"
            return
    try:
        listed = subprocess.run([str(target), "-I", "-c", _LIST], capture_output=True,
                                text=True, timeout=120, stdin=subprocess.DEVNULL)
        found = json.loads(listed.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        found = {}
    out.installed = {normalize(str(k)): str(v) for k, v in found.items()} \
        if isinstance(found, dict) else {}
    out.warnings = label_warnings(out.pins, out.installed, recorded_versions(bag))
    out.python = str(target)


def label_warnings(pins: dict[str, str], installed: dict[str, str],
                   recorded: dict[str, str]) -> list[str]:
    """A pin whose exported build carried a local label (torch 2.13.0+cpu) that the venv
    did not get: which build it got and the index that serves the exported one."""
    out: list[str] = []
    for name in sorted(pins):
        exported = recorded.get(name)
        if not exported or public_version(exported)[1] is None:
            continue
        got = installed.get(name)
        if got == exported:
            continue
        index = label_index(name, public_version(exported)[1] or "")
        where = f" (--pip-extra-index {index})" if index else " (its maker's own index)"
        out.append(f"{name}: {got or 'nothing'} installed, the export used the local build "
                   f"{exported}{where}")
    return out


def venv_env() -> dict[str, str]:
    """The environment pip runs with: the person's own (their pip configuration, indexes
    and cache), less what would point it at another interpreter."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_TARGET", "PIP_PREFIX",
                 "PIP_USER", "PYTHONUSERBASE"):
        env.pop(name, None)
    return env
