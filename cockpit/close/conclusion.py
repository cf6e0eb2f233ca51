"""What closes the campaign: the conclusion (D1, D2), from the ACCEPTED results.

``conclude(...)`` is a pure function over the plan's conclusion rule (read and validated
by :mod:`cockpit.campaign.sections_close`) and the journal's state: under
``beat_baseline``, which accepted variants beat the accepted baseline by the margin;
under ``reach_threshold``, which reach the threshold — and, once every variant still
needed was judged on the question's metric and none does, the negative answer that
closes the question (D2). Judged means accepted, or rejected by the acceptance check
on that metric alone; a crash, a stop or a rejection for another reason leaves the
question open and is named; a variant dropped by a limit decision is not needed. The
deadline (D19) is :mod:`cockpit.planning.deadline`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from cockpit.campaign.model import Campaign, ConclusionSpec, question_variants
from cockpit.journal.fold import DROPPED, FAILED, STOPPED, SUCCEEDED, CampaignState


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


def on_deadline(campaign: Campaign) -> str:
    return campaign.on_deadline


# ------------------------------------------------------------------ conclusion


def _num(value: float) -> Decimal:
    # repr() gives the shortest text that round-trips: 0.82 - 0.80 is exactly 0.02 here.
    return Decimal(repr(float(value)))


def _fmt(value: float | Decimal) -> str:
    """A figure of the plan (a threshold, a margin): as written."""
    return f"{float(value):.6g}"


def _shown(value: float | Decimal, *against: float | Decimal) -> str:
    """A measured figure for people: three significant digits, more only where fewer
    would show it equal to a figure it is compared with (0.69996 against 0.7 is
    0.69996, never 0.7). Shown against each other, two figures that differ get the
    same number of digits, so they never read as equal (-999950 against -999500 is
    -1e+06 against -9.995e+05, never -1e+06 twice)."""
    v = float(value)
    others = [float(o) for o in against if float(o) != v]
    for digits in range(3, 16):
        text = f"{v:.{digits}g}"
        if all(float(f"{o:.{digits}g}") != float(text) for o in others):
            return text
    return repr(v)


def _signed(delta: float | Decimal, *against: float | Decimal) -> str:
    return ("+" if delta >= 0 else "") + _shown(delta, *against)


def _not_accepted_why(state: CampaignState, run_id: str) -> str:
    run = state.runs.get(run_id)
    if run is None or run.state == "not_started":
        dropped = _dropped(state, run_id)
        if dropped:
            return f"dropped ({dropped})"
        return "not run"
    if run.stop is not None or run.state == STOPPED:
        return f"stopped ({run.stop.reason if run.stop else 'no reason recorded'})"
    if run.state == FAILED:
        return f"failed (exit code {run.exit_code})"
    if run.verdict == "rejected":
        return f"rejected ({run.verdict_reason or 'no reason recorded'})"
    if run.state == "running":
        return "still running"
    if run.state == SUCCEEDED and run.verdict is None:
        return "awaits a verdict"
    return "not (yet) accepted"


def _dropped(state: CampaignState, run_id: str) -> str | None:
    """Why a run that never started was dropped (its stage dropped), or None."""
    run = state.runs.get(run_id)
    if run is not None and run.state != "not_started":
        return None
    dropped = [s for s in state.stages.values() if s.run == run_id and s.state == DROPPED]
    return (dropped[0].reason or "by a decision") if dropped else None


def _accepted(state: CampaignState, run_id: str) -> bool:
    run = state.runs.get(run_id)
    return bool(run and run.verdict == "accepted" and run.stop is None
                and run.state != STOPPED)


def _rejected_on(state: CampaignState, run_id: str, metric: str) -> bool:
    """Rejected by its acceptance check on the question's metric, and by nothing else:
    a verdict on that metric. A person's rejection, a crash, a stop or another failed
    check (predictions from the wrong split) say nothing of it (D2)."""
    run = state.runs.get(run_id)
    return bool(run and run.verdict == "rejected" and run.state == SUCCEEDED
                and run.stop is None and run.verdict_failed
                and all(f == f"metric:{metric}" for f in run.verdict_failed))


@dataclass(frozen=True)
class _Judged:
    """One variant as the conclusion sees it: judged on the question's metric (its
    value counts), missing (the question waits for it) or dropped (not needed)."""

    run: str
    state: str  # "accepted" | "rejected" (on the metric) | "missing" | "dropped"
    value: float | None
    why: str
    ended: bool = True  # ended with a verdict, a crash or a stop: only a rerun helps


def _judge(state: CampaignState, run_id: str, metric: str,
           value: float | None) -> _Judged:
    shown = f"{metric} {_shown(value)}" if value is not None else f"no {metric}"
    finite = value is not None and math.isfinite(value)
    dropped = _dropped(state, run_id)
    if dropped is not None:
        return _Judged(run_id, "dropped", None, f"dropped ({dropped}): not needed")
    if _accepted(state, run_id):
        if not finite:
            return _Judged(run_id, "missing", value, f"accepted, but reported {shown}")
        return _Judged(run_id, "accepted", value, f"accepted, {shown}")
    run = state.runs.get(run_id)
    if _rejected_on(state, run_id, metric):
        reason = run.verdict_reason if run and run.verdict_reason else "no reason recorded"
        if not finite:
            return _Judged(run_id, "missing", value, f"rejected ({reason}), {shown}")
        return _Judged(run_id, "rejected", value,
                       f"rejected by its acceptance check on {metric} ({reason})")
    why = _not_accepted_why(state, run_id)
    if run is not None and run.state == FAILED:
        why += f": a crash says nothing of {metric}"
    elif run is not None and (run.stop is not None or run.state == STOPPED):
        why += f": a stopped run is not judged on {metric}"
    elif run is not None and run.verdict == "rejected":
        why += f": not a verdict on {metric}"
    ended = run is not None and (run.state in (FAILED, STOPPED) or run.verdict is not None)
    return _Judged(run_id, "missing", value, why, ended)


def _missing_text(missing: list[_Judged]) -> str:
    named = "; ".join(f"{j.run}: {j.why}" for j in missing)
    ended = [j.run for j in missing if j.ended]
    if not ended:
        return f"some are not judged on the question's metric yet ({named})"
    return (f"not judged on the question's metric: {named} — rerun "
            f"{', '.join(ended)}, or decide revise (D2: a crash, a stop or a rejection for "
            "another reason is no evidence against the hypothesis)")


def _dropped_tail(dropped: list[_Judged]) -> str:
    return f" (dropped: {', '.join(j.run for j in dropped)})" if dropped else ""


def conclude(campaign: Campaign, state: CampaignState,
             metric_values: dict[str, float]) -> Conclusion:
    """Which variants answer the question, from the runs judged on its metric (D1, D2)."""
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
            closed=False, baseline=base, metric=metric,
            reasons=(f"no accepted baseline {base} ({why})",))
    base_value = metric_values.get(base)
    if base_value is None or not math.isfinite(base_value):
        return Conclusion(
            text=f"the question cannot be closed: the baseline {base} reported no {metric}",
            closed=False, baseline=base, metric=metric,
            reasons=(f"the baseline {base} reported no {metric}",))
    comparisons, missing, dropped = _compare_with_baseline(campaign, spec, state,
                                                           metric_values, base_value)
    counted = [c for c in comparisons if c.counted]
    winners = tuple(c.run for c in counted if c.beats)
    margin_text = _fmt(spec.margin)
    not_counted = [f"{c.run}: {c.why}" for c in comparisons if not c.counted]
    tail = f" (not counted: {'; '.join(not_counted)})" if not_counted else ""

    def answer(text: str, closed: bool, winners: tuple[str, ...] = ()) -> Conclusion:
        return Conclusion(text=text, closed=closed, winners=winners, baseline=base,
                          baseline_value=base_value, metric=metric,
                          comparisons=tuple(comparisons), reasons=tuple(not_counted))

    if winners:
        parts = [f"{c.run} ({metric} {_shown(c.value or 0, base_value)}, "
                 f"{_signed(c.delta or 0, spec.margin)})" for c in counted if c.beats]
        text = (f"{', '.join(parts)} beat{'s' if len(winners) == 1 else ''} the baseline {base} "
                f"({metric} {_shown(base_value, *(c.value or 0 for c in counted if c.beats))}) "
                f"by at least {margin_text} ({direction} is "
                f"better)")
        losers = [c.run for c in counted if not c.beats]
        if losers:
            text += f"; {', '.join(losers)} do{'es' if len(losers) == 1 else ''} not"
        return answer(text + tail, True, winners)
    if missing:
        return answer(f"the question cannot be closed yet: no variant beats the baseline "
                      f"{base} by {margin_text} on {metric} so far, and "
                      f"{_missing_text(missing)}{_dropped_tail(dropped)}", False)
    if not counted:
        return answer(f"the question cannot be closed: no variant is a result judged on "
                      f"{metric} to compare with the baseline {base}{tail}", False)
    text = (f"no variant beats the baseline {base} by {margin_text} on {metric} "
            f"({direction} is better; baseline {_shown(base_value)}): a negative result "
            "that closes the question (D2)")
    return answer(text + tail, True)


def _compare_with_baseline(campaign: Campaign, spec: ConclusionSpec, state: CampaignState,
                           metric_values: dict[str, float], base_value: float
                           ) -> tuple[list[Comparison], list[_Judged], list[_Judged]]:
    """Each variant against the baseline's value: (comparisons, missing, dropped)."""
    metric = spec.metric
    direction = "higher" if spec.better == "higher" else "lower"
    margin = _num(spec.margin)
    comparisons: list[Comparison] = []
    missing: list[_Judged] = []
    dropped: list[_Judged] = []
    for run_id in question_variants(campaign):
        judged = _judge(state, run_id, metric, metric_values.get(run_id))
        if judged.state in ("missing", "dropped"):
            (missing if judged.state == "missing" else dropped).append(judged)
            comparisons.append(Comparison(run_id, judged.value, None, False, False, judged.why))
            continue
        assert judged.value is not None
        delta = _num(judged.value) - _num(base_value)
        if spec.better == "lower":
            delta = -delta
        beats = delta > 0 and delta >= margin
        compared = (f"{metric} {_shown(judged.value, base_value)} vs "
                    f"{_shown(base_value, judged.value)}: "
                    f"{_signed(delta, margin)} ({direction} is better)")
        if judged.state == "rejected":
            if beats:  # its acceptance floor is stricter than the question: no verdict
                missing.append(_Judged(run_id, "missing", judged.value,
                                       f"{judged.why}, yet {compared}"))
                comparisons.append(Comparison(run_id, judged.value, float(delta), False,
                                              False, missing[-1].why))
                continue
            compared = f"{judged.why}: {compared}"
        comparisons.append(Comparison(run_id, judged.value, float(delta),
                                      beats and judged.state == "accepted", True, compared))
    return comparisons, missing, dropped


