"""The snapshot build: a pure function of plan, folded state, observations and ``now``.

:func:`build_snapshot` reads no file, no process and no clock: everything the tick
observed arrives in :class:`Observations`, so the same inputs give the same
Snapshot (the faces' only view of the engine). What in it came from a run, a note or a
journal line (reasons, notes, metric names, checkpoint paths, warnings) is made
printable here, once, for every face (:mod:`cockpit.common.printable`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import cockpit.engine.readiness as readiness
from cockpit.campaign.model import Campaign, MetricCheck, StopRule
from cockpit.close.budget import budget
from cockpit.close.conclusion import conclude
from cockpit.common.printable import is_printable, printable
from cockpit.engine.snapshot import (
    CheckpointView,
    EventLine,
    MachineView,
    RuleView,
    RunView,
    Snapshot,
    StageView,
    WindowView,
)
from cockpit.engine.timebase import parse_t
from cockpit.journal.fold import DONE, NOT_STARTED, RUNNING, CampaignState, RunState
from cockpit.journal.log import JournalProblem
from cockpit.planning.deadline import closing_times, expected_export_bytes, retrieve_by
from cockpit.planning.forecast import forecast
from cockpit.planning.schedule import no_options_reason
from cockpit.runs.blind import (
    BLIND,
    WAITING,
    conclusion_runs,
    declared_sources,
    stream_blind,
    watches_metric,
)
from cockpit.runs.checkpoints.discovery import CheckpointScan, interval_advice
from cockpit.runs.metrics.progress import progress_of
from cockpit.runs.metrics.stream import MetricPoint, MetricStream
from cockpit.runs.rules import span, stall_limit, step_interval
from cockpit.telemetry import GpuReading, HostInfo


@dataclass(frozen=True)
class Observations:
    """What the tick observed, as the snapshot needs it."""

    streams: Mapping[str, MetricStream]
    checkpoints: Mapping[str, CheckpointScan]
    gpu: GpuReading
    host: HostInfo | None
    telemetry_warnings: tuple[str, ...]
    gpu_memory: Mapping[str, int]
    journal_problems: tuple[JournalProblem, ...]
    events: tuple[EventLine, ...]
    rules_hash: str
    auto: bool
    new_events: tuple[EventLine, ...] = ()
    # Planned seconds per stage in the plan as decided, where the file changed since (D24).
    decided_planned_s: Mapping[str, float] = field(default_factory=dict)
    machine: int | None = 1
    machines: tuple[MachineView, ...] = ()
    export_bytes: int | None = None  # the real size of the newest export written (D19)



def _text(value: str | None) -> str | None:
    """A reason, a rule name, a note: journal text, shown on every face (printable)."""
    return None if value is None else printable(value)


def _named(latest: Mapping[str, float]) -> dict[str, float]:
    """A run's latest values; its metric names come from the run (made printable)."""
    return {name if is_printable(name) else printable(name, 100): value
            for name, value in latest.items()}

