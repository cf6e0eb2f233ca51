"""The engine's time: the injected clock, the watch over wall-clock jumps, and the
monotonic age of each own journal event.

Ages (a stop's grace, the ``restart`` window, a claim's time limit, a hook's age) are
measured on the monotonic clock from when this engine first read the event, never on
the wall clock: a wall-clock step neither hastens nor delays them. Only a clock that
pairs the two can be watched for jumps; a bare ``() -> datetime`` (tests, older
callers) is its own monotonic clock. :class:`Timebase` reads no journal: the history
feeds it each event as it is first read (:meth:`Timebase.saw`).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cockpit.common.event_kinds import RUN_STARTED, STAGE_CLAIMED, STAGE_STARTED, STOP_REQUESTED
from cockpit.engine.clockwatch import ClockJump, ClockWatch
from cockpit.engine.ports import Clock
from cockpit.journal.log import parse_time
from cockpit.runs.supervisor import alive as process_alive


def own_identity() -> tuple[int, float]:
    """This process as a claim's owner: its pid and its start time (a reused pid differs)."""
    import psutil

    try:
        return os.getpid(), psutil.Process().create_time()
    except psutil.Error:  # pragma: no cover - the own process is always readable
        return os.getpid(), 0.0


def parse_t(event: Mapping[str, Any]) -> datetime:
    """An event's time stamp."""
    return parse_time(str(event.get("t")))


# Events whose age is asked as long as they matter (a launch's claim and start, a stop
# request): their monotonic time is kept for the engine's life. Any other event's only
# while it is among the newest RECENT_TIMES (verifications, hooks ask about new ones).
DURABLE_KINDS = frozenset({STAGE_CLAIMED, STAGE_STARTED, RUN_STARTED, STOP_REQUESTED})
RECENT_TIMES = 4096


class Timebase:
    """Wall time anchored to monotonic time, and the monotonic time of own events."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.paired: bool = getattr(clock, "wall_is_paired", True)
        self.watch = ClockWatch()
        self.owner = own_identity()
        # seq -> monotonic time: when written, for events that appeared while this engine
        # watched; for older ones, their wall age when first read.
        self._mono_at: dict[int, float] = {}  # the kinds whose age matters for long
        self._mono_recent: OrderedDict[int, float] = OrderedDict()  # the rest, newest
        self._history_read: tuple[float, datetime] | None = None  # (mono, steady) then
        # Events up to here are history (set by the engine's open): a face announces only
        # what happens after, and only later events have a measured duration.
        self.opened_seq = 0

    def mono(self) -> float:
        """Monotonic seconds (a wall-only clock: its own wall time, which is all it has)."""
        return self.clock.monotonic() if self.paired else self.clock.now().timestamp()

    def steady_now(self) -> datetime:
        """The time to act on: the wall clock, or the steady time while a jump holds."""
        wall = self.clock.now()
        return self.watch.now(wall, self.mono()) if self.paired else wall

    def read_clock(self) -> tuple[datetime, ClockJump | None]:
        """One tick's reading: the time to act on, and a clock jump seen since the last."""
        wall = self.clock.now()
        if not self.paired:
            return wall, None
        mono = self.clock.monotonic()
        jump = self.watch.observe(wall, mono)
        return self.watch.now(wall, mono), jump

    def holding(self) -> bool:
        """Whether time-based actions wait for the clock to settle after a jump."""
        return self.paired and self.watch.holding(self.clock.monotonic())

    def hold_warning(self) -> tuple[str, ...]:
        """What a face says while the clock settles."""
        if not self.holding():
            return ()
        left = self.watch.hold_left(self.clock.monotonic())
        return (f"the wall clock jumped: rules on ages, the deadline guard and auto-start "
                f"wait until it has been steady for {left:.0f} s more",)

    def saw(self, event: Mapping[str, Any], mono: float, steady: datetime) -> None:
        """An own event read for the first time: when it happened, on the monotonic clock."""
        seq = int(event.get("seq", 0))
        if seq <= self.opened_seq:
            self.read_history(mono, steady)
        elif event.get("kind") in DURABLE_KINDS:
            self._mono_at.setdefault(seq, mono)
        else:  # asked about only while new (a hook, a claim): the newest few are kept
            self._mono_recent.setdefault(seq, mono)
            if len(self._mono_recent) > RECENT_TIMES:
                self._mono_recent.popitem(last=False)

    def read_history(self, mono: float, steady: datetime) -> None:
        """The engine reads the history journaled before it opened: an event of it is
        not stored (a million of them), its age is its wall age as of now (:meth:`age_s`)."""
        if self._history_read is None:
            self._history_read = (mono, steady)

    def age_s(self, seq: Any, t: datetime | None, now: datetime) -> float:
        """Seconds since an own journal event, on the monotonic clock (the wall clock's
        ``now - t`` only for an event this engine has not read yet)."""
        at = self._mono_at.get(seq, self._mono_recent.get(seq)) if isinstance(seq, int) \
            else None
        if at is None and self._history_read is not None and t is not None \
                and isinstance(seq, int) and 0 < seq <= self.opened_seq:
            mono, steady = self._history_read
            at = mono - max(0.0, (steady - t).total_seconds())
        if at is not None:
            return self.mono() - at
        return (now - t).total_seconds() if t is not None else 0.0

    def live(self, seq: Any) -> bool:
        """Whether an own event appeared while this engine watched (its time is monotonic)."""
        return isinstance(seq, int) and seq > self.opened_seq and (
            seq in self._mono_at or seq in self._mono_recent)

    def watched_s(self, seq: Any) -> float | None:
        """Monotonic seconds since an own event this engine saw appear (None: not seen)."""
        if not self.live(seq):
            return None
        return round(self.mono() - self._mono_at.get(seq, self._mono_recent.get(seq, 0.0)), 3)

    def owner_alive(self, event: Mapping[str, Any], ours: bool = False) -> bool:
        """Whether the process that wrote a claim still lives (pid and start time). A claim
        of this very process counts as ``ours`` (what this engine still does, it knows
        without the journal)."""
        pid, start = event.get("owner_pid"), event.get("owner_start")
        if not isinstance(pid, int) or isinstance(pid, bool):
            return True  # an older claim without an owner: only its time limit ends it
        if (pid, start) == self.owner:
            return ours
        return process_alive(pid, float(start) if isinstance(start, (int, float)) else None)