def _reach_threshold(campaign: Campaign, spec: ConclusionSpec, state: CampaignState,
                     metric_values: dict[str, float]) -> Conclusion:
    """Does an accepted variant reach the threshold? When every variant still needed
    was judged on the metric and none does, that is the negative answer that closes
    the question (D2); a crash, a stop or a rejection for another reason is no such
    judgement, and a variant dropped by a limit decision is not needed."""
    metric, threshold = spec.metric, float(spec.threshold or 0.0)
    sign = ">=" if spec.better == "higher" else "<="
    goal = f"{metric} {sign} {_fmt(threshold)}"
    comparisons: list[Comparison] = []
    missing: list[_Judged] = []
    dropped: list[_Judged] = []
    for run_id in question_variants(campaign):
        judged = _judge(state, run_id, metric, metric_values.get(run_id))
        value = judged.value
        reaches = value is not None and math.isfinite(value) and (
            value >= threshold if spec.better == "higher" else value <= threshold)
        if judged.state == "rejected" and reaches:
            # Its acceptance floor is stricter than the question: no verdict either way.
            judged = _Judged(run_id, "missing", value,
                             f"{judged.why}, yet {metric} {_shown(value or 0, threshold)} "
                             f"reaches {goal}")
        if judged.state in ("missing", "dropped"):
            (missing if judged.state == "missing" else dropped).append(judged)
            comparisons.append(Comparison(run_id, value, None, False, False, judged.why))
            continue
        why = judged.why if judged.state == "accepted" \
            else f"{judged.why}, {metric} {_shown(value or 0, threshold)}"
        comparisons.append(Comparison(run_id, value, None,
                                      reaches and judged.state == "accepted", True, why))
    winners = tuple(c.run for c in comparisons if c.beats)
    reasons = tuple(f"{j.run}: {j.why}" for j in missing)
    if winners:
        return Conclusion(
            text=f"{', '.join(winners)} reach{'es' if len(winners) == 1 else ''} {goal} as an "
                 "accepted result: the question is answered", closed=True, winners=winners,
            metric=metric, comparisons=tuple(comparisons), reasons=reasons)
    if missing:
        return Conclusion(text=f"the question cannot be closed yet: no variant reaches {goal} "
                               f"so far, and {_missing_text(missing)}{_dropped_tail(dropped)}",
                          closed=False, metric=metric, comparisons=tuple(comparisons),
                          reasons=reasons)
    if not any(c.counted for c in comparisons):
        return Conclusion(text=f"the question cannot be closed: no variant to judge on {goal}"
                               f"{_dropped_tail(dropped)}",
                          closed=False, metric=metric, comparisons=tuple(comparisons))
    detail = "; ".join(f"{c.run}: {c.why}" for c in comparisons if c.counted)
    return Conclusion(text=f"no variant reaches {goal} ({detail}){_dropped_tail(dropped)}: a "
                           "negative result that closes the question (D2)", closed=True,
                      metric=metric, comparisons=tuple(comparisons))


def conclude_now(campaign: Campaign, state: CampaignState) -> Conclusion:
    """The conclusion from the runs' last reported values (read from their files)."""
    from cockpit.close.acceptance import last_metrics  # reads run files: the core stays pure

    spec = campaign.conclusion
    values: dict[str, float] = {}
    if spec is not None:
        for run_id in campaign.runs:
            value = last_metrics(campaign, state, run_id, [spec.metric]).get(spec.metric)
            if value is not None:
                values[run_id] = value
    return conclude(campaign, state, values)


# ------------------------------------------------------------------ deadline guard
