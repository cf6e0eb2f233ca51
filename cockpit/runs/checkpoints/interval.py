"""Save-interval advice (D18): how often to save, given what one save costs.

This module owns ``interval_advice``, a pure function of the save cost, the current
interval, the tolerable loss of work and the mean time between interruptions, and
``format_duration``, the short spelling its message uses (``2m30s``, ``1h45m``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cockpit.common.durations import format_duration as house_duration


@dataclass(frozen=True)
class Advice:
    overhead: float  # fraction of time spent saving at the current interval
    worst_case_loss_seconds: float  # work lost if interrupted just before a save completes
    optimum_seconds: float  # Young's interval, uncapped
    advised_seconds: float  # optimum capped so the worst-case loss stays tolerable
    advised_overhead: float
    message: str | None  # plain words when current and advised are far apart


def interval_advice(
    save_seconds: float,
    interval_seconds: float,
    tolerable_loss_seconds: float,
    mtbi_seconds: float,
) -> Advice:
    """How often to save (D18): balance the cost of one save against the work at risk.

    Overhead is ``save / interval``; an interruption just before a save completes loses
    ``interval + save``. The optimum interval is Young's first-order approximation
    ``sqrt(2 * save * MTBI)`` (J. W. Young, "A first order approximation to the optimum
    checkpoint interval", CACM 17(9), 1974; refined by J. T. Daly, "A higher order
    estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3), 2006,
    whose correction is negligible while save << MTBI), capped so the worst-case loss
    stays within the tolerable loss. ``mtbi_seconds`` may be ``math.inf`` (no
    interruption expected): then the tolerable loss alone sets the interval.

    A message is given when the current interval and the advised one differ by more
    than a factor 1.5, or when the current worst-case loss exceeds the tolerable loss.
    """
    for name, value in (
        ("save_seconds", save_seconds),
        ("interval_seconds", interval_seconds),
        ("tolerable_loss_seconds", tolerable_loss_seconds),
        ("mtbi_seconds", mtbi_seconds),
    ):
        if not value > 0 or math.isnan(value):
            raise ValueError(f"{name} must be positive, got {value!r}")
    overhead = save_seconds / interval_seconds
    worst = interval_seconds + save_seconds
    optimum = math.sqrt(2.0 * save_seconds * mtbi_seconds)
    cap = max(tolerable_loss_seconds - save_seconds, save_seconds)
    advised = _round_interval(min(optimum, cap))
    advised_overhead = save_seconds / advised
    ratio = max(advised / interval_seconds, interval_seconds / advised)
    message = None
    if ratio > 1.5 or worst > tolerable_loss_seconds:
        message = (
            f"saving every {format_duration(interval_seconds)} costs "
            f"{overhead * 100:.1f} % and risks {format_duration(worst)}; tolerable loss is "
            f"{format_duration(tolerable_loss_seconds)}: every {format_duration(advised)} "
            f"would cost {advised_overhead * 100:.1f} %"
        )
    return Advice(overhead, worst, optimum, advised, advised_overhead, message)


def _round_interval(seconds: float) -> float:
    # Down to whole minutes (whole seconds under 10 minutes): a cap stays a cap.
    if seconds >= 600:
        return float(math.floor(seconds / 60) * 60)
    return float(max(1, math.floor(seconds)))


def format_duration(seconds: float) -> str:
    """The house's durations (:func:`cockpit.common.durations.format_duration`: ``45s``,
    ``30m``, ``1h45m``, ``1d6h``), with the seconds kept under 10 minutes (``2m30s``): a
    save interval's seconds matter; above, whole minutes, rounded."""
    total = int(round(seconds))
    if 60 <= total < 600 and total % 60:
        return f"{total // 60}m{total % 60}s"
    return house_duration(total if total < 600 else round(total / 60) * 60)
