"""The one table of journal event kinds: for each, who may write it (its ownership scope,
D12), its fields and their types, which module writes it, and its human line.

The table (``EVENT_KINDS``) drives everything that knows a kind: the reader's checks
(:func:`event_problem`, on every line read), the sentence (:func:`describe_event`), the
ownership checks (:func:`refusal`, ``SCOPE``) and the fold's dispatch (a handler per
kind, keyed by the same names: :mod:`cockpit.journal.fold`; a test checks they match).

Every event also carries ``seq``, ``t`` and ``kind`` (the journal adds them). The
fields listed are what the writers put there today; a reader must still treat each
one as optional (an older journal, a hand-edited line). A field's type is the same in
every kind (:mod:`cockpit.journal.fields`). ``describe_event`` is the one place an
event becomes a sentence: the headless output, the TUI's event list and the CLI's
"journal #N ..." lines all use it. Its fields are untrusted (a note, a reason, a metric
name, a path, a peer's line): each one is made printable here, once, before any
describer sees it (:mod:`cockpit.common.printable`), so the sentence is safe for a
terminal and a log line whatever the journal holds.

Ownership: a campaign on several machines has one journal per machine, and every
machine folds all of them. An event counts only when the machine that wrote it may
write it (its kind's ``scope``):

- ``stage``: a stage's claim, start, finish or skip: only the machine that runs the
  stage (``stages[].machine``).
- ``run``: a run's start, exit, stop request and end, rule firings, checkpoint and
  resume verifications, verdicts: only the machine that runs the run's stage.
- ``decision``: a decision, only from the machine of its decision-point stage; a
  ``stage_dropped`` from the dropped stage's machine or from the machine whose
  decision dropped it (a decision is made where its stage runs and drops across
  machines: the one documented cross-machine effect besides ``after``).
- ``any``: campaign-wide facts any machine may record (other costs, notes on a stage
  of the plan); each is still checked as its own command checks it.
- ``local``: the writer's own records (the plan and rules as it recorded them, its
  environment, warnings, hooks, exports): folded only from the reader's own journal.

:func:`refusal` applies the table to one event; :func:`cockpit.journal.fold.fold` drops what
a machine may not write, with one warning naming the machine and the event.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.common.event_kinds import (
    ALERT_CLAIMED,
    ALERT_FAILED,
    ALERT_SENT,
    ALERT_TARGETS,
    CHECKPOINT_VERIFIED,
    CLAIM_EXPIRED,
    CLOCK_JUMP,
    COST,
    DECISION,
    ENVIRONMENT_RECORDED,
    EXPORT_DONE,
    HOOK_STARTED,
    LANDING,
    NOTE,
    PLAN_CHANGED,
    PLAN_RECORDED,
    RESULT_ACCEPTED,
    RESULT_REJECTED,
    RESUME_VERIFIED,
    RULE_BLIND,
    RULE_FIRED,
    RULES_RECORDED,
    RUN_EXITED,
    RUN_STARTED,
    STAGE_CLAIMED,
    STAGE_DROPPED,
    STAGE_FINISHED,
    STAGE_SKIPPED,
    STAGE_STARTED,
    STOP_DONE,
    STOP_REQUESTED,
    VERIFY_STARTED,
    WARNING,
)
from cockpit.common.printable import printable
from cockpit.common.units import format_duration
from cockpit.journal.fields import FIELD_TYPES, FieldType, field_type

Event = Mapping[str, Any]  # what a describer or the ownership check reads (any event)

# The ownership scopes (see the module docstring).
STAGE_SCOPE, RUN_SCOPE, DECISION_SCOPE = "stage", "run", "decision"
ANY_SCOPE, LOCAL_SCOPE = "any", "local"
SCOPES = (STAGE_SCOPE, RUN_SCOPE, DECISION_SCOPE, ANY_SCOPE, LOCAL_SCOPE)


@dataclass(frozen=True)
class EventKind:
    """One row of the table."""

    kind: str
    scope: str  # which machine may write it (one of SCOPES)
    writer: str  # the modules that journal it (held to the code by test_journal_kinds)
    fields: Mapping[str, FieldType]  # its fields (beside seq, t, kind) and their types
    describe: Callable[[Event], str]


def _kind(kind: str, scope: str, writer: str, fields: tuple[str, ...],
          describe: Callable[[Event], str]) -> EventKind:
    assert scope in SCOPES, f"{kind}: scope {scope!r}"
    return EventKind(kind, scope, writer, {name: field_type(name) for name in fields},
                     describe)


def _short(value: Any) -> str:
    return str(value)[:12]


def _signed(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return "by an unknown amount"
    return ("forward " if seconds >= 0 else "back ") + format_duration(abs(float(seconds)))


def _target_names(targets: Any) -> str:
    """The targets of an ``alert_targets`` line, as journaled (label and scheme)."""
    names = [str(t.get("target") or t.get("label")) for t in targets
             if isinstance(t, dict)] if isinstance(targets, list) else []
    return ", ".join(names) or "no target"


def _stage_started(ev: Event) -> str:
    how = "marked started" if ev.get("manual") else f"started (pid {ev.get('pid')})"
    if ev.get("reconciled"):
        how += ", recorded from its launch marker"
    return f"stage {ev.get('stage')} {how}" + (f" — {ev['warning']}" if ev.get("warning") else "")


def _stage_finished(ev: Event) -> str:
    extra = f": {ev['reason']}" if ev.get("reason") else ""
    return f"stage {ev.get('stage')} {ev.get('outcome')}{extra}"


def _decision(ev: Event) -> str:
    drops = f", dropping {', '.join(ev.get('drops') or [])}" if ev.get("drops") else ""
    return f"decision at {ev.get('stage')}: {ev.get('outcome')}{drops} — {ev.get('note')}"


def _resume_verified(ev: Event) -> str:
    verdict = "PASS" if ev.get("ok") else "FAIL"
    return f"resume check of run {ev.get('run')}: {verdict} — {ev.get('message')}"


def _checkpoint_verified(ev: Event) -> str:
    verdict = "reloads" if ev.get("ok") else f"does NOT reload: {ev.get('error')}"
    return f"checkpoint of run {ev.get('run')} {verdict} ({ev.get('path')})"


def _export_done(ev: Event) -> str:
    verdict = "verified" if ev.get("verified") else "NOT verified"
    return (f"export written and {verdict}: {ev.get('path')} (tar sha256 "
            f"{_short(ev.get('sha256'))})")


_KINDS = (
    _kind(PLAN_RECORDED, LOCAL_SCOPE, "engine.journal_actions", ("sha256", "path", "text_z"),
              lambda ev: f"plan recorded as decided (sha256 {_short(ev.get('sha256'))})"),
    _kind(PLAN_CHANGED, LOCAL_SCOPE, "engine.journal_actions", ("sha256", "path", "text_z"),
              lambda ev: f"campaign file changed after the plan was decided (now sha256 "
                         f"{_short(ev.get('sha256'))}); the plan as decided still stands (D24)"),
    _kind(ENVIRONMENT_RECORDED, LOCAL_SCOPE, "runs.env_record",
              ("python", "implementation", "os", "arch", "distributions",
               "distributions_sha256", "count"),
              lambda ev: "environment recorded at the first run start (the export warns of "
                         "a change)"),
    _kind(RULES_RECORDED, LOCAL_SCOPE, "engine.launcher", ("sha256",),
              lambda ev: f"stop rules recorded (sha256 {_short(ev.get('sha256'))})"),
    _kind(STAGE_CLAIMED, STAGE_SCOPE, "engine.launcher",
              ("stage", "run", "marker", "params_hash", "forced", "auto", "actor", "owner_pid",
               "owner_start", "out"),
              # The marker (COCKPIT_LAUNCH) is in the event; the line stays short.
              lambda ev: f"stage {ev.get('stage')} claimed for launch"),
    _kind(STAGE_STARTED, STAGE_SCOPE, "engine.launcher, engine.journal_actions",
              ("stage", "run", "pid", "pgid", "create_time", "command", "exit_file", "stdout",
               "stderr", "gpus", "forced", "auto", "actor", "warning", "manual", "claim",
               "marker", "reconciled"),
              _stage_started),
    _kind(RUN_STARTED, RUN_SCOPE, "engine.launcher",
              ("run", "stage", "pid", "pgid", "create_time", "command", "params_hash", "attempt",
               "gpus", "exit_file", "report", "marker"),
              lambda ev: f"run {ev.get('run')} started (params {_short(ev.get('params_hash'))})"),
    _kind(RUN_EXITED, RUN_SCOPE, "engine.exits",
              ("run", "stage", "code", "attempt", "signal", "elapsed_s"),
              lambda ev: f"run {ev.get('run')} exited with code {ev.get('code')}"),
    _kind(STOP_DONE, RUN_SCOPE, "engine.exits", ("run", "stage", "attempt", "rule"),
              lambda ev: f"run {ev.get('run')} stopped"),
    _kind(STAGE_FINISHED, STAGE_SCOPE, "engine.exits, engine.launcher, engine.journal_actions",
              ("stage", "outcome", "code", "reason", "manual", "actor", "elapsed_s"),
              _stage_finished),
    _kind(STAGE_SKIPPED, STAGE_SCOPE, "engine.journal_actions", ("stage", "note", "actor"),
              lambda ev: f"stage {ev.get('stage')} skipped"
              + (f": {ev['note']}" if ev.get("note") else "")),
    _kind(STAGE_DROPPED, DECISION_SCOPE, "engine.journal_actions", ("stage", "reason"),
              lambda ev: f"stage {ev.get('stage')} dropped ({ev.get('reason')})"),
    _kind(RULE_FIRED, RUN_SCOPE, "engine.launcher",
              ("run", "stage", "rule", "reason", "value", "threshold", "step", "action",
               "attempt", "actor"),
              lambda ev: f"rule {ev.get('rule')} fired on run {ev.get('run')}: "
              f"{ev.get('reason')}"),
    _kind(RULE_BLIND, RUN_SCOPE, "engine.guards",
              ("key", "run", "stage", "rule", "metric", "reason", "attempt", "ended", "actor"),
              lambda ev: f"rule {ev.get('rule')} is blind on run {ev.get('run')}"
                         + (" (the run ended blind)" if ev.get("ended") else "")
                         + f": {ev.get('reason')}"),
    _kind(STOP_REQUESTED, RUN_SCOPE, "engine.launcher",
              ("run", "stage", "rule", "reason", "value", "step", "attempt", "actor"),
              lambda ev: f"stop of run {ev.get('run')} requested ({ev.get('rule')}): "
              f"{ev.get('reason')}"),
    _kind(DECISION, DECISION_SCOPE, "engine.journal_actions",
              ("stage", "outcome", "drops", "note", "actor"), _decision),
    _kind(NOTE, ANY_SCOPE, "engine.journal_actions", ("stage", "text", "actor"),
              lambda ev: f"note on {ev.get('stage')}: {ev.get('text')}"),
    _kind(COST, ANY_SCOPE, "engine.journal_actions", ("label", "amount", "currency", "actor"),
              lambda ev: f"cost {ev.get('label')}: {ev.get('amount')} {ev.get('currency')}"),
    _kind(RESULT_ACCEPTED, RUN_SCOPE, "engine.journal_actions, close.acceptance",
              ("run", "stage", "result", "reason", "checks", "attempt", "actor", "override"),
              lambda ev: f"result of run {ev.get('run')} accepted"
                         + (" BY OVERRIDE (its acceptance checks failed)"
                            if ev.get("override") else "") + f": {ev.get('reason')}"),
    _kind(RESULT_REJECTED, RUN_SCOPE, "engine.journal_actions, close.acceptance",
              ("run", "stage", "result", "reason", "checks", "attempt", "actor", "failed"),
              lambda ev: f"result of run {ev.get('run')} rejected: {ev.get('reason')}"),
    _kind(RESUME_VERIFIED, RUN_SCOPE, "engine.evidence",
              ("run", "ok", "path", "from_step", "compared", "diverged_step", "message",
               "seconds", "actor"),
              _resume_verified),
    _kind(VERIFY_STARTED, RUN_SCOPE, "engine.verification",
              ("key", "run", "path", "attempt", "owner_pid", "owner_start", "limit_s", "retry"),
              lambda ev: f"verifying checkpoint of run {ev.get('run')} ({ev.get('path')})"),
    _kind(CHECKPOINT_VERIFIED, RUN_SCOPE, "engine.evidence, engine.verification",
              ("run", "attempt", "auto", "actor", "path", "ok", "layout", "missing", "warnings",
               "error", "load_seconds", "wall_seconds", "step", "summary"),
              _checkpoint_verified),
    _kind(WARNING, LOCAL_SCOPE, "engine.exits, engine.guards, engine.hooks, engine.observer",
              ("message", "source", "key", "gpu", "event", "stage", "run"),
              lambda ev: f"warning: {ev.get('message')}"),
    _kind(EXPORT_DONE, LOCAL_SCOPE, "export.bag",
              ("path", "root", "size", "tar", "tar_size", "sha256", "verified", "artifacts",
               "reload_checked", "failures", "kept_failed", "current", "seconds", "fetch",
               "facts"),
              _export_done),
    _kind(CLOCK_JUMP, LOCAL_SCOPE, "engine.journal_actions",
              ("key", "from", "to", "seconds", "settle_s", "actor"),
              lambda ev: f"the wall clock jumped {_signed(ev.get('seconds'))} (from "
                         f"{ev.get('from')} to {ev.get('to')}): ages, graces and durations "
                         f"stay on the monotonic clock; rules on ages, the deadline guard and "
                         f"auto-start wait until it has been steady for "
                         f"{ev.get('settle_s')} s"),
    _kind(CLAIM_EXPIRED, RUN_SCOPE, "engine.launcher",
              ("stage", "run", "claim", "path", "owner_pid", "reason"),
              lambda ev: f"claim #{ev.get('claim')} of "
                         + (f"stage {ev.get('stage')}" if ev.get("stage") else
                            f"run {ev.get('run')}") + f" expired: {ev.get('reason')}"),
    _kind(HOOK_STARTED, LOCAL_SCOPE, "engine.hooks", ("key", "hook", "pid", "for_seq"),
              lambda ev: f"hook {ev.get('hook')} started for event #{ev.get('for_seq')} "
              f"(pid {ev.get('pid')})"),
    # The target is named by label and scheme, never its URL (it holds a token).
    _kind(ALERT_SENT, LOCAL_SCOPE, "engine.alerting",
              ("key", "alert", "target", "level", "attempt", "what", "for_seq", "covers"),
              lambda ev: f"alert sent to {ev.get('target')} ({ev.get('level')}): "
                         f"{ev.get('what')}"),
    # A delivery claimed before its send (issue 39): a conductor that dies mid-send
    # leaves a claim that the next one finishes once (it may repeat; never lost).
    _kind(ALERT_CLAIMED, LOCAL_SCOPE, "engine.alerting",
              ("key", "alert", "target", "level", "what", "title", "body", "for_seq",
               "covers"),
              lambda ev: f"alert to {ev.get('target')} claimed ({ev.get('level')}): "
                         f"{ev.get('what')}"),
    _kind(ALERT_FAILED, LOCAL_SCOPE, "engine.alerting",
              ("key", "alert", "target", "level", "attempt", "what", "error", "final",
               "title", "body", "for_seq", "covers"),
              lambda ev: f"alert to {ev.get('target')} failed (attempt {ev.get('attempt')}"
                         f"{', given up' if ev.get('final') else ''}): {ev.get('error')}"),
    # The alert targets a conductor sends to (issue 43: the outbox's horizon, by label
    # and scheme, never a URL), at its open; "closed" at its clean close.
    _kind(ALERT_TARGETS, LOCAL_SCOPE, "engine.alerting", ("targets", "phase", "pid"),
              lambda ev: f"alerts {'no longer sent' if ev.get('phase') == 'closed' else 'go'}"
                         f" to {_target_names(ev.get('targets'))}"),
    # One step of the landing (on_deadline: land; engine.landing), keyed once each.
    _kind(LANDING, LOCAL_SCOPE, "engine.landing",
              ("key", "phase", "text", "run", "attempt", "limit_s", "ok", "fetch", "actor",
               "path", "size_bytes", "mtime", "step", "point", "reserve"),
              lambda ev: f"landing, {ev.get('phase')}: {ev.get('text')}"),
)

EVENT_KINDS: Mapping[str, EventKind] = {k.kind: k for k in _KINDS}

# Which machine may write each kind: the ownership table (see the module docstring).
SCOPE: Mapping[str, str] = {k.kind: k.scope for k in _KINDS}


def owners(campaign: Campaign, event: Event) -> list[tuple[str, int]]:
    """The plan's stages and runs the event names, with the machine each runs on (none:
    it names none of the plan's, or its kind is campaign-wide or local). An event may
    name a stage and a run: both count, so a machine's ``stage_started`` of its own stage
    cannot carry another machine's run."""
    scope = SCOPE.get(str(event.get("kind")))
    if scope not in (STAGE_SCOPE, RUN_SCOPE, DECISION_SCOPE):
        return []
    named: list[tuple[str, int]] = []
    run_id, stage_id = event.get("run"), event.get("stage")
    if isinstance(run_id, str):
        of_run = campaign.stage_of_run(run_id)
        if of_run is not None:
            named.append((f"run {run_id}", of_run.machine))
    if isinstance(stage_id, str):
        try:
            named.append((f"stage {stage_id}", campaign.stage(stage_id).machine))
        except KeyError:
            pass
    return named


