"""Durations in words for people (``2d3h``, ``5h12m``, ``14m``, ``40s``).

Standard library only, so that the status line can format without importing the rest
of :mod:`cockpit.common.units` (which re-exports :func:`format_duration`).
"""

from __future__ import annotations


def format_duration(seconds: float, *, signed: bool = False) -> str:
    """Compact human duration: 2d 3h, 5h12m, 14m, 40s."""
    sign = ""
    if seconds < 0:
        sign = "-"
        seconds = -seconds
    elif signed:
        sign = "+"
    s = int(round(seconds))
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        text = f"{days}d{hours}h" if hours else f"{days}d"
    elif hours:
        text = f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    elif minutes:
        text = f"{minutes}m"
    else:
        text = f"{secs}s"
    return sign + text
