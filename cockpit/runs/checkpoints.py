"""Checkpoint discovery, completeness, age, disk and save cost; save-interval advice (D16-D19).

This module owns what the cockpit knows about a run's checkpoint folder between ticks:
which checkpoints exist, which are complete (stopped changing, or reported written by
the run), which are still being written, how old the newest complete one is, how much
disk they take and how much is left (D19), and what one save costs (D17/D18). It never
loads a checkpoint: reloading is :mod:`cockpit.runs.reload_check`'s job, in another process.

Cost per tick stays flat with thousands of files: the folder is listed again only when
its mtime changes; otherwise only the in-progress entries (and the few newest complete
ones, which ``last.ckpt``-style rewrites can touch in place) are stat'ed.

:func:`interval_advice` is a pure function: how often to save given the save cost,
the tolerable loss of work and the mean time between interruptions.
"""

from __future__ import annotations

import fnmatch
import heapq
import math
import os
import re
import shutil
import stat
import time
from collections import deque
from dataclasses import dataclass
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
_HF_DIR = re.compile(r"^(?:tmp-)?checkpoint-(\d+)$")
_ACCEL_DIR = re.compile(r"^checkpoint_(\d+)$")
_SHARD = re.compile(r"-\d+-of-\d+")
_STEP_PATTERNS = (
    re.compile(r"checkpoint[-_](\d+)", re.IGNORECASE),
    re.compile(r"global[-_]?step[-_=]?(\d+)", re.IGNORECASE),
    re.compile(r"(?:^|[^a-z])step[-_=]?(\d+)", re.IGNORECASE),
    re.compile(r"(?:^|[^a-z])iter(?:ation)?[-_=]?(\d+)", re.IGNORECASE),
)
_TRAILING = re.compile(r"(epoch[-_=]?)?(\d+)$", re.IGNORECASE)

MAX_LISTED = 50  # complete checkpoints carried in a view, newest first
MAX_COSTS = 50  # save costs remembered
UNKNOWN_DIRS_PER_TICK = 16  # unrecognised folders looked into again per tick
RECHECK_NEWEST = 4  # newest complete entries re-stat'ed each tick (last.ckpt rewrites)
SWEEP_PER_TICK = 32  # older complete entries re-stat'ed per tick, round-robin
_RACY_SECONDS = 1.0  # a folder changed this recently is listed again next tick


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


@dataclass(frozen=True)
class CheckpointInfo:
    path: Path
    kind: str  # "file", "hf-trainer", "accelerate", "folder", "pattern"
    step: int | None
    mtime: float  # last change: file mtime, or newest mtime inside a folder
    age_seconds: float
    size_bytes: int
    complete: bool
    reported: bool  # the run said checkpoint_written for it


@dataclass(frozen=True)
class SaveCost:
    path: Path
    seconds: float
    source: str  # "report" (the run's own events) or "observed" (first seen -> last change)
    step: int | None = None


@dataclass(frozen=True)
class CheckpointScan:
    folder: Path
    exists: bool
    newest: CheckpointInfo | None
    complete: tuple[CheckpointInfo, ...]  # newest first, at most MAX_LISTED
    complete_count: int
    in_progress: tuple[CheckpointInfo, ...]
    total_bytes: int
    free_bytes: int | None
    save_costs: tuple[SaveCost, ...]  # oldest first, at most MAX_COSTS
    note: str | None = None  # e.g. "folder does not exist yet"

    @property
    def newest_age_seconds(self) -> float | None:
        return None if self.newest is None else self.newest.age_seconds

    @property
    def last_save_seconds(self) -> float | None:
        return self.save_costs[-1].seconds if self.save_costs else None

    @property
    def typical_save_seconds(self) -> float | None:
        """Median of the observed save costs (robust to one slow save)."""
        if not self.save_costs:
            return None
        values = sorted(c.seconds for c in self.save_costs)
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


