"""The exits of this machine's supervised stages: a stage whose wrapper is gone is
journaled as ended (``run_exited``, ``stop_done`` for a requested stop, and
``stage_finished`` with its outcome), once, under the journal lock.

A wrapper killed -9 while its training lives on in its process group is not an exit:
the run counts as running while its group does (a warning says so once). A run
watched from its start to its exit has its duration journaled from the monotonic
clock (``elapsed_s``). A failure is explained once, here (the exit in words and the
last line of its stderr, or a full disk), so every face and REPORT.md say the same.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cockpit.common.event_kinds import RUN_EXITED, STAGE_FINISHED, STOP_DONE, WARNING
from cockpit.engine.history import History
from cockpit.engine.ports import Supervisor
from cockpit.engine.scope import Scope
from cockpit.journal.fold import DONE, FAILED, RUNNING, STOPPED, CampaignState, StageState
from cockpit.runs.exit_reason import failure_reason
from cockpit.runs.supervisor import no_space_note


class ExitRecorder:
    """Journals the exits of this machine's stages (see the module text)."""

    def __init__(self, scope: Scope, history: History, supervisor: Supervisor) -> None:
        self.scope = scope
        self.history = history
        self.supervisor = supervisor

    def record(self, state: CampaignState, now: datetime) -> None:
        """A supervised stage whose wrapper is gone: run_exited (+ stop_done), stage_finished."""
        for st in state.stages.values():
            if st.state != RUNNING or st.manual or not st.pid or not self.scope.mine(st.id):
                continue
            if self.supervisor.alive(st.pid, st.create_time):
                continue
            if st.marker and self.supervisor.group_alive(st.pgid, st.marker):
                self._orphaned(st, now)
                continue
            self._ended(st, self.supervisor.read_exit(st.exit_file) or {}, now)

    def _orphaned(self, st: StageState, now: datetime) -> None:
        # The wrapper is gone (kill -9) but the training lives on in its group: the run is
        # alive while its group is. Rules keep firing, stop ends the group, a restart is
        # refused; the exit is recorded when the group is gone.
        self.history.journal_once(
            WARNING, f"orphan:{st.id}:{st.attempt}", now, source="supervisor",
            stage=st.id, run=st.run,
            message=f"stage {st.id}: its wrapper (pid {st.pid}) is gone but its process "
                    f"group {st.pgid} lives on; it counts as running until the group ends "
                    "(`cockpit stop` ends it)")

    def _ended(self, st: StageState, info: dict[str, Any], now: datetime) -> None:
        code = info.get("code")
        # Watched from its start: its duration on the monotonic clock, not the wall's.
        measured = self.history.time.watched_s(st.attempt) if st.attempt is not None else None
        elapsed = {} if measured is None else {"elapsed_s": measured}
        with self.history.journal.transaction() as txn:
            folded = self.history.fold_locked(now)
            current = folded.stages[st.id]
            if current.state != RUNNING or current.attempt != st.attempt:
                return  # another cockpit recorded it first
            run = folded.runs.get(current.run) if current.run else None
            stopped = bool(run and run.stop is not None and run.attempt == st.attempt)
            outcome = STOPPED if stopped else (DONE if code == 0 else FAILED)
            reason = failed_reason(st, info) if outcome == FAILED else None
            if current.run:
                txn.append(RUN_EXITED, now=now, run=current.run, stage=st.id, code=code,
                           attempt=st.attempt, signal=info.get("signal"), **elapsed)
                if stopped and run and run.stop is not None and not run.stop.done:
                    txn.append(STOP_DONE, now=now, run=current.run, stage=st.id,
                               attempt=st.attempt, rule=run.stop.rule)
            txn.append(STAGE_FINISHED, now=now, stage=st.id, outcome=outcome, code=code,
                       reason=reason, **elapsed)


def failed_reason(st: StageState, info: dict[str, Any]) -> str:
    """A failed stage's exit in words: its code or signal and the last line of its
    stderr, or why there is no exit code (killed, a full disk)."""
    code = info.get("code")
    reason = (failure_reason(code, info.get("signal"), st.exit_file)
              or "process vanished without an exit code (killed?)")
    if code is None and st.marker and not info:
        reason = ("its wrapper and every process of its group are gone, "
                  "without an exit code (killed?)")
    full = no_space_note(st.exit_file) if code is None else None
    if full:  # not a mystery: the disk is full
        reason = f"ended without an exit code: {full}"
    return reason
