"""Stage readiness: what a pending stage waits for (pure functions of plan and state).

A pending stage is refined into ``ready`` (it has a command and nothing holds it),
``needs-person`` (ready but without a command), ``waiting`` (an ``after`` stage has
not ended, or a resource it needs is held: a GPU, its machine's CPU, the person, as
the planner places them: D6) or ``blocked`` (a pending decision upstream, or
the question under revision). Used by the snapshot, auto-start and ``start``.
"""

from __future__ import annotations

from cockpit.campaign.model import OPTIONAL_CATEGORIES, Campaign, Stage
from cockpit.close.acceptance import awaiting_verdict
from cockpit.journal.fold import ENDED, FAILED, PENDING, RUNNING, STOPPED, CampaignState
from cockpit.planning.advice import downstream
from cockpit.planning.schedule import resource_conflict


def stage_status(campaign: Campaign, state: CampaignState, stage: Stage) -> str:
    """pending stages refined: ready / needs-person / waiting / blocked."""
    st = state.stages[stage.id]
    if st.state != PENDING:
        return st.state
    if state.revised:
        return "blocked"
    if unmet_after(campaign, state, stage):
        return "waiting"
    for decider in state.pending_decisions:
        if stage.id in downstream(campaign, decider):
            return "blocked"
    if resource_holder(campaign, state, stage):
        return "waiting"
    return "ready" if stage.command is not None else "needs-person"


def unmet_after(campaign: Campaign, state: CampaignState, stage: Stage) -> list[str]:
    """The stages in ``stage.after`` that have not ended (in plan order)."""
    unmet: list[str] = []
    for dep in stage.after:
        dep_state = state.stages[dep].state
        if dep_state in ENDED:
            continue
        dep_stage = campaign.stage(dep)
        if dep_state in (FAILED, STOPPED) and dep_stage.category in OPTIONAL_CATEGORIES:
            continue  # an optional stage that failed is information, not a blocker (D15)
        unmet.append(f"{dep} ({dep_state})")
    judging = set(awaiting_verdict(campaign, state))
    for dep in stage.after:
        run = campaign.stage(dep).run
        if state.stages[dep].state in ENDED and run in judging:
            # What follows a result (the error analysis, the export) reads its verdict.
            unmet.append(f"{dep} (its result {run} is being judged)")
    return unmet


def resource_holder(campaign: Campaign, state: CampaignState,
                 stage: Stage) -> tuple[str, str] | None:
    """The running stage that holds a resource this stage needs (a GPU, its machine's
    CPU, the person), and that resource in words: the planner's own rule (D6)."""
    running = [s for s in campaign.stages if state.stages[s.id].state == RUNNING]
    return resource_conflict(stage, running, campaign.package.offer.gpus)


def restart_refusal(state: CampaignState, stage: Stage) -> str | None:
    """Why starting ``stage`` again needs ``--force`` (D15): its run was stopped by a rule.

    A rule stopped it for a reason fixed before the run; a silent restart would hide that
    stop. None: nothing to say (never run, failed, stopped by a person)."""
    if not stage.run:
        return None
    run = state.runs.get(stage.run)
    if run is None or run.state != STOPPED or run.stop is None or run.stop.rule == "manual":
        return None
    return (f"stage {stage.id!r}: its run {stage.run!r} was stopped by rule {run.stop.rule!r} "
            f"({run.stop.reason}); a restart needs --force (D15)")