class _Entry:
    """Mutable per-checkpoint bookkeeping inside the scanner."""

    __slots__ = (
        "key", "path", "name", "kind", "is_dir", "step", "size", "mtime", "sig",
        "first_seen", "changed_seen", "complete", "reported", "seen_incomplete",
    )

    def __init__(
        self, key: str, path: Path, kind: str, is_dir: bool, first_seen: float
    ) -> None:
        self.key = key  # name in the folder ("" when the folder itself is the save)
        self.path = path
        self.name = path.name
        self.kind = kind
        self.is_dir = is_dir
        self.step = step_from_name(path.name)
        self.size = 0
        self.mtime = 0.0
        self.sig: tuple[int, int] | None = None
        self.first_seen = first_seen
        self.changed_seen: float | None = None  # our clock when we saw it change
        self.complete = False
        self.reported = False
        self.seen_incomplete = False


class CheckpointScanner:
    """Watches one folder for checkpoints; call :meth:`scan` once per tick."""

    def __init__(
        self, folder: str | os.PathLike[str], pattern: str | None = None,
        settle_seconds: float = 2.0,
    ) -> None:
        self.folder = Path(folder)
        self.pattern = pattern
        self.settle_seconds = float(settle_seconds)
        self._entries: dict[str, _Entry] = {}
        self._pending: set[str] = set()  # keys of entries not complete yet
        self._folder_sig: tuple[int, int] | None = None
        self._racy = True
        self._self_kind: str | None = None  # the folder itself is one HF/accelerate save
        self._marks: dict[str, tuple[float | None, int | None]] = {}
        self._started: dict[str, float] = {}
        self._costs: deque[SaveCost] = deque(maxlen=MAX_COSTS)
        self._ignored: set[str] = set()  # names that are not checkpoints (files)
        self._unknown_dirs: set[str] = set()  # folders that may become checkpoints
        self._top: list[_Entry] = []  # complete entries, newest first, <= MAX_LISTED
        self._top_stale = False
        self._sweep: list[str] = []  # complete entries still to re-stat this round
        self._complete_count = 0
        self._total_bytes = 0

    # ----------------------------------------------------------- run events

    def mark_started(self, path: str | os.PathLike[str], at: float | None = None) -> None:
        """The run reported ``checkpoint_started`` for ``path`` (at time ``at``)."""
        key = _norm(path)
        self._started[key] = time.time() if at is None else at
        name = self._top_name(key)
        entry = None if name is None else self._entries.get(name)
        if entry is not None and entry.complete:
            # A new save into an existing path (last.ckpt): not complete until written.
            entry.reported = False
            self._set_complete(entry, False)

    def mark_written(
        self, path: str | os.PathLike[str], seconds: float | None = None,
        step: int | None = None, at: float | None = None,
    ) -> None:
        """The run reported ``checkpoint_written``: the checkpoint is complete now."""
        key = _norm(path)
        started = self._started.pop(key, None)
        if seconds is None and started is not None:
            seconds = max(0.0, (time.time() if at is None else at) - started)
        if seconds is not None:
            self._costs.append(SaveCost(Path(key), float(seconds), "report", step))
        name = self._top_name(key)
        if name is None:
            return
        self._marks[name] = (seconds, step)
        entry = self._entries.get(name)
        if entry is not None:
            self._apply_mark(entry)

    # ------------------------------------------------------------------ tick

    def scan(self, now: float) -> CheckpointScan:
        try:
            st = os.stat(self.folder)
        except OSError:
            for key in list(self._entries):
                self._remove(key)
            self._folder_sig = None
            return self._view(now, exists=False, note="folder does not exist yet")
        sig = (st.st_mtime_ns, st.st_ino)
        if sig != self._folder_sig or self._racy:
            self._folder_sig = sig
            self._relist(now)
            # Coarse timestamps: a change in the same clock tick as our listing would
            # leave the mtime unchanged, so list again while the folder is fresh.
            self._racy = time.time() - st.st_mtime_ns / 1e9 < _RACY_SECONDS
        elif self._unknown_dirs:
            self._recheck_unknown_dirs(now)
        for key in list(self._pending):
            self._refresh(self._entries[key], now)
        for entry in self._top_list()[:RECHECK_NEWEST]:
            self._refresh(entry, now)
        self._sweep_some(now)
        return self._view(now, exists=True)

    # ------------------------------------------------------------- internals

    def _relist(self, now: float) -> None:
        try:
            listed = os.listdir(self.folder)  # names only: no per-file syscall
        except OSError:
            listed = []
        self_kind = _self_kind(self.folder, listed)
        if self_kind is not None:
            # The watched folder is itself one save (accelerate output_dir, say).
            for key in [k for k in self._entries if k]:
                self._remove(key)
            self._unknown_dirs.clear()
            if "" not in self._entries:
                self._add("", self.folder, self_kind, True, now)
            return
        if "" in self._entries:
            self._remove("")
        names = set(listed)
        for gone in [k for k in self._entries if k not in names]:
            self._remove(gone)
        self._ignored &= names
        self._unknown_dirs &= names
        for name in names.difference(self._entries, self._ignored, self._unknown_dirs):
            self._consider(name, now)
        self._recheck_unknown_dirs(now)

    def _sweep_some(self, now: float) -> None:
        # Older complete checkpoints rewritten in place change no folder mtime: re-stat
        # a few per tick, round-robin, so sizes and states are right eventually.
        if not self._sweep:
            self._sweep = [k for k, e in self._entries.items() if e.complete]
        for _ in range(min(SWEEP_PER_TICK, len(self._sweep))):
            entry = self._entries.get(self._sweep.pop())
            if entry is not None and entry.complete:
                self._refresh(entry, now)

    def _consider(self, name: str, now: float) -> None:
        """Classify a name seen for the first time (or an unrecognised folder again)."""
        if name.startswith(".") or name.endswith((".tmp", ".partial", ".incomplete")):
            self._ignored.add(name)
            return
        path = self.folder / name
        try:
            is_dir = stat.S_ISDIR(os.stat(path).st_mode)
        except OSError:
            return  # gone already
        kind = self._classify(name, path, is_dir)
        if kind is not None:
            self._unknown_dirs.discard(name)
            self._add(name, path, kind, is_dir, now)
        elif is_dir:
            # A folder may become a checkpoint as files land in it, without the
            # watched folder's mtime changing: look again on later ticks.
            self._unknown_dirs.add(name)
        else:
            self._ignored.add(name)

    def _recheck_unknown_dirs(self, now: float) -> None:
        for name in sorted(self._unknown_dirs)[:UNKNOWN_DIRS_PER_TICK]:
            self._unknown_dirs.discard(name)
            self._consider(name, now)

    def _classify(self, name: str, path: Path, is_dir: bool) -> str | None:
        if self.pattern and fnmatch.fnmatch(name, self.pattern):
            return "pattern"
        if is_dir:
            if _HF_DIR.match(name):
                return "hf-trainer"
            try:
                inner = set(os.listdir(path))
            except OSError:
                return None
            return _folder_kind(name, inner)
        if name.lower().endswith(CHECKPOINT_SUFFIXES):
            return "file"
        return None

    def _add(self, key: str, path: Path, kind: str, is_dir: bool, now: float) -> None:
        entry = _Entry(key, path, kind, is_dir, now)
        self._entries[key] = entry
        self._pending.add(key)
        self._refresh(entry, now)
        if key in self._marks:
            self._apply_mark(entry)

    def _remove(self, key: str) -> None:
        entry = self._entries.pop(key)
        self._pending.discard(key)
        self._total_bytes -= entry.size
        if entry.complete:
            self._complete_count -= 1
            if entry in self._top:
                self._top_stale = True

    def _refresh(self, entry: _Entry, now: float) -> None:
        size, mtime_ns = _measure(entry.path, entry.is_dir)
        if mtime_ns < 0:  # vanished between listing and stat
            return
        sig = (size, mtime_ns)
        if sig != entry.sig:
            if entry.sig is not None:
                entry.changed_seen = now
            entry.sig = sig
            self._total_bytes += size - entry.size
            entry.size = size
            entry.mtime = mtime_ns / 1e9
            if entry.complete and not entry.reported:
                self._set_complete(entry, False)  # rewritten in place: settle again
            elif entry.complete:
                self._reorder(entry)
        if entry.complete:
            return
        if entry.name.startswith("tmp-checkpoint-"):
            entry.seen_incomplete = True
            return  # HF Trainer renames it when done
        last_change = max(entry.mtime, entry.changed_seen or 0.0)
        if now - last_change >= self.settle_seconds:
            self._set_complete(entry, True)
            if entry.seen_incomplete and entry.mtime > entry.first_seen:
                # Seen growing: first appearance -> last change (settle time excluded).
                self._costs.append(
                    SaveCost(entry.path, entry.mtime - entry.first_seen, "observed", entry.step)
                )
        else:
            entry.seen_incomplete = True

    def _apply_mark(self, entry: _Entry) -> None:
        _seconds, step = self._marks.pop(entry.key)
        if step is not None:
            entry.step = step
        entry.reported = True
        self._set_complete(entry, True)
        entry.seen_incomplete = False  # its cost came from the report, not observation

    def _set_complete(self, entry: _Entry, complete: bool) -> None:
        if entry.complete == complete:
            return
        entry.complete = complete
        if complete:
            self._pending.discard(entry.key)
            self._complete_count += 1
            self._reorder(entry)
        else:
            self._pending.add(entry.key)
            self._complete_count -= 1
            if entry in self._top:
                self._top_stale = True

    def _reorder(self, entry: _Entry) -> None:
        """Keep the newest-first top list current without sorting every entry."""
        if self._top_stale:
            return
        if entry in self._top:
            self._top_stale = True  # its place changed: rebuild on demand
            return
        if len(self._top) < MAX_LISTED or _order(entry) > _order(self._top[-1]):
            self._top.append(entry)
            self._top.sort(key=_order, reverse=True)
            del self._top[MAX_LISTED:]

    def _top_list(self) -> list[_Entry]:
        if self._top_stale:
            done = (e for e in self._entries.values() if e.complete)
            self._top = heapq.nlargest(MAX_LISTED, done, key=_order)
            self._top_stale = False
        return self._top

    def _top_name(self, key: str) -> str | None:
        folder = os.path.abspath(self.folder)
        if key == folder:
            return ""
        rel = os.path.relpath(key, folder)
        if rel.startswith(".."):
            return None
        return rel.split(os.sep, 1)[0]

    def _view(self, now: float, *, exists: bool, note: str | None = None) -> CheckpointScan:
        listed = tuple(_info(e, now) for e in self._top_list())
        progress = tuple(
            sorted((_info(self._entries[k], now) for k in self._pending), key=lambda i: i.mtime)
        )
        return CheckpointScan(
            folder=self.folder,
            exists=exists,
            newest=listed[0] if listed else None,
            complete=listed,
            complete_count=self._complete_count,
            in_progress=progress,
            total_bytes=self._total_bytes,
            free_bytes=_free_bytes(self.folder),
            save_costs=tuple(self._costs),
            note=note,
        )


