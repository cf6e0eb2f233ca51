"""Stop rules (D14): pure evaluation of one rule against a run's new metric points.

A rule fires at most once per run attempt (the engine claims it in the journal);
here we only answer "does this rule fire on these points, and why, in words".
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from cockpit.campaign.model import StopRule
from cockpit.units import format_duration


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


def rules_hash(rules: Sequence[StopRule]) -> str:
    """The rule set's fingerprint, journaled when the first run starts (D14)."""
    text = json.dumps([asdict(r) for r in rules], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _json_value(value: float) -> Any:
    return value if math.isfinite(value) else str(value)


def check_points(rule: StopRule, points: Iterable[Any]) -> Firing | None:
    """First point (in order) at which a metric rule fires, or None."""
    if rule.metric is None or rule.kind == "restart":
        return None
    for point in points:
        if rule.metric not in point.values:
            continue
        value = float(point.values[rule.metric])
        step = point.step
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


def _at(step: int | None) -> str:
    return "" if step is None else f" at step {step}"
