"""The snapshot build's run and rule views: each run's progress, throughput, watched
metrics, checkpoint and what a person may do to it, and each stop rule's state on each
run. Pure, like :mod:`cockpit.engine.build` (which composes them into the Snapshot).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from cockpit.campaign.model import Campaign, MetricCheck, StopRule
from cockpit.close.acceptance import awaiting_verdict
from cockpit.common.metric_names import lookup
from cockpit.common.printable import is_printable, printable
from cockpit.engine.affordances import log_paths, run_stop_allowed, verdict_allowed
from cockpit.engine.snapshot import CheckpointView, RuleView, RunView
from cockpit.engine.underfed import UnderfedSeen
from cockpit.journal.fold import NOT_STARTED, RUNNING, CampaignState, RunState
from cockpit.journal.log import parse_time
from cockpit.runs.blind import (
    BLIND,
    FIRST_REPORT_WORDS,
    WAITING,
    declared_sources,
    first_report_due,
    source_status,
    stream_blind,
    value_due,
    watches_metric,
)
from cockpit.runs.checkpoints.discovery import CheckpointScan, interval_advice
from cockpit.runs.metrics.stream import MetricPoint, MetricStream
from cockpit.runs.rules import span, stall_limit, step_interval
from cockpit.runs.supervisor import stage_gpus


def shown(value: str | None) -> str | None:
    """A reason, a rule name, a note: journal text, shown on every face (printable)."""
    return None if value is None else printable(value)


def named_metrics(latest: Mapping[str, float]) -> dict[str, float]:
    """A run's latest values; its metric names come from the run (made printable)."""
    return {name if is_printable(name) else printable(name, 100): value
            for name, value in latest.items()}

def run_views(campaign: Campaign, state: CampaignState, streams: Mapping[str, MetricStream],
              checkpoints: Mapping[str, CheckpointScan], gpu_memory: Mapping[str, int],
              max_steps: Mapping[str, int], machine: int | None,
              now: datetime) -> tuple[RunView, ...]:
    runs = []
    judging = set(awaiting_verdict(campaign, state))  # its acceptance checks will judge it
    for run_id, run in state.runs.items():
        stream = streams.get(run_id)
        spec = campaign.runs.get(run_id)
        planned_stage = campaign.stage_of_run(run_id) if spec else None
        stale = stream.stale_seconds(now.timestamp()) if stream else None
        runs.append(RunView(
            id=run_id, stage=run.stage or (planned_stage.id if planned_stage else None),
            state=run.state, step=stream.latest_step if stream else None,
            max_steps=max_steps.get(run_id),
            metrics=named_metrics(stream.latest) if stream else {}, pid=run.pid, gpus=run.gpus,
            gpu_memory=gpu_memory.get(run_id), exit_code=run.exit_code,
            stop_rule=shown(run.stop.rule) if run.stop else None,
            stop_reason=shown(run.stop.reason) if run.stop else None, verdict=run.verdict,
            verdict_reason=shown(run.verdict_reason), stale_s=stale,
            garbage=stream.garbage if stream else 0,
            result=spec.result_id if spec else run_id, kind=spec.kind if spec else "train",
            produces_result=spec.produces_result if spec else True,
            checkpoint=checkpoint_view(campaign, run, checkpoints.get(run_id), now),
            stalled=stalled_now(campaign, state, run, stream),
            accept=verdict_allowed(campaign, state, run_id, machine, "accept"),
            reject=verdict_allowed(campaign, state, run_id, machine, "reject"),
            stop=run_stop_allowed(campaign, state, run_id, machine),
            log_path=log_paths(run.exit_file), judging=run_id in judging,
            **progress_fields(campaign, run_id, stream, max_steps.get(run_id), now)))
    return tuple(runs)


