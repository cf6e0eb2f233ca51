"""What a person may do now, and why not: the predicates the engine's actions enforce.

Pure functions of plan, folded state and which machine this cockpit is. Each
``*_refusal`` returns the refusal in the words the action raises (``ActionRefused``),
or None: the actions (:mod:`cockpit.engine.actions`, :mod:`cockpit.engine.records`)
call them under the journal lock, and :func:`cockpit.engine.build.build_snapshot` calls
them for the Snapshot's :class:`~cockpit.engine.snapshot.Allowed` values, so a face
offers exactly what the engine would do and shows the engine's own reason when not.

What a face offers is at most what the engine permits: where the engine would act but
the plan's course does not call for it (starting a stage that is blocked by a pending
decision, re-running a stage that is done, marking a stage that has a command), the
Snapshot says not now and how (the CLI, with ``--force`` where the action wants it).
Checks that need the process table or a file (a live process of the stage, a params
file edited since the run started, the acceptance checks) stay the action's.

``machine`` None is ``cockpit fleet``: its actions run on the machine that owns the
stage (:mod:`cockpit.fleet.remote`), so no machine refuses them here.
"""

from __future__ import annotations

from cockpit.campaign.model import Campaign, Stage
from cockpit.common.printable import printable
from cockpit.engine.readiness import resource_holder, restart_refusal, stage_status, unmet_after
from cockpit.engine.snapshot import ALLOWED, Allowed, ExportAction, LogPaths
from cockpit.journal.fold import (
    DONE,
    DROPPED,
    FAILED,
    PENDING,
    RUNNING,
    SKIPPED,
    STOPPED,
    SUCCEEDED,
    CampaignState,
    RunState,
)
from cockpit.planning.advice import downstream

MARKS = ("started", "done")  # what a person marks on a manual stage (skipping is the CLI's)


def allowed(refusal: str | None) -> Allowed:
    """An Allowed from a refusal (None: allowed); its words are shown, so printable."""
    return ALLOWED if refusal is None else Allowed(False, printable(refusal))


# ---------------------------------------------------------------------- the actions' checks
def machine_refusal(stage: Stage, machine: int | None, what: str) -> str | None:
    """A stage's processes, verdicts and decisions belong to its own machine (D12)."""
    if stage.machine == machine:
        return None
    here = "cockpit fleet (no machine)" if machine is None \
        else f"this cockpit is machine {machine}"
    return (f"stage {stage.id!r} runs on machine {stage.machine} and {here}: {what} it "
            f"there (`--machine {stage.machine}` or COCKPIT_MACHINE={stage.machine}), "
            f"or from anywhere with `cockpit fleet FILE {what} ...`")


def no_command_refusal(stage: Stage) -> str | None:
    if stage.command is not None:
        return None
    return (f"stage {stage.id!r} has no command: mark it with "
            f"`cockpit mark FILE {stage.id} started|done`")


def start_refusal(state: CampaignState, stage: Stage, campaign: Campaign, *,
                  force: bool = False) -> str | None:
    """Why ``start`` refuses the stage on this state (in the action's order), or None.
    ``force`` overrides a rule's stop, an unmet ``after`` and a held resource."""
    st = state.stages[stage.id]
    if st.state == RUNNING and st.claim is not None:
        return (f"stage {stage.id!r} is being launched (claim #{st.claim}): the next tick "
                "records its process")
    if st.state == RUNNING:
        return f"stage {stage.id!r} is already running (pid {st.pid})"
    if st.state in (DROPPED, SKIPPED):
        return f"stage {stage.id!r} was {st.state}"
    if force:
        return None
    if st.state == DONE:  # done on purpose: a new attempt is the person's explicit choice
        return done_refusal(stage)
    refusal = restart_refusal(state, stage)
    if refusal:
        return refusal
    waits_for = unmet_after(campaign, state, stage)
    if waits_for:
        return f"stage {stage.id!r} waits for {', '.join(waits_for)}; --force starts it anyway"
    holder = resource_holder(campaign, state, stage)
    if holder:
        return (f"stage {stage.id!r} needs {holder[1]}, which stage {holder[0]!r} holds "
                "(D6); --force overrides")
    return None


