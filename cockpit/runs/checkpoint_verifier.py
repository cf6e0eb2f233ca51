"""Checkpoint verification for a campaign's runs (D16, D17): which checkpoint, which
check (the reload worker or the run's own ``verify_command``), resume equivalence,
and a one-job background verifier the engine uses so its tick never waits.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cockpit.campaign.model import Campaign, Run
from cockpit.errors import InputError
from cockpit.runs.checkpoints import CheckpointInfo, CheckpointScanner, step_from_name
from cockpit.runs.metrics import MetricStream
from cockpit.runs.reload_check import VerifyReport, run_verify_command, verify_checkpoint
from cockpit.runs.supervisor import report_path


def scanner_for(campaign: Campaign, run: Run,
                settle_seconds: float = 2.0) -> CheckpointScanner | None:
    if run.checkpoints is None:
        return None
    return CheckpointScanner(campaign.resolve(run.checkpoints), pattern=run.pattern,
                             settle_seconds=settle_seconds)


def run_stream(campaign: Campaign, run_id: str) -> MetricStream:
    """Every metric file of a run: its declared ``metrics`` and its cockpit.report file."""
    run = campaign.runs.get(run_id)
    paths = [campaign.resolve(p) for p in (run.metrics if run else ())]
    report = report_path(campaign, run_id)
    if report not in paths:
        paths.append(report)
    return MetricStream(paths)


def feed_checkpoint_reports(campaign: Campaign, scanner: CheckpointScanner,
                            events: list[dict[str, Any]]) -> None:
    """Tell the scanner what the run reported: a checkpoint it said it wrote is complete
    at once; the settle time is only for files nobody reported."""
    for event in events:
        if not event.get("path"):
            continue
        path = campaign.resolve(Path(str(event["path"])))
        at = event.get("t") if isinstance(event.get("t"), (int, float)) else None
        if event.get("event") == "checkpoint_started":
            scanner.mark_started(path, at=at)
        elif event.get("event") == "checkpoint_written":
            step = event.get("step")
            seconds = event.get("seconds")
            scanner.mark_written(path, step=step if isinstance(step, int) else None,
                                 seconds=seconds if isinstance(seconds, (int, float)) else None,
                                 at=at)


def reported_scanner(campaign: Campaign, run: Run,
                     settle_seconds: float = 2.0) -> CheckpointScanner | None:
    """A fresh scanner that already knows every checkpoint the run reported written."""
    scanner = scanner_for(campaign, run, settle_seconds)
    if scanner is None:
        return None
    stream = run_stream(campaign, run.id)
    while stream.poll():  # a reader returns a bounded slice per poll: read to the end
        feed_checkpoint_reports(campaign, scanner, stream.poll_events())
    feed_checkpoint_reports(campaign, scanner, stream.poll_events())
    return scanner


def choose_checkpoint(campaign: Campaign, run: Run, which: str = "newest",
                      now: float | None = None) -> CheckpointInfo | Path:
    """``newest`` / ``first`` complete checkpoint of the run, or an explicit path.

    ``now`` (epoch seconds) is the caller's clock for the settle time; default: real time."""
    if which not in ("newest", "first"):
        path = Path(which)
        path = path if path.is_absolute() else Path.cwd() / path
        if not path.exists():
            raise InputError(f"verify: no checkpoint at {path}")
        return path
    scanner = reported_scanner(campaign, run)
    if scanner is None:
        raise InputError(f"{campaign.path}: run {run.id!r} has no checkpoints folder")
    view = scanner.scan(time.time() if now is None else now)
    if not view.complete:
        raise InputError(f"run {run.id!r}: no complete checkpoint in {scanner.folder}"
                         + (f" ({view.note})" if view.note else ""))
    ordered = sorted(view.complete, key=lambda c: (c.step if c.step is not None else -1,
                                                    c.mtime))
    return ordered[0] if which == "first" else ordered[-1]


def verify_run_checkpoint(campaign: Campaign, run: Run, path: Path) -> VerifyReport:
    """Reload in a fresh process; the run's ``verify_command`` when it gives one."""
    timeout = campaign.settings.verify_timeout_s
    if run.verify_command:
        return run_verify_command(list(run.verify_command), path, timeout, cwd=campaign.folder)
    return verify_checkpoint(path, run.kind, timeout=timeout,
                             allow_unsafe=run.allow_unsafe_pickle,
                             base_model=run.base_model, base_revision=run.base_revision)


def report_fields(report: VerifyReport) -> dict[str, Any]:
    """What a ``checkpoint_verified`` journal event records."""
    return {"path": report.path, "ok": report.ok, "layout": report.layout,
            "missing": list(report.missing_required), "warnings": list(report.warnings),
            "error": report.error, "load_seconds": report.load_seconds, "step": report.step,
            "summary": report.summary()}