def rule_views(campaign: Campaign, state: CampaignState,
               streams: Mapping[str, MetricStream],
               underfed: Mapping[str, Mapping[str, UnderfedSeen]] | None = None,
               ages: Mapping[str, float] | None = None) -> tuple[RuleView, ...]:
    """Each stop rule's state on each run it applies to; ``ages``: how long each running
    run's attempt has run (a rule is blind on it only after its first reports had time
    to come, :func:`cockpit.runs.blind.first_report_due`)."""
    rules = []
    for rule in campaign.stop_rules:
        for run_id, run in state.runs.items():
            if not rule.applies_to(run_id) or (rule.kind == "underfed" and not rule.runs
                                               and not watched_gpus(campaign, run)):
                continue  # an underfed rule for every run: a run holding no GPU is not its
            hit = next((f for f in state.fired if f.run == run_id and f.rule == rule.id
                        and f.attempt == run.attempt), None)
            stream = streams.get(run_id)
            value = lookup(stream.latest, rule.metric) if stream and rule.metric else None
            blind = None if hit or not watches_metric(rule) else stream_blind(
                rule.metric, run.state, stream, declared_sources(campaign, run_id),
                strict=bool(rule.runs))
            if blind and stream is not None and first_report_due(
                    run.state, (ages or {}).get(run_id), stream.latest.keys(),
                    source_status(stream, declared_sources(campaign, run_id))):
                rules.append(RuleView(rule.id, run_id, rule.kind, WAITING, FIRST_REPORT_WORDS,
                                      rule.action, rule.metric, None, rule.implicit))
                continue
            due = value_due(rule.metric, rule.after_step, run.state, stream.latest_step,
                            stream.latest.get("max_steps"), stream.latest.keys(),
                            source_status(stream, declared_sources(campaign, run_id))) \
                if blind and stream is not None and rule.metric else None
            if due is not None:
                rules.append(RuleView(rule.id, run_id, rule.kind, WAITING, due, rule.action,
                                      rule.metric, None, rule.implicit))
                continue
            if hit:
                rules.append(RuleView(rule.id, run_id, rule.kind,
                                      "fired" if hit.action == "stop" else "warn",
                                      shown(hit.reason), rule.action, rule.metric, hit.value,
                                      rule.implicit))
            elif rule.kind == "underfed":
                rules.append(underfed_view(rule, run, (underfed or {}).get(run_id, {})
                                           .get(rule.id)))
            else:  # unknown is not ok: a metric never seen leaves the rule blind
                note = stall_note(rule, run, stream) \
                    if rule.kind == "stalled" and run.state == RUNNING else None
                if note is None and rule.kind == "non_finite":
                    note = unjudged_note(rule, run, value)
                # waiting: the run has not started, a stalled rule has no interval yet,
                # or a non_finite rule never judged the non-finite value shown
                state_now = BLIND if blind else WAITING if run.state == NOT_STARTED or \
                    note == NO_INTERVAL or (note and rule.kind == "non_finite") else "ok"
                rules.append(RuleView(rule.id, run_id, rule.kind, state_now,
                                      shown(blind) if blind else note, rule.action,
                                      rule.metric, value, rule.implicit))
    return tuple(rules)


NO_INTERVAL = "no interval yet (under 3 steps): cannot tell a stall yet"


def unjudged_note(rule: StopRule, run: RunState, value: float | None) -> str | None:
    """A non_finite rule that has not fired while the run's last value is non-finite
    never judged that value: it came before the rule watched (the rule was added since;
    it fires on the non-finite values it sees). Never ✓ beside a NaN: what it watches
    from, in words; None when the value is finite or unknown."""
    if value is None or math.isfinite(value):
        return None
    seen = f"{rule.metric} was {value} before this rule watched run {run.id}"
    if run.state == RUNNING:
        return f"{seen}: it judges the run's reports from now on"
    return f"{seen}: watches from attempt {len(run.attempts()) + 1}"
NO_GPU_SAMPLE = ("no GPU sample of this run yet (a cockpit samples only its own machine's "
                 "GPUs)")


def watched_gpus(campaign: Campaign, run: RunState) -> tuple[int, ...]:
    """The GPUs an underfed rule watches on a run: those it started on; before its start,
    those its stage plans to hold."""
    if run.state != NOT_STARTED:
        return run.gpus
    stage = campaign.stage_of_run(run.id)
    return stage_gpus(stage, campaign.package.offer.gpus) if stage is not None else ()


def underfed_view(rule: StopRule, run: RunState, seen: UnderfedSeen | None) -> RuleView:
    """An underfed rule that has not fired on a run: waiting (not started; running with
    no GPU sample yet, or on another machine's GPUs), blind (it cannot see a GPU's
    utilization), else ok with what it sees: the streak under the limit, or the GPUs'
    utilization now. An ended run it never fired on: ok."""
    if run.state == NOT_STARTED:
        return RuleView(rule.id, run.id, rule.kind, WAITING, None, rule.action)
    if run.state != RUNNING:
        return RuleView(rule.id, run.id, rule.kind, "ok", None, rule.action)
    if seen is None:
        return RuleView(rule.id, run.id, rule.kind, WAITING, NO_GPU_SAMPLE, rule.action)
    if seen.blind is not None:
        return RuleView(rule.id, run.id, rule.kind, BLIND, shown(seen.blind), rule.action)
    known = [u for u in seen.utils if u is not None]
    peak = max(known) if known else None
    if seen.streak is not None:
        note = (f"under {rule.util_below:g}% for {span(seen.streak.below_s)} (fires at "
                f"{span(rule.for_s or 0.0)})")
    else:
        note = "GPU " + ", ".join(f"{g} at {u:g}%" for g, u in zip(seen.gpus, seen.utils,
                                                                  strict=False)
                                  if u is not None)
    return RuleView(rule.id, run.id, rule.kind, "ok", note, rule.action, None, peak)


def stall_note(rule: StopRule, run: RunState, stream: MetricStream | None) -> str:
    """What a stalled rule that holds measures on a run: its median step interval and the
    limit, or that it has none yet (under three stepped points: never stalled)."""
    since = run.started_at.timestamp() - 1.0 if run.started_at else None
    interval = step_interval(stream.recent, since) if stream is not None else None
    if interval is None:
        return NO_INTERVAL
    return f"steps every {span(interval)}, stalled after {span(stall_limit(rule, interval))}"


