"""Checkpoint discovery: completeness, age, disk and save cost (D16-D19).

This module owns what the cockpit knows about a run's checkpoint folder between ticks:
which checkpoints exist, which are complete (stopped changing, or reported written by
the run), which are still being written, how old the newest complete one is, how much
disk they take and how much is left (D19), and what one save costs (D17/D18). It never
loads a checkpoint: reloading is :mod:`cockpit.runs.checkpoints.reload_check`'s job, in
another process.

Attempts are scoped (:mod:`cockpit.runs.attempts`): with :attr:`CheckpointScanner.since`
set to the run's current attempt's start, a checkpoint whose newest file time is older
(an earlier attempt's ``checkpoint-500``, ``step=999.ckpt``) is not complete, newest or
counted for it (``earlier`` counts them); rewritten during the attempt, it counts again.

A save's cost comes from the run's report (``checkpoint_written`` with its seconds),
else from the checkpoint itself (:func:`~cockpit.runs.checkpoints.layout.write_span`:
its files' write span), else from what the scanner saw (first seen growing -> last
change).

Cost per tick stays flat with thousands of files: the folder is listed again only when
its mtime changes; otherwise only the in-progress entries (and the few newest complete
ones, which ``last.ckpt``-style rewrites can touch in place) are stat'ed.

What a checkpoint looks like (names, steps, kinds, sizes) lives in ``checkpoint_layout``;
the save-interval advice (:func:`interval_advice`, pure) in ``checkpoint_interval``, both
re-exported here.
"""

from __future__ import annotations

import heapq
import os
import shutil
import stat
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from cockpit.runs.attempts import MTIME_SLACK_S, older_than
from cockpit.runs.checkpoints.interval import Advice as Advice  # re-exported
from cockpit.runs.checkpoints.interval import format_duration as format_duration  # re-exported
from cockpit.runs.checkpoints.interval import interval_advice as interval_advice  # re-exported
from cockpit.runs.checkpoints.layout import (
    checkpoint_kind,
    measure,
    watched_folder_kind,
    write_span,
)
from cockpit.runs.checkpoints.layout import step_from_name as step_from_name  # re-exported

MAX_LISTED = 50  # complete checkpoints carried in a view, newest first
MAX_COSTS = 50  # save costs remembered
UNKNOWN_DIRS_PER_TICK = 16  # unrecognised folders looked into again per tick
RECHECK_NEWEST = 4  # newest complete entries re-stat'ed each tick (last.ckpt rewrites)
SWEEP_PER_TICK = 32  # older complete entries re-stat'ed per tick, round-robin
_RACY_SECONDS = 1.0  # a folder changed this recently is listed again next tick


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
    # "report" (the run's own events), "files" (its files' write span: first file created
    # -> last file written) or "observed" (the scanner saw it growing: first seen -> last
    # change)
    source: str
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
    earlier: int = 0  # checkpoints older than the attempt (``since``): not counted above

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
        "first_seen", "changed_seen", "complete", "reported", "seen_incomplete", "floor",
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
        # The newest file time of its previous version (a rewrite in place: last.ckpt):
        # a file older than that is not part of the write being measured.
        self.floor: float | None = None


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
        self.self_kind: str | None = None  # the folder itself is one HF/accelerate save
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
        # The current attempt's start (epoch seconds; None: every checkpoint counts).
        self.since: float | None = None

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
        self_kind = watched_folder_kind(self.folder, listed)
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
        return checkpoint_kind(name, path, is_dir, self.pattern)

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
        size, mtime_ns = measure(entry.path, entry.is_dir)
        if mtime_ns < 0:  # vanished between listing and stat
            return
        sig = (size, mtime_ns)
        if sig != entry.sig:
            if entry.sig is not None:
                entry.changed_seen = now
                if entry.complete:
                    entry.floor = entry.mtime  # a new save into the same path
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
        # No settle time (an ended run writes nothing more): complete whatever ``now`` is,
        # also when a caller's clock reads earlier than the file's mtime (a stepped clock).
        if self.settle_seconds <= 0 or now - last_change >= self.settle_seconds:
            self._set_complete(entry, True)
            if not self._measure_files(entry) and entry.seen_incomplete \
                    and entry.mtime > entry.first_seen:
                # Seen growing: first appearance -> last change (settle time excluded).
                self._costs.append(
                    SaveCost(entry.path, entry.mtime - entry.first_seen, "observed", entry.step)
                )
        else:
            entry.seen_incomplete = True

    def _measure_files(self, entry: _Entry) -> bool:
        """The save's cost from its own files' times (False: not measurable there), for
        a checkpoint of the current attempt nobody reported a cost for."""
        if older_than(entry.mtime, self.since):
            return False  # an earlier attempt's save: its cost is not this attempt's
        floors = [f for f in (entry.floor, None if self.since is None
                              else self.since - MTIME_SLACK_S) if f is not None]
        seconds = write_span(entry.path, entry.is_dir, int(max(floors, default=0.0) * 1e9))
        if seconds is None:
            return False
        self._costs.append(SaveCost(entry.path, seconds, "files", entry.step))
        return True

    def _apply_mark(self, entry: _Entry) -> None:
        seconds, step = self._marks.pop(entry.key)
        if step is not None:
            entry.step = step
        entry.reported = True
        self._set_complete(entry, True)
        entry.seen_incomplete = False  # its cost came from the report, not observation
        if seconds is None:
            self._measure_files(entry)  # reported written, without its cost

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
        since = self.since
        listed = tuple(_info(e, now) for e in self._top_list()
                       if not older_than(e.mtime, since))
        earlier = 0 if since is None else sum(
            1 for e in self._entries.values() if e.complete and older_than(e.mtime, since))
        progress = tuple(
            sorted((_info(self._entries[k], now) for k in self._pending), key=lambda i: i.mtime)
        )
        return CheckpointScan(
            folder=self.folder,
            exists=exists,
            newest=listed[0] if listed else None,
            complete=listed,
            complete_count=self._complete_count - earlier,
            in_progress=progress,
            total_bytes=self._total_bytes,
            free_bytes=_free_bytes(self.folder),
            save_costs=tuple(self._costs),
            note=note,
            earlier=earlier,
        )


def _order(entry: _Entry) -> tuple[float, int]:
    return (entry.mtime, -1 if entry.step is None else entry.step)


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