def build_snapshot(campaign: Campaign, state: CampaignState, obs: Observations,
                   now: datetime) -> Snapshot:
    pkg = campaign.package
    progress, max_steps = progress_of(campaign, obs.streams)
    fc = forecast(campaign, state, now, progress)
    window_s = (pkg.end - pkg.start).total_seconds()
    used = min(max((now - pkg.start).total_seconds() / window_s * 100, 0.0), 100.0)
    times = closing_times(campaign, expected_export_bytes(campaign, {
        run_id: view.newest.size_bytes if view.newest else None
        for run_id, view in obs.checkpoints.items()}), obs.export_bytes)
    deadline = retrieve_by(campaign, times)
    window = WindowView(
        start=pkg.start, end=pkg.end, remaining_s=(pkg.end - now).total_seconds(),
        used_pct=used, forecast_end=fc.end, forecast_slack_s=fc.slack_s,
        verdict=fc.verdict, retrieval_deadline=deadline,
        options=tuple(o.describe() for o in fc.options), pilot_ratio=fc.pilot_ratio,
        pilot_note=fc.pilot_note)

    stages = []
    for stage in campaign.stages:
        st = state.stages[stage.id]
        status = readiness.stage_status(campaign, state, stage)
        prog = progress.get(stage.id) if status == RUNNING else None
        eta = fc.stage_end.get(stage.id) if status == RUNNING else None
        decision = None
        if stage.decision_point:
            made = state.decisions.get(stage.id)
            decision = made.outcome if made else ("pending" if st.state == DONE else None)
        stages.append(StageView(
            id=stage.id, state=status, category=stage.category,
            resource=stage.resource_label,
            planned_s=obs.decided_planned_s.get(stage.id, stage.seconds),
            elapsed_s=st.elapsed_s(now), decision_point=stage.decision_point,
            started_at=st.started_at, ended_at=st.ended_at, run=stage.run,
            has_command=stage.command is not None, progress=prog, eta=eta,
            forecast_end=fc.stage_end.get(stage.id), decision=decision, reason=_text(st.reason),
            notes=tuple(printable(n) for n in st.notes), exit_code=st.exit_code))

    runs = []
    for run_id, run in state.runs.items():
        stream = obs.streams.get(run_id)
        spec = campaign.runs.get(run_id)
        planned_stage = campaign.stage_of_run(run_id) if spec else None
        stale = stream.stale_seconds(now.timestamp()) if stream else None
        runs.append(RunView(
            id=run_id, stage=run.stage or (planned_stage.id if planned_stage else None),
            state=run.state, step=stream.latest_step if stream else None,
            max_steps=max_steps.get(run_id),
            metrics=_named(stream.latest) if stream else {}, pid=run.pid, gpus=run.gpus,
            gpu_memory=obs.gpu_memory.get(run_id), exit_code=run.exit_code,
            stop_rule=_text(run.stop.rule) if run.stop else None,
            stop_reason=_text(run.stop.reason) if run.stop else None, verdict=run.verdict,
            verdict_reason=_text(run.verdict_reason), stale_s=stale,
            garbage=stream.garbage if stream else 0,
            result=spec.result_id if spec else run_id, kind=spec.kind if spec else "train",
            produces_result=spec.produces_result if spec else True,
            checkpoint=checkpoint_view(campaign, run, obs.checkpoints.get(run_id), now),
            stalled=stalled_now(campaign, state, run, stream),
            **progress_fields(campaign, run_id, stream, max_steps.get(run_id), now)))

    rules = []
    for rule in campaign.stop_rules:
        for run_id, run in state.runs.items():
            if not rule.applies_to(run_id):
                continue
            hit = next((f for f in state.fired if f.run == run_id and f.rule == rule.id
                        and f.attempt == run.attempt), None)
            stream = obs.streams.get(run_id)
            value = stream.latest.get(rule.metric) if stream and rule.metric else None
            blind = None if hit or not watches_metric(rule) else stream_blind(
                rule.metric, run.state, stream, declared_sources(campaign, run_id),
                strict=bool(rule.runs))
            if hit:
                rules.append(RuleView(rule.id, run_id, rule.kind,
                                      "fired" if hit.action == "stop" else "warn",
                                      _text(hit.reason), rule.action, rule.metric, hit.value,
                                      rule.implicit))
            else:  # unknown is not ok: a metric never seen leaves the rule blind
                note = stall_note(rule, run, stream) \
                    if rule.kind == "stalled" and run.state == RUNNING else None
                # waiting: the run has not started, or a stalled rule has no interval yet
                state_now = BLIND if blind else WAITING if run.state == NOT_STARTED or \
                    note == NO_INTERVAL else "ok"
                rules.append(RuleView(rule.id, run_id, rule.kind, state_now,
                                      _text(blind) if blind else note, rule.action,
                                      rule.metric, value, rule.implicit))

    none_fits = "" if fc.fits or any(o.fits for o in fc.options) else \
        no_options_reason(campaign, (fc.end - pkg.start).total_seconds() / 3600, fc.options)
    warnings = list(_warnings(campaign, state, obs, fc.verdict, none_fits))
    warnings.extend(obs.gpu.warnings)
    warnings.extend(obs.telemetry_warnings)
    return Snapshot(
        taken_at=now, campaign=campaign.id, question=campaign.question, offer=pkg.offer.id,
        count=pkg.count, window=window, stages=tuple(stages), runs=tuple(runs),
        rules=tuple(rules), pending_decisions=state.pending_decisions,
        revised=state.revised, gpus=obs.gpu, host=obs.host,
        warnings=tuple(printable(w) for w in warnings),
        events=obs.events, auto=obs.auto, budget=budget(campaign, state, now),
        new_events=obs.new_events, conclusion=_text(conclusion_text(campaign, state, obs.streams)),
        machine=obs.machine, machines=obs.machines)