def _order(entry: _Entry) -> tuple[float, int]:
    return (entry.mtime, -1 if entry.step is None else entry.step)


def _self_kind(folder: Path, listed: list[str]) -> str | None:
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
    if any((_HF_DIR.match(n) or _ACCEL_DIR.match(n)) and os.path.isdir(folder / n)
           for n in names):
        return None
    return kind


def _folder_kind(name: str, inner: set[str]) -> str | None:
    """What kind of save a folder holding ``inner`` is, or None."""
    if "trainer_state.json" in inner or _HF_DIR.match(name):
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


def _measure(path: Path, is_dir: bool) -> tuple[int, int]:
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


def _info(entry: _Entry, now: float) -> CheckpointInfo:
    return CheckpointInfo(
        path=entry.path,
        kind=entry.kind,
        step=entry.step,
        mtime=entry.mtime,
        age_seconds=max(0.0, now - entry.mtime),
        size_bytes=entry.size,
        complete=entry.complete,
        reported=entry.reported,
    )


def _free_bytes(folder: Path) -> int | None:
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def _norm(path: str | os.PathLike[str]) -> str:
    return os.path.abspath(os.fspath(path))


# ------------------------------------------------------------------ interval advice


@dataclass(frozen=True)
class Advice:
    overhead: float  # fraction of time spent saving at the current interval
    worst_case_loss_seconds: float  # work lost if interrupted just before a save completes
    optimum_seconds: float  # Young's interval, uncapped
    advised_seconds: float  # optimum capped so the worst-case loss stays tolerable
    advised_overhead: float
    message: str | None  # plain words when current and advised are far apart