def refusal(campaign: Campaign, event: Event, writer: int,
            dropped_by: Collection[str] = ()) -> str | None:
    """Why machine ``writer`` may not write ``event`` under the ownership table (None:
    it may, or the event names no stage or run of the plan). ``dropped_by``: the stages
    a decision of ``writer`` dropped. ``any`` and ``local`` kinds: None (a local record
    is the caller's to skip: it is a machine's own record, not an offence)."""
    kind = str(event.get("kind"))
    for what, machine in owners(campaign, event):
        if machine == writer:
            continue
        if kind == STAGE_DROPPED and event.get("stage") in dropped_by:
            continue  # dropped by that machine's own decision
        return (f"{what} runs on machine {machine}; a machine writes {kind} only for its "
                "own stages")
    return None


def event_problem(event: Mapping[str, Any]) -> str | None:
    """What is wrong with an event's fields, in words (None: it fits): its kind's fields
    by the table's types, then any other field the registry knows (a field means the
    same in every kind). A kind not in the table is read too (a newer cockpit may write
    it; the fold ignores it), its fields checked by the registry alone."""
    # The fields whose types alone do not settle it, for these names, this kind and
    # these types (a journal has a few dozen such shapes: each is worked out once).
    shape = (*event, event.get("kind"), *map(type, event.values()))
    to_check = _TO_CHECK.get(shape)
    if to_check is None:
        if len(_TO_CHECK) >= _SHAPES_KEPT:
            _TO_CHECK.clear()  # a journal of made-up shapes: stay bounded
        to_check = _TO_CHECK[shape] = _fields_to_check(event)
    for name, fits, checked in to_check:
        value = event[name]
        if not fits(value):
            return checked.problem(name, value)
    return None