def stalled_now(campaign: Campaign, state: CampaignState, run: RunState,
                stream: MetricStream | None) -> str | None:
    """The reason a stalled rule gave on this attempt, while the run still runs at the
    step it stalled on (a run that moved again is no longer shown stalled)."""
    if run.state != RUNNING:
        return None
    kinds = {rule.id: rule.kind for rule in campaign.stop_rules}
    for hit in state.fired:
        if hit.run == run.id and hit.attempt == run.attempt \
                and kinds.get(hit.rule) == "stalled" \
                and (stream is None or stream.latest_step == hit.step):
            return shown(hit.reason)
    return None


RATE_WINDOW_S = 60.0  # throughput over the last minute of reports (or the last 50 points)


def watched_metrics(campaign: Campaign, run_id: str) -> tuple[str, ...]:
    """The metrics of the run's acceptance checks, then those of its stop rules."""
    names: list[str] = []
    spec = campaign.runs.get(run_id)
    for check in spec.acceptance if spec else ():
        if isinstance(check, MetricCheck) and check.metric not in names:
            names.append(check.metric)
    for rule in campaign.stop_rules:
        if rule.metric and rule.applies_to(run_id) and rule.metric not in names:
            names.append(rule.metric)
    return tuple(names)


def key_metric_of(latest: Mapping[str, float], watched: tuple[str, ...]) -> str | None:
    """The loss when the run reports one (``loss``, else the first ``*loss*``), else the
    first watched metric it reports, else the first it reports at all."""
    if "loss" in latest:
        return "loss"
    for name in latest:
        if "loss" in name.lower():
            return name
    for name in watched:
        if name in latest:
            return name
    return next((n for n in latest if n != "max_steps"), None)


def throughput(points: Iterable[MetricPoint]) -> float | None:
    """Steps per second between the newest point and the oldest of the last minute
    (at most 50 points back); None without two timed, stepped points."""
    newest: MetricPoint | None = None
    oldest: MetricPoint | None = None
    for seen, p in enumerate(points):
        if p.step is None or p.t is None:
            continue
        if newest is None:
            newest = p
            continue
        if seen > 50 or newest.t is None or p.t < newest.t - RATE_WINDOW_S:
            break
        oldest = p
    if newest is None or oldest is None or newest.t is None or oldest.t is None:
        return None
    dt, ds = newest.t - oldest.t, (newest.step or 0) - (oldest.step or 0)
    return ds / dt if dt > 0 and ds > 0 else None


def progress_fields(campaign: Campaign, run_id: str, stream: MetricStream | None,
                    max_steps: int | None, now: datetime) -> dict[str, Any]:
    watched = watched_metrics(campaign, run_id)
    if stream is None:
        return {"watched": watched}
    rate = throughput(reversed(stream.recent))
    eta = None
    if rate and max_steps and stream.latest_step is not None:
        eta = now + timedelta(seconds=max(max_steps - stream.latest_step, 0) / rate)
    return {"watched": watched, "key_metric": key_metric_of(stream.latest, watched),
            "rate": rate, "eta": eta, "points": tuple(stream.recent)}


def checkpoint_view(campaign: Campaign, run: RunState, view: CheckpointScan | None,
                    now: datetime) -> CheckpointView | None:
    if view is None:
        return None
    newest = view.newest
    verified = None
    verified_age = None
    # this attempt's verdicts only: an earlier attempt's checkpoint is not this one's
    mine = [v for v in run.verified if v.get("attempt") in (None, run.attempt)]
    if mine:
        last = mine[-1]
        why = last.get("summary") or last.get("error")
        verified = "ok" if last.get("ok") else f"failed: {why}"
        verified_age = (now - parse_time(str(last.get("t")))).total_seconds()
    save = view.typical_save_seconds
    advice = None
    interval = typical_interval(view)
    spec = campaign.runs.get(run.id)
    if save and interval:
        tolerable = (spec.tolerable_loss_s if spec and spec.tolerable_loss_s
                     else campaign.settings.tolerable_loss_s)
        advice = interval_advice(save, interval, tolerable, campaign.settings.mtbi_s).message
    return CheckpointView(
        path=printable(newest.path) if newest else None,
        step=newest.step if newest else None,
        age_s=newest.age_seconds if newest else None,
        size=newest.size_bytes if newest else None, total_size=view.total_bytes,
        count=view.complete_count, free_disk=view.free_bytes, save_cost_s=save,
        verified=shown(verified), verified_age_s=verified_age, advice=advice,
        in_progress=len(view.in_progress))


def typical_interval(view: CheckpointScan) -> float | None:
    """Median time between successive complete checkpoints (the save interval in use)."""
    times = sorted(c.mtime for c in view.complete)
    gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False) if b > a)
    return gaps[len(gaps) // 2] if gaps else None
