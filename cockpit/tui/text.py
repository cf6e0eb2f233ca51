"""Pure text helpers for the panels: bars, sparklines, countdowns, state words.

No Textual here, only strings, so the shapes are easy to test and reuse. The state
vocabulary (symbols and words) comes from the headless face (``render_text``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from cockpit.common.units import format_number
from cockpit.headless.render_text import STATE_MARK

SPARK = "▁▂▃▄▅▆▇█"
FULL, EMPTY = "█", "░"

# ok / warn / fired / blind (never seen): one colour meaning, always with a symbol or word.
LEVEL_MARK = {"ok": "✓", "warn": "!", "fired": "✗", "blind": "◌", "info": "·"}
STAGE_LEVEL = {
    "running": "info", "done": "ok", "failed": "fired", "stopped": "fired",
    "skipped": "info", "dropped": "info", "ready": "ok", "needs-person": "warn",
    "waiting": "info", "blocked": "warn",
}
VERDICT_LEVEL = {"fits": "ok", "tight": "warn", "exceeds": "fired"}


def bar(fraction: float | None, width: int) -> str:
    """A solid bar of ``width`` cells; unknown fractions are drawn as blanks."""
    if width <= 0:
        return ""
    if fraction is None or math.isnan(fraction):
        return "·" * width
    filled = round(min(max(fraction, 0.0), 1.0) * width)
    return FULL * filled + EMPTY * (width - filled)


def sparkline(values: Sequence[float], width: int, lo: float = 0.0, hi: float = 100.0) -> str:
    """The last ``width`` values as block characters, left-padded with blanks."""
    tail = list(values)[-width:] if width > 0 else []
    span = (hi - lo) or 1.0
    out = []
    for v in tail:
        level = int((min(max(v, lo), hi) - lo) / span * (len(SPARK) - 1))
        out.append(SPARK[level])
    return " " * (width - len(out)) + "".join(out)


def countdown(seconds: float) -> str:
    """Days, hours and minutes left: ``2d 05h 13m``; never negative."""
    s = max(int(seconds), 0)
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d {hours:02d}h {minutes:02d}m"
    return f"{hours}h {minutes:02d}m"


def hours_text(seconds: float) -> str:
    hours = abs(seconds) / 3600
    return f"{hours:.1f} h" if hours < 10 else f"{hours:.0f} h"


def stage_state(state: str) -> str:
    """Symbol and word, so the state reads without colour."""
    return f"{STATE_MARK.get(state, ' ')} {state}"


def level_word(level: str, word: str | None = None) -> str:
    return f"{LEVEL_MARK.get(level, ' ')} {word or level}"


def clock(at: datetime | None) -> str:
    return "-" if at is None else f"{at:%m-%d %H:%M}"


def metric(value: object) -> str:
    """A metric value for people (no ``1e+04`` for a count)."""
    return format_number(value)


def scaled_sparkline(values: Sequence[float], width: int) -> str:
    """A sparkline of ``values`` scaled to their own finite min..max (a loss curve)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return " " * width
    lo, hi = min(finite), max(finite)
    if hi == lo:
        hi = lo + 1.0
    return sparkline([v if math.isfinite(v) else hi for v in values], width, lo, hi)
