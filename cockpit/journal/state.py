"""The campaign's state as the fold leaves it: frozen values, no I/O.

:class:`CampaignState` holds every stage's and run's state, the fired rules, the
decisions and the costs (:func:`cockpit.journal.fold.fold` builds it from the journal);
the stage and run state names live here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cockpit.common.printable import printable
from cockpit.common.units import Money
from cockpit.journal.fields import Event

# Stage states. "pending" has not started; the engine refines it into ready/blocked.
PENDING, RUNNING, DONE, FAILED, STOPPED, SKIPPED, DROPPED = (
    "pending", "running", "done", "failed", "stopped", "skipped", "dropped")
ENDED = (DONE, SKIPPED, DROPPED)  # a stage after these may go on
# Run states.
NOT_STARTED, SUCCEEDED = "not_started", "succeeded"


@dataclass(frozen=True)
class StageState:
    id: str
    state: str = PENDING
    attempt: int | None = None  # seq of its latest stage_started event
    started_at: datetime | None = None
    ended_at: datetime | None = None
    run: str | None = None
    manual: bool = False
    exit_code: int | None = None
    reason: str | None = None
    notes: tuple[str, ...] = ()  # the newest (fold_records.NOTES_KEPT at least)
    notes_count: int = 0  # every note of the stage, in the journal
    pid: int | None = None
    pgid: int | None = None
    create_time: float | None = None
    exit_file: str | None = None
    marker: str | None = None  # the launch marker in its processes' environment
    # A launch claimed in the journal (the seq of its stage_claimed) whose start is not
    # recorded yet: the stage counts as running until the next tick reconciles it.
    claim: int | None = None
    # Seconds it ran, on the monotonic clock of the cockpit that watched it from start to
    # end (None: not measured so; the wall-clock difference stands in).
    measured_s: float | None = None

    def elapsed_s(self, now: datetime) -> float:
        if self.started_at is None:
            return 0.0
        if self.ended_at is not None and self.measured_s is not None:
            return self.measured_s  # a wall-clock step while it ran does not count
        end = self.ended_at or now
        return max((end - self.started_at).total_seconds(), 0.0)


@dataclass(frozen=True)
class StopInfo:
    rule: str  # a rule id or "manual"
    reason: str
    value: Any = None
    step: int | None = None
    at: datetime | None = None
    done: bool = False
    seq: int | None = None  # the stop_requested event (its grace is measured from it)


@dataclass(frozen=True)
class Attempt:
    """An earlier attempt of a run, restarted since (``start --force``, D15): its time
    stays a cost and its stop a reason, whatever the later attempts did."""

    attempt: int | None
    state: str  # what it ended as: succeeded, failed, stopped (running: no end recorded)
    started_at: datetime | None
    ended_at: datetime | None
    measured_s: float | None
    gpus: tuple[int, ...]
    exit_code: int | None
    stop: StopInfo | None
    stage: str | None = None

    def elapsed_s(self, until: datetime | None) -> float:
        """Seconds it ran: measured, else wall time to its end (or ``until``: an attempt
        superseded without a recorded end held its GPUs at most until the next start)."""
        if self.measured_s is not None and self.ended_at is not None:
            return self.measured_s
        end = self.ended_at or until
        if self.started_at is None or end is None:
            return 0.0
        return max((end - self.started_at).total_seconds(), 0.0)


@dataclass(frozen=True)
class RunState:
    id: str
    stage: str | None = None
    state: str = NOT_STARTED
    attempt: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    pid: int | None = None
    pgid: int | None = None
    create_time: float | None = None
    marker: str | None = None
    params_hash: str | None = None
    gpus: tuple[int, ...] = ()
    exit_code: int | None = None
    exit_file: str | None = None
    stop: StopInfo | None = None
    verdict: str | None = None  # "accepted" | "rejected" | None
    verdict_reason: str | None = None
    verdict_override: bool = False  # accepted although its acceptance checks failed
    # The keys of the acceptance checks a rejection failed ("metric:val/accuracy", ...;
    # :class:`cockpit.close.acceptance.Judgement`); None: unknown (a person's rejection, or a
    # journal from before the keys were kept). The conclusion reads them (D2).
    verdict_failed: tuple[str, ...] | None = None
    verified: tuple[Event, ...] = ()  # checkpoint_verified events, oldest first
    measured_s: float | None = None  # as StageState.measured_s
    earlier: tuple[Attempt, ...] = ()  # the attempts before this one, oldest first (D15)

    def attempts(self) -> tuple[Attempt, ...]:
        """Every attempt, oldest first, this one last (none when it never started)."""
        if self.started_at is None:
            return self.earlier
        return self.earlier + (Attempt(self.attempt, self.state, self.started_at,
                                       self.ended_at, self.measured_s, self.gpus,
                                       self.exit_code, self.stop, self.stage),)


@dataclass(frozen=True)
class FiredRule:
    run: str
    rule: str
    reason: str
    value: Any
    threshold: Any
    step: int | None
    action: str
    at: datetime
    attempt: int | None


@dataclass(frozen=True)
class Decision:
    stage: str
    outcome: str
    drops: tuple[str, ...]
    note: str
    at: datetime


@dataclass(frozen=True)
class CostEntry:
    label: str
    money: Money
    at: datetime


@dataclass(frozen=True)
class Dropped:
    """A journal event not folded: who wrote it, which one, why."""

    machine: int | None  # the peer that wrote it; None: this machine's own journal
    seq: Any
    kind: str
    reason: str
    event: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def message(self) -> str:
        where = "this machine's journal" if self.machine is None \
            else f"machine {self.machine}'s journal"
        return printable(f"{where}, event #{self.seq} ({self.kind}): not folded: "
                         f"{self.reason}")


DROPPED_SHOWN = 10  # dropped events named one by one in the warnings; the rest counted


@dataclass(frozen=True)
class CampaignState:
    stages: Mapping[str, StageState]
    runs: Mapping[str, RunState]
    fired: tuple[FiredRule, ...] = ()
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    pending_decisions: tuple[str, ...] = ()
    revised: bool = False
    costs: tuple[CostEntry, ...] = ()  # the newest (fold_records.COSTS_KEPT at least)
    cost_totals: tuple[Money, ...] = ()  # every cost, one total per currency
    costs_count: int = 0
    plan_hash: str | None = None  # the plan as decided (the first one recorded)
    plan_changed: bool = False  # the file now differs from the plan as decided
    latest_plan_hash: str | None = None  # the newest version the journal holds
    rules_hash: str | None = None
    journal_warnings: tuple[str, ...] = ()
    last_seq: int = 0
    not_folded: tuple[Dropped, ...] = ()  # journal events dropped (see fold_history)
    export: Mapping[str, Any] | None = None  # the newest export_done event (None: none)

    def fired_for(self, run: str, attempt: int | None) -> set[str]:
        return {f.rule for f in self.fired if f.run == run and f.attempt == attempt}

    @property
    def dropped(self) -> set[str]:
        return {s.id for s in self.stages.values() if s.state == DROPPED}
