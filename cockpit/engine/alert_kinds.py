"""What each kind of alert says (issue 26), pure: a journal event -> the alert
(:func:`alert_of`), the waits no event marks (:func:`wait_alerts`), an unreachable peer
(:func:`peer_alert`), the export gone stale (:func:`stale_alert`) and the campaign
closed (:func:`closed_alert`: the question answered, never over a stale export). Each
alert says what
happened, what the cockpit did and the exact command a person can run, with its level
and its kind (the family ``alerts.send`` routes by). The sending is
:mod:`cockpit.engine.alerting`'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from cockpit.alerts.message import Alert
from cockpit.campaign.model import Campaign
from cockpit.close.acceptance import awaiting_verdict
from cockpit.close.budget import budget_of
from cockpit.close.conclusion import conclude_now
from cockpit.close.export_state import ExportState, question_open
from cockpit.common.durations import format_duration
from cockpit.common.event_kinds import (
    CHECKPOINT_VERIFIED,
    CLOCK_JUMP,
    DECISION,
    EXPORT_DONE,
    LANDING,
    RULE_BLIND,
    RULE_FIRED,
    STAGE_FINISHED,
)
from cockpit.engine.hooks import hook_event_name
from cockpit.engine.observer import THROTTLE_EVENT
from cockpit.engine.snapshot import MachineView
from cockpit.journal.fold import DONE, SUCCEEDED, CampaignState

AgeOf = Callable[[str, str, datetime], float]  # (stage|run, its id, ended at) -> seconds


def alert_of(event: Mapping[str, Any], campaign: Campaign, deciders: set[str]) -> Alert | None:
    """The alert a journal event is (None: not worth a person's phone)."""
    file, seq = campaign.path.name, event.get("seq")
    run, stage = event.get("run"), event.get("stage")
    name = hook_event_name(event, deciders)
    kind = event.get("kind")
    if name == RULE_FIRED:
        stop = event.get("action") == "stop"
        return Alert(f"rule_fired:{seq}", "critical" if stop else "warn",
                     f"rule {event.get('rule')} fired on {run}: {event.get('reason')}",
                     f"stopped {run}" if stop else "nothing (a warning rule)",
                     f"cockpit status {file}; to run it again: cockpit start {file} "
                     f"{stage} --force", kind=RULE_FIRED)
    if kind == STAGE_FINISHED and event.get("outcome") == "failed":
        why = event.get("reason") or f"exit code {event.get('code')}"
        return Alert(f"stage_failed:{seq}", "critical", f"stage {stage} failed: {why}",
                     "nothing: the stage is failed",
                     f"read its log (cockpit status {file}); retry: cockpit start {file} "
                     f"{stage} --force", kind="stage_failed")
    if kind == RULE_BLIND:
        return Alert(f"rule_blind:{seq}", "warn",
                     f"rule {event.get('rule')} is blind on {run}: {event.get('reason')}",
                     "nothing: the rule cannot judge what it cannot see",
                     f"check the run's metric names (cockpit status {file})", kind=RULE_BLIND)
    if name == "decision_needed":
        return Alert(f"decision:{seq}", "warn", f"a decision is needed after {stage}",
                     "holding the stages after it",
                     f"cockpit decide {file} continue|limit|revise --stage {stage} --note …",
                     kind=DECISION)
    if name == EXPORT_DONE:
        verified = bool(event.get("verified"))
        where = event.get("tar") or event.get("path")
        return Alert(f"export:{seq}", "info" if verified else "critical",
                     f"export {'verified' if verified else 'NOT verified'}: {where}",
                     "wrote the export", (f"fetch it before the window ends: "
                                          f"{event.get('fetch') or 'see FETCH.txt'}")
                     if verified else f"cockpit export {file} again",
                     kind="export")
    if name == "gpu_lost":
        return Alert(f"gpu_lost:{seq}", "critical", f"GPU lost: {event.get('message')}",
                     "nothing yet", f"cockpit status {file}", kind="gpu")
    if name == "deadline_near":
        return Alert(f"deadline:{seq}", "warn", str(event.get("message")),
                     "warned", f"cockpit plan {file}", kind="deadline")
    if kind == "landing" and event.get("phase") in ("began", "landed"):
        landed = event.get("phase") == "landed"
        fetch = event.get("fetch")
        return Alert(f"landing:{event.get('phase')}:{seq}",
                     "critical" if landed or event.get("ok") is False else "warn",
                     str(event.get("text")),
                     "landed: runs stopped, the export written" if landed else
                     "asking the runs to save, then stopping them and exporting",
                     str(fetch) if landed and fetch else f"cockpit status {file}",
                     kind=LANDING)
    if kind == CHECKPOINT_VERIFIED and event.get("ok") is False:
        # Once per run attempt: each later checkpoint that fails is on the screen.
        return Alert(f"checkpoint:{run}:{event.get('attempt')}", "critical",
                     f"checkpoint of {run} does NOT reload: {event.get('error')} "
                     f"({event.get('path')})",
                     "nothing: the run goes on; a restart can only use an earlier checkpoint "
                     "that reloads (the restart rule counts those alone)",
                     f"cockpit status {file}; check it again: cockpit verify {file} {run}",
                     kind="checkpoint")
    if kind == "warning":
        return _warning_alert(event, file, seq)
    if kind == CLOCK_JUMP:
        return Alert(f"clock:{seq}", "warn",
                     f"the wall clock jumped {_signed(event.get('seconds'))} (from "
                     f"{event.get('from')} to {event.get('to')})",
                     f"held rules on ages, the deadline guard and auto-start until the clock "
                     f"was steady for {event.get('settle_s')} s (ages stay monotonic)",
                     f"check the machine's time sync (timedatectl); cockpit status {file}",
                     kind="clock")
    return None


def _warning_alert(event: Mapping[str, Any], file: str, seq: Any) -> Alert | None:
    """A journaled warning worth a phone: a GPU's Xid, ECC or held-down clocks, low disk."""
    what = str(event.get("message"))
    gpu_event = event.get("event")
    if gpu_event == "gpu_xid":
        return Alert(f"gpu:{seq}", "critical", what,
                     "recorded it; the runs go on (an Xid often means a crash or a hang)",
                     f"nvidia-smi; sudo dmesg | grep -i xid; cockpit status {file}", kind="gpu")
    if gpu_event == "gpu_ecc":
        return Alert(f"gpu:{seq}", "critical", what,
                     "recorded it; the runs go on (their results since then may be corrupt)",
                     f"nvidia-smi -q -d ECC; cockpit status {file}", kind="gpu")
    if gpu_event == THROTTLE_EVENT:
        return Alert(f"gpu:{seq}", "warn", what,
                     "recorded it; the runs go on, slower", f"nvidia-smi -q -d PERFORMANCE "
                     f"(temperature, power); cockpit status {file}", kind="gpu")
    if event.get("key") == "landing_near":
        return Alert(f"landing_near:{seq}", "warn", what,
                     "nothing yet: the landing begins by itself at the point of no return",
                     f"land now by hand: cockpit export {file}", kind=LANDING)
    if event.get("source") == "disk":
        return Alert(f"disk:{seq}", "warn", what,
                     "warned (a full disk fails checkpoints and the export)",
                     f"free space there (du -sh); cockpit status {file}", kind="disk")
    return None


def _signed(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return "by an unknown amount"
    return ("forward " if seconds >= 0 else "back ") + format_duration(abs(float(seconds)))


def wait_alerts(campaign: Campaign, state: CampaignState, age_of: AgeOf,
                machine: int | None) -> list[Alert]:
    """The waits no journal event marks (issue 26): a decision pending and a run's result
    awaiting its verdict for more than ``alerts.pending_after_minutes``, on this machine;
    each once per (stage or run, attempt). ``age_of(what, id, ended_at)``: seconds since
    it ended (the caller's clock)."""
    file, limit = campaign.path.name, campaign.alerts.pending_after_s
    out: list[Alert] = []
    for stage_id in state.pending_decisions:
        st = state.stages.get(stage_id)
        if st is None or st.ended_at is None or not _mine(campaign.stage(stage_id).machine,
                                                           machine):
            continue
        age = age_of("stage", stage_id, st.ended_at)
        if age > limit:
            out.append(Alert(f"decision_pending:{stage_id}:{st.attempt}", "warn",
                             f"a decision has been pending after {stage_id} for "
                             f"{format_duration(age)}", "holding the stages after it",
                             f"cockpit decide {file} continue|limit|revise --stage "
                             f"{stage_id} --note …", kind=DECISION))
    for run_id in awaiting_verdict(campaign, state):
        run, stage = state.runs[run_id], campaign.stage_of_run(run_id)
        if run.ended_at is None or stage is None or not _mine(stage.machine, machine):
            continue
        age = age_of("run", run_id, run.ended_at)
        if age > limit:
            out.append(Alert(f"verdict_pending:{run_id}:{run.attempt}", "warn",
                             f"run {run_id} ended {format_duration(age)} ago and its result "
                             "still has no verdict", "nothing: its acceptance checks have not "
                             "judged it (a reload still running, or no cockpit judging)",
                             f"cockpit status {file}; then cockpit accept {file} {run_id} "
                             f"--note … or cockpit reject {file} {run_id} --note …",
                             kind="verdict"))
    return out


def _mine(stage_machine: int, machine: int | None) -> bool:
    return machine is None or stage_machine == machine


def peer_alert(view: MachineView, last_ok: int | None, file: str) -> Alert:
    """A peer this cockpit has not reached for :data:`PEER_ALERT_S` (``last_ok``: the
    wall time, whole seconds, of its last good pull; one alert per outage)."""
    since = "never reached" if view.data_age_s is None else \
        f"no answer for {format_duration(view.data_age_s)}"
    return Alert(f"peer:{view.machine}:{last_ok if last_ok is not None else 'never'}", "warn",
                 f"machine {view.machine} ({view.ssh}) is unreachable: {since} "
                 f"({view.error or 'no answer'})",
                 "kept pulling it with backoff; its stages are its own cockpit's",
                 f"ssh {view.ssh}; cockpit fleet {file}", kind="peer")


def stale_alert(export: ExportState) -> Alert | None:
    """The newest export no longer says what is true (issue 41): once per export."""
    if export.stale is None or not export.exported:
        return None
    return Alert(f"export:stale:{export.seq}", "warn", f"export STALE: {export.stale}",
                 "nothing yet: the bag fetched now would not say what is true (with --auto "
                 "the export stage runs again)", export.command, kind="export")


def closed_alert(campaign: Campaign, state: CampaignState, now: datetime,
                 export: ExportState | None = None) -> Alert | None:
    """The campaign closed: every essential stage done, every result that ran to its end
    judged and the question answered (:func:`cockpit.close.export_state.question_open`:
    with a conclusion rule, a positive or a negative answer; without one, an accepted
    result); with the rental share per accepted result (D21). One alert per conclusion.
    None while the question is open (nothing is sent then) and while the export is stale
    (:func:`stale_alert` says so; this alert follows the export made again)."""
    essential = [s for s in campaign.stages if s.category == "essential"]
    if not essential or not all(state.stages[s.id].state == DONE for s in essential):
        return None  # (no essential stage: nothing whose end closes it)
    for run in state.runs.values():
        spec = campaign.runs.get(run.id)
        if run.state == SUCCEEDED and run.verdict is None and (
                spec is None or spec.produces_result):
            return None  # a result still waits for its verdict: the cost is not known yet
    verdict = conclude_now(campaign, state) if campaign.conclusion is not None else None
    if question_open(campaign, state, verdict) is not None \
            or (export is not None and export.stale is not None):
        return None
    text = verdict.text if verdict is not None else "every essential stage is done"
    budget = budget_of(campaign, state, now)
    cost = f"{budget.share_per_accepted} per accepted result ({budget.accepted} accepted)" \
        if budget.share_per_accepted is not None else \
        f"cost per accepted result undefined: {budget.share_undefined}"
    file = campaign.path.name
    exported = export.exported if export is not None else \
        bool(state.export and state.export.get("verified"))
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return Alert(f"closed:{digest}", "info", f"the campaign closed: {text}; {cost}",
                 "nothing more to run", f"cockpit budget {file}" + (
                     "; fetch the export before the window ends" if exported
                     else f"; cockpit export {file}"), kind="closed")
