"""What a decision rests on (the ``d`` dialog's context) and the bounds on a metric
(the decision context and the chart's horizontal lines)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from cockpit.campaign.model import Campaign, MetricCheck
from cockpit.common.units import format_duration
from cockpit.engine.snapshot import RunView, Snapshot
from cockpit.headless.render_text import run_metric_names
from cockpit.tui import text as tx
from cockpit.tui.panels.base import block, styled
from cockpit.tui.panels.runs import step_text


@dataclass(frozen=True)
class Threshold:
    """A bound on a metric: a stop rule's or an acceptance check's (chart line, decide)."""

    label: str
    value: float
    bound: str = "max"  # "min": values below it fail / stop; "max": values above it

    def holds(self, value: float) -> bool:
        return value >= self.value if self.bound == "min" else value <= self.value


def thresholds(campaign: Campaign, metric: str, runs: Sequence[str]) -> list[Threshold]:
    """The bounds on ``metric`` from the stop rules and acceptance checks of ``runs``."""
    out: dict[tuple[str, float], Threshold] = {}
    for rule in campaign.stop_rules:
        if rule.metric != metric or not any(rule.applies_to(r) for r in runs):
            continue
        if rule.min is not None:
            out[("min", rule.min)] = Threshold(f"rule {rule.id}: stop < {rule.min:g}", rule.min,
                                                "min")
        if rule.max is not None:
            out[("max", rule.max)] = Threshold(f"rule {rule.id}: stop > {rule.max:g}", rule.max)
    for run_id in runs:
        spec = campaign.runs.get(run_id)
        for check in spec.acceptance if spec else ():
            if not isinstance(check, MetricCheck) or check.metric != metric:
                continue
            if check.min is not None and ("min", check.min) not in out:
                out[("min", check.min)] = Threshold(f"accept ≥ {check.min:g}", check.min,
                                                       "min")
            if check.max is not None and ("max", check.max) not in out:
                out[("max", check.max)] = Threshold(f"accept ≤ {check.max:g}", check.max)
    return list(out.values())


def decision_context(snap: Snapshot, stage_id: str, campaign: Campaign) -> Text:
    """What a decision rests on: the stage's measured vs planned time, its run's metrics
    against the thresholds, and the forecast with the pilot's ratio applied (D4, D13)."""
    lines: list[Text] = []
    view = snap.stage(stage_id)
    if view is not None and view.started_at is not None:
        ratio = view.elapsed_s / view.planned_s if view.planned_s else None
        lines.append(styled([("time: ", "bold"),
                             (f"measured {format_duration(view.elapsed_s)} vs planned "
                              f"{format_duration(view.planned_s)}", ""),
                             (f" (×{ratio:.2f})" if ratio else "", "bold")]))
    runs = [snap.run(view.run)] if view is not None and view.run else []
    shown = [r for r in runs if r is not None] or [r for r in snap.runs if r.metrics]
    for r in shown:
        lines += _run_lines(r, campaign)
    w = snap.window
    verdict = (f"✗ exceeds the window by {tx.hours_text(-w.forecast_slack_s)}"
               if w.forecast_slack_s < 0 else
               f"✓ fits, {tx.hours_text(w.forecast_slack_s)} to spare")
    scaled = (f" with the pilot's ×{w.pilot_ratio:.2f} applied to the GPU stages left"
              if w.pilot_ratio is not None else f" ({w.pilot_note})" if w.pilot_note
              else " (no pilot ratio yet: plan durations)")
    lines.append(styled([("forecast: ", "bold"), (f"ends {tx.clock(w.forecast_end)}{scaled}: ",
                                                   ""), (verdict, "bold")]))
    return block(lines)


def _run_lines(r: RunView, campaign: Campaign) -> list[Text]:
    names = run_metric_names(r, most=6)
    if not names:
        return [Text(f"run {r.id}: no metrics reported")]
    lines = [styled([("run ", "bold"), (r.id, "bold"),
                     (f" ({r.state}, step {step_text(r)})", "")])]
    for name in names:
        value = r.metrics[name]
        parts: list[tuple[str, str]] = [(f"  {name} {tx.metric(value)}", "")]
        for line in thresholds(campaign, name, [r.id]):
            parts.append((f"  {'✓' if line.holds(value) else '✗'} {line.label}", ""))
        lines.append(styled(parts))
    return lines
