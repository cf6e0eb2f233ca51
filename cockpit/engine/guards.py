"""The guards: pure functions from the folded state and what the observer saw to
intents (:mod:`cockpit.engine.intents`). They read no file, poll no metric, send no
signal and write no journal; the launcher carries their intents out.

- A stop rule fires on the run's fresh metric points (``rule_fired``; a ``stop`` rule
  also requests the stop). A ``restart`` rule fires when the run has had no usable
  restart for its ``max_age`` (not while its newest checkpoint is being verified); a
  ``stalled`` rule when its step has not moved for its limit (monotonic); an
  ``underfed`` rule when every GPU of the run stayed under its utilization for ``for``
  (the streak the observer keeps, :mod:`cockpit.engine.underfed`).
- A rule whose metric was never seen is *blind*: journaled once per rule and attempt
  when the run has run ``BLIND_GRACE_S`` or has ended; an underfed rule, when it has
  not seen its run's GPUs' utilization for ``BLIND_GRACE_S`` without a break.
- A requested stop escalates to SIGKILL once ``stop_grace`` has passed (monotonic).
- In auto mode, ready stages start in plan order; nothing starts past a pending
  decision or a revision (the launcher checks readiness again under the lock). An
  export stage whose export went stale (issue 41) runs again once nothing else is left
  to run or judge (:func:`export_again`); ``--until-done`` never exits 0 on a stale
  export.
- The deadline guard (D19) warns when the window is near its end without a verified
  export and, with ``on_deadline: stop-optional``, stops optional runs and starts the
  export when the forecast leaves no time for export and retrieval.
- With ``on_deadline: land``, the landing's warning comes before the point of no return
  (never once the landing began), and auto mode starts no stage that cannot end before
  that point (:func:`landing_cuts`: said once, left for a person).

After a wall-clock jump the rules on ages, auto-start and the deadline guard hold until
the clock has settled (the caller passes ``holding``); rules on metric values never hold.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cockpit.campaign.model import OPTIONAL_CATEGORIES, Campaign, StopRule
from cockpit.close.acceptance import awaiting_verdict, has_slow_checks
from cockpit.close.conclusion import conclude_now, on_deadline
from cockpit.close.export_state import ExportState
from cockpit.common.event_kinds import RULE_BLIND, WARNING
from cockpit.common.units import format_duration
from cockpit.engine.intents import (
    EscalateStop,
    FireRule,
    Intent,
    RecordOnce,
    StartStage,
    StopRun,
)
from cockpit.engine.readiness import resource_holder, stage_status, unmet_after
from cockpit.engine.underfed import UnderfedSeen
from cockpit.journal.fold import (
    DONE,
    FAILED,
    NOT_STARTED,
    PENDING,
    RUNNING,
    STOPPED,
    CampaignState,
    RunState,
)
from cockpit.planning.advice import downstream
from cockpit.planning.deadline import closing_times, deadline_check, is_closing, work_end
from cockpit.planning.forecast import forecast
from cockpit.runs.blind import BLIND_GRACE_S as BLIND_GRACE_S  # re-exported
from cockpit.runs.blind import declared_sources, stream_blind, watches_metric
from cockpit.runs.metrics.stream import MetricPoint, MetricStream
from cockpit.runs.rules import (
    Firing,
    check_points,
    check_restart,
    check_stalled,
    check_underfed,
)

# A running run's first reports come within BLIND_GRACE_S (runs.blind); then blind is news.


@dataclass(frozen=True)
class RunSeen:
    """What the observer saw of one of this machine's started runs in this step."""

    points: tuple[MetricPoint, ...]  # new metric points of the current attempt
    stream: MetricStream  # its metric stream, as read so far (never polled here)
    age_s: float  # since its attempt started (monotonic)
    since_restart_s: float | None  # since its start or its last passing verification
    silent_s: float  # since its step last moved (monotonic)
    interval_s: float | None  # its median step interval (None: too few points)
    verifying: bool  # its newest checkpoint is being verified (a restart rule waits)
    # rule -> what each underfed rule saw of its GPUs at the last sample
    underfed: Mapping[str, UnderfedSeen] = field(default_factory=dict)


@dataclass(frozen=True)
class ExitVerdict:
    """What ``headless --until-done`` should do now: keep going (None) or exit with code."""

    code: int | None
    reason: str


