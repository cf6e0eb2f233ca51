"""The fold of a stage's events: its claim, start, finish, skip or drop.

A stage's start also starts its run when it carries a pid: a cockpit killed between the
two appends (``stage_started``, then ``run_started``) must not leave a live run unseen.
"""

from __future__ import annotations

from collections.abc import Mapping

from cockpit.common.event_kinds import (
    CLAIM_EXPIRED,
    STAGE_CLAIMED,
    STAGE_DROPPED,
    STAGE_FINISHED,
    STAGE_SKIPPED,
    STAGE_STARTED,
)
from cockpit.journal.fields import Event
from cockpit.journal.fold_draft import Folding, Handler, seconds, when
from cockpit.journal.fold_runs import keep_attempt
from cockpit.journal.state import DONE, DROPPED, RUNNING, SKIPPED


def stage_claimed(f: Folding, ev: Event) -> None:
    """The intent to launch, journaled before the launch (claim before you act). What
    the stage was before is kept: a claim that expired without a launch gives it back."""
    stage = f.stage(ev)
    if stage is None:
        return
    stage["before_claim"] = {k: v for k, v in stage.items() if k != "before_claim"}
    stage.update(state=RUNNING, claim=ev.get("seq"), attempt=None,
                 started_at=when(ev), ended_at=None, manual=False, exit_code=None,
                 reason=None, pid=None, pgid=None, create_time=None, exit_file=None,
                 marker=ev.get("marker"), measured_s=None)


def claim_expired(f: Folding, ev: Event) -> None:
    stage = f.stage(ev)
    if stage is not None and ev.get("claim") is not None \
            and stage.get("claim") == ev.get("claim") and "before_claim" in stage:
        before = stage.pop("before_claim")
        stage.clear()
        stage.update(before)


def stage_started(f: Folding, ev: Event) -> None:
    stage = f.stage(ev)
    if stage is None:
        return
    stage.update(state=RUNNING, attempt=ev.get("seq"), started_at=when(ev), ended_at=None,
                 measured_s=None, manual=bool(ev.get("manual")), exit_code=None, reason=None,
                 pid=ev.get("pid"), pgid=ev.get("pgid"), create_time=ev.get("create_time"),
                 exit_file=ev.get("exit_file"), marker=ev.get("marker"), claim=None)
    run = f.run(ev)
    if run is not None and ev.get("pid") is not None:
        keep_attempt(run, ev.get("seq"))
        run.update(stage=ev.get("stage"), state=RUNNING, attempt=ev.get("seq"),
                   started_at=when(ev), ended_at=None, pid=ev.get("pid"),
                   pgid=ev.get("pgid"), create_time=ev.get("create_time"),
                   marker=ev.get("marker"), gpus=tuple(ev.get("gpus") or ()),
                   exit_code=None, exit_file=ev.get("exit_file"), stop=None,
                   measured_s=None, verdict=None, verdict_reason=None, verdict_failed=None)


def stage_finished(f: Folding, ev: Event) -> None:
    stage = f.stage(ev)
    if stage is None:
        return
    stage.update(state=ev.get("outcome", DONE), ended_at=when(ev),
                 exit_code=ev.get("code"), reason=ev.get("reason"), claim=None,
                 measured_s=seconds(ev.get("elapsed_s")))
    stage.setdefault("started_at", when(ev))


def stage_skipped(f: Folding, ev: Event) -> None:
    stage = f.stage(ev)
    if stage is not None:
        stage.update(state=SKIPPED, ended_at=when(ev),
                     reason=ev.get("note") or ev.get("reason"))


def stage_dropped(f: Folding, ev: Event) -> None:
    stage = f.stage(ev)
    if stage is not None:
        stage.update(state=DROPPED, ended_at=when(ev),
                     reason=ev.get("note") or ev.get("reason"))


STAGE_HANDLERS: Mapping[str, Handler] = {
    STAGE_CLAIMED: stage_claimed,
    CLAIM_EXPIRED: claim_expired,
    STAGE_STARTED: stage_started,
    STAGE_FINISHED: stage_finished,
    STAGE_SKIPPED: stage_skipped,
    STAGE_DROPPED: stage_dropped,
}
