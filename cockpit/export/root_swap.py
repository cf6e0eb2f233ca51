"""The export root's atomic swap: the new root renamed in, the previous one kept safe.

This module owns what makes an export all-or-nothing on disk: recognising an export
root (``export.json``), putting back a previous export that a kill left aside, removing
leftovers of interrupted exports, the two renames that swap the new root in, and
keeping a failed export beside a verified one (``<root>.failed-<time>``) instead of
replacing it: a new export replaces the previous one only when it verifies.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cockpit.common.fsutil import fsync_dir

ROOT_FORMAT = "cockpit-export-root/1"


def is_export_root(path: Path) -> bool:
    if not path.is_dir():
        return False
    if not any(path.iterdir()):
        return True
    try:
        return bool(json.loads((path / "export.json").read_text()).get("format") == ROOT_FORMAT)
    except (OSError, ValueError, AttributeError):
        return False


def recover(root: Path) -> None:
    """Under the export lock: put back a previous export that a kill left aside, and
    remove the leftovers of interrupted exports (never the current root)."""
    parent, name = root.parent, root.name
    olds = sorted(parent.glob(f".{name}.old-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    if not root.exists() and olds and is_export_root(olds[0]):
        os.rename(olds[0], root)
        olds = olds[1:]
    for leftover in [*olds, *parent.glob(f".{name}.tmp-*")]:
        shutil.rmtree(leftover, ignore_errors=True)


def swap_in(tmp_root: Path, root: Path, progress: Callable[[str], None]) -> None:
    old = None
    if root.exists():
        old = root.with_name(f".{root.name}.old-{os.getpid()}-{secrets.token_hex(4)}")
        os.rename(root, old)
        progress("old_moved_aside")
    os.rename(tmp_root, root)
    fsync_dir(root.parent)
    progress("renamed")
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def root_info(root: Path) -> dict[str, Any] | None:
    """The export root's ``export.json``, or None when there is none to read."""
    try:
        data = json.loads((root / "export.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == ROOT_FORMAT else None


def holds_verified(root: Path) -> bool:
    info = root_info(root)
    return info is not None and info.get("verified") is True


def failed_name(root: Path, now: datetime) -> Path:
    """``<root>.failed-<UTC time>`` beside the root (``-2``, ``-3`` ... when taken)."""
    stamp = now.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    candidate = root.with_name(f"{root.name}.failed-{stamp}")
    n = 2
    while os.path.lexists(candidate):
        candidate = root.with_name(f"{root.name}.failed-{stamp}-{n}")
        n += 1
    return candidate


def keep_failed(tmp_root: Path, root: Path, now: datetime) -> Path:
    """Rename a written export that failed verification beside the root, for inspection;
    the root (the verified export) is not touched."""
    target = failed_name(root, now)
    os.rename(tmp_root, target)
    fsync_dir(root.parent)
    return target
