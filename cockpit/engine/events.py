"""The one catalogue of journal event kinds: who writes each, its fields, its human line.

Every event also carries ``seq``, ``t`` and ``kind`` (the journal adds them). The
fields listed are what the writers put there today; a reader must still treat each
one as optional (an older journal, a hand-edited line). ``describe_event`` is the one
place an event becomes a sentence: the headless output, the TUI's event list and
the CLI's "journal #N ..." lines all use it. Its fields are untrusted (a note, a
reason, a metric name, a path, a peer's line): each one is made printable here, once,
before any describer sees it (:mod:`cockpit.printable`), so the sentence is safe for a
terminal and a log line whatever the journal holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cockpit.printable import printable

Event = Mapping[str, Any]


@dataclass(frozen=True)
class EventKind:
    kind: str
    writer: str  # the module (or engine part) that journals it
    fields: tuple[str, ...]
    describe: Callable[[Event], str]


def _short(value: Any) -> str:
    return str(value)[:12]


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
    EventKind("plan_recorded", "engine.actions", ("sha256", "path", "text_z"),
              lambda ev: f"plan recorded as decided (sha256 {_short(ev.get('sha256'))})"),
    EventKind("plan_changed", "engine.actions", ("sha256", "path", "text_z"),
              lambda ev: f"campaign file changed after the plan was decided (now sha256 "
                         f"{_short(ev.get('sha256'))}); the plan as decided still stands (D24)"),
    EventKind("environment_recorded", "engine.actions (start, the first run)",
              ("python", "implementation", "os", "arch", "distributions",
               "distributions_sha256", "count"),
              lambda ev: "environment recorded at the first run start (the export warns of "
                         "a change)"),
    EventKind("rules_recorded", "engine.actions", ("sha256",),
              lambda ev: f"stop rules recorded (sha256 {_short(ev.get('sha256'))})"),
    EventKind("stage_claimed", "engine.actions (start, before the launch)",
              ("stage", "run", "marker", "params_hash", "forced", "auto", "actor"),
              # The marker (COCKPIT_LAUNCH) is in the event; the line stays short.
              lambda ev: f"stage {ev.get('stage')} claimed for launch"),
    EventKind("stage_started", "engine.actions (start, or the tick that reconciles a claim)",
              ("stage", "run", "pid", "pgid", "create_time", "command", "exit_file", "stdout",
               "stderr", "gpus", "forced", "auto", "actor", "warning", "manual", "claim",
               "marker", "reconciled"),
              _stage_started),
    EventKind("run_started", "engine.actions",
              ("run", "stage", "pid", "pgid", "create_time", "command", "params_hash", "attempt",
               "gpus", "exit_file", "report", "marker"),
              lambda ev: f"run {ev.get('run')} started (params {_short(ev.get('params_hash'))})"),
    EventKind("run_exited", "engine.observe", ("run", "stage", "code", "attempt", "signal"),
              lambda ev: f"run {ev.get('run')} exited with code {ev.get('code')}"),
    EventKind("stop_done", "engine.observe", ("run", "stage", "attempt", "rule"),
              lambda ev: f"run {ev.get('run')} stopped"),
    EventKind("stage_finished", "engine.observe, engine.actions (mark)",
              ("stage", "outcome", "code", "reason", "manual", "actor"), _stage_finished),
    EventKind("stage_skipped", "engine.actions", ("stage", "note", "actor"),
              lambda ev: f"stage {ev.get('stage')} skipped"
              + (f": {ev['note']}" if ev.get("note") else "")),
    EventKind("stage_dropped", "engine.actions (decide limit)", ("stage", "reason"),
              lambda ev: f"stage {ev.get('stage')} dropped ({ev.get('reason')})"),
    EventKind("rule_fired", "engine.guards",
              ("run", "stage", "rule", "reason", "value", "threshold", "step", "action",
               "attempt", "actor"),
              lambda ev: f"rule {ev.get('rule')} fired on run {ev.get('run')}: "
              f"{ev.get('reason')}"),
    EventKind("stop_requested", "engine.actions (stop), engine.guards (rules, deadline)",
              ("run", "stage", "rule", "reason", "value", "step", "attempt", "actor"),
              lambda ev: f"stop of run {ev.get('run')} requested ({ev.get('rule')}): "
              f"{ev.get('reason')}"),
    EventKind("decision", "engine.actions", ("stage", "outcome", "drops", "note", "actor"),
              _decision),
    EventKind("note", "engine.actions", ("stage", "text", "actor"),
              lambda ev: f"note on {ev.get('stage')}: {ev.get('text')}"),
    EventKind("cost", "engine.actions", ("label", "amount", "currency", "actor"),
              lambda ev: f"cost {ev.get('label')}: {ev.get('amount')} {ev.get('currency')}"),
    EventKind("result_accepted", "engine.actions (accept), acceptance (auto)",
              ("run", "stage", "result", "reason", "checks", "attempt", "actor", "override"),
              lambda ev: f"result of run {ev.get('run')} accepted"
                         + (" BY OVERRIDE (its acceptance checks failed)"
                            if ev.get("override") else "") + f": {ev.get('reason')}"),
    EventKind("result_rejected", "engine.actions (reject), acceptance (auto)",
              ("run", "stage", "result", "reason", "checks", "attempt", "actor"),
              lambda ev: f"result of run {ev.get('run')} rejected: {ev.get('reason')}"),
    EventKind("resume_verified", "engine.actions (verify --resume)",
              ("run", "ok", "path", "from_step", "compared", "diverged_step", "message",
               "seconds", "actor"),
              _resume_verified),
    EventKind("verify_started", "engine.observe (background verification)",
              ("key", "run", "path", "attempt"),
              lambda ev: f"verifying checkpoint of run {ev.get('run')} ({ev.get('path')})"),
    EventKind("checkpoint_verified", "engine.observe (auto), engine.actions (verify)",
              ("run", "attempt", "auto", "actor", "path", "ok", "layout", "missing", "warnings",
               "error", "load_seconds", "step", "summary"),
              _checkpoint_verified),
    EventKind("warning", "engine.guards (deadline, hooks), engine.observe (GPU events)",
              ("message", "source", "key", "gpu", "event"),
              lambda ev: f"warning: {ev.get('message')}"),
    EventKind("export_done", "export.bag",
              ("path", "root", "size", "tar", "sha256", "verified", "artifacts",
               "reload_checked", "failures"),
              _export_done),
    EventKind("hook_started", "engine.guards", ("key", "hook", "pid", "for_seq"),
              lambda ev: f"hook {ev.get('hook')} started for event #{ev.get('for_seq')} "
              f"(pid {ev.get('pid')})"),
)

EVENT_KINDS: dict[str, EventKind] = {k.kind: k for k in _KINDS}


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
