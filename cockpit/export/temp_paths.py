"""verify-export's "no temporary paths" check: nothing in the bag points into a temp folder.

This module owns what counts as temporary (/tmp, /var/tmp, $TMPDIR, /dev/shm, pytest
and mkdtemp folders), ``is_temporary``, and the scan of the bag's text payload files
for absolute paths (temporary ones fail, other paths outside the bag are warnings).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from cockpit.export.export_checks import HISTORY_FILE, Check, payload_files
from cockpit.export.minutes_csv import MINUTES_PATH

TEXT_SUFFIXES = (".txt", ".md", ".json", ".jsonl", ".yaml", ".yml", ".csv", ".tsv", ".cfg",
                 ".ini", ".toml", ".log", ".py", ".sh", ".svg", ".sha256", ".ids", "")


TEXT_MAX_BYTES = 64 * 1024 * 1024


# An absolute path inside text: not preceded by a word character, ':' (URLs) or '/'.
_ABS_PATH = re.compile(r"(?<![\w.~:/\\-])(/[^\s\"'<>|;,()\[\]{}=`*]+)")


_TMP_PARTS = re.compile(r"^(pytest-of-.+|pytest-\d+|tmp[a-z0-9_]{8})$")


_INTERPRETER = re.compile(r"/bin/python[0-9.]*$")


# Journal fields that hold embedded data, not text: the plan's compressed, base64 text
# (``text_z``: its '/' would read as paths, "names /Onz2/jj5…"). Their values are
# blanked before the scan.
_EMBEDDED = re.compile(r'("text_z"\s*:\s*)"[^"]*"')


def _temp_roots() -> list[str]:
    roots = {"/tmp", "/var/tmp", "/dev/shm", tempfile.gettempdir()}
    if os.environ.get("TMPDIR"):
        roots.add(os.environ["TMPDIR"])
    out = set()
    for r in roots:
        out.add(os.path.normpath(r))
        out.add(os.path.realpath(r))
    return sorted(out)


def is_temporary(path: str, roots: list[str] | None = None) -> bool:
    """Does ``path`` live in a temporary folder (that will not exist tomorrow)?"""
    p = os.path.normpath(path)
    for root in roots or _temp_roots():
        if p == root or p.startswith(root.rstrip("/") + "/"):
            return True
    return any(_TMP_PARTS.match(part) for part in p.split("/"))


def _under(path: str, folder: str | None) -> bool:
    if not folder:
        return False
    p, f = os.path.normpath(path), os.path.normpath(folder)
    return p == f or p.startswith(f.rstrip("/") + "/")


def _scannable(text: str, history: bool) -> str:
    """The text whose absolute paths count: in history, the lines of earlier exports
    (where they were written is history, not something results need) left out; the
    values of embedded data fields blanked."""
    if history:
        text = "\n".join(line for line in text.splitlines()
                          if '"kind": "export_done"' not in line)
    if '"text_z"' in text:
        text = _EMBEDDED.sub(r'\1""', text)
    return text


def no_temp_paths(bag: Path, campaign_folder: Path | None) -> Check:
    name = "no temporary paths"
    roots = _temp_roots()
    # The export's own root (the bag's folder and the tar beside it) is not "outside".
    folders = [str(bag.parent)]
    if campaign_folder is not None:
        folders += [os.path.normpath(campaign_folder), os.path.realpath(campaign_folder)]
    failures: list[str] = []
    history_notes: list[str] = []
    outside: dict[str, str] = {}
    scanned = 0
    for path in payload_files(bag):
        if path.suffix.lower() not in TEXT_SUFFIXES:
            continue
        if path.relative_to(bag).as_posix() == MINUTES_PATH:
            continue  # the disks the cockpit watched (telemetry minutes checks the file)
        try:
            if path.stat().st_size > TEXT_MAX_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # binary after all
        rel = path.relative_to(bag).as_posix()
        if rel.startswith("data/code/"):
            continue  # the campaign's own source: its paths are code, not results' paths
        scanned += 1
        # The journal is history (which interpreter ran, where): a temporary path there
        # is a fact to note, not something a reload depends on.
        history = rel in ("data/journal/journal.jsonl", f"data/{HISTORY_FILE}")
        text = _scannable(text, history)
        seen: set[str] = set()
        for match in _ABS_PATH.finditer(text):
            found = match.group(1).rstrip(".:")
            if found in seen or len(found) < 2:
                continue
            seen.add(found)
            if any(_under(found, f) for f in folders):
                continue
            if is_temporary(found, roots):
                # An interpreter path (a venv in /tmp ran the stages) is the environment,
                # not a file results need: RELOAD.md says to use one's own Python.
                if history or _INTERPRETER.search(found):
                    history_notes.append(f"{rel} records a temporary path (history): {found}")
                else:
                    failures.append(f"{rel} points into a temporary folder: {found}")
            elif found.count("/") >= 2:
                outside.setdefault(found, rel)
    warnings = tuple(history_notes[:10]) + tuple(
        f"{rel} names {p}, outside the export" for p, rel in outside.items())
    return Check(name, not failures, tuple(failures[:50]), warnings,
                 f"{scanned} text file(s) scanned")
