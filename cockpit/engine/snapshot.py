"""The engine's immutable Snapshot: everything both faces (TUI, headless) render.

Plain frozen dataclasses plus :func:`snapshot_json`, the full JSON shape of
``cockpit status --json``. (The headless status log writes a compact form of its
own: :mod:`cockpit.headless.status_log`.)

The Snapshot also says what a person may do now (:class:`Allowed` per run and stage, the
export key's :class:`ExportAction`), computed by :mod:`cockpit.engine.affordances`, the
predicates the engine's actions enforce: a face offers what it says, and shows why not.
Every type a face names is importable from here, so a face needs nothing below the engine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cockpit.close.budget import Budget, EarlierAttempt, OtherCost, PackageTerms, Rejection
from cockpit.close.export_state import ExportState
from cockpit.close.hours import GpuHours, HoursBought, IdleGap, StageHours
from cockpit.common.durations import format_duration
from cockpit.common.units import Money
from cockpit.planning.schedule import Slot
from cockpit.runs.blind import BLIND, BLIND_MARK, WAITING
from cockpit.runs.metrics.values import MetricPoint
from cockpit.telemetry import GpuReading, HostInfo, gpu_json, host_json

# Re-exported: the types and words a face names (a face imports nothing below the engine).
__all__ = [
    "BLIND", "BLIND_MARK", "WAITING", "Allowed", "Budget", "CheckpointView", "EarlierAttempt",
    "EventLine", "ExportAction", "ExportState", "GpuHours", "GpuReading", "HostInfo", "HoursBought",
    "IdleGap", "LogPaths", "MachineView", "StageHours",
    "MetricPoint", "Money", "OtherCost", "PackageTerms", "Rejection", "RuleView", "RunView",
    "Slot", "Snapshot", "StageView", "WindowView", "snapshot_json",
]


@dataclass(frozen=True)
class Allowed:
    """Whether an action is offered now, and why not (empty when it is). ``ok`` implies
    the engine's action would not refuse it on what the journal says (a check that needs
    the process table or a file, like a live process or a changed params file, is still
    the action's own); every refusal of the action is ``ok=False`` with its words."""

    ok: bool
    why_not: str = ""


ALLOWED = Allowed(True)
# A view built without the engine's predicates (a test's hand-made view): never offered.
UNKNOWN = Allowed(False, "not known")


@dataclass(frozen=True)
class LogPaths:
    """The current attempt's output files, as the supervisor named them (``.err`` may
    not exist yet: the face says so)."""

    out: str
    err: str


@dataclass(frozen=True)
class ExportAction:
    """What the export key does now. ``kind``: ``start_stage`` (the plan's export stage
    has a command: start it, with ``force`` when it is not ready), ``export_and_mark``
    (a manual export stage: export, then mark it done), ``export`` (no export stage, or
    it has ended: a plain export) or ``none`` (refused: ``allowed.why_not`` says why)."""

    kind: str
    stage: str | None = None
    force: bool = False
    allowed: Allowed = ALLOWED


@dataclass(frozen=True)
class WindowView:
    start: datetime
    end: datetime
    remaining_s: float
    used_pct: float
    forecast_end: datetime
    forecast_slack_s: float
    verdict: str  # fits | tight | exceeds
    retrieval_deadline: datetime
    options: tuple[str, ...] = ()
    pilot_ratio: float | None = None
    pilot_note: str | None = None  # "pilot measured nothing: ..." (D13)
    # The last moment a landing can begin and the results be home by the end (issue 26),
    # and what it is made of.
    point_of_no_return: datetime | None = None
    landing_words: str = ""
    landing_mode: bool = False  # on_deadline: land (the cockpit lands by itself)


