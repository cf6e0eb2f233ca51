"""The fold of a run's events: its start, exit, stop, fired rules, verdicts, checkpoints.

An event of an earlier attempt (its ``attempt`` is not the run's latest) changes
nothing; a new attempt keeps the one it replaces (D15: its time stays a cost and its
stop a reason).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cockpit.common.event_kinds import (
    CHECKPOINT_VERIFIED,
    RESULT_ACCEPTED,
    RESULT_REJECTED,
    RULE_FIRED,
    RUN_EXITED,
    RUN_STARTED,
    STOP_DONE,
    STOP_REQUESTED,
)
from cockpit.journal.fields import Event
from cockpit.journal.fold_draft import Draft, Folding, Handler, seconds, when
from cockpit.journal.state import (
    FAILED,
    NOT_STARTED,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    Attempt,
    FiredRule,
    StopInfo,
)

VERIFIED_KEPT = 64  # a run's newest verifications the state holds (between 64 and 128)


def keep_attempt(run: Draft, attempt: Any) -> None:
    """Before a new attempt replaces a run's fields, keep the one it replaces (D15)."""
    if run.get("started_at") is None or run.get("attempt") == attempt:
        return  # never started, or the same attempt (stage_started, then run_started)
    run.setdefault("earlier", []).append(Attempt(
        run.get("attempt"), run.get("state", NOT_STARTED), run.get("started_at"),
        run.get("ended_at"), run.get("measured_s"), tuple(run.get("gpus") or ()),
        run.get("exit_code"), run.get("stop"), run.get("stage")))


def _this_attempt(f: Folding, ev: Event) -> Draft | None:
    """The run's draft when the event is about its latest attempt (None: not)."""
    run = f.run(ev)
    return run if run is not None and ev.get("attempt") == run.get("attempt") else None


def run_started(f: Folding, ev: Event) -> None:
    run = f.run(ev)
    if run is None:
        return
    keep_attempt(run, ev.get("attempt"))
    run.update(stage=ev.get("stage"), state=RUNNING, attempt=ev.get("attempt"),
               started_at=when(ev), ended_at=None, pid=ev.get("pid"),
               pgid=ev.get("pgid"), create_time=ev.get("create_time"),
               marker=ev.get("marker"), params_hash=ev.get("params_hash"),
               gpus=tuple(ev.get("gpus") or ()), exit_code=None,
               exit_file=ev.get("exit_file"), stop=None, measured_s=None, verdict=None,
               verdict_reason=None, verdict_failed=None)


def run_exited(f: Folding, ev: Event) -> None:
    run = _this_attempt(f, ev)
    if run is None:
        return
    code = ev.get("code")
    state = STOPPED if run.get("stop") else (SUCCEEDED if code == 0 else FAILED)
    run.update(state=state, exit_code=code, ended_at=when(ev),
               measured_s=seconds(ev.get("elapsed_s")))


def stop_requested(f: Folding, ev: Event) -> None:
    run = _this_attempt(f, ev)
    if run is None:
        return
    run["stop"] = StopInfo(str(ev.get("rule", "manual")), str(ev.get("reason", "")),
                           ev.get("value"), ev.get("step"), when(ev), seq=ev.get("seq"))
    if run.get("state") in (SUCCEEDED, FAILED):
        run["state"] = STOPPED


def stop_done(f: Folding, ev: Event) -> None:
    run = _this_attempt(f, ev)
    if run is None or run.get("stop") is None:
        return
    old: StopInfo = run["stop"]
    run["stop"] = StopInfo(old.rule, old.reason, old.value, old.step, old.at, True, old.seq)
    run["state"] = STOPPED
    if run.get("ended_at") is None:
        run["ended_at"] = when(ev)


def rule_fired(f: Folding, ev: Event) -> None:
    run_id = ev.get("run")
    if isinstance(run_id, str):
        f.fired.append(FiredRule(run_id, str(ev.get("rule")), str(ev.get("reason", "")),
                                 ev.get("value"), ev.get("threshold"), ev.get("step"),
                                 str(ev.get("action", "stop")), when(ev), ev.get("attempt")))


def verdict(f: Folding, ev: Event) -> None:
    """A later verdict replaces an earlier one: the last one stands (verdicts come only
    from the run's own machine: the ownership table)."""
    run = f.run(ev)
    if run is None:
        return
    rejected = ev.get("kind") == RESULT_REJECTED
    failed = ev.get("failed")
    run.update(verdict="rejected" if rejected else "accepted",
               verdict_reason=ev.get("reason"),
               verdict_override=ev.get("override") is True,
               verdict_failed=tuple(str(x) for x in failed)
               if rejected and isinstance(failed, list) else None)


def checkpoint_verified(f: Folding, ev: Event) -> None:
    """A run's verifications, the newest :data:`VERIFIED_KEPT` (a checkpoint is verified
    once, newest last: what is asked is whether the newest ones reload)."""
    run_id = ev.get("run")
    if isinstance(run_id, str):
        kept = f.verified.setdefault(run_id, [])
        kept.append(ev.copy())
        if len(kept) > 2 * VERIFIED_KEPT:
            del kept[:-VERIFIED_KEPT]


RUN_HANDLERS: Mapping[str, Handler] = {
    RUN_STARTED: run_started,
    RUN_EXITED: run_exited,
    STOP_REQUESTED: stop_requested,
    STOP_DONE: stop_done,
    RULE_FIRED: rule_fired,
    RESULT_ACCEPTED: verdict,
    RESULT_REJECTED: verdict,
    CHECKPOINT_VERIFIED: checkpoint_verified,
}