def done_refusal(stage: Stage) -> str:
    """Why ``start`` of a stage that is done needs ``--force`` (the screen asks too)."""
    return (f"stage {stage.id!r} is done; --force starts it again (a new attempt, the "
            "earlier one kept)")


def stop_refusal(run_id: str, run: RunState | None) -> str | None:
    """Why ``stop`` refuses the run on this state, or None."""
    if run is None or run.state != RUNNING:
        return f"run {run_id!r} is not running"
    if run.stop is not None:
        return f"run {run_id!r} is already being stopped ({run.stop.reason})"
    return None


def mark_refusal(state: CampaignState, stage: Stage, what: str) -> str | None:
    """Why ``mark STAGE started|done|skipped`` refuses on this state, or None."""
    st = state.stages[stage.id]
    if st.state == RUNNING and not st.manual:
        return (f"stage {stage.id!r} runs under the cockpit (pid {st.pid}): it finishes by "
                "itself, or `cockpit stop` it")
    if what == "started":
        return f"stage {stage.id!r} is already started" if st.state == RUNNING else None
    if what == "done":
        return f"stage {stage.id!r} is already {st.state}" \
            if st.state in (DONE, SKIPPED, DROPPED) else None
    if stage.category == "essential":
        return (f"stage {stage.id!r} is essential and cannot be skipped (D3); record a "
                "`revise` decision instead")
    return None if st.state == PENDING else f"stage {stage.id!r} is {st.state}, not pending"


def no_result_refusal(campaign: Campaign, run_id: str) -> str | None:
    """A data check, pilot or resume check measures or decides: no verdict (D21)."""
    spec = campaign.runs.get(run_id)
    if spec is None or spec.produces_result:
        return None
    return (f"run {run_id!r} produces no result (result: none — a data check, pilot or "
            "resume check measures or decides): it needs no verdict (D21)")


def judge_refusal(run_id: str, run: RunState, *, rejecting: bool = False) -> str | None:
    """Why a verdict cannot be given on the run as it stands (D15), or None."""
    if run.state == STOPPED or run.stop is not None:
        why = run.stop.reason if run.stop else "stopped"
        return (f"run {run_id!r} was stopped ({why}): a stopped run is never an accepted "
                "result (D15)")
    if run.state == RUNNING:
        return f"run {run_id!r} is still running"
    if run.state == FAILED and not rejecting:
        return f"run {run_id!r} failed (exit code {run.exit_code})"
    if run.state not in (SUCCEEDED, FAILED):
        return f"run {run_id!r} has not run"
    return None


# ---------------------------------------------------------------------- what the Snapshot says
def _owner_refusal(campaign: Campaign, run_id: str, machine: int | None,
                   what: str) -> str | None:
    owner = campaign.stage_of_run(run_id)
    if machine is None or owner is None:
        return None  # the fleet acts where the run lives
    return machine_refusal(owner, machine, what)


def verdict_allowed(campaign: Campaign, state: CampaignState, run_id: str,
                    machine: int | None, verdict: str) -> Allowed:
    """May the run be accepted (``verdict="accept"``) or rejected now? In the action's
    order; a verdict it already has is not offered again (the action does nothing).
    Accepting a run whose checks fail stays the action's (an override with a note)."""
    if run_id not in campaign.runs:
        return Allowed(False, f"run {run_id!r} is not in the plan")
    rejecting = verdict == "reject"
    run = state.runs[run_id]
    refusal = (no_result_refusal(campaign, run_id)
               or _owner_refusal(campaign, run_id, machine, verdict)
               or judge_refusal(run_id, run, rejecting=rejecting))
    if refusal is None and run.verdict == ("rejected" if rejecting else "accepted"):
        refusal = f"run {run_id!r} is already {run.verdict}"
    return allowed(refusal)


def run_stop_allowed(campaign: Campaign, state: CampaignState, run_id: str,
                     machine: int | None) -> Allowed:
    return allowed(_owner_refusal(campaign, run_id, machine, "stop")
                   or stop_refusal(run_id, state.runs.get(run_id)))


