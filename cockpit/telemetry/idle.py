"""Derived alert: the GPUs sit idle while a GPU stage is supposed to be running.

This module owns `IdleDetector`, a pure object: the engine feeds it
(now, utilization, stage_running) every tick and shows the warning it
returns. On a package paid whole, an idle GPU during a stage is money burning
(a hung data loader, a dead rank, a job waiting on input).
"""

from __future__ import annotations

from collections.abc import Iterable

from cockpit.common.durations import format_duration


class IdleDetector:
    """Warns when utilization stays under `threshold_pct` for more than `grace_s`.

    Unknown utilization (None) or no stage running resets the clock: the
    detector only speaks about time it actually saw idle under a stage.
    """

    def __init__(self, threshold_pct: float = 5.0, grace_s: float = 600.0) -> None:
        if grace_s < 0:
            raise ValueError("grace_s must be 0 or more")
        self.threshold_pct = threshold_pct
        self.grace_s = grace_s
        self.idle_since: float | None = None

    def update(self, now: float, util: float | None, stage_running: bool) -> str | None:
        """Feed one observation; returns the warning while the alert holds, else None."""
        if not stage_running or util is None or util >= self.threshold_pct:
            self.idle_since = None
            return None
        if self.idle_since is None or now < self.idle_since:
            self.idle_since = now
        idle_for = now - self.idle_since
        if idle_for <= self.grace_s:
            return None
        return (
            f"GPU idle: utilization under {self.threshold_pct:g}% for "
            f"{format_duration(idle_for)} while a GPU stage runs"
        )

    def update_many(
        self, now: float, utils: Iterable[float | None], stage_running: bool
    ) -> str | None:
        """Same, for several GPUs: idle only when every GPU that reports is idle."""
        known = [u for u in utils if u is not None]
        return self.update(now, max(known) if known else None, stage_running)


