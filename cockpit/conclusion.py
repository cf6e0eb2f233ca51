"""What closes the campaign: the conclusion (D1, D2), from the ACCEPTED results.

``conclude(...)`` is a pure function over the plan's conclusion rule (read and validated
by :mod:`cockpit.campaign.sections_close`) and the journal's state: under
``beat_baseline``, which accepted variants beat the accepted baseline by the margin;
under ``reach_threshold``, which reach the threshold — and, once every variant was
judged and none does, the negative answer that closes the question (D2). The deadline
(D19) is :mod:`cockpit.planning.deadline`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from cockpit.campaign.model import Campaign, ConclusionSpec, DeadlineSpec
from cockpit.state import STOPPED, CampaignState


@dataclass(frozen=True)
class Comparison:
    run: str
    value: float | None
    delta: float | None  # improvement over the baseline (positive = better)
    beats: bool
    counted: bool  # an accepted result with a value
    why: str


@dataclass(frozen=True)
class Conclusion:
    text: str
    closed: bool
    winners: tuple[str, ...] = ()
    baseline: str | None = None
    baseline_value: float | None = None
    metric: str | None = None
    comparisons: tuple[Comparison, ...] = ()
    reasons: tuple[str, ...] = field(default_factory=tuple)

    def as_json(self) -> dict[str, Any]:
        return {"text": self.text, "closed": self.closed, "winners": list(self.winners),
                "baseline": self.baseline, "baseline_value": self.baseline_value,
                "metric": self.metric, "reasons": list(self.reasons),
                "comparisons": [c.__dict__ for c in self.comparisons]}


# Kept for their callers (engine, export, close commands): the model's fields, by name.
def conclusion_spec(campaign: Campaign) -> ConclusionSpec | None:
    return campaign.conclusion


def deadline_spec(campaign: Campaign) -> DeadlineSpec:
    return campaign.deadline


def on_deadline(campaign: Campaign) -> str:
    return campaign.on_deadline


# ------------------------------------------------------------------ conclusion


def _num(value: float) -> Decimal:
    # repr() gives the shortest text that round-trips: 0.82 - 0.80 is exactly 0.02 here.
    return Decimal(repr(float(value)))


def _fmt(value: float | Decimal) -> str:
    return f"{float(value):.6g}"


def _not_accepted_why(state: CampaignState, run_id: str) -> str:
    run = state.runs.get(run_id)
    if run is None or run.state == "not_started":
        dropped = [s for s in state.stages.values() if s.run == run_id and s.state == "dropped"]
        if dropped:
            return f"dropped ({dropped[0].reason or 'by a decision'})"
        return "not run"
    if run.stop is not None or run.state == STOPPED:
        return f"stopped ({run.stop.reason if run.stop else 'no reason recorded'})"
    if run.verdict == "rejected":
        return f"rejected ({run.verdict_reason or 'no reason recorded'})"
    if run.state == "failed":
        return f"failed (exit code {run.exit_code})"
    if run.state == "running":
        return "still running"
    return "not (yet) accepted"


def _accepted(state: CampaignState, run_id: str) -> bool:
    run = state.runs.get(run_id)
    return bool(run and run.verdict == "accepted" and run.stop is None
                and run.state != STOPPED)


def conclude(campaign: Campaign, state: CampaignState,
             metric_values: dict[str, float]) -> Conclusion:
    """Which accepted variants beat the accepted baseline by the margin, in words."""
    spec = conclusion_spec(campaign)
    if spec is None:
        return Conclusion(
            text="the campaign file names no conclusion (conclusion: {metric, better, "
                 "baseline, margin}): state the question's answer in words (D1)",
            closed=False)
    if spec.rule == "reach_threshold":
        return _reach_threshold(campaign, spec, state, metric_values)
    metric, base = spec.metric, spec.baseline
    assert base is not None  # the loader requires it under beat_baseline
    direction = "higher" if spec.better == "higher" else "lower"
    if not _accepted(state, base):
        why = _not_accepted_why(state, base)
        return Conclusion(
            text=f"the question cannot be closed: the baseline {base} is not an accepted "
                 f"result ({why}), so no variant can be compared with it — the conclusion "
                 "rule is 'beat the baseline'; a rule that a negative answer closes is "
                 "rule: reach_threshold (D2)",
            closed=False, baseline=base, metric=metric, reasons=(f"baseline {base}: {why}",))
    base_value = metric_values.get(base)
    if base_value is None or base_value != base_value:
        return Conclusion(
            text=f"the question cannot be closed: the baseline {base} reported no {metric}",
            closed=False, baseline=base, metric=metric,
            reasons=(f"baseline {base}: no {metric}",))
    variants = _variants(campaign, spec)
    margin = _num(spec.margin)
    comparisons: list[Comparison] = []
    for run_id in variants:
        if not _accepted(state, run_id):
            comparisons.append(Comparison(run_id, metric_values.get(run_id), None, False, False,
                                          _not_accepted_why(state, run_id)))
            continue
        value = metric_values.get(run_id)
        if value is None or value != value:
            comparisons.append(Comparison(run_id, None, None, False, False,
                                          f"accepted, but reported no {metric}"))
            continue
        delta = _num(value) - _num(base_value)
        if spec.better == "lower":
            delta = -delta
        beats = delta > 0 and delta >= margin
        comparisons.append(Comparison(
            run_id, value, float(delta), beats, True,
            f"{metric} {_fmt(value)} vs {_fmt(base_value)}: "
            f"{'+' if delta >= 0 else ''}{_fmt(delta)} ({direction} is better)"))
    counted = [c for c in comparisons if c.counted]
    winners = tuple(c.run for c in counted if c.beats)
    margin_text = _fmt(spec.margin)
    not_counted = [f"{c.run}: {c.why}" for c in comparisons if not c.counted]
    tail = f" (not counted: {'; '.join(not_counted)})" if not_counted else ""
    if not counted:
        return Conclusion(
            text=f"the question cannot be closed: no variant is an accepted result to "
                 f"compare with the baseline {base}{tail}",
            closed=False, baseline=base, baseline_value=base_value, metric=metric,
            comparisons=tuple(comparisons), reasons=tuple(not_counted))
    if winners:
        parts = [f"{c.run} ({metric} {_fmt(c.value or 0)}, {'+' if (c.delta or 0) >= 0 else ''}"
                 f"{_fmt(c.delta or 0)})" for c in counted if c.beats]
        text = (f"{', '.join(parts)} beat{'s' if len(winners) == 1 else ''} the baseline {base} "
                f"({metric} {_fmt(base_value)}) by at least {margin_text} ({direction} is "
                f"better)")
        losers = [c.run for c in counted if not c.beats]
        if losers:
            text += f"; {', '.join(losers)} do{'es' if len(losers) == 1 else ''} not"
    else:
        text = (f"no variant beats the baseline {base} by {margin_text} on {metric} "
                f"({direction} is better; baseline {_fmt(base_value)}): a negative result "
                "that closes the question (D2)")
    return Conclusion(text=text + tail, closed=True, winners=winners, baseline=base,
                      baseline_value=base_value, metric=metric,
                      comparisons=tuple(comparisons), reasons=tuple(not_counted))


def _variants(campaign: Campaign, spec: ConclusionSpec) -> tuple[str, ...]:
    return spec.variants or tuple(r.id for r in campaign.runs.values()
                                  if r.id != spec.baseline and r.produces_result)


def _reach_threshold(campaign: Campaign, spec: ConclusionSpec, state: CampaignState,
                     metric_values: dict[str, float]) -> Conclusion:
    """Does an accepted variant reach the threshold? When every variant was judged and
    none does, that is the negative answer that closes the question (D2)."""
    metric, threshold = spec.metric, float(spec.threshold or 0.0)
    sign = ">=" if spec.better == "higher" else "<="
    goal = f"{metric} {sign} {_fmt(threshold)}"
    comparisons: list[Comparison] = []
    pending: list[str] = []
    for run_id in _variants(campaign, spec):
        run = state.runs.get(run_id)
        value = metric_values.get(run_id)
        reaches = value is not None and value == value and (
            value >= threshold if spec.better == "higher" else value <= threshold)
        shown = "no value" if value is None else f"{metric} {_fmt(value)}"
        if _accepted(state, run_id):
            comparisons.append(Comparison(run_id, value, None, reaches, True,
                                          f"accepted, {shown}"))
        elif run is not None and (run.verdict == "rejected" or run.stop is not None
                                  or run.state in (STOPPED, "failed")):
            comparisons.append(Comparison(run_id, value, None, False, True,
                                          f"{_not_accepted_why(state, run_id)}, {shown}"))
        else:
            pending.append(f"{run_id}: {_not_accepted_why(state, run_id)}")
    winners = tuple(c.run for c in comparisons if c.beats)
    if winners:
        return Conclusion(
            text=f"{', '.join(winners)} reach{'es' if len(winners) == 1 else ''} {goal} as an "
                 "accepted result: the question is answered", closed=True, winners=winners,
            metric=metric, comparisons=tuple(comparisons), reasons=tuple(pending))
    if pending or not comparisons:
        waiting = "; ".join(pending) or "no variant to judge"
        return Conclusion(text=f"the question cannot be closed yet: no variant reaches {goal} "
                               f"so far, and some are not judged ({waiting})",
                          closed=False, metric=metric, comparisons=tuple(comparisons),
                          reasons=tuple(pending))
    detail = "; ".join(f"{c.run}: {c.why}" for c in comparisons)
    return Conclusion(text=f"no variant reaches {goal} ({detail}): a negative result that "
                           "closes the question (D2)", closed=True, metric=metric,
                      comparisons=tuple(comparisons))


def conclude_now(campaign: Campaign, state: CampaignState) -> Conclusion:
    """The conclusion from the runs' last reported values (read from their files)."""
    from cockpit.acceptance import last_metrics  # reads run files: the core stays pure

    spec = campaign.conclusion
    values: dict[str, float] = {}
    if spec is not None:
        for run_id in campaign.runs:
            value = last_metrics(campaign, state, run_id, [spec.metric]).get(spec.metric)
            if value is not None:
                values[run_id] = value
    return conclude(campaign, state, values)


# ------------------------------------------------------------------ deadline guard