def status_refusal(campaign: Campaign, state: CampaignState, stage: Stage,
                   status: str) -> str | None:
    """Why a stage the engine would start is not offered: it is not ``ready`` (a failed
    or stopped stage is offered again: a restart, its attempts kept; one a rule stopped
    still needs --force, :func:`start_refusal` says so)."""
    if status in ("ready", FAILED, STOPPED):
        return None
    if status == "blocked":
        if state.revised:
            return f"stage {stage.id!r} is blocked: the question is under revision (D4)"
        decider = next((d for d in state.pending_decisions
                        if stage.id in downstream(campaign, d)), None)
        return (f"stage {stage.id!r} is blocked: the decision at {decider!r} is pending "
                "(D4); `cockpit start` runs it anyway")
    return (f"stage {stage.id!r} is {status}: `cockpit start --force` runs it again"
            if status == DONE else f"stage {stage.id!r} is {status}")


def start_allowed(campaign: Campaign, state: CampaignState, stage: Stage,
                  machine: int | None, status: str) -> Allowed:
    """The start key offers a ready stage the engine would start without --force."""
    return allowed(no_command_refusal(stage)
                   or (machine_refusal(stage, machine, "start") if machine is not None
                       else None)
                   or start_refusal(state, stage, campaign)
                   or status_refusal(campaign, state, stage, status))


def stage_stop_allowed(campaign: Campaign, state: CampaignState, stage: Stage,
                       machine: int | None) -> Allowed:
    if stage.run is None:
        return Allowed(False, f"stage {stage.id!r} has no run; give it `run: ID` to "
                              "supervise and stop it")
    return run_stop_allowed(campaign, state, stage.run, machine)


def marks_offered(state: CampaignState, stage: Stage, machine: int | None,
                  status: str) -> tuple[tuple[str, ...], Allowed]:
    """The marks the mark key offers on a manual stage (one without a command): started
    and done while it is ``needs-person``, done while it runs; and why none."""
    if machine is not None and (refusal := machine_refusal(stage, machine, "mark")):
        return (), allowed(refusal)
    if stage.command is not None:
        return (), allowed(mark_refusal(state, stage, "done")
                           or f"stage {stage.id!r} has a command: the cockpit starts it and "
                              "records its end")
    wanted = MARKS if status == "needs-person" else ("done",) if status == RUNNING else ()
    offered = tuple(w for w in wanted if mark_refusal(state, stage, w) is None)
    if offered:
        return offered, ALLOWED
    return (), allowed(mark_refusal(state, stage, "done") or f"stage {stage.id!r} is {status}")


def export_action(campaign: Campaign, state: CampaignState, machine: int | None
                  ) -> ExportAction:
    """One export path: with an export stage in the plan, the export key completes that
    stage (starts its command, with --force when it is not ready; or exports and marks a
    manual one done); once it has ended, or without one, it exports."""
    stage = next((s for s in campaign.stages if (s.role or s.id) == "export"), None)
    status = stage_status(campaign, state, stage) if stage is not None else DONE
    if stage is None or status in (DONE, DROPPED, SKIPPED):
        return ExportAction("export")
    if status == RUNNING:
        return ExportAction("none", stage.id,
                            allowed=Allowed(False, f"the export stage {stage.id!r} is running"))
    if stage.command is not None:
        force = status != "ready"
        refusal = (machine_refusal(stage, machine, "start") if machine is not None else None) \
            or start_refusal(state, stage, campaign, force=force)
        return ExportAction("start_stage", stage.id, force, allowed(refusal))
    refusal = (machine_refusal(stage, machine, "mark") if machine is not None else None) \
        or mark_refusal(state, stage, "done")
    return ExportAction("export_and_mark", stage.id, False, allowed(refusal))


def log_paths(exit_file: str | None) -> LogPaths | None:
    """The output files of the attempt whose exit file the journal holds (the supervisor
    names ``BASE.out``, ``BASE.err`` and ``BASE.exit`` alike)."""
    if not exit_file or not exit_file.endswith(".exit"):
        return None
    base = exit_file[:-len(".exit")]
    return LogPaths(f"{base}.out", f"{base}.err")