NO_INTERVAL = "no interval yet (under 3 steps): cannot tell a stall yet"


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
            return _text(hit.reason)
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


def conclusion_text(campaign: Campaign, state: CampaignState,
                    streams: Mapping[str, MetricStream]) -> str | None:
    """The conclusion rule applied to the accepted results so far (None: no rule)."""
    spec = campaign.conclusion
    if spec is None:
        return None
    values = {run_id: stream.latest[spec.metric] for run_id, stream in streams.items()
              if spec.metric in stream.latest}
    return conclude(campaign, state, values).text + blind_note(campaign, state, streams)


def blind_note(campaign: Campaign, state: CampaignState,
               streams: Mapping[str, MetricStream]) -> str:
    """The conclusion's metric never seen on a run it compares: said, not silently
    "reported no ..." (issue 22); "" when every started run reports it."""
    spec = campaign.conclusion
    if spec is None:
        return ""
    involved = conclusion_runs(campaign)
    blind = [f"{run_id}: {why}" for run_id, run in state.runs.items() if run_id in involved
             and (why := stream_blind(spec.metric, run.state, streams.get(run_id),
                                      declared_sources(campaign, run_id)))]
    return f" ({BLIND}: " + "; ".join(blind) + ")" if blind else ""


def checkpoint_view(campaign: Campaign, run: RunState, view: CheckpointScan | None,
                    now: datetime) -> CheckpointView | None:
    if view is None:
        return None
    newest = view.newest
    verified = None
    verified_age = None
    if run.verified:
        last = run.verified[-1]
        why = last.get("summary") or last.get("error")
        verified = "ok" if last.get("ok") else f"failed: {why}"
        verified_age = (now - parse_t(last)).total_seconds()
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
        verified=_text(verified), verified_age_s=verified_age, advice=advice,
        in_progress=len(view.in_progress))


def typical_interval(view: CheckpointScan) -> float | None:
    """Median time between successive complete checkpoints (the save interval in use)."""
    times = sorted(c.mtime for c in view.complete)
    gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False) if b > a)
    return gaps[len(gaps) // 2] if gaps else None


def _warnings(campaign: Campaign, state: CampaignState, obs: Observations,
              verdict: str, none_fits: str) -> Iterable[str]:
    """``none_fits``: why no option makes the forecast fit (D11), or empty."""
    if state.plan_changed:
        yield ("the campaign file changed after the plan was decided: planned against "
               "realized is measured against the plan as decided, the journal keeps each "
               "version (REPORT.md lists the changes as diffs) (D24); explain deviations "
               "with notes")
    if state.rules_hash and campaign.stop_rules and state.rules_hash != obs.rules_hash:
        yield "the stop rules changed after the first run started (D14: fixed before the test)"
    for problem in obs.journal_problems:
        yield f"journal line {problem.line}: {problem.message}"
    yield from state.journal_warnings
    for m in obs.machines:
        if m.reachable is False or (m.reachable is None and m.error):
            yield m.label
        yield from m.notices
    if verdict == "exceeds":
        yield (f"the forecast exceeds the rental window (D11): {none_fits}" if none_fits
               else "the forecast exceeds the rental window (D11): see the options")
