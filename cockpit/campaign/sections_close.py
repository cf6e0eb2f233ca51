"""The campaign file's closing sections: ``conclusion:`` (how the question is answered,
D1, D2), ``deadline:`` and ``on_deadline:`` (what must still fit in the window, D19)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cockpit.campaign.checker import NAME_ID, Checker
from cockpit.campaign.model import ON_DEADLINE, ConclusionSpec, DeadlineSpec, Run
from cockpit.campaign.yamlread import KeyPath

CONCLUSION_KEYS = ("metric", "better", "baseline", "margin", "variants", "rule", "threshold")
CONCLUSION_RULES = ("beat_baseline", "reach_threshold")
DEADLINE_KEYS = ("export_hours", "retrieve_hours", "landing_margin", "landing_lead")


def read_conclusion(check: Checker, value: Any, path: KeyPath) -> ConclusionSpec | None:
    if value is None:
        return None
    entry = check.mapping(value, path, CONCLUSION_KEYS, ("metric",), what="conclusion")
    if entry is None:
        return None
    metric = check.string(entry.get("metric"), path + ("metric",), "metric") \
        if "metric" in entry else None
    baseline = check.string(entry.get("baseline"), path + ("baseline",), "baseline run",
                            NAME_ID) if "baseline" in entry else None
    better = entry.get("better", "higher")
    if better not in ("higher", "lower"):
        check.err(path + ("better",), "better must be higher or lower")
        better = "higher"
    margin = entry.get("margin", 0)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or margin < 0 \
            or margin != margin or margin == float("inf"):
        check.err(path + ("margin",), "margin must be a finite number >= 0")
        margin = 0
    variants = tuple(check.str_list(entry.get("variants", []), path + ("variants",),
                                    "variants"))
    rule = entry.get("rule", "beat_baseline")
    if rule not in CONCLUSION_RULES:
        check.err(path + ("rule",), f"rule must be one of {', '.join(CONCLUSION_RULES)}")
        rule = "beat_baseline"
    threshold = entry.get("threshold")
    if threshold is not None and (isinstance(threshold, bool)
                                  or not isinstance(threshold, (int, float))
                                  or threshold != threshold or abs(threshold) == float("inf")):
        check.err(path + ("threshold",), "threshold must be a finite number")
        threshold = None
    if rule == "reach_threshold" and threshold is None and "threshold" not in entry:
        check.err(path, "rule reach_threshold needs a threshold")
    if rule == "beat_baseline" and baseline is None and "baseline" not in entry:
        check.err(path, "conclusion needs 'baseline' (or rule: reach_threshold with a threshold)")
    if metric is None or (baseline is None and rule == "beat_baseline"):
        return None
    return ConclusionSpec(metric, baseline, better, float(margin), variants, rule,
                          None if threshold is None else float(threshold))


def check_conclusion(check: Checker, spec: ConclusionSpec | None,
                     runs: Mapping[str, Run]) -> None:
    """The baseline and the variants must be runs of the campaign."""
    if spec is None:
        return
    if spec.baseline is not None and spec.baseline not in runs:
        known = ", ".join(sorted(runs)) or "none"
        check.err(("conclusion", "baseline"),
                  f"baseline {spec.baseline!r} is not a run (runs: {known})")
    for i, name in enumerate(spec.variants):
        if name not in runs:
            check.err(("conclusion", "variants", i), f"variant {name!r} is not a run")
        elif name == spec.baseline:
            check.err(("conclusion", "variants", i), "the baseline is not its own variant")


def read_deadline(check: Checker, value: Any, path: KeyPath) -> DeadlineSpec:
    if value is None:
        return DeadlineSpec()
    entry = check.mapping(value, path, DEADLINE_KEYS, what="deadline")
    if entry is None:
        return DeadlineSpec()
    values: dict[str, float] = {}
    for key, attr in (("export_hours", "export_s"), ("retrieve_hours", "retrieve_s"),
                      ("landing_margin", "landing_margin_s"), ("landing_lead", "landing_lead_s")):
        if key in entry:
            raw = entry[key]
            if raw == 0 and not isinstance(raw, bool):
                values[attr] = 0.0
                continue
            seconds = check.duration(raw, path + (key,), key)
            if seconds is not None:
                values[attr] = seconds
    return DeadlineSpec(**values)


def read_on_deadline(check: Checker, value: Any, path: KeyPath) -> str:
    if value is None:
        return "warn"
    if value not in ON_DEADLINE:
        check.err(path, f"on_deadline must be one of {', '.join(ON_DEADLINE)}")
        return "warn"
    return str(value)
