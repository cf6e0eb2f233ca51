"""Finding and loading the cockpit's themes: every ``themes/*.tcss`` file is one.

A theme file scopes its rules under ``App.-cockpit-theme-NAME`` (so all themes load once and
``t`` only swaps a class) and names the Textual palette it builds on in a comment
line ``/* palette: textual-dark */``. The palette gives ``$success``/``$warning``/
``$error`` (ok / warn / fired) their colours; the file styles the structure's colour.
The folder ships inside the package (:mod:`cockpit.assets`, a link to the top-level
``themes/`` in a checkout); ``COCKPIT_THEMES`` points at another folder of them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cockpit.assets import asset_path

ORDER = ("default", "light", "high-contrast")
PALETTE = re.compile(r"/\*\s*palette:\s*([\w-]+)\s*\*/")


class ThemeMissing(Exception):
    """A theme (or the themes folder) that is not there: the CLI exits 2 with this."""


@dataclass(frozen=True)
class ThemeFile:
    name: str
    path: Path
    palette: str


def themes_dir() -> Path:
    env = os.environ.get("COCKPIT_THEMES")
    return Path(env) if env else asset_path("themes")


def discover(folder: Path | None = None) -> dict[str, ThemeFile]:
    """The themes in ``folder``, the three shipped ones first, in cycling order."""
    folder = folder or themes_dir()
    found: dict[str, ThemeFile] = {}
    for path in sorted(folder.glob("*.tcss")):
        match = PALETTE.search(path.read_text(encoding="utf-8"))
        found[path.stem] = ThemeFile(path.stem, path,
                                     match.group(1) if match else "textual-dark")
    return {name: found[name] for name in (*ORDER, *sorted(found)) if name in found}


def resolve(name: str | None, folder: Path | None = None) -> tuple[ThemeFile, dict[str, ThemeFile]]:
    """The chosen theme and all themes, or ThemeMissing naming the file that is not there."""
    folder = folder or themes_dir()
    name = name or "default"
    if not folder.is_dir():
        raise ThemeMissing(f"theme folder {folder} not found (theme {name!r} needs "
                           f"{folder / (name + '.tcss')}); set COCKPIT_THEMES to the folder "
                           "holding the .tcss files")
    themes = discover(folder)
    if name not in themes:
        known = ", ".join(themes) or "none"
        raise ThemeMissing(f"theme file {folder / (name + '.tcss')} not found "
                           f"(themes: {known})")
    return themes[name], themes
