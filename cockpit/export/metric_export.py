"""A run's metrics in the export: every source the cockpit reads, as files (D22).

This module owns ``add_run_metrics``. Each metrics source of a run (its ``metrics:``
paths, then the :mod:`cockpit.report` file) goes into ``data/runs/<id>/metrics/``
through the payload's one path rule (symlinks resolved, inside the campaign folder or
``settings.export_outside``, regular files only), as the cockpit's readers read it:

- a JSON-lines or CSV file, a ``trainer_state.json``: the file; an output folder: its
  ``trainer_state.json`` files (as before);
- TensorBoard: the event files (one file, or those directly in the folder, in name
  order: what :class:`~cockpit.runs.metrics.tensorboard.TensorBoardReader` reads) into a
  folder of their own, ``metrics/<name>/``, and their scalars as
  ``metrics/<name>.scalars.jsonl``, one line per point in the format of
  :mod:`cockpit.report` (``{"t": ..., "step": ..., "<tag>": value}``, NaN spelled
  ``NaN``), so the curves open without TensorBoard and the cockpit's JSON-lines reader
  reads them back. The scalars are read from the bag's own copies, by the cockpit's
  reader: the JSONL says what the bag's event files hold, never what a file that
  changed since holds.

An empty event file (a writer killed before its first flush), a folder of more than
``MAX_EVENT_FILES`` and a file above verify-export's per-file limit are not exported
and named. Without the ``tensorboard`` package the event files are exported and the
export warns that their scalars are not.

The manifest lists every file under ``files.metrics`` and, per source, under
``files.metric_sources`` (what the plan declared, the files, the scalars file and its
points); ``export_checks.metrics_exported`` checks them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.export.payload import Payload
from cockpit.export.tar_limits import DEFAULT_LIMITS
from cockpit.runs.metrics.tensorboard import (
    TENSORBOARD_MISSING,
    TensorBoardReader,
    is_tensorboard_path,
)
from cockpit.runs.metrics.values import MetricPoint
from cockpit.runs.supervisor import report_path

TB_PREFIX = "events.out.tfevents."
# More event files than this in one folder is not a run's log (a restarted writer adds
# one file per restart): the rest is named, not exported.
MAX_EVENT_FILES = 1000
SCALARS_SUFFIX = ".scalars.jsonl"


@dataclass
class RunMetrics:
    """What ``add_run_metrics`` put in the bag for one run."""

    files: list[str] = field(default_factory=list)  # bag paths, for files.metrics
    sources: list[dict[str, Any]] = field(default_factory=list)  # files.metric_sources
    warnings: list[str] = field(default_factory=list)


def add_run_metrics(payload: Payload, campaign: Campaign, run_id: str, base: str) -> RunMetrics:
    """Every metrics source of ``run_id`` into ``<base>/metrics/`` (see the module)."""
    out = RunMetrics()
    run = campaign.runs.get(run_id)
    sources: list[tuple[str | None, Path]] = [
        (p.as_posix(), campaign.resolve(p)) for p in (run.metrics if run else ())]
    report = report_path(campaign, run_id)
    if all(path != report for _d, path in sources):
        sources.append((None, report))  # the cockpit.report file: exported when written
    for declared, path in sources:
        record: dict[str, Any] = {"declared": declared,
                                  "source": payload.source_label(path), "files": []}
        if is_tensorboard_path(path):
            _add_tensorboard(payload, run_id, base, path, record, out)
        elif path.is_file():
            record["format"] = "file"
            entry = payload.add_file(f"{base}/metrics/{path.name}", path)
            record["files"] = [entry.path] if entry else []
        elif path.is_dir():
            record["format"] = "trainer_state"
            for found in sorted(p for p in path.rglob("trainer_state.json") if p.is_file()):
                entry = payload.add_file(f"{base}/metrics/{found.name}", found)
                if entry:
                    record["files"].append(entry.path)
        if declared is None and not record["files"]:
            continue  # no cockpit.report file: the run logs elsewhere
        record["found"] = bool(record["files"])
        if not record["found"] and declared is not None:
            payload.skip(path, f"metrics of run {run_id}: nothing to export there")
        out.files += record["files"]
        if record.get("scalars"):
            out.files.append(record["scalars"])
        out.sources.append(record)
    return out


def _add_tensorboard(payload: Payload, run_id: str, base: str, path: Path,
                     record: dict[str, Any], out: RunMetrics) -> None:
    record["format"] = "tensorboard"
    if path.name.startswith(TB_PREFIX):
        files, label = ([path] if path.is_file() else []), path.parent.name or "tensorboard"
    else:
        try:
            with os.scandir(path) as children:
                files = sorted(Path(c.path) for c in children
                               if c.name.startswith(TB_PREFIX) and c.is_file())
        except OSError as exc:
            payload.skip(path, f"cannot be listed: {exc.strerror or exc}")
            files = []
        label = path.name or "tensorboard"
    if len(files) > MAX_EVENT_FILES:
        payload.skip(path, f"{len(files)} event files: only the first {MAX_EVENT_FILES} "
                           "exported")
        files = files[:MAX_EVENT_FILES]
    folder = _free_folder(payload, f"{base}/metrics/{label}")
    for file in files:
        try:
            size = file.stat().st_size
        except OSError as exc:  # gone since it was listed
            payload.skip(file, f"cannot be read: {exc.strerror or exc}")
            continue
        if size == 0:
            payload.skip(file, "an empty event file (nothing was flushed to it)")
            continue
        if size > DEFAULT_LIMITS.max_file_bytes:
            payload.skip(file, f"an event file of {size} bytes, above verify-export's "
                               "per-file limit")
            continue
        entry = payload.add_file(f"{folder}/{file.name}", file)
        if entry:
            record["files"].append(entry.path)
    if not record["files"]:
        return
    reader = TensorBoardReader(payload.data / folder)
    counted = [0]
    entry = payload.add_lines(f"{folder}{SCALARS_SUFFIX}", _jsonl(reader.read_all(), counted))
    record["points"] = counted[0]
    record["scalars"] = entry.path if entry else None
    if reader.error == TENSORBOARD_MISSING:
        out.warnings.append(f"run {run_id}: the scalars of {record['source']} are not "
                            f"exported as JSON lines (the event files are): {TENSORBOARD_MISSING}")
    elif reader.garbage:
        record["damaged"] = reader.garbage
        out.warnings.append(f"run {run_id}: {reader.garbage} damaged record(s) in the event "
                            f"files of {record['source']} (last: {reader.last_garbage}); "
                            "the scalars before each are exported")
    elif entry is None:
        out.warnings.append(f"run {run_id}: the event files of {record['source']} hold no "
                            "scalar")


def _free_folder(payload: Payload, rel: str) -> str:
    """``rel``, or ``rel-2``, ``rel-3``...: a folder no file of the bag is in yet (two
    sources of one run named alike keep apart; an event file is never renamed, or its
    reader would no longer know it)."""
    taken = {Path(p).parent.as_posix() for p in payload.files}
    taken |= {p.removesuffix(SCALARS_SUFFIX) for p in payload.files}
    candidate, n = rel, 2
    while f"data/{candidate}" in taken:
        candidate, n = f"{rel}-{n}", n + 1
    return candidate


def _jsonl(points: Iterator[MetricPoint], counted: list[int]) -> Iterator[bytes]:
    """One line per point, as :mod:`cockpit.report` writes them."""
    for point in points:
        record: dict[str, Any] = {}
        if point.t is not None:
            record["t"] = point.t
        if point.step is not None:
            record["step"] = point.step
        record.update(point.values)
        counted[0] += 1
        yield (json.dumps(record) + "\n").encode("utf-8")
