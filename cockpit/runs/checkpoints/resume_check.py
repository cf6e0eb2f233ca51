"""The resume check (D17): does a restart from a checkpoint reproduce the original run?

This module owns ``resume_equivalence``: the run's own training restarted from a
checkpoint for N steps in a new process (a scratch folder, its own report file), and
its metric compared step by step with what the run logged, within a tolerance.
Which checkpoint and whether it reloads at all belong to ``checkpoint_verifier`` and
``reload_check``.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cockpit.campaign.model import Campaign, Run
from cockpit.common.errors import InputError
from cockpit.journal.paths import CampaignFiles
from cockpit.runs.metrics.stream import MetricStream
from cockpit.runs.supervisor import report_path


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
    scratch = CampaignFiles.of(campaign).resume_checks / f"{run.id}-{now:%Y%m%dT%H%M%S%f}"
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