@dataclass(frozen=True)
class StageView:
    id: str
    state: str  # waiting | ready | needs-person | blocked | running | done | failed | stopped ...
    category: str
    resource: str
    planned_s: float
    elapsed_s: float
    decision_point: bool
    started_at: datetime | None = None
    ended_at: datetime | None = None
    run: str | None = None
    has_command: bool = False
    progress: float | None = None
    eta: datetime | None = None
    forecast_end: datetime | None = None
    decision: str | None = None  # outcome, "pending", or None
    reason: str | None = None
    notes: tuple[str, ...] = ()  # the newest (build.SNAPSHOT_NOTES)
    notes_count: int = 0  # every note of the stage
    exit_code: int | None = None
    # What a person may do to the stage now (the engine's own refusals when not).
    start: Allowed = UNKNOWN
    stop: Allowed = UNKNOWN
    mark: Allowed = UNKNOWN
    mark_as: tuple[str, ...] = ()  # the marks offered: ("started", "done") or ("done",)
    log_path: LogPaths | None = None


@dataclass(frozen=True)
class CheckpointView:
    path: str | None
    step: int | None
    age_s: float | None
    size: int | None
    total_size: int
    count: int
    free_disk: int | None
    save_cost_s: float | None
    verified: str | None  # "ok", "failed: ...", None
    verified_age_s: float | None = None
    advice: str | None = None
    in_progress: int = 0