def interval_advice(
    save_seconds: float,
    interval_seconds: float,
    tolerable_loss_seconds: float,
    mtbi_seconds: float,
) -> Advice:
    """How often to save (D18): balance the cost of one save against the work at risk.

    Overhead is ``save / interval``; an interruption just before a save completes loses
    ``interval + save``. The optimum interval is Young's first-order approximation
    ``sqrt(2 * save * MTBI)`` (J. W. Young, "A first order approximation to the optimum
    checkpoint interval", CACM 17(9), 1974; refined by J. T. Daly, "A higher order
    estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3), 2006,
    whose correction is negligible while save << MTBI), capped so the worst-case loss
    stays within the tolerable loss. ``mtbi_seconds`` may be ``math.inf`` (no
    interruption expected): then the tolerable loss alone sets the interval.

    A message is given when the current interval and the advised one differ by more
    than a factor 1.5, or when the current worst-case loss exceeds the tolerable loss.
    """
    for name, value in (
        ("save_seconds", save_seconds),
        ("interval_seconds", interval_seconds),
        ("tolerable_loss_seconds", tolerable_loss_seconds),
        ("mtbi_seconds", mtbi_seconds),
    ):
        if not value > 0 or math.isnan(value):
            raise ValueError(f"{name} must be positive, got {value!r}")
    overhead = save_seconds / interval_seconds
    worst = interval_seconds + save_seconds
    optimum = math.sqrt(2.0 * save_seconds * mtbi_seconds)
    cap = max(tolerable_loss_seconds - save_seconds, save_seconds)
    advised = _round_interval(min(optimum, cap))
    advised_overhead = save_seconds / advised
    ratio = max(advised / interval_seconds, interval_seconds / advised)
    message = None
    if ratio > 1.5 or worst > tolerable_loss_seconds:
        message = (
            f"saving every {format_duration(interval_seconds)} costs "
            f"{overhead * 100:.1f} % and risks {format_duration(worst)}; tolerable loss is "
            f"{format_duration(tolerable_loss_seconds)}: every {format_duration(advised)} "
            f"would cost {advised_overhead * 100:.1f} %"
        )
    return Advice(overhead, worst, optimum, advised, advised_overhead, message)


def _round_interval(seconds: float) -> float:
    # Down to whole minutes (whole seconds under 10 minutes): a cap stays a cap.
    if seconds >= 600:
        return float(math.floor(seconds / 60) * 60)
    return float(max(1, math.floor(seconds)))


def format_duration(seconds: float) -> str:
    """``45s``, ``2m30s``, ``30m``, ``1h45m``, ``2h``, ``1d6h``."""
    total = int(round(seconds))
    if total < 60:
        return f"{total}s"
    if total < 600:
        minutes, secs = divmod(total, 60)
        return f"{minutes}m{secs}s" if secs else f"{minutes}m"
    total_minutes = int(round(total / 60))
    hours, minutes = divmod(total_minutes, 60)
    if hours == 0:
        return f"{minutes}m"
    if hours < 24:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"