# ---------------------------------------------------------------------- stop rules
def rule_firings(campaign: Campaign, state: CampaignState, seen: Mapping[str, RunSeen], *,
                 holding: bool) -> list[Intent]:
    """The rules that fire on this machine's running runs (``seen`` holds only those)."""
    out: list[Intent] = []
    for run in state.runs.values():
        look = seen.get(run.id)
        if run.state != RUNNING or look is None:
            continue
        fired = state.fired_for(run.id, run.attempt)
        for rule in campaign.stop_rules:
            if not rule.applies_to(run.id) or rule.id in fired:
                continue
            firing = _rule_fires(rule, run, look, holding)
            if firing is not None:
                out.append(FireRule(run.id, firing))
    return out


def _rule_fires(rule: StopRule, run: RunState, look: RunSeen, holding: bool
                ) -> Firing | None:
    firing = check_points(rule, look.points)
    if firing is None and rule.kind == "restart" and not holding and not look.verifying:
        firing = check_restart(rule, seconds_without_restart=look.since_restart_s,
                               step=look.stream.latest_step)
    if firing is None and rule.kind == "stalled" and run.stop is None:
        firing = check_stalled(rule, interval_s=look.interval_s, silent_s=look.silent_s,
                               step=look.stream.latest_step)
    gpus = look.underfed.get(rule.id)
    if firing is None and rule.kind == "underfed" and run.stop is None and gpus is not None:
        firing = check_underfed(rule, gpus.streak, gpus=gpus.gpus,
                                step=look.stream.latest_step)
    return firing


def blind_rules(campaign: Campaign, state: CampaignState, seen: Mapping[str, RunSeen],
                known: Container[str]) -> list[Intent]:
    """``rule_blind`` once per rule and run attempt, for this machine's runs: when a
    running run has run BLIND_GRACE_S (its first reports had time to come) or has
    ended, and a rule's metric was still never seen (issue 22). ``known``: the
    once-only keys already journaled."""
    out: list[Intent] = []
    for run in state.runs.values():
        look = seen.get(run.id)
        if run.state == NOT_STARTED or look is None or (
                run.state == RUNNING and look.age_s < BLIND_GRACE_S):
            continue
        fired = state.fired_for(run.id, run.attempt)
        for rule in campaign.stop_rules:
            key = f"blind:{run.id}:{run.attempt}:{rule.id}"
            if key in known or rule.id in fired or not rule.applies_to(run.id):
                continue
            if rule.kind == "underfed":
                gpus = look.underfed.get(rule.id)
                why = gpus.blind if gpus is not None and gpus.blind_s >= BLIND_GRACE_S \
                    else None
            elif watches_metric(rule):
                why = stream_blind(rule.metric, run.state, look.stream,
                                   declared_sources(campaign, run.id), strict=bool(rule.runs))
            else:
                continue
            if why is not None:
                out.append(RecordOnce(RULE_BLIND, key, {
                    "run": run.id, "stage": run.stage, "rule": rule.id, "metric": rule.metric,
                    "reason": why, "attempt": run.attempt, "ended": run.state != RUNNING}))
    return out


# ---------------------------------------------------------------------- stops
def stops_to_escalate(state: CampaignState, stop_ages: Mapping[str, float],
                      grace_s: float) -> list[Intent]:
    """The stopped runs whose grace has passed (``stop_ages``: seconds since the stop
    request of this machine's runs, monotonic). The launcher SIGKILLs what is left of
    the group; the exit is recorded when the wrapper is gone."""
    out: list[Intent] = []
    for run in state.runs.values():
        stop, age = run.stop, stop_ages.get(run.id)
        if stop is None or stop.done or run.state != RUNNING or age is None:
            continue
        if age >= grace_s:
            out.append(EscalateStop(run.id))
    return out


# ---------------------------------------------------------------------- auto mode
def auto_starts(campaign: Campaign, state: CampaignState, machine: int | None,
                export: ExportState | None = None) -> list[Intent]:
    """This machine's ready stages, in plan order (none while the question is revised);
    with none, the export stage again when its export is stale (:func:`export_again`)."""
    if state.revised:
        return []
    starts: list[Intent] = [StartStage(stage.id, auto=True) for stage in campaign.stages
                            if stage.command is not None and stage.machine == machine
                            and stage_status(campaign, state, stage) == "ready"]
    again = export_again(campaign, state, machine, export) if not starts else None
    # Forced, not "auto" (the launcher starts an auto intent only while ready): a done
    # stage starts again only so; export_again checked its after, resources, decisions.
    return starts or ([StartStage(again, force=True)] if again else [])


