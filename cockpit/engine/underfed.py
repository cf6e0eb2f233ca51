"""The ``underfed`` rules' bookkeeping: for each running run of this machine and each
underfed rule on it, since when every GPU of the run has been under the rule's
utilization (a :class:`~cockpit.runs.rules.Streak`, on the monotonic clock), or why the
rule cannot see (blind: no telemetry, a GPU lost, a utilization not read). It is
updated at each GPU sample; the guards decide with
:func:`~cockpit.runs.rules.check_underfed`.

The GPUs watched are the run's own (``RunState.gpus``, journaled at its start: the
stage's ``resource: gpu``, every GPU of the machine when it names no index). A run
whose stage holds no GPU is not watched by a rule for every run; a rule that names it
in ``runs:`` is blind on it (nothing to watch is not ok).

After a cockpit restart the streak is rebuilt from the flight recorder (read once per
run attempt, the last ``for`` of the run's GPUs): the recorded seconds count, as long
as the recording reaches to within :data:`~cockpit.runs.rules.STREAK_GAP_S` of now and
has no gap longer than that (a cockpit down longer saw nothing: the streak starts
again). No recording, or an unreadable one: the streak starts again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cockpit.campaign.model import Campaign, StopRule
from cockpit.engine.scope import Scope
from cockpit.engine.timebase import Timebase
from cockpit.journal.fold import RUNNING, CampaignState, RunState
from cockpit.runs.blind import gpus_blind
from cockpit.runs.rules import STREAK_GAP_S, Streak, extend_streak
from cockpit.telemetry import GpuReading
from cockpit.telemetry.flight import RecordingReader, RecordingUnreadable, gpu_series


@dataclass(frozen=True)
class UnderfedSeen:
    """One underfed rule on one running run, as of the last GPU sample."""

    gpus: tuple[int, ...]
    utils: tuple[float | None, ...]  # each GPU's utilization at that sample
    streak: Streak | None  # every GPU under the rule's utilization since ... (None: not)
    blind: str | None  # why the rule cannot see (then no streak)
    blind_since: float | None = None  # monotonic: since when it is blind without a break
    blind_s: float = 0.0  # how long it has been blind, as of that sample


def underfed_rules(campaign: Campaign, run_id: str, gpus: Sequence[int]) -> list[StopRule]:
    """The underfed rules that watch this run: those for every run only when its stage
    holds a GPU; one that names it, always (blind when there is nothing to watch)."""
    return [r for r in campaign.stop_rules if r.kind == "underfed" and r.applies_to(run_id)
            and (gpus or r.runs)]


class UnderfedWatch:
    """The streaks and blind states of this machine's running runs (see the module)."""

    def __init__(self, scope: Scope, timebase: Timebase, recording: Path | None) -> None:
        self.scope = scope
        self.campaign = scope.campaign
        self.time = timebase
        self.recording = recording
        self._attempt: dict[str, Any] = {}
        self._seen: dict[str, dict[str, UnderfedSeen]] = {}

    def looks(self) -> Mapping[str, Mapping[str, UnderfedSeen]]:
        """run -> rule -> what the rule saw at the last sample (running runs only)."""
        return self._seen

    def update(self, state: CampaignState, reading: GpuReading, now: datetime) -> None:
        """One GPU sample: each running run's streaks extended, broken or rebuilt."""
        mono = self.time.mono()
        seen: dict[str, dict[str, UnderfedSeen]] = {}
        for run in state.runs.values():
            if run.state != RUNNING or not self.scope.mine_run(run.id):
                continue
            rules = underfed_rules(self.campaign, run.id, run.gpus)
            if not rules:
                continue
            if self._attempt.get(run.id) == run.attempt:
                before = self._seen.get(run.id, {})
            else:  # a new attempt, or the first look since this cockpit started
                self._attempt[run.id] = run.attempt
                before = self._rebuilt(run, rules, now, mono)
            seen[run.id] = {rule.id: self._one(rule, run, reading, before.get(rule.id), mono)
                            for rule in rules}
        self._seen = seen
        for run_id in set(self._attempt) - set(seen):
            del self._attempt[run_id]  # ended: a later start is a new attempt anyway

    @staticmethod
    def _one(rule: StopRule, run: RunState, reading: GpuReading, before: UnderfedSeen | None,
             mono: float) -> UnderfedSeen:
        by_index = {g.index: g for g in reading.gpus}
        utils = tuple(None if (g := by_index.get(i)) is None or g.lost else g.util
                      for i in run.gpus)
        blind = gpus_blind(run.gpus, reading)
        if blind is not None:
            since = before.blind_since if before is not None and before.blind_since is not None \
                else mono
            return UnderfedSeen(run.gpus, utils, None, blind, since, mono - since)
        streak = extend_streak(before.streak if before is not None else None, utils,
                               rule.util_below or 0.0, mono)
        return UnderfedSeen(run.gpus, utils, streak, None)

    def _rebuilt(self, run: RunState, rules: list[StopRule], now: datetime,
                 mono: float) -> dict[str, UnderfedSeen]:
        """The streaks as the flight recorder saw them before this cockpit started."""
        if self.recording is None or not run.gpus or run.started_at is None:
            return {}
        now_ts = now.timestamp()
        longest = max(r.for_s or 0.0 for r in rules)
        t0 = max(now_ts - longest - STREAK_GAP_S, run.started_at.timestamp())
        try:
            with RecordingReader.open(self.recording) as reader:
                per_gpu = [{p.t: p.hi for p in reader.series(gpu_series(i, "util"), t0, now_ts)}
                           for i in run.gpus]
        except RecordingUnreadable:
            return {}
        out: dict[str, UnderfedSeen] = {}
        for rule in rules:
            streak = recorded_streak(per_gpu, rule.util_below or 0.0, now_ts)
            if streak is not None:  # wall seconds of the recording -> this monotonic clock
                streak = Streak(mono - (now_ts - streak.since), mono - (now_ts - streak.last),
                                streak.peak)
                out[rule.id] = UnderfedSeen(run.gpus, (), streak, None)
        return out


def recorded_streak(per_gpu: Sequence[Mapping[float, float]], below: float,
                    now_ts: float) -> Streak | None:
    """The streak that ends a recording (wall seconds): the seconds where every GPU has a
    reading (``hi``: a minute's highest) under ``below``, back from the newest, with no gap
    over STREAK_GAP_S between them nor between the newest and ``now_ts``."""
    if not per_gpu:
        return None
    times = sorted(set.intersection(*(set(g) for g in per_gpu)), reverse=True)
    if not times or now_ts - times[0] > STREAK_GAP_S:
        return None
    since: float | None = None
    peak = 0.0
    for t in times:
        values = [g[t] for g in per_gpu]
        if not all(v < below for v in values) or (since is not None
                                                   and since - t > STREAK_GAP_S):
            break
        since, peak = t, max(peak, *values)
    return None if since is None else Streak(since, times[0], peak)
