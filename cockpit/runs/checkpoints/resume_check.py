"""The resume check (D17): does a restart from a checkpoint reproduce the original run?

This module owns ``resume_equivalence``: the run's own training restarted from a
checkpoint for N steps in a new process (a scratch folder, its own report file), and
its metric compared step by step with what the run logged, within a tolerance.
Which checkpoint and whether it reloads at all belong to ``checkpoint_verifier`` and
``reload_check``.

What the resumed process logged is read where it writes it, as the run's own is: its
report file (``$COCKPIT_REPORT``: :mod:`cockpit.report` and the integrations), plus the
run's own kind of metric source written under its scratch folder (the command is given
``{scratch}``: a Trainer's ``trainer_state.json``, a Lightning ``metrics.csv``,
TensorBoard event files, the same-named JSON lines), or the paths the
``resume_check.metrics`` key names there. Both sides are read with the canonical metric
names (:mod:`cockpit.common.metric_names`) and the run's ``metric_names``. When the
resumed process reported nothing, the message names that process (its command, its
exit, where it was expected to write), not the original run.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cockpit.campaign.model import Campaign, ResumeCheck, Run
from cockpit.common.errors import InputError
from cockpit.common.metric_names import lookup
from cockpit.common.printable import printable
from cockpit.journal.paths import CampaignFiles
from cockpit.runs.metrics.stream import MetricStream
from cockpit.runs.metrics.tensorboard import is_tensorboard_path
from cockpit.runs.supervisor import report_path

SCRATCH = "{scratch}"
TB_GLOB = "events.out.tfevents.*"
MAX_FOUND = 64  # metric files read from one scratch folder


@dataclass(frozen=True)
class ResumeResult:
    ok: bool
    checkpoint: str
    from_step: int | None
    compared: int
    diverged_step: int | None
    message: str
    seconds: float


@dataclass(frozen=True)
class Resumed:
    """The resumed process: how it was run and where it was to write."""

    argv: tuple[str, ...]
    scratch: Path
    report: Path

    def named(self) -> str:
        return printable(" ".join(self.argv))


def metric_by_step(paths: list[Path], metric: str,
                   names: Mapping[str, str] | None = None) -> dict[int, float]:
    """Every value of ``metric`` by step in these files (the last one wins on repeats),
    found under its own name or its canonical one (``names``: the run's mapping)."""
    stream = MetricStream(paths, names=names)
    values: dict[int, float] = {}
    while points := stream.poll():  # each poll reads a bounded slice: go to the end
        for point in points:
            value = lookup(point.values, metric)
            if point.step is not None and value is not None:
                values[point.step] = float(value)
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
             "{steps}": str(spec.steps), SCRATCH: str(scratch), "{run}": run.id}
    argv = [words.get(w, w) for w in spec.command]
    for key, value in words.items():
        argv = [w.replace(key, value) if key in w else w for w in argv]
    resumed = Resumed(tuple(argv), scratch, scratch / "report.jsonl")
    env = {**_env(), "COCKPIT_REPORT": str(resumed.report),
           "COCKPIT_RUN": f"{run.id}:resume-check"}
    started = time.monotonic()

    def failed(message: str) -> ResumeResult:
        return ResumeResult(False, str(checkpoint), from_step, 0, None, message,
                            time.monotonic() - started)

    timeout = campaign.settings.verify_timeout_s
    try:
        with open(scratch / "stdout.log", "wb") as out, open(scratch / "stderr.log", "wb") as err:
            code = subprocess.run(argv, cwd=campaign.folder, env=env, stdout=out, stderr=err,
                                  timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        return failed(f"the resumed process ran past {timeout:g} s and was stopped: "
                      f"`{resumed.named()}` (scratch folder {printable(scratch)})")
    except OSError as exc:
        return failed(f"the resumed process could not start: `{resumed.named()}`: "
                      f"{printable(exc)}")
    seconds = time.monotonic() - started
    if code != 0:
        tail = (scratch / "stderr.log").read_text(errors="replace").strip().splitlines()[-1:]
        return failed(f"the resumed process exited {code}: `{resumed.named()}` (scratch "
                      f"folder {printable(scratch)}): {printable(' '.join(tail))}")
    original_paths = [campaign.resolve(p) for p in run.metrics] + [report_path(campaign, run.id)]
    original = metric_by_step(original_paths, spec.metric, run.metric_names)
    sources = resumed_sources(campaign, run, spec, resumed)
    try:
        values = metric_by_step(sources, spec.metric, run.metric_names)
    except ValueError as exc:  # a resume_check.metrics path no reader knows
        return failed(f"the resumed process's metrics cannot be read: {printable(exc)}")
    values = {s: v for s, v in values.items() if from_step is None or s > from_step}
    if not values:  # (a Trainer's state carries the history before the checkpoint)
        return failed(_reported_nothing(spec, resumed, sources, code, seconds,
                                        from_step, source_patterns(campaign, run)))
    return _compare(spec, checkpoint, from_step, original, values, seconds)


def _compare(spec: ResumeCheck, checkpoint: Path, from_step: int | None,
             original: dict[int, float], resumed: dict[int, float],
             seconds: float) -> ResumeResult:
    """The resumed values against the original's, step by step after ``from_step``."""
    steps = sorted(resumed)
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


def resumed_sources(campaign: Campaign, run: Run, spec: ResumeCheck,
                    resumed: Resumed) -> list[Path]:
    """Where the resumed process's metrics are: its report file, then the paths of
    ``resume_check.metrics`` (``{scratch}`` replaced), else the files of the run's own
    sources' kinds found under its scratch folder."""
    paths = [resumed.report]
    if spec.metrics:
        for template in spec.metrics:
            path = Path(template.replace(SCRATCH, str(resumed.scratch)))
            paths.append(path if path.is_absolute() else campaign.folder / path)
        return paths
    for pattern in source_patterns(campaign, run):
        for found in sorted(resumed.scratch.rglob(pattern)):
            if found.is_file() and found not in paths and len(paths) <= MAX_FOUND:
                paths.append(found)
    return paths


def source_patterns(campaign: Campaign, run: Run) -> list[str]:
    """File names to look for under the scratch folder, one kind per declared source:
    a Trainer output folder or state (``trainer_state.json``; a folder may hold event
    files too), a TensorBoard source (event files), a CSV or JSON lines (its name)."""
    patterns: list[str] = []
    for declared in run.metrics:
        path = campaign.resolve(declared)
        if path.name == "trainer_state.json":
            kinds = ["trainer_state.json"]
        elif path.name.startswith("events.out.tfevents."):
            kinds = [TB_GLOB]
        elif path.suffix:
            kinds = [path.name]
        elif is_tensorboard_path(path):
            kinds = [TB_GLOB]
        else:  # a folder: a Trainer's output folder, or one that gets event files
            kinds = ["trainer_state.json", TB_GLOB]
        patterns.extend(k for k in kinds if k not in patterns)
    return patterns


def _reported_nothing(spec: ResumeCheck, resumed: Resumed, sources: list[Path],
                      code: int, seconds: float, from_step: int | None,
                      patterns: list[str]) -> str:
    """Why nothing could be compared, naming the resumed process (not the original)."""
    written = [p for p in sources if p.exists()]
    where = f"{resumed.report.name} ($COCKPIT_REPORT: cockpit.report and the integrations)"
    if spec.metrics:
        where += " or " + ", ".join(printable(m) for m in spec.metrics)
    elif patterns:
        where += (f" or the run's own kind of source ({', '.join(patterns)}; give the "
                  f"command {SCRATCH} as its output folder)")
    after = "" if from_step is None else f" after step {from_step}"
    found = (f"; it wrote {', '.join(printable(p.name) for p in written[:4])} but no "
             f"{printable(spec.metric)} with a step{after} there" if written
             else "; it wrote none of them")
    return (f"the resumed process reported no {printable(spec.metric)}{after}: "
            f"`{resumed.named()}` exited {code} after {seconds:.1f} s, its scratch folder "
            f"{printable(resumed.scratch)}; it was to write there: {where}{found}")


def _close(a: float, b: float, tolerance: float) -> bool:
    if math.isnan(a) and math.isnan(b):
        return True
    return a == b or abs(a - b) <= tolerance


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("COCKPIT_REPORT", None)
    return env
