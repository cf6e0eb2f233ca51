"""Checkpoint verification for a campaign's runs (D17): which checkpoint, which
check (the reload worker or the run's own ``verify_command``), and a one-job
background verifier the engine uses so its tick never waits.

The resume check (D17) lives in ``resume_check``; ``resume_equivalence`` and
``ResumeResult`` are re-exported here for the importers that know them from here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from cockpit.campaign.model import Campaign, Run
from cockpit.common.errors import InputError
from cockpit.runs.checkpoints.discovery import CheckpointInfo, CheckpointScanner
from cockpit.runs.checkpoints.layout import step_from_name
from cockpit.runs.checkpoints.reload_check import (
    VerifyReport,
    run_verify_command,
    verify_checkpoint,
)
from cockpit.runs.checkpoints.resume_check import ResumeResult as ResumeResult  # re-exported
from cockpit.runs.checkpoints.resume_check import (
    resume_equivalence as resume_equivalence,  # re-exported
)
from cockpit.runs.metrics.stream import MetricStream
from cockpit.runs.supervisor import report_path


def scanner_for(campaign: Campaign, run: Run, settle_seconds: float = 2.0,
                since: float | None = None) -> CheckpointScanner | None:
    """The run's checkpoint scanner; ``since``: its current attempt's start (an earlier
    attempt's checkpoints do not count, :mod:`cockpit.runs.attempts`)."""
    if run.checkpoints is None:
        return None
    scanner = CheckpointScanner(campaign.resolve(run.checkpoints), pattern=run.pattern,
                                settle_seconds=settle_seconds)
    scanner.since = since
    return scanner


def run_stream(campaign: Campaign, run_id: str, since: float | None = None) -> MetricStream:
    """Every metric file of a run: its declared ``metrics`` and its cockpit.report file,
    read with the run's ``metric_names`` mapping; ``since``: its current attempt's start
    (what an earlier attempt wrote is not read, :mod:`cockpit.runs.attempts`)."""
    run = campaign.runs.get(run_id)
    paths = [campaign.resolve(p) for p in (run.metrics if run else ())]
    report = report_path(campaign, run_id)
    if report not in paths:
        paths.append(report)
    return MetricStream(paths, names=run.metric_names if run else None, since=since)


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


def reported_scanner(campaign: Campaign, run: Run, settle_seconds: float = 2.0,
                     since: float | None = None) -> CheckpointScanner | None:
    """A fresh scanner that already knows every checkpoint the run reported written
    (``since``: the current attempt's start; earlier attempts' do not count)."""
    scanner = scanner_for(campaign, run, settle_seconds, since)
    if scanner is None:
        return None
    stream = run_stream(campaign, run.id, since)
    while stream.poll():  # a reader returns a bounded slice per poll: read to the end
        feed_checkpoint_reports(campaign, scanner, stream.poll_events())
    feed_checkpoint_reports(campaign, scanner, stream.poll_events())
    return scanner


def choose_checkpoint(campaign: Campaign, run: Run, which: str = "newest",
                      now: float | None = None,
                      since: float | None = None) -> CheckpointInfo | Path:
    """``newest`` / ``first`` complete checkpoint of the run, or an explicit path.

    ``now`` (epoch seconds) is the caller's clock for the settle time; default: real time.
    ``since``: the run's current attempt's start (an earlier attempt's checkpoint is not
    chosen as this attempt's)."""
    if which not in ("newest", "first"):
        path = Path(which)
        path = path if path.is_absolute() else Path.cwd() / path
        if not path.exists():
            raise InputError(f"verify: no checkpoint at {path}")
        return path
    scanner = reported_scanner(campaign, run, since=since)
    if scanner is None:
        raise InputError(f"{campaign.path}: run {run.id!r} has no checkpoints folder")
    view = scanner.scan(time.time() if now is None else now)
    if not view.complete:
        earlier = (f"; {view.earlier} from before the run's current attempt"
                   if view.earlier else "")
        raise InputError(f"run {run.id!r}: no complete checkpoint in {scanner.folder}"
                         + (f" ({view.note})" if view.note else "") + earlier)
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
            "error": report.error, "load_seconds": report.load_seconds,
            "wall_seconds": report.wall_seconds, "step": report.step,
            "summary": report.summary()}


def checkpoint_step(item: CheckpointInfo | Path) -> int | None:
    if isinstance(item, CheckpointInfo):
        return item.step
    return step_from_name(item.name)


class BackgroundVerifier:
    """At most one slow check at a time, off the caller's thread; results are polled.

    Two kinds of jobs share the one slot: checkpoint verifications (:meth:`submit`,
    results from :meth:`results`) and any other slow check, such as a run's acceptance
    with a ``checkpoint: reloads`` (:meth:`submit_check`, results from
    :meth:`check_results`), so the engine's tick never waits for a reload."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._done: list[tuple[str, int | None, VerifyReport]] = []
        self._checks: list[tuple[Any, Any]] = []
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

        self._start(work, f"verify-{run.id}")
        return True

    def submit_check(self, key: Hashable, check: Callable[[], Any],
                     on_error: Callable[[Exception], Any]) -> bool:
        """Run ``check()`` in the background (False: the slot is busy, try later). Its
        value, or ``on_error(exc)`` when it raised, comes back from :meth:`check_results`."""
        if self.busy:
            return False

        def work() -> None:
            try:
                value = check()
            except Exception as exc:  # noqa: BLE001 - a result in words, never a dead thread
                value = on_error(exc)
            with self._lock:
                self._checks.append((key, value))

        self._start(work, f"check-{key}")
        return True

    def _start(self, work: Callable[[], None], name: str) -> None:
        self._thread = threading.Thread(target=work, name=name, daemon=True)
        self._thread.start()

    def results(self) -> list[tuple[str, int | None, VerifyReport]]:
        with self._lock:
            done, self._done = self._done, []
        return done

    def check_results(self) -> list[tuple[Any, Any]]:
        with self._lock:
            done, self._checks = self._checks, []
        return done

    def wait(self, timeout: float) -> bool:
        """Wait for the running job (tests, one-shot commands); True when none is left."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return not self.busy
