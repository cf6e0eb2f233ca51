"""The snapshot build: a pure function of plan, folded state, observations and ``now``.

:func:`build_snapshot` reads no file, no process and no clock: everything the tick
observed arrives in :class:`Observations`, so the same inputs give the same
Snapshot (the faces' only view of the engine). What in it came from a run, a note or a
journal line (reasons, notes, metric names, checkpoint paths, warnings) is made
printable here, once, for every face (:mod:`cockpit.common.printable`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from cockpit.campaign.model import Campaign, Stage
from cockpit.close.budget import budget_of
from cockpit.close.conclusion import conclude
from cockpit.close.export_state import ExportState
from cockpit.close.hours import HoursBought
from cockpit.common.metric_names import lookup
from cockpit.common.printable import printable
from cockpit.engine.affordances import (
    export_action,
    log_paths,
    marks_offered,
    stage_stop_allowed,
    start_allowed,
)
from cockpit.engine.alert_health import failing_targets
from cockpit.engine.build_runs import NO_INTERVAL, rule_views, run_views, shown
from cockpit.engine.landing import landing_now
from cockpit.engine.outbox import owed_words
from cockpit.engine.readiness import stage_status
from cockpit.engine.snapshot import (
    ConductorView,
    EventLine,
    MachineView,
    Slot,
    Snapshot,
    StageView,
    WindowView,
)
from cockpit.engine.timebase import parse_t
from cockpit.engine.underfed import UnderfedSeen
from cockpit.journal.fold import DONE, RUNNING, CampaignState
from cockpit.journal.log import JournalProblem
from cockpit.planning.deadline import (
    closing_times,
    expected_export_bytes,
    export_size,
    retrieve_by,
)
from cockpit.planning.forecast import Forecast, forecast
from cockpit.planning.schedule import no_options_reason, schedule
from cockpit.runs.blind import BLIND, conclusion_runs, declared_sources, stream_blind
from cockpit.runs.checkpoints.discovery import CheckpointScan
from cockpit.runs.metrics.progress import progress_of, reported_progress
from cockpit.runs.metrics.stream import MetricStream
from cockpit.telemetry import GpuReading, HostInfo

__all__ = ["NO_INTERVAL", "Observations", "build_snapshot", "progress_of", "reported_progress"]


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
    landing: tuple[str, ...] = ()  # the landing's steps so far (engine.landing)
    # run -> rule -> what each underfed rule saw of the run's GPUs (engine.underfed)
    underfed: Mapping[str, Mapping[str, UnderfedSeen]] = field(default_factory=dict)
    hours: HoursBought | None = None  # what the GPU-hours bought (engine.hours, cached)
    conductor: ConductorView = ConductorView()  # who conducts (engine.conductor)
    plan_refused: str | None = None  # an edit of the campaign file that does not load
    # run -> seconds its running attempt has run (monotonic where this engine watched it)
    run_ages: Mapping[str, float] = field(default_factory=dict)
    export: ExportState | None = None  # the export against the facts now (issue 41)
    # (target "label (scheme)", alerts the journal owes it) (issue 43: engine.outbox)
    alerts_owed: tuple[tuple[str, int], ...] = ()


SNAPSHOT_NOTES = 10  # a stage's newest notes in the Snapshot (the journal holds all)


def build_snapshot(campaign: Campaign, state: CampaignState, obs: Observations,
                   now: datetime) -> Snapshot:
    pkg = campaign.package
    progress, max_steps = progress_of(campaign, obs.streams)
    fc = forecast(campaign, state, now, progress)
    window_s = (pkg.end - pkg.start).total_seconds()
    used = min(max((now - pkg.start).total_seconds() / window_s * 100, 0.0), 100.0)
    export = state.export  # the newest export written (D19: its real size)
    times = closing_times(campaign, expected_export_bytes(campaign, {
        run_id: view.newest.size_bytes if view.newest else None
        for run_id, view in obs.checkpoints.items()}), export_size(export) if export else None)
    deadline = retrieve_by(campaign, times)
    landing = landing_now(campaign, state, obs.checkpoints, obs.machine)
    window = WindowView(
        start=pkg.start, end=pkg.end, remaining_s=(pkg.end - now).total_seconds(),
        used_pct=used, forecast_end=fc.end, forecast_slack_s=fc.slack_s,
        verdict=fc.verdict, retrieval_deadline=deadline,
        options=tuple(o.describe() for o in fc.options), pilot_ratio=fc.pilot_ratio,
        pilot_note=fc.pilot_note, point_of_no_return=landing.point,
        landing_words=landing.times.words(), landing_mode=campaign.on_deadline == "land")
    none_fits = "" if fc.fits or any(o.fits for o in fc.options) else \
        no_options_reason(campaign, (fc.end - pkg.start).total_seconds() / 3600, fc.options)
    warnings = list(_warnings(campaign, state, obs, fc.verdict, none_fits))
    if not obs.conductor.conducted:  # first: nobody runs the guards (issue 39)
        warnings.insert(0, obs.conductor.words())
    if obs.plan_refused is not None:
        warnings.insert(0, f"campaign file edit refused: {obs.plan_refused}; the plan in "
                           "force is unchanged")
    warnings.extend(obs.gpu.warnings)
    warnings.extend(obs.telemetry_warnings)
    return Snapshot(
        taken_at=now, campaign=campaign.id, question=campaign.question, offer=pkg.offer.id,
        count=pkg.count, window=window, stages=stage_views(campaign, state, obs, fc, progress,
                                                           now),
        runs=run_views(campaign, state, obs.streams, obs.checkpoints, obs.gpu_memory,
                       max_steps, obs.machine, now),
        rules=rule_views(campaign, state, obs.streams, obs.underfed, obs.run_ages),
        pending_decisions=state.pending_decisions,
        revised=state.revised, gpus=obs.gpu, host=obs.host,
        warnings=tuple(printable(w) for w in warnings),
        events=obs.events, auto=obs.auto, budget=budget_of(campaign, state, now),
        new_events=obs.new_events, conclusion=shown(conclusionshown(campaign, state, obs.streams)),
        machine=obs.machine, machines=obs.machines,
        export_action=export_action(campaign, state, obs.machine),
        schedule=planned_schedule(campaign),
        exported_at=parse_t(export) if export and export.get("verified") else None,
        export=export_shown(obs.export),
        landing=tuple(printable(line) for line in obs.landing), hours=obs.hours,
        conductor=obs.conductor, alerts_owed=obs.alerts_owed,
        plan_refused=None if obs.plan_refused is None else printable(obs.plan_refused))


def export_shown(export: ExportState | None) -> ExportState | None:
    """The export's state with its journal-born words made printable (a verdict's
    reason, a run id)."""
    if export is None:
        return None
    return replace(export, stale=shown(export.stale), open=shown(export.open))


def stage_views(campaign: Campaign, state: CampaignState, obs: Observations, fc: Forecast,
                progress: Mapping[str, float], now: datetime) -> tuple[StageView, ...]:
    """Each stage as planned and realized, and what a person may do to it now."""
    stages = []
    for stage in campaign.stages:
        st = state.stages[stage.id]
        status = stage_status(campaign, state, stage)
        prog = progress.get(stage.id) if status == RUNNING else None
        eta = fc.stage_end.get(stage.id) if status == RUNNING else None
        decision = None
        if stage.decision_point:
            made = state.decisions.get(stage.id)
            decision = made.outcome if made else ("pending" if st.state == DONE else None)
        mark_as, mark = marks_offered(state, stage, obs.machine, status)
        stages.append(StageView(
            id=stage.id, state=status, category=stage.category,
            resource=stage.resource_label,
            planned_s=obs.decided_planned_s.get(stage.id, stage.seconds),
            elapsed_s=st.elapsed_s(now), decision_point=stage.decision_point,
            started_at=st.started_at, ended_at=st.ended_at, run=stage.run,
            has_command=stage.command is not None, progress=prog, eta=eta,
            forecast_end=fc.stage_end.get(stage.id), decision=decision,
            reason=_stage_reason(stage, st.reason, status, obs.export),
            notes=tuple(printable(n) for n in st.notes[-SNAPSHOT_NOTES:]),
            notes_count=st.notes_count, exit_code=st.exit_code,
            start=start_allowed(campaign, state, stage, obs.machine, status),
            stop=stage_stop_allowed(campaign, state, stage, obs.machine),
            mark=mark, mark_as=mark_as, log_path=log_paths(st.exit_file)))
    return tuple(stages)


def _stage_reason(stage: Stage, reason: str | None, status: str,
                  export: ExportState | None) -> str | None:
    """A stage's reason as shown; the export stage's done says when its export went
    stale (the stage is done, its product is not current)."""
    if status == DONE and (stage.role or stage.id) == "export" and export is not None \
            and export.stale is not None:
        return shown(f"export STALE: {export.stale}")
    return shown(reason)


# The plan as scheduled, per campaign object (a campaign is loaded once and never changes).
_SCHEDULES: dict[int, tuple[Campaign, tuple[Slot, ...]]] = {}


def planned_schedule(campaign: Campaign) -> tuple[Slot, ...]:
    """The plan's slots as ordered (``cockpit plan``'s schedule): the timeline's plan lane.
    A pure function of the campaign, remembered for the last few campaigns seen."""
    held = _SCHEDULES.get(id(campaign))
    if held is not None and held[0] is campaign:
        return held[1]
    slots = tuple(schedule(campaign.stages, campaign.package.offer.gpus))
    if len(_SCHEDULES) >= 8:
        _SCHEDULES.clear()
    _SCHEDULES[id(campaign)] = (campaign, slots)
    return slots


def conclusionshown(campaign: Campaign, state: CampaignState,
                    streams: Mapping[str, MetricStream]) -> str | None:
    """The conclusion rule applied to the accepted results so far (None: no rule)."""
    spec = campaign.conclusion
    if spec is None:
        return None
    values = {run_id: value for run_id, stream in streams.items()
              if (value := lookup(stream.latest, spec.metric)) is not None}
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
    yield from failing_targets(obs.events)  # alert targets failing (issue 26)
    if (owed := owed_words(obs.alerts_owed)) is not None:
        yield owed  # alerts the journal owes a target (issue 43)
    for m in obs.machines:
        if m.reachable is False or (m.reachable is None and m.error):
            yield m.label
        yield from m.notices
    if verdict == "exceeds":
        yield (f"the forecast exceeds the rental window (D11): {none_fits}" if none_fits
               else "the forecast exceeds the rental window (D11): see the options")
