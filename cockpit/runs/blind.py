"""Blind: a rule, check or conclusion metric that watches what a run never reported.

"Unknown is not ok" (issue 22): a stop rule on ``train/los`` when the run writes
``train/loss`` never fires, so without this state it reads ✓ all campaign long. This
module owns

- :func:`blind_reason`, the pure decision and its words: the run has started (running
  or ended), the watched metric has never been seen on this attempt, and why when that
  is known (a declared metrics source that does not exist, a reader whose extra is not
  installed), naming the metrics the run *does* report, with a did-you-mean that names
  the canonical name (:mod:`cockpit.common.metric_names`: a metric seen under an alias
  is seen);
- :func:`first_report_due`, the grace before that: a running run that has run under
  :data:`BLIND_GRACE_S` (the documented 2 min) and reported no metric yet is *waiting*
  for its first report, not blind (a source that reports other metrics, or cannot be
  read, is blind at once);
- :func:`source_status`, what a polled :class:`MetricStream` says about its sources;
- :func:`read_evidence` and :func:`evidence_problems`, what an accept needs from a
  ended run's files: the stop rules it ended blind to and a non-finite last loss;
- :func:`gpus_blind`, why an ``underfed`` rule cannot see a run's GPUs' utilization.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cockpit.campaign.model import Campaign, StopRule
from cockpit.common.metric_names import (
    GRAD_NORM,
    LOSS,
    as_reported,
    canonical_name,
    lookup,
    suggestion,
)
from cockpit.journal.fold import NOT_STARTED, RUNNING
from cockpit.runs.metrics.stream import MetricStream
from cockpit.telemetry import GpuReading

BLIND = "blind"
BLIND_MARK = "◌"  # beside ✓ ok, ! warn, ✗ fired: nothing seen
# A rule on a run that has not started watches nothing yet: not ok, not blind.
WAITING = "waiting"
NAMES_SHOWN = 8  # metric names listed in a blind reason (then "and N more")
# A running run's first reports come within this (the docs' 2 min); then blind is news.
BLIND_GRACE_S = 120.0


@dataclass(frozen=True)
class SourceStatus:
    """What a run's metric readers know about their sources."""

    missing: tuple[str, ...] = ()  # declared metrics sources that do not exist
    unreadable: tuple[str, ...] = ()  # why a source cannot be read (a missing extra...)
    behind: bool = False  # a backlog still being read: not every name is known yet


@dataclass(frozen=True)
class Evidence:
    """A run attempt's metrics as its files hold them: each metric's last value."""

    last: dict[str, float] = field(default_factory=dict)
    source: SourceStatus = SourceStatus()


def watches_metric(rule: StopRule) -> bool:
    """Whether the rule reads a metric (``restart`` watches checkpoints, never blind)."""
    return rule.metric is not None and rule.kind != "restart"


