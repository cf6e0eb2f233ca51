"""Stop rules (D14): pure evaluation of one rule against a run's new metric points.

A rule fires at most once per run attempt (the engine claims it in the journal);
here we only answer "does this rule fire on these points, and why, in words".
``stalled`` is answered from two figures the engine measures: the run's median step
interval (its points' own times) and the seconds since its last new step (monotonic).
``underfed`` from a :class:`Streak`: since when every GPU of the run has been under the
rule's utilization, on the monotonic clock of the GPU samples (the engine keeps it,
sample by sample, with :func:`extend_streak`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from cockpit.campaign.model import StopRule
from cockpit.common.metric_names import GRAD_NORM, canonical_name, lookup
from cockpit.common.units import format_duration


@dataclass(frozen=True)
class Firing:
    rule: str
    reason: str
    value: Any
    threshold: Any
    step: int | None
    action: str


@dataclass(frozen=True)
class Point:
    """A metric point as the rules see it (the metric readers' points satisfy this)."""

    step: int | None
    values: dict[str, float]
    t: float | None = None
    masked: frozenset[str] = frozenset()  # names whose logged value hides a non-finite one


def rules_hash(rules: Sequence[StopRule]) -> str:
    """The fingerprint of the rules the file fixed, journaled when the first run starts
    (D14). The implicit stalled rule is no one's decision; the stalled-only fields are left
    out of other kinds, so a campaign's hash is the same as before they existed."""
    fixed = []
    for rule in rules:
        if rule.implicit:
            continue
        fields = asdict(rule)
        del fields["implicit"]
        if rule.kind != "stalled":
            del fields["factor"], fields["floor_s"]
        if rule.kind != "underfed":
            del fields["util_below"], fields["for_s"]
        fixed.append(fields)
    text = json.dumps(fixed, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _json_value(value: float) -> Any:
    return value if math.isfinite(value) else str(value)


def check_points(rule: StopRule, points: Iterable[Any]) -> Firing | None:
    """First point (in order) at which a metric rule fires, or None. A rule finds its
    metric under its own name or its canonical one (``val_loss`` finds ``eval_loss``); a
    ``non_finite`` rule also fires on a value the point marks masked (a loss of 0.0 that
    hides a NaN, :mod:`cockpit.runs.metrics.stream`)."""
    if rule.metric is None or rule.kind in ("restart", "stalled", "underfed"):
        return None
    for point in points:
        step = point.step
        masked: frozenset[str] = getattr(point, "masked", frozenset())
        if rule.kind == "non_finite" and masked and (
                rule.metric in masked or canonical_name(rule.metric) in masked):
            return Firing(rule.id, f"{rule.metric} is 0.0 while {GRAD_NORM} is non-finite"
                          + _at(step) + ": a NaN loss hidden by the logger's filter "
                          "(the Trainer's logging_nan_inf_filter)", 0.0, "finite", step,
                          rule.action)
        found = lookup(point.values, rule.metric)
        if found is None:
            continue
        value = float(found)
        if rule.kind == "non_finite" and not math.isfinite(value):
            return Firing(rule.id, f"{rule.metric} is {value} (non-finite)", _json_value(value),
                          "finite", step, rule.action)
        if rule.kind == "truncation" and (not math.isfinite(value) or value > (rule.max or 0)):
            return Firing(rule.id, f"{rule.metric} = {value:g} inputs truncated (allowed "
                          f"{rule.max or 0:g})", _json_value(value), rule.max or 0, step,
                          rule.action)
        if rule.kind == "threshold":
            if step is not None and step < rule.after_step:
                continue
            if rule.min is not None and not value >= rule.min:
                return Firing(rule.id, f"{rule.metric} = {value:g} below the floor {rule.min:g}"
                              + _at(step), _json_value(value), {"min": rule.min}, step,
                              rule.action)
            if rule.max is not None and not value <= rule.max:
                return Firing(rule.id, f"{rule.metric} = {value:g} above the ceiling "
                              f"{rule.max:g}" + _at(step), _json_value(value),
                              {"max": rule.max}, step, rule.action)
    return None


def check_restart(rule: StopRule, *, seconds_without_restart: float | None,
                  step: int | None) -> Firing | None:
    """``restart``: no usable (verified) restart for longer than ``max_age``."""
    if rule.kind != "restart" or rule.max_age_s is None or seconds_without_restart is None:
        return None
    if seconds_without_restart <= rule.max_age_s:
        return None
    return Firing(rule.id, f"no usable restart for {format_duration(seconds_without_restart)} "
                  f"(max {format_duration(rule.max_age_s)})", round(seconds_without_restart, 1),
                  rule.max_age_s, step, rule.action)


STALL_MIN_POINTS = 3  # fewer stepped points: no median interval yet, never stalled


def step_interval(points: Iterable[Any], since: float | None = None) -> float | None:
    """The run's median seconds between successive new steps, from its points' own times
    (``t``, at or after ``since``); None with fewer than STALL_MIN_POINTS such points or
    no positive gap. A point repeating the last step (an eval line) is no new step; a
    gap that is not positive (a wall-clock step back, one write time) is no interval."""
    times: list[float] = []
    last: int | None = None
    for point in points:
        if point.step is None or point.t is None or point.step == last \
                or (since is not None and point.t < since):
            continue
        times.append(float(point.t))
        last = point.step
    if len(times) < STALL_MIN_POINTS:
        return None
    gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False) if b > a)
    return gaps[len(gaps) // 2] if gaps else None


def stall_limit(rule: StopRule, interval_s: float) -> float:
    """Seconds without a new step after which the run is stalled."""
    return max(rule.factor * interval_s, rule.floor_s)


def check_stalled(rule: StopRule, *, interval_s: float | None, silent_s: float | None,
                  step: int | None) -> Firing | None:
    """``stalled``: no new step for ``factor`` x the median interval, and at least
    ``floor``. ``silent_s`` is measured on the monotonic clock; no interval yet (under
    STALL_MIN_POINTS points) is never stalled."""
    if rule.kind != "stalled" or interval_s is None or silent_s is None:
        return None
    limit = stall_limit(rule, interval_s)
    if silent_s <= limit:
        return None
    return Firing(rule.id, f"stalled: no new step for {span(silent_s)} ({rule.factor:g}× its "
                  f"median {span(interval_s)} interval, floor {span(rule.floor_s)})",
                  round(silent_s, 1), round(limit, 1), step, rule.action)


# Two GPU samples further apart than this leave time nobody saw: the streak starts again.
STREAK_GAP_S = 60.0


@dataclass(frozen=True)
class Streak:
    """Every GPU of a run under a rule's utilization: since the sample at ``since``, up to
    the sample at ``last`` (monotonic seconds), the highest utilization seen meanwhile."""

    since: float
    last: float
    peak: float

    @property
    def below_s(self) -> float:
        return self.last - self.since


def extend_streak(streak: Streak | None, utils: Sequence[float | None], below: float,
                  at: float) -> Streak | None:
    """The streak after one sample (at ``at``) of the run's GPUs' utilization: begun, or
    extended, when every reading is under ``below``. Broken (None) by a reading at or
    above it, by one that is unknown (None: not read, a lost GPU) or no reading at all,
    and started again after a gap of more than STREAK_GAP_S or a clock going back."""
    if not utils or any(u is None or not u < below for u in utils):
        return None
    peak = max(u for u in utils if u is not None)
    if streak is None or at < streak.last or at - streak.last > STREAK_GAP_S:
        return Streak(at, at, peak)
    return Streak(streak.since, at, max(streak.peak, peak))


def check_underfed(rule: StopRule, streak: Streak | None, *, gpus: Sequence[int],
                   step: int | None) -> Firing | None:
    """``underfed``: every GPU of the run stayed under ``util_below`` % for ``for`` (a
    streak that long). No streak (a GPU busy, or a reading unknown) never fires."""
    if rule.kind != "underfed" or rule.util_below is None or rule.for_s is None \
            or streak is None or streak.below_s < rule.for_s:
        return None
    which = "GPU " + ", ".join(str(g) for g in gpus) if gpus else "its GPUs"
    return Firing(rule.id, f"underfed: {which} under {rule.util_below:g}% utilization for "
                  f"{span(streak.below_s)} (at most {streak.peak:g}%; limit "
                  f"{span(rule.for_s)}): input-bound or stuck",
                  round(streak.below_s, 1), {"util_below": rule.util_below,
                                             "for_s": rule.for_s}, step, rule.action)


def span(seconds: float) -> str:
    """A duration to the second under an hour (6m 40s, 0.4s), else compact (2h05m)."""
    if seconds < 60:
        return f"{seconds:.2g}s" if seconds < 10 else f"{seconds:.0f}s"
    if seconds < 3600:
        minutes, secs = divmod(int(round(seconds)), 60)
        return f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return format_duration(seconds)


def _at(step: int | None) -> str:
    return "" if step is None else f" at step {step}"
