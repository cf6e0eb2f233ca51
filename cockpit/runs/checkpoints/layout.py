"""What a checkpoint looks like on disk: its step, its kind, its size.

This module owns the naming rules (``step_from_name``: ``checkpoint-1200``,
``step=1200``, not an epoch or a shard index), what makes a folder an HF Trainer,
accelerate or plain-weights save, the measure of a file or folder (size, newest
mtime) and its write span (how long the save took, from its files' own times). Pure or
one-stat helpers; the scanner in ``checkpoints`` calls them.
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors", ".bin")


# Files that, together, make a folder an HF / accelerate / PEFT save.
WEIGHT_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
)


ACCELERATE_MARKERS = ("optimizer.bin",)


HF_DIR = re.compile(r"^(?:tmp-)?checkpoint-(\d+)$")


_ACCEL_DIR = re.compile(r"^checkpoint_(\d+)$")


_SHARD = re.compile(r"-\d+-of-\d+")


_STEP_PATTERNS = (
    re.compile(r"checkpoint[-_](\d+)", re.IGNORECASE),
    re.compile(r"global[-_]?step[-_=]?(\d+)", re.IGNORECASE),
    re.compile(r"(?:^|[^a-z])step[-_=]?(\d+)", re.IGNORECASE),
    re.compile(r"(?:^|[^a-z])iter(?:ation)?[-_=]?(\d+)", re.IGNORECASE),
)


_TRAILING = re.compile(r"(epoch[-_=]?)?(\d+)$", re.IGNORECASE)


def step_from_name(name: str) -> int | None:
    """The training step a checkpoint's name announces, if any.

    ``checkpoint-1200``, ``step=1200``, ``step_1200``, ``epoch=3-step=1200.ckpt``,
    ``global_step1200``, and plain trailing digits (``model_1200.pt``); not an epoch
    number (``epoch=3.ckpt``) and not a shard index (``model-00001-of-00002``).
    """
    stem = name
    for suffix in (*CHECKPOINT_SUFFIXES, ".json", ".index"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    for pattern in _STEP_PATTERNS:
        found = pattern.search(stem)
        if found:
            return int(found.group(1))
    if _SHARD.search(stem):
        return None
    found = _TRAILING.search(stem)
    if found and not found.group(1):
        return int(found.group(2))
    return None


def watched_folder_kind(folder: Path, listed: list[str]) -> str | None:
    """The watched folder is itself one save (an accelerate ``save_state`` target, a
    checkpoint-N folder watched directly) only when it holds optimizer state and no
    checkpoint folders of its own: a bare ``pytorch_model.bin`` beside others is a file."""
    names = set(listed)
    if "optimizer.bin" in names or "random_states_0.pkl" in names:
        kind = "accelerate"
    elif "trainer_state.json" in names and "optimizer.pt" in names:
        kind = "hf-trainer"
    else:
        return None  # the common case, decided without looking at every name
    if any((HF_DIR.match(n) or _ACCEL_DIR.match(n)) and os.path.isdir(folder / n)
           for n in names):
        return None
    return kind


def folder_kind(name: str, inner: set[str]) -> str | None:
    """What kind of save a folder holding ``inner`` is, or None."""
    if "trainer_state.json" in inner or HF_DIR.match(name):
        return "hf-trainer"
    has_weights = any(w in inner for w in WEIGHT_FILES) or any(
        n.startswith(("model_", "pytorch_model_")) and n.endswith((".safetensors", ".bin"))
        for n in inner
    )
    if any(m in inner for m in ACCELERATE_MARKERS) or any(
        n.startswith("random_states_") for n in inner
    ):
        return "accelerate"
    if has_weights or _ACCEL_DIR.match(name):
        return "folder"
    return None


def checkpoint_kind(name: str, path: Path, is_dir: bool, pattern: str | None) -> str | None:
    """What kind of checkpoint the entry ``name`` of a watched folder is (None: none):
    ``pattern`` (the run's own), ``hf-trainer``, ``accelerate``, ``folder`` or ``file``."""
    if pattern and fnmatch.fnmatch(name, pattern):
        return "pattern"
    if is_dir:
        if HF_DIR.match(name):
            return "hf-trainer"
        try:
            inner = set(os.listdir(path))
        except OSError:
            return None
        return folder_kind(name, inner)
    if name.lower().endswith(CHECKPOINT_SUFFIXES):
        return "file"
    return None


def count_checkpoints(folder: Path, pattern: str | None = None) -> int:
    """How many checkpoints ``folder`` holds now, complete or not (one listing)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    if watched_folder_kind(folder, names) is not None:
        return 1  # the folder itself is one save
    count = 0
    for name in names:
        if name.startswith(".") or name.endswith((".tmp", ".partial", ".incomplete")):
            continue
        path = folder / name
        if checkpoint_kind(name, path, path.is_dir(), pattern) is not None:
            count += 1
    return count


def measure(path: Path, is_dir: bool) -> tuple[int, int]:
    """(total size, newest mtime in ns) of a file, or of a folder's files (3 levels)."""
    try:
        st = os.stat(path)
    except OSError:
        return 0, -1
    if not is_dir:
        return st.st_size, st.st_mtime_ns
    size, newest = 0, st.st_mtime_ns
    stack = [(os.fspath(path), 0)]
    while stack:
        current, depth = stack.pop()
        try:
            with os.scandir(current) as listing:
                for child in listing:
                    try:
                        cst = child.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    newest = max(newest, cst.st_mtime_ns)
                    if child.is_dir(follow_symlinks=False):
                        if depth < 3:
                            stack.append((child.path, depth + 1))
                    else:
                        size += cst.st_size
        except OSError:
            continue
    return size, newest


# A write span under this is the file system's clock tick (ext4: a kernel tick, 1-10 ms),
# not a measure of the save: such a save stays "not measured" (the landing reserves more).
MIN_SPAN_S = 0.05


def write_span(path: Path, is_dir: bool, floor_ns: int = 0) -> float | None:
    """Seconds a save took to write, read from its own files (None: not measurable).

    From the first file's creation to the last file's last write. A file's creation is
    its access time while nobody read it since (creating a file sets its access,
    modification and change times alike; writing moves only the last two; a read after
    the last write moves the access time past it, and then the file's modification time
    stands in: a folder's first, small file such as ``config.json`` is written at once).
    Files last written before ``floor_ns`` (an earlier save into the same folder, an
    earlier attempt's) are not this save's, and an access time before it is not this
    write's creation (a file rewritten in place keeps its first creation's). A single
    file read since it was written, or a span under :data:`MIN_SPAN_S` (a file written
    at once: its times differ by a tick of the file system's clock, not by the save's
    work), gives None.
    """
    starts: list[int] = []
    ends: list[int] = []
    for st in _file_stats(path, is_dir):
        if st.st_mtime_ns < floor_ns:
            continue
        ends.append(st.st_mtime_ns)
        created = st.st_atime_ns
        starts.append(created if floor_ns <= created <= st.st_mtime_ns else st.st_mtime_ns)
    if not ends:
        return None
    span = (max(ends) - min(starts)) / 1e9
    return span if span >= MIN_SPAN_S else None


def _file_stats(path: Path, is_dir: bool) -> list[os.stat_result]:
    """The stat of a file, or of a folder's files (3 levels, as :func:`measure`)."""
    if not is_dir:
        try:
            return [os.stat(path)]
        except OSError:
            return []
    found: list[os.stat_result] = []
    stack = [(os.fspath(path), 0)]
    while stack:
        current, depth = stack.pop()
        try:
            with os.scandir(current) as listing:
                for child in listing:
                    try:
                        if child.is_dir(follow_symlinks=False):
                            if depth < 3:
                                stack.append((child.path, depth + 1))
                        else:
                            found.append(child.stat(follow_symlinks=False))
                    except OSError:
                        continue
        except OSError:
            continue
    return found