def blind_reason(metric: str | None, run_state: str, reported: Collection[str],
                 source: SourceStatus = SourceStatus(), *, strict: bool = True) -> str | None:
    """Why a rule or check on ``metric`` is blind on a run, in words; None when it is not
    (no metric, a run not started yet, the metric seen, or a backlog still read).

    ``strict``: the rule or check names this run (a run's acceptance check, a rule with
    ``runs:``, the conclusion's runs), so any metric never seen makes it blind. A rule for
    every run is not meant for each one (a loss rule on the data check, a truncation rule
    on a training run): there it is blind only when the run reports no metric at all, a
    source of it is missing or unreadable, or a name it reports is close to the rule's (a
    misspelling)."""
    if metric is None or run_state == NOT_STARTED or source.behind \
            or metric in reported or canonical_name(metric) in reported:
        return None  # seen, under its own name or its canonical one (an alias)
    causes: list[str] = list(source.unreadable)
    if source.missing:
        causes.append(f"its metrics source {', '.join(source.missing)} does not exist")
    names = as_reported(reported)
    hint = suggestion(metric, reported)
    if not strict and names and not causes and not hint:
        return None  # the run reports other metrics, none like this one: not its rule
    if names:
        shown = ", ".join(names[:NAMES_SHOWN]) + (
            f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")
        causes.append(f"the run reports {shown}"
                      + (f" (did you mean {hint}?)" if hint else ""))
    else:
        causes.append("the run reports no metrics")
    return f"{metric} never seen — " + "; ".join(causes)


def first_report_due(run_state: str, age_s: float | None, reported: Collection[str],
                     source: SourceStatus = SourceStatus()) -> bool:
    """Whether a rule that has not seen its metric on a run is *waiting* for the run's
    first report rather than blind: the run is running, has run under
    :data:`BLIND_GRACE_S` (``age_s``, its attempt's age; None: unknown, not waiting) and
    its sources have reported no metric yet and are not unreadable. A source that reports
    other metrics lacks this one: blind at once."""
    if run_state != RUNNING or age_s is None or age_s >= BLIND_GRACE_S:
        return False
    return not source.unreadable and not any(n != "max_steps" for n in reported)


# An evaluation metric (eval_loss, val/accuracy, test_f1): logged at the run's
# evaluation interval, often long after its first training reports.
EVALUATION = re.compile(r"(eval|val|valid|validation|test)[/_]")
EVALUATION_DUE = 0.5  # of the run's steps: no evaluation by then is news


def value_due(metric: str, after_step: int, run_state: str, step: int | None,
              max_steps: float | None, reported: Collection[str],
              source: SourceStatus = SourceStatus()) -> str | None:
    """Why a running run's rule has not seen ``metric`` *yet*, when the run's reports
    say it is not due (the rule is then waiting, not blind, and nobody is paged): the
    rule watches from ``after_step`` and the run is not there; or the metric is an
    evaluation metric (:data:`EVALUATION`), no reported name looks like a misspelling of
    it, and the run is not past :data:`EVALUATION_DUE` of its steps (or its max steps
    are unknown). None: not due for a reason the reports show (blind stands)."""
    if run_state != RUNNING or source.unreadable or source.missing:
        return None
    at = step or 0
    if after_step and at < after_step:
        return f"watches from step {after_step}; the run is at step {at}"
    if (EVALUATION.match(metric) or EVALUATION.match(canonical_name(metric))) \
            and suggestion(metric, reported) is None \
            and (not max_steps or at < EVALUATION_DUE * max_steps):
        return (f"no {metric} yet: evaluations come at the run's evaluation interval; "
                f"blind if none by {EVALUATION_DUE:.0%} of its steps")
    return None


# What a rule waiting for a running run's first report says (the same on every tick).
FIRST_REPORT_WORDS = (f"no report from the run yet: blind if none comes within "
                      f"{BLIND_GRACE_S / 60:g} min of its start")


def gpus_blind(gpus: Sequence[int], reading: GpuReading) -> str | None:
    """Why the utilization of ``gpus`` is not known from this GPU sample (no telemetry, a
    GPU not seen or lost, a utilization not read); None when each has one."""
    if not gpus:
        return "its stage holds no GPU (resource: gpu): no utilization to watch"
    if reading.status == "unavailable":
        return f"no GPU telemetry ({reading.error or 'not sampled'}): utilization unknown"
    by_index = {g.index: g for g in reading.gpus}
    causes = []
    for index in gpus:
        gpu = by_index.get(index)
        if gpu is None:
            causes.append(f"GPU {index} not seen")
        elif gpu.lost:
            causes.append(f"GPU {index} lost")
        elif gpu.util is None:
            causes.append(f"GPU {index} utilization not read")
    return "; ".join(causes) + ": utilization unknown" if causes else None


def conclusion_runs(campaign: Campaign) -> set[str]:
    """The runs the conclusion compares (its baseline and variants; without variants,
    every run that produces a result): its metric is watched strictly on each."""
    spec = campaign.conclusion
    if spec is None:
        return set()
    if spec.variants:
        return {r for r in (spec.baseline, *spec.variants) if r is not None}
    return {r.id for r in campaign.runs.values() if r.produces_result}


def declared_sources(campaign: Campaign, run_id: str) -> tuple[Path, ...]:
    run = campaign.runs.get(run_id)
    return tuple(campaign.resolve(p) for p in (run.metrics if run else ()))


def source_status(stream: MetricStream, declared: Sequence[Path]) -> SourceStatus:
    """From a polled stream's readers (no file is read here): the declared sources that
    do not exist, why a source cannot be read, whether a backlog is still being read."""
    wanted = set(declared)
    missing = tuple(str(r.path) for r in stream.readers if r.path in wanted and not r.exists)
    unreadable = tuple(dict.fromkeys(r.error for r in stream.readers if r.error))
    return SourceStatus(missing, unreadable, any(not r.caught_up for r in stream.readers))


def stream_blind(metric: str | None, run_state: str, stream: MetricStream | None,
                 declared: Sequence[Path], *, strict: bool = True) -> str | None:
    """:func:`blind_reason` from a live stream (None without one: not read here)."""
    if stream is None:
        return None
    return blind_reason(metric, run_state, stream.latest.keys(),
                        source_status(stream, declared), strict=strict)


def read_evidence(stream: MetricStream, declared: Sequence[Path],
                  since: float | None) -> Evidence:
    """Every point of ``stream`` read to the end; points older than ``since`` (epoch
    seconds: an earlier attempt) are skipped."""
    last: dict[str, float] = {}
    while points := stream.poll():  # each poll reads a bounded slice
        for point in points:
            if since is None or point.t is None or point.t >= since:
                last.update(point.values)
    return Evidence(last, source_status(stream, declared))


def rules_blind(rules: Iterable[StopRule], run_id: str, run_state: str,
                evidence: Evidence) -> list[tuple[str, str]]:
    """(rule id, reason) for each stop rule of the run that is blind on this evidence."""
    out = []
    for rule in rules:
        if rule.applies_to(run_id) and watches_metric(rule):
            why = blind_reason(rule.metric, run_state, evidence.last.keys(), evidence.source,
                               strict=bool(rule.runs))
            if why is not None:
                out.append((rule.id, why))
    return out


def non_finite_losses(last: Mapping[str, float]) -> list[str]:
    """The run's losses (``loss`` or any ``*loss*``, an alias said once) whose last value
    is NaN or infinite, and a last loss of exactly 0.0 beside a non-finite gradient norm
    (the Hugging Face Trainer's ``logging_nan_inf_filter`` hides a NaN loss so)."""
    out = [f"its last {name} is {last[name]} (non-finite)" for name in as_reported(last)
           if "loss" in name.lower() and not math.isfinite(last[name])]
    hidden = hidden_nan_words(last)
    return out + ([hidden] if hidden else [])


def hidden_nan_words(values: Mapping[str, float]) -> str | None:
    """Words for a loss of exactly 0.0 beside a non-finite gradient norm; None if not so."""
    loss, norm = lookup(values, LOSS), lookup(values, GRAD_NORM)
    if loss == 0.0 and norm is not None and not math.isfinite(norm):
        return (f"its last {LOSS} is 0.0 while its {GRAD_NORM} is {norm}: a non-finite "
                "loss hidden by the logger's NaN filter (the Trainer's logging_nan_inf_filter)")
    return None


def evidence_problems(rules: Iterable[StopRule], run_id: str, run_state: str,
                      evidence: Evidence) -> list[str]:
    """Why a run's result may not be accepted without an override: the stop rules it
    ended blind to, and a non-finite last loss."""
    problems = [f"it ended blind to stop rule {rule}: {why}"
                for rule, why in rules_blind(rules, run_id, run_state, evidence)]
    return problems + non_finite_losses(evidence.last)