def export_again(campaign: Campaign, state: CampaignState, machine: int | None,
                 export: ExportState | None) -> str | None:
    """The export stage to run again because its export is stale (issue 41), the way a
    rerun works (the stage is done; its product is not current), or None: no stale
    export, no export stage with a command on this machine, something still running,
    ready or awaiting its verdict (the export would go stale again), what the stage
    waits for (its ``after``, a resource, a decision), or the stage ran since this
    export was written and did not replace it (its command does not export: said by
    ``--until-done``, never run in a loop)."""
    if export is None or export.stale is None or state.revised:
        return None
    stage = next((s for s in campaign.stages if (s.role or s.id) == "export"), None)
    if stage is None or stage.command is None or stage.machine != machine:
        return None
    st = state.stages[stage.id]
    if st.state != DONE or (export.seq is not None and st.attempt is not None
                            and st.attempt > export.seq):
        return None
    if any(state.stages[s.id].state == RUNNING or stage_status(campaign, state, s) == "ready"
           for s in campaign.stages) or awaiting_verdict(campaign, state):
        return None
    if unmet_after(campaign, state, stage) or resource_holder(campaign, state, stage) \
            or any(stage.id in downstream(campaign, d) for d in state.pending_decisions):
        return None
    return stage.id


def until_done(campaign: Campaign, state: CampaignState, *, auto: bool,
               judging: bool, held: Container[str] = frozenset(),
               machine: int | None = None, export: ExportState | None = None
               ) -> ExitVerdict:
    """0: every essential stage done (and the question closed, when the plan has a
    conclusion rule); 1: an essential stage stopped/failed; 3: waiting for a person;
    4: every essential stage done, but the question is not closed; 6: every essential
    stage done, but the export is stale (in auto mode its stage runs again first:
    :func:`export_again`). ``judging``: a reload check still runs in the background;
    ``held``: ready stages auto mode holds back for a person (:func:`landing_cuts`);
    ``export``: the newest export against the facts now (None: not known)."""
    statuses = {s.id: stage_status(campaign, state, s) for s in campaign.stages}
    if any(v == RUNNING for v in statuses.values()):
        return ExitVerdict(None, "running")
    if any(r.stop is not None and not r.stop.done and r.state == RUNNING
           for r in state.runs.values()):
        return ExitVerdict(None, "stopping")
    if auto and not state.revised and any(v == "ready" and sid not in held
                                          for sid, v in statuses.items()):
        return ExitVerdict(None, "starting")
    if judging or any(has_slow_checks(campaign.runs[r])
                      for r in awaiting_verdict(campaign, state)):
        return ExitVerdict(None, "judging")
    essential = [s for s in campaign.stages if s.category == "essential"]
    broken = [s.id for s in essential if statuses[s.id] in (FAILED, STOPPED)]
    if broken:
        return ExitVerdict(1, f"essential stage {', '.join(broken)} {statuses[broken[0]]}")
    if all(statuses[s.id] == DONE for s in essential):
        if export is not None and export.stale is not None:
            if auto and export_again(campaign, state, machine, export):
                return ExitVerdict(None, "exporting again")
            return ExitVerdict(6, f"every essential stage is done, but the export is stale "
                                  f"({export.stale}): {export.command}")
        if campaign.conclusion is not None:
            verdict = conclude_now(campaign, state)
            if not verdict.closed:
                return ExitVerdict(4, "every essential stage is done, but the question is "
                                      f"not closed: {verdict.text}")
            return ExitVerdict(0, f"every essential stage is done; {verdict.text}")
        return ExitVerdict(0, "every essential stage is done")
    if state.pending_decisions:
        return ExitVerdict(3, f"waiting for a decision at {', '.join(state.pending_decisions)}")
    if state.revised:
        return ExitVerdict(3, "the question is under revision")
    waiting = [sid for sid, v in statuses.items() if v in ("needs-person", "ready")]
    return ExitVerdict(3, f"waiting for a person: {', '.join(waiting) or 'nothing startable'}")


# ---------------------------------------------------------------------- deadline (D19)
@dataclass(frozen=True)
class ExportFacts:
    """What the deadline guard knows of the export: whether a verified one exists, the
    size one would have now, and the real size of the newest one written."""

    exported: bool
    expected_bytes: int | None
    written_bytes: int | None