@dataclass(frozen=True)
class RunView:
    id: str
    stage: str | None
    state: str
    step: int | None
    max_steps: int | None
    metrics: dict[str, float]
    pid: int | None
    gpus: tuple[int, ...]
    gpu_memory: int | None
    exit_code: int | None
    stop_rule: str | None
    stop_reason: str | None
    verdict: str | None
    verdict_reason: str | None
    stale_s: float | None
    garbage: int
    checkpoint: CheckpointView | None = None
    result: str = ""
    kind: str = "train"
    # Steps per second over the last minute of reports, and when max_steps is reached.
    rate: float | None = None
    eta: datetime | None = None
    # The metrics a person watches on this run: its key metric (the loss when it reports
    # one) first, then the metrics of its acceptance checks and of its stop rules.
    watched: tuple[str, ...] = ()
    key_metric: str | None = None
    produces_result: bool = True  # False: a data check, pilot or resume check (no verdict)
    # A stalled rule's reason while the run still sits at the step it stalled on.
    stalled: str | None = None
    # What a person may do to the run now (a data check or pilot is never judged, D21).
    accept: Allowed = UNKNOWN
    reject: Allowed = UNKNOWN
    stop: Allowed = UNKNOWN
    log_path: LogPaths | None = None  # its current attempt's output
    # Ended with no verdict yet, and its acceptance checks will judge it (the conductor's
    # automatic verdict, a reload in the background): no person is asked before they do.
    judging: bool = False
    # The run's recent points (bounded by the stream's deque): sparklines and the chart.
    points: tuple[MetricPoint, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class RuleView:
    rule: str
    run: str
    kind: str
    state: str  # ok | warn | fired | blind (metric never seen) | waiting (run not started)
    reason: str | None
    action: str
    metric: str | None = None
    value: Any = None
    implicit: bool = False  # the default stalled rule (the file declares none)


@dataclass(frozen=True)
class EventLine:
    """One journal event as the faces show it: its line (``describe_event``) and fields."""

    seq: int
    at: datetime
    kind: str
    text: str
    fields: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    earlier: bool = False  # journaled before this engine opened: history, not news


@dataclass(frozen=True)
class MachineView:
    """Another machine of the campaign (D12), as its pulled copies show it."""

    machine: int
    ssh: str
    reachable: bool | None  # None: not reached yet
    data_age_s: float | None  # since the last good pull (None: never)
    error: str | None
    held_bytes: int  # bytes of its journal held here
    gpus: tuple[Mapping[str, Any], ...] = ()  # from its status log's last line
    status_at: str | None = None  # when that line was written
    notices: tuple[str, ...] = ()  # its journal lines skipped here, its history's bounds

    @property
    def label(self) -> str:
        if self.reachable is None:
            why = f" ({self.error})" if self.error else ""
            return f"machine {self.machine} ({self.ssh}): not reached yet{why}"
        age = "never" if self.data_age_s is None else f"{self.data_age_s:.0f} s old"
        if self.reachable:
            return f"machine {self.machine} ({self.ssh}): reachable, data {age}"
        return f"machine {self.machine} ({self.ssh}): UNREACHABLE, last data {age} " \
               f"({self.error})"


@dataclass(frozen=True)
class ConductorView:
    """Who conducts this campaign on this machine (issue 39): this face (``you``),
    another (its face, pid, host and since when), or nobody (the guards are not
    running: a person must know; ``since``: when the last conductor gave it back)."""

    you: bool = True
    conducted: bool = True
    face: str | None = None
    pid: int | None = None
    host: str | None = None
    since: datetime | None = None
    problem: str | None = None  # why this face cannot take the lease at all

    def words(self) -> str:
        """``you conduct`` · ``conducted by headless, pid 4121, since 17:02 UTC`` ·
        ``NOT CONDUCTED: nobody runs the guards (since 17:40 UTC)``."""
        at = "" if self.since is None else self.since.strftime("%H:%M UTC")
        if self.you:
            return "you conduct" + (f" (since {at})" if at else "")
        if self.conducted:
            who = f"{self.face or 'a face'}, pid {self.pid}" if self.pid else "another face"
            return f"conducted by {who}" + (f" since {at}" if at else "")
        return ("NOT CONDUCTED: nobody runs the guards, the alerts or the recording"
                + (f" (since {at})" if at else "")
                + (f"; {self.problem}" if self.problem else ""))

    def json(self) -> dict[str, Any]:
        return {"you": self.you, "conducted": self.conducted, "face": self.face,
                "pid": self.pid, "host": self.host,
                "since": None if self.since is None else self.since.isoformat(),
                "words": self.words()}


@dataclass(frozen=True)
class Snapshot:
    taken_at: datetime
    campaign: str
    question: str
    offer: str
    count: int
    window: WindowView
    stages: tuple[StageView, ...]
    runs: tuple[RunView, ...]
    rules: tuple[RuleView, ...]
    pending_decisions: tuple[str, ...]
    revised: bool
    gpus: GpuReading
    host: HostInfo | None
    warnings: tuple[str, ...]
    events: tuple[EventLine, ...]
    auto: bool = False
    budget: Budget | None = None
    # Journal events first seen since the previous snapshot (on the first one: the whole
    # journal, each marked ``earlier``). Faces print, toast or ring for these.
    new_events: tuple[EventLine, ...] = ()
    # The conclusion (D1, D2) in words from the accepted results so far, when the plan
    # states one.
    conclusion: str | None = None
    # Which machine this cockpit is (None: `cockpit fleet`) and the others (D12).
    machine: int | None = 1
    machines: tuple[MachineView, ...] = ()
    # What the export key does now, and the plan's schedule (the timeline's plan lane).
    export_action: ExportAction = ExportAction("none", allowed=UNKNOWN)
    schedule: tuple[Slot, ...] = ()
    # When the newest verified export was written (None: none yet).
    exported_at: datetime | None = None
    # The export against the facts now and the question's answer: stale, closed or
    # exported with the question open, in one wording (issue 41; None: not known).
    export: ExportState | None = None
    # The landing's steps as they happened, each with its time (empty: none began).
    landing: tuple[str, ...] = ()
    # What this machine's GPU-hours bought so far (issue 27; None: not computed).
    hours: HoursBought | None = None
    # Who conducts (issue 39): this face, another, or nobody.
    conductor: ConductorView = ConductorView()
    # An edit of the campaign file that does not load, located (the plan stays).
    plan_refused: str | None = None
    # (target "label (scheme)", alerts the journal owes it), issue 43: every face says it.
    alerts_owed: tuple[tuple[str, int], ...] = ()

    def stage(self, stage_id: str) -> StageView | None:
        return next((s for s in self.stages if s.id == stage_id), None)

    def run(self, run_id: str) -> RunView | None:
        return next((r for r in self.runs if r.id == run_id), None)

    @property
    def active_runs(self) -> tuple[RunView, ...]:
        return tuple(r for r in self.runs if r.state == "running")

    def needs_person(self) -> tuple[Need, ...]:
        """What only a person can do now, most urgent first: a decision the plan waits
        for, a run that ended and awaits its verdict, a rule that cannot see its metric,
        an export gone stale (without --auto).
        The faces tell it (headless prints and repeats it, the TUI's keys come first)."""
        needs = [Need(f"decide:{s}", f"decision needed at {s}: the plan waits for it "
                      "(d in the cockpit, or `cockpit decide FILE continue|limit|revise "
                      f"--stage {s} --note …`)",
                      "decide") for s in self.pending_decisions]
        # A run its acceptance checks are judging awaits them, not a person (unless
        # nobody conducts: then nothing judges it).
        needs += [Need(f"verdict:{r.id}", f"run {r.id} ended and awaits a verdict: "
                       f"accept or reject it (a / r in the cockpit)", "verdict")
                  for r in self.runs
                  if r.produces_result and r.verdict is None and r.accept.ok
                  and not (r.judging and self.conductor.conducted)]
        needs += [Need(f"blind:{r.rule}@{r.run}", f"rule {r.rule} on run {r.run} is blind "
                       f"({r.reason or 'its metric was never seen'}): it cannot stop the run",
                       "blind") for r in self.rules if r.state == "blind"]
        export = self.export
        if export is not None and export.stale is not None and not self.auto:
            # (--auto runs the export stage again itself: issue 41)
            needs.append(Need(f"export:stale:{export.seq}", f"{export.words()} (e in the "
                              "cockpit)", "export"))
        return tuple(needs)


@dataclass(frozen=True)
class Need:
    """One thing only a person can do (``Snapshot.needs_person``): a stable key (the
    same need on the next tick has the same key), the words, and its kind (``decide``,
    ``verdict``, ``blind``, ``export``)."""

    key: str
    text: str
    kind: str


def landing_words(snap: Snapshot) -> str | None:
    """The window line's landing: ``lands in 5h12m`` (on_deadline: land; ``no return in
    5h12m`` otherwise), ``landing`` while it runs, ``landed``; None once closed."""
    w = snap.window
    if snap.landing:
        phase = snap.landing[-1].split(" ", 1)[-1]
        return "landed" if phase.startswith("landed:") else "landing"
    if w.point_of_no_return is None or snap.exported_at is not None:
        return None
    left = (w.point_of_no_return - snap.taken_at).total_seconds()
    if left <= 0:
        return "past the point of no return"
    return f"{'lands' if w.landing_mode else 'no return'} in {format_duration(left)}"


def json_time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def json_number(value: Any) -> Any:
    """JSON has no NaN: non-finite metric values travel as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def snapshot_json(snap: Snapshot) -> dict[str, Any]:
    w = snap.window
    out: dict[str, Any] = {
        "taken_at": json_time(snap.taken_at),
        "campaign": snap.campaign,
        "question": snap.question,
        "offer": snap.offer,
        "count": snap.count,
        "window": {
            "start": json_time(w.start), "end": json_time(w.end),
            "remaining_s": round(w.remaining_s, 1), "used_pct": round(w.used_pct, 2),
            "retrieval_deadline": json_time(w.retrieval_deadline),
            "point_of_no_return": json_time(w.point_of_no_return)
            if w.point_of_no_return else None,
            "point_of_no_return_from": w.landing_words, "lands_by_itself": w.landing_mode,
        },
        "landing": list(snap.landing),
        "conductor": snap.conductor.json(),
        "forecast": {
            "end": json_time(w.forecast_end), "slack_s": round(w.forecast_slack_s, 1),
            "verdict": w.verdict, "fits": w.forecast_slack_s >= 0, "options": list(w.options),
            "pilot_ratio": w.pilot_ratio, "pilot_note": w.pilot_note,
        },
        "stages": [stage_json(s) for s in snap.stages],
        "runs": [run_json(r) for r in snap.runs],
        "rules": [
            {"rule": r.rule, "run": r.run, "kind": r.kind, "state": r.state,
             "reason": r.reason, "action": r.action, "metric": r.metric,
             "value": json_number(r.value)}
            for r in snap.rules
        ],
        "decisions": {"pending": list(snap.pending_decisions), "revised": snap.revised},
        "gpu_status": snap.gpus.status,
        "gpus": [gpu_json(g) for g in snap.gpus.gpus],
        "host": None if snap.host is None else host_json(snap.host),
        "warnings": list(snap.warnings),
        "alerts_owed": dict(snap.alerts_owed),
        "events": [{"seq": e.seq, "t": json_time(e.at), "kind": e.kind, "text": e.text}
                   for e in snap.events],
    }
    if snap.gpus.status == "unavailable":
        out["gpu_error"] = snap.gpus.error
    if snap.budget is not None:
        out["budget"] = snap.budget.as_json()
    if snap.hours is not None:
        out["hours"] = snap.hours.as_json()
    x = snap.export_action
    out["export_action"] = {"kind": x.kind, "stage": x.stage, "force": x.force,
                            **allowed_json(x.allowed)}
    if snap.conclusion is not None:
        out["conclusion"] = snap.conclusion
    if snap.export is not None:
        out["export"] = snap.export.as_json()
    if snap.machines:
        out["machine"] = snap.machine
        out["machines"] = [machine_json(m) for m in snap.machines]
    return out


def stage_json(s: StageView) -> dict[str, Any]:
    return {
        "id": s.id, "state": s.state, "category": s.category, "resource": s.resource,
        "planned_s": s.planned_s, "elapsed_s": round(s.elapsed_s, 1),
        "started_at": json_time(s.started_at), "ended_at": json_time(s.ended_at),
        "decision_point": s.decision_point, "decision": s.decision, "run": s.run,
        "progress": s.progress, "eta": json_time(s.eta),
        "forecast_end": json_time(s.forecast_end), "reason": s.reason,
        "notes": list(s.notes), "notes_count": s.notes_count, "exit_code": s.exit_code,
        "may": {"start": allowed_json(s.start), "stop": allowed_json(s.stop),
                "mark": allowed_json(s.mark), "mark_as": list(s.mark_as)},
    }


def run_json(r: RunView) -> dict[str, Any]:
    return {
        "id": r.id, "stage": r.stage, "state": r.state, "step": r.step,
        "max_steps": r.max_steps,
        "metrics": {k: json_number(v) for k, v in r.metrics.items()},
        "pid": r.pid, "gpus": list(r.gpus), "gpu_memory": r.gpu_memory,
        "exit_code": r.exit_code, "stop_rule": r.stop_rule,
        "stop_reason": r.stop_reason, "verdict": r.verdict,
        "verdict_reason": r.verdict_reason, "stale_s": r.stale_s,
        "stalled": r.stalled, "judging": r.judging,
        "garbage": r.garbage, "result": r.result, "kind": r.kind,
        "rate": r.rate, "eta": json_time(r.eta), "watched": list(r.watched),
        "key_metric": r.key_metric,
        "may": {"accept": allowed_json(r.accept), "reject": allowed_json(r.reject),
                "stop": allowed_json(r.stop)},
        "checkpoint": None if r.checkpoint is None else {
            "path": r.checkpoint.path, "step": r.checkpoint.step,
            "age_s": r.checkpoint.age_s, "size": r.checkpoint.size,
            "total_size": r.checkpoint.total_size, "count": r.checkpoint.count,
            "free_disk": r.checkpoint.free_disk,
            "save_cost_s": r.checkpoint.save_cost_s,
            "verified": r.checkpoint.verified,
            "verified_age_s": r.checkpoint.verified_age_s,
            "advice": r.checkpoint.advice, "in_progress": r.checkpoint.in_progress,
        },
    }


def allowed_json(a: Allowed) -> dict[str, Any]:
    return {"ok": a.ok, "why_not": a.why_not}


def machine_json(m: MachineView) -> dict[str, Any]:
    return {"machine": m.machine, "ssh": m.ssh, "reachable": m.reachable,
            "data_age_s": None if m.data_age_s is None else round(m.data_age_s, 1),
            "error": m.error, "held_bytes": m.held_bytes, "status_at": m.status_at,
            "notices": list(m.notices),
            "gpus": [dict(g) for g in m.gpus]}