def _fields_to_check(event: Mapping[str, Any]) -> _Plan:
    kind = event.get("kind")
    checks = _CHECKS.get(kind) if isinstance(kind, str) else None
    if checks is None:  # a kind not in the table: the registry alone
        checks = FIELD_TYPES
    return tuple((name, checked.check, checked) for name, value in event.items()
                 if (checked := checks.get(name)) is not None
                 and type(value) not in checked.quick)


_SHAPES_KEPT = 1000
_Plan = tuple[tuple[str, Callable[[Any], bool], FieldType], ...]  # fields to check by value
# (field names, kind, each value's type) -> the fields to check by value
_TO_CHECK: dict[tuple[Any, ...], _Plan] = {}


# Each kind's checks: its declared fields over the registry (one lookup per field).
_CHECKS: Mapping[str, Mapping[str, FieldType]] = {
    k.kind: {**FIELD_TYPES, **k.fields} for k in _KINDS}


FIELD_LIMIT = 1000  # characters of one field in an event's line (a long note stays whole)
EVENT_LINE_LIMIT = 4000  # characters of the whole line (an unknown kind lists every field)


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value, FIELD_LIMIT)
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    return printable(value, FIELD_LIMIT)  # a dict or anything else: its text, made safe


def describe_event(ev: Event) -> str:
    """One human line per journal event (headless output, the TUI's event list), every
    field made printable and bounded first."""
    clean = {k: _clean(v) for k, v in ev.items()}
    known = EVENT_KINDS.get(str(ev.get("kind")))
    if known is not None:
        line = known.describe(clean)
    else:
        line = f"{clean.get('kind')}: " + ", ".join(
            f"{printable(k, FIELD_LIMIT)}={v}" for k, v in clean.items()
            if k not in ("seq", "t", "kind"))
    # The describers add only the cockpit's own words; this bounds the whole line.
    return printable(line, EVENT_LINE_LIMIT)
