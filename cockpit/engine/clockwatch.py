"""The engine's watch over the wall clock: clock jumps, the settle hold, steady time.

The wall clock (``Clock.now``) can step — an NTP correction, a VM resumed, a person
setting the date — while the monotonic clock (``Clock.monotonic``) only moves
forward at the pace of real time. Each tick anchors the two: between two ticks the
wall clock should move as far as the monotonic one. When it moves more than
:data:`JUMP_THRESHOLD_S` further (or back), the wall clock *jumped*:

- the jump is reported once (from, to) and the engine journals it as ``clock_jump``;
- the engine keeps a *steady* time (the last trusted wall time plus the monotonic time
  since) and uses it instead of the jumped wall time while it holds;
- time-based actions (rules on ages, the deadline guard, auto-start) hold until the
  clock has been steady for :data:`SETTLE_S`; a wall clock still off after that is
  believed (the step was real) and becomes the new anchor.

Pure bookkeeping: no clock of its own, no journal; the engine feeds it readings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# Ticks run every 0.5–2 s: between two of them the wall and the monotonic clock differ by
# microseconds (an NTP slew is at most 0.5 ms per second). A difference of 5 s is a few
# tick intervals and can only be a step, yet small enough that a step of a few minutes is
# never taken for real time passing.
JUMP_THRESHOLD_S = 5.0
# How long the clock must read steadily (no further jump) before time-based actions act
# again: a step and its correction (a VM that resumes, then syncs) come within seconds of
# each other; 30 s delays no decision that matters on a campaign measured in hours.
SETTLE_S = 30.0


@dataclass(frozen=True)
class ClockJump:
    """One wall-clock step: where the wall clock should have been, and where it was."""

    expected: datetime  # the previous wall reading moved by the monotonic time since
    actual: datetime  # what the wall clock reads now

    @property
    def seconds(self) -> float:
        """Positive: the clock stepped forward; negative: back."""
        return (self.actual - self.expected).total_seconds()


class ClockWatch:
    """Anchors wall time to monotonic time, tick after tick (see the module text)."""

    def __init__(self, threshold_s: float = JUMP_THRESHOLD_S,
                 settle_s: float = SETTLE_S) -> None:
        self.threshold_s = threshold_s
        self.settle_s = settle_s
        self._last: tuple[datetime, float] | None = None  # the previous reading (wall, mono)
        self._anchor: tuple[datetime, float] | None = None  # (steady time, mono) it was at
        self._last_jump_mono: float | None = None

    def observe(self, wall: datetime, mono: float) -> ClockJump | None:
        """Take one reading; a jump when the wall clock moved unlike the monotonic one
        since the previous reading (each step is reported once, however long it lasts)."""
        if self._last is None or self._anchor is None:
            self._last = self._anchor = (wall, mono)
            return None
        last_wall, last_mono = self._last
        moved = (wall - last_wall).total_seconds() - (mono - last_mono)
        jump = None
        if abs(moved) > self.threshold_s:
            jump = ClockJump(last_wall + timedelta(seconds=mono - last_mono), wall)
            self._last_jump_mono = mono
        self._last = (wall, mono)
        # While holding, steady time goes on from its anchor at the monotonic pace; once
        # settled, the wall clock is believed again (a step that stayed was real).
        self._anchor = (self.steady(mono), mono) if self.holding(mono) else (wall, mono)
        return jump

    def steady(self, mono: float) -> datetime:
        """The steady time now: the last anchor moved by the monotonic time since."""
        assert self._anchor is not None
        wall, at = self._anchor
        return wall + timedelta(seconds=mono - at)

    def holding(self, mono: float) -> bool:
        """Whether time-based actions wait: a jump less than ``settle_s`` ago."""
        return self._last_jump_mono is not None and mono - self._last_jump_mono < self.settle_s

    def hold_left(self, mono: float) -> float:
        """Seconds until the clock counts as settled (0 when not holding)."""
        if not self.holding(mono):
            return 0.0
        assert self._last_jump_mono is not None
        return self.settle_s - (mono - self._last_jump_mono)

    def now(self, wall: datetime, mono: float) -> datetime:
        """The time the engine acts on: the steady time while holding, else the wall."""
        if self._anchor is None or not self.holding(mono):
            return wall
        return self.steady(mono)
