"""What belongs to a run's current attempt: its start on the file system's clock, and the
files an earlier attempt left in the run's folders.

A run started again (``start --force``, a restart after a stop) writes to the same fixed
paths as before (``version_0/metrics.csv``, ``checkpoint-N/``, ``step=N.ckpt``): what the
earlier attempt left there must never count for the new one (its step 999, its
checkpoint verified as this attempt's). This module owns :func:`attempt_start` (when the
attempt's process started, in wall-clock epoch seconds: the launched process's own start
time as the OS records it, else the journal's start), :data:`MTIME_SLACK_S` (the
allowance when a file's modification time is compared with it) and
:func:`earlier_files` (what ``cockpit start`` warns about, per folder with a count).
The metric readers (:mod:`cockpit.runs.metrics`) and the checkpoint scanner
(:mod:`cockpit.runs.checkpoints.discovery`) apply the rule.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.runs.checkpoints.layout import count_checkpoints

if TYPE_CHECKING:
    from cockpit.campaign.model import Campaign
    from cockpit.journal.state import RunState

# A file modified less than this before the attempt's start still counts as the
# attempt's. The start is the process's start time as psutil reads it (the boot time
# in whole seconds plus clock ticks: up to 1 s early); file times are the file system's:
# coarse on some (FAT and exFAT 2 s, HFS+ and ext3 1 s; ext4 a kernel tick, a few ms,
# behind) and the server's clock on NFS. Records with their own time (``t``, written by
# the training process from the same wall clock) need no such allowance.
MTIME_SLACK_S = 2.0


def attempt_start(run: RunState) -> float | None:
    """When the run's current attempt started, in epoch seconds (None: never started):
    its process's start time when the launch recorded one, else the journal's time of
    its start (a stage marked started by hand has no process)."""
    if run.started_at is None:
        return None
    created = run.create_time
    if isinstance(created, (int, float)) and not isinstance(created, bool) and created > 0:
        return float(created)
    return run.started_at.timestamp()


def older_than(mtime: float, since: float | None) -> bool:
    """Whether a file last modified at ``mtime`` predates an attempt started at
    ``since`` (with :data:`MTIME_SLACK_S`): an earlier attempt's, not this one's."""
    return since is not None and mtime < since - MTIME_SLACK_S


@dataclass(frozen=True)
class EarlierFiles:
    """Files an earlier attempt left where a run writes: ``count`` of ``what`` in
    ``folder``."""

    folder: Path
    count: int
    what: str

    def words(self) -> str:
        noun = self.what if self.count == 1 else f"{self.what}s"
        return (f"{self.folder} holds {self.count} {noun} from before this attempt: "
                "ignored for it until rewritten")


def earlier_files(campaign: Campaign, run_id: str) -> list[EarlierFiles]:
    """The checkpoints and metric files already in the run's declared folders before it
    starts (called just before a launch: everything there is an earlier attempt's)."""
    spec = campaign.runs.get(run_id)
    if spec is None:
        return []
    found: list[EarlierFiles] = []
    if spec.checkpoints is not None:
        folder = campaign.resolve(spec.checkpoints)
        count = count_checkpoints(folder, spec.pattern)
        if count:
            found.append(EarlierFiles(folder, count, "checkpoint"))
    for declared in spec.metrics:
        path = campaign.resolve(declared)
        count = _metric_files(path)
        if count:
            found.append(EarlierFiles(path, count, "metrics file"))
    return found


METRIC_NAMES = ("trainer_state.json", "metrics.csv")
TB_PREFIX = "events.out.tfevents."


def _metric_files(path: Path) -> int:
    """Metric files at ``path``: 1 for a file, else the Trainer states, Lightning CSVs
    and TensorBoard event files in the folder (three levels down)."""
    if path.is_file():
        return 1
    count = 0
    base = os.fspath(path)
    for current, dirs, files in os.walk(base):
        if current[len(base):].count(os.sep) >= 3:
            dirs.clear()
        count += sum(1 for f in files if f in METRIC_NAMES or f.startswith(TB_PREFIX))
    return count
