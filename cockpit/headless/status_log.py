"""Status outputs for tools: the compact per-tick JSON, its one-line form, a
size-bounded rotating log file, and the atomic write of the Prometheus textfile (its
text: :mod:`cockpit.headless.prometheus`).

Every file here is written only into a real file: a symbolic link planted at the status
log, the event log or the Prometheus file is refused (OSError ELOOP, the journal's rule
in :mod:`cockpit.common.fsutil`), never written through.

The compact JSON is what the status log holds, one object a line;
:mod:`cockpit.headless.status_line` turns one such object into the tmux status-bar line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from cockpit.common.fsutil import open_no_follow
from cockpit.engine.snapshot import Snapshot, json_number, json_time, landing_words

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_BACKUPS = 5


def compact_json(snap: Snapshot) -> dict[str, Any]:
    """The snapshot, compact: window, stages, runs, rules, GPU summary, warnings."""
    w = snap.window
    gpus = [
        {"i": g.index, "util": g.util, "mem": g.mem_used, "temp": g.temp, "power": g.power,
         "lost": g.lost}
        for g in snap.gpus.gpus
    ]
    utils = [g.util for g in snap.gpus.gpus if g.util is not None and not g.lost]
    ckpt_ages = [r.checkpoint.age_s for r in snap.runs
                 if r.checkpoint is not None and r.checkpoint.age_s is not None
                 and r.state == "running"]
    return {
        "t": json_time(snap.taken_at),
        "campaign": snap.campaign,
        "window": {"end": json_time(w.end), "left_s": round(w.remaining_s),
                   "used_pct": round(w.used_pct, 1),
                   "point_of_no_return": json_time(w.point_of_no_return),
                   "landing": landing_words(snap)},
        "forecast": {"end": json_time(w.forecast_end), "slack_s": round(w.forecast_slack_s),
                     "verdict": w.verdict},
        "stages": {s.id: s.state for s in snap.stages},
        "runs": {r.id: {"state": r.state, "step": r.step,
                        "metrics": {k: json_number(v) for k, v in r.metrics.items()},
                        "ckpt_age_s": None if r.checkpoint is None or r.checkpoint.age_s is None
                        else round(r.checkpoint.age_s)}
                 for r in snap.runs},
        "rules": {"fired": [f"{r.rule}@{r.run}" for r in snap.rules if r.state == "fired"],
                  "warn": [f"{r.rule}@{r.run}" for r in snap.rules if r.state == "warn"],
                  "blind": [f"{r.rule}@{r.run}" for r in snap.rules if r.state == "blind"],
                  "ok": sum(1 for r in snap.rules if r.state == "ok"),
                  "waiting": sum(1 for r in snap.rules if r.state == "waiting")},
        "decisions_pending": list(snap.pending_decisions),
        "gpu_status": snap.gpus.status,
        "gpu_util_mean": round(sum(utils) / len(utils), 1) if utils else None,
        "ckpt_age_s": round(min(ckpt_ages)) if ckpt_ages else None,
        "gpus": gpus,
        "warnings": list(snap.warnings),
        "alerts_owed": dict(snap.alerts_owed),
        "conductor": snap.conductor.json(),
        # Closed: the question answered and its verified export current (issue 41); what
        # is left is to fetch it in time.
        "closed": None if snap.export is None or not snap.export.closed else {
            "exported_at": json_time(snap.exported_at),
            "fetch_by": json_time(w.retrieval_deadline)},
        # The export against the facts now: its words, said by `status --line` too.
        "export": None if snap.export is None or not snap.export.exported else {
            "stale": snap.export.stale is not None, "why": snap.export.stale,
            "question_open": snap.export.open, "words": snap.export.words()},
    }


class RotatingFile:
    """Append lines to ``path``; past ``max_bytes`` rotate to path.1 … path.N (N = backups).

    ``reopen()`` (on SIGHUP) closes and reopens the path, so logrotate's move-and-signal
    works; the total on disk stays under (backups + 1) × max_bytes.
    """

    def __init__(self, path: Path, max_bytes: int = DEFAULT_MAX_BYTES,
                 backups: int = DEFAULT_BACKUPS) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._handle: IO[str] | None = None
        self._size = 0

    def _open(self) -> IO[str]:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Never through a planted symbolic link (the journal's rule).
            fd = open_no_follow(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            handle = os.fdopen(fd, "a", encoding="utf-8")
            self._size = handle.tell()
            if self._size and not _ends_with_newline(self.path):
                # A line cut short by a full disk: end it, so the next one stands alone.
                handle.write("\n")
                self._size += 1
            self._handle = handle
        return self._handle

    def write_line(self, line: str) -> None:
        """Append one line; OSError (a full disk) propagates, and the line is dropped
        rather than kept in a buffer to be retried, so the next write starts clean."""
        data = line.rstrip("\n") + "\n"
        size = len(data.encode("utf-8"))
        try:
            handle = self._open()
            if self._size and self._size + size > self.max_bytes:
                self._rotate()
                handle = self._open()
            handle.write(data)
            handle.flush()
        except OSError:
            self._drop()
            raise
        self._size += size

    def _drop(self) -> None:
        """Forget the handle after a failed write, discarding what it still buffers."""
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.close()
            except OSError:
                try:  # close could not flush: close the descriptor underneath
                    os.close(handle.fileno())
                except (OSError, ValueError):
                    pass

    def _rotate(self) -> None:
        self.close()
        for i in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{i + 1}"))
        if self.backups > 0:
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink(missing_ok=True)

    def reopen(self) -> None:
        self.close()

    def close(self) -> None:
        self._drop()


def _ends_with_newline(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"
    except OSError:
        return True




def dumps(compact: dict[str, Any]) -> str:
    return json.dumps(compact, separators=(",", ":"), default=str)
