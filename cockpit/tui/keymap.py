"""The person's keymap file: binding ids to keys, applied with Textual's ``set_keymap``.

``$COCKPIT_KEYMAP``, else ``$XDG_CONFIG_HOME/cockpit/keymap.toml`` (``~/.config`` when
unset). One line per binding to move, e.g. a key a terminal or tmux takes::

    # keymap.toml: binding id = "key[,key]"
    stop-run = "X"
    chart = "G,f5"

Unknown ids and malformed lines are reported (shown as a warning), never fatal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from cockpit.common.config import config_file

LINE = re.compile(r"""^\s*([A-Za-z0-9_.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')\s*(?:#.*)?$""")


def keymap_path() -> Path:
    return config_file("COCKPIT_KEYMAP", "keymap.toml")


def parse_keymap(text: str, known: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """(binding id -> keys, problems in words). A flat TOML table of strings; read with
    a line pattern so Python 3.10 (no tomllib) reads it the same way."""
    ids = set(known)
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped in ("[keys]", "[keymap]"):
            continue
        match = LINE.match(line)
        if match is None:
            problems.append(f"line {number}: expected  binding-id = \"key\"")
            continue
        binding, keys = match.group(1), match.group(2) if match.group(2) is not None \
            else match.group(3)
        if binding not in ids:
            problems.append(f"line {number}: no binding {binding!r} (known: "
                            f"{', '.join(sorted(ids))})")
            continue
        if not keys.strip():
            problems.append(f"line {number}: no key for {binding!r}")
            continue
        keymap[binding] = keys.replace(" ", "")
    return keymap, problems


def load_keymap(known: Iterable[str], path: Path | None = None
                ) -> tuple[dict[str, str], list[str], Path]:
    path = path or keymap_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, [], path
    except OSError as exc:
        return {}, [f"cannot read it: {exc.strerror or exc}"], path
    keymap, problems = parse_keymap(text, known)
    return keymap, problems, path