def deadline_guard(campaign: Campaign, state: CampaignState, now: datetime, *,
                   progress: Mapping[str, float], export: ExportFacts,
                   machine: int | None) -> list[Intent]:
    """D19: results must leave the box before the window ends (see the module text)."""
    out: list[Intent] = []
    left = (campaign.package.end - now).total_seconds()
    if 0 < left <= campaign.settings.deadline_warn_s and not export.exported:
        out.append(RecordOnce(WARNING, "deadline_near", {
            "source": "window", "message": f"{format_duration(left)} left in the rental "
                                           "window and no verified export: export and "
                                           "fetch (D19)"}))
    if campaign.package.start > now:
        return out
    fc = forecast(campaign, state, now, dict(progress))
    times = closing_times(campaign, export.expected_bytes, export.written_bytes)
    text = deadline_check(campaign, now, work_end(campaign, fc.stage_end), export.exported,
                          times)
    if text is None:
        return out
    hour = now.strftime("%Y%m%d%H")  # the loud warning repeats at most hourly
    out.append(RecordOnce(WARNING, f"deadline:{hour}", {"source": "deadline",
                                                         "message": text}))
    if on_deadline(campaign) == "stop-optional":
        out.extend(_deadline_stops(campaign, state, machine))
    return out


def landing_near(campaign: Campaign, now: datetime, point: datetime, *,
                 began: bool = False) -> list[Intent]:
    """With ``on_deadline: land``: a warning ``deadline.landing_lead`` before the point of
    no return (once), so the person can land by hand, or knows the cockpit will. Never
    once the landing ``began`` (the point moves later as runs stop: no step is announced
    that is already past)."""
    left = (point - now).total_seconds()
    if began or on_deadline(campaign) != "land" or now < campaign.package.start \
            or not 0 < left <= campaign.deadline.landing_lead_s:
        return []
    return [RecordOnce(WARNING, "landing_near", {
        "source": "landing", "message": f"the landing begins in {format_duration(left)} "
                                        f"(the point of no return, {point:%H:%M} UTC): "
                                        "running runs are asked to save, then stopped, "
                                        "and the results exported"})]


def landing_cuts(campaign: Campaign, starts: Sequence[Intent], now: datetime,
                 point: datetime) -> tuple[list[Intent], frozenset[str]]:
    """With ``on_deadline: land``: the auto starts of stages whose planned duration from
    now ends after the point of no return are held back (the landing would cut them:
    a stage with checkpoints cannot be known to reach its first one sooner), each said
    once (a warning keyed ``landing_cut:<stage>``) and left for a person; a closing
    stage (export, retrieval) is never held. (the intents to carry out, the held ids)"""
    if on_deadline(campaign) != "land":
        return list(starts), frozenset()
    out: list[Intent] = []
    held: set[str] = set()
    for intent in starts:
        stage = campaign.stage(intent.stage) if isinstance(intent, StartStage) else None
        ends = now + timedelta(seconds=stage.seconds) if stage is not None else now
        if stage is None or is_closing(stage) or ends <= point:
            out.append(intent)
            continue
        held.add(stage.id)
        out.append(RecordOnce(WARNING, f"landing_cut:{stage.id}", {
            "source": "landing", "stage": stage.id,
            "message": f"{stage.id} not started by --auto: its planned "
                       f"{format_duration(stage.seconds)} would end {ends:%H:%M} UTC, after "
                       f"the point of no return ({point:%H:%M} UTC), and the landing would "
                       f"cut it; left for a person (cockpit start {stage.id})"}))
    return out, frozenset(held)


def _deadline_stops(campaign: Campaign, state: CampaignState, machine: int | None
                    ) -> Sequence[Intent]:
    """Stop this machine's optional runs and start its export stage."""
    out: list[Intent] = []
    for run in state.runs.values():
        stage = campaign.stage_of_run(run.id)
        if run.state == RUNNING and run.stop is None and stage is not None \
                and stage.category in OPTIONAL_CATEGORIES and stage.machine == machine:
            out.append(StopRun(run.id, "window deadline: export and retrieval need the time "
                                       "left (D19)", "deadline"))
    export = next((s for s in campaign.stages if (s.role or s.id) == "export"), None)
    if export is not None and export.command is not None \
            and state.stages[export.id].state == PENDING and export.machine == machine:
        out.append(StartStage(export.id, force=True))
    return out