@dataclass(frozen=True)
class ResumeResult:
    ok: bool
    checkpoint: str
    from_step: int | None
    compared: int
    diverged_step: int | None
    message: str
    seconds: float


def metric_by_step(paths: list[Path], metric: str) -> dict[int, float]:
    """Every value of ``metric`` by step in these files (the last one wins on repeats)."""
    stream = MetricStream(paths)
    values: dict[int, float] = {}
    for point in stream.poll():
        if point.step is not None and metric in point.values:
            values[point.step] = float(point.values[metric])
    return values


def resume_equivalence(campaign: Campaign, run: Run, checkpoint: Path,
                       from_step: int | None, now: datetime) -> ResumeResult:
    """Restart the run's own training from ``checkpoint`` for N steps in a new process,
    writing to a scratch folder, and compare the metric with what the run logged."""
    spec = run.resume_check
    if spec is None:
        raise InputError(f"{campaign.path}: run {run.id!r} has no resume_check section")
    scratch = campaign.state_dir / "resume-check" / f"{run.id}-{now:%Y%m%dT%H%M%S%f}"
    scratch.mkdir(parents=True, exist_ok=True)
    words = {"{python}": sys.executable, "{checkpoint}": str(checkpoint),
             "{steps}": str(spec.steps), "{scratch}": str(scratch), "{run}": run.id}
    argv = [words.get(w, w) for w in spec.command]
    for key, value in words.items():
        argv = [w.replace(key, value) if key in w else w for w in argv]
    report = scratch / "report.jsonl"
    env = {**_env(), "COCKPIT_REPORT": str(report), "COCKPIT_RUN": f"{run.id}:resume-check"}
    started = time.monotonic()
    try:
        with open(scratch / "stdout.log", "wb") as out, open(scratch / "stderr.log", "wb") as err:
            code = subprocess.run(argv, cwd=campaign.folder, env=env, stdout=out, stderr=err,
                                  timeout=campaign.settings.verify_timeout_s).returncode
    except subprocess.TimeoutExpired:
        return ResumeResult(False, str(checkpoint), from_step, 0, None,
                            "resume check timed out", time.monotonic() - started)
    except OSError as exc:
        return ResumeResult(False, str(checkpoint), from_step, 0, None,
                            f"resume check could not start: {exc}", time.monotonic() - started)
    seconds = time.monotonic() - started
    if code != 0:
        tail = (scratch / "stderr.log").read_text(errors="replace").strip().splitlines()[-1:]
        return ResumeResult(False, str(checkpoint), from_step, 0, None,
                            f"resumed process exited {code}: {' '.join(tail)}", seconds)
    original_paths = [campaign.resolve(p) for p in run.metrics] + [report_path(campaign, run.id)]
    original = metric_by_step(original_paths, spec.metric)
    resumed = metric_by_step([report], spec.metric)
    steps = sorted(s for s in resumed if from_step is None or s > from_step)
    compared = 0
    for step in steps:
        if step not in original:
            continue
        compared += 1
        a, b = original[step], resumed[step]
        if not _close(a, b, spec.tolerance):
            return ResumeResult(False, str(checkpoint), from_step, compared, step,
                                f"{spec.metric} diverged at step {step}: original {a!r}, "
                                f"resumed {b!r} (tolerance {spec.tolerance:g}): the restart "
                                "is not exact (RNG or data position not restored?)", seconds)
    if compared == 0:
        return ResumeResult(False, str(checkpoint), from_step, 0, None,
                            f"nothing to compare: the original run logged no {spec.metric} at "
                            f"the resumed steps {steps[:3]}…", seconds)
    return ResumeResult(True, str(checkpoint), from_step, compared, None,
                        f"{compared} steps of {spec.metric} match the original within "
                        f"{spec.tolerance:g}: the restart is exact", seconds)


def _close(a: float, b: float, tolerance: float) -> bool:
    if math.isnan(a) and math.isnan(b):
        return True
    return a == b or abs(a - b) <= tolerance


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("COCKPIT_REPORT", None)
    return env


def checkpoint_step(item: CheckpointInfo | Path) -> int | None:
    if isinstance(item, CheckpointInfo):
        return item.step
    return step_from_name(item.name)


class BackgroundVerifier:
    """At most one verification at a time, off the caller's thread; results are polled."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._done: list[tuple[str, int | None, VerifyReport]] = []
        self._lock = threading.Lock()

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def submit(self, campaign: Campaign, run: Run, path: Path, attempt: int | None) -> bool:
        if self.busy:
            return False

        def work() -> None:
            report = verify_run_checkpoint(campaign, run, path)
            with self._lock:
                self._done.append((run.id, attempt, report))

        self._thread = threading.Thread(target=work, name=f"verify-{run.id}", daemon=True)
        self._thread.start()
        return True

    def results(self) -> list[tuple[str, int | None, VerifyReport]]:
        with self._lock:
            done, self._done = self._done, []
        return done
