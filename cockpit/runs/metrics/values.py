"""Metric values: the point and batch types, and how a raw value becomes a float.

This module owns ``MetricPoint`` and ``ReadBatch`` (what every reader returns), the
tolerant number parsing (``to_float``: NaN and infinities in any common spelling are
floats, booleans are not metrics) and ``loads_tolerant`` (JSON with bare NaN tokens).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from cockpit.common.safe_json import TooDeep, loads_bounded

Clock = Callable[[], float]


@dataclass(frozen=True)
class MetricPoint:
    """Metric values recorded together; ``t`` is the record's own time (epoch seconds).
    ``masked``: names whose logged value at this step hides a non-finite one (a loss the
    Trainer's NaN filter logged as 0.0 beside a non-finite gradient norm), set by the
    metric stream; they need not be among ``values``."""

    step: int | None
    values: Mapping[str, float]
    t: float | None
    masked: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ReadBatch:
    """What one poll of one reader found."""

    points: list[MetricPoint] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


# NaN as C libraries print it with a payload or a kind: nan(0x1), -nan(ind), nan(snan).
_NAN_WITH_PAYLOAD = re.compile(r"[-+]?nan\([\w.]*\)", re.IGNORECASE)
_INFINITY_SIGN = {"∞": math.inf, "+∞": math.inf, "-∞": -math.inf, "−∞": -math.inf}


def to_float(value: Any) -> float | None:
    """A metric value as float, or None when it is not a number (booleans are not).

    Non-finite values in every spelling seen in logs are values, not garbage: Python's
    and JSON's (nan, inf, Infinity, any case and sign), C's NaN with a payload
    (``nan(0x1)``, ``-nan(ind)``) and the infinity sign (``∞``, ``-∞``). A JSON
    ``null`` is handled by the JSON-lines reader (it counts as NaN there).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            # float() already accepts nan/inf/infinity with any case and sign.
            return float(text)
        except ValueError:
            if _NAN_WITH_PAYLOAD.fullmatch(text):
                return math.nan
            return _INFINITY_SIGN.get(text)
    return None


def to_step(value: Any) -> int | None:
    number = to_float(value)
    if number is None or not math.isfinite(number) or number != int(number):
        return None
    return int(number)


def to_time(value: Any) -> float | None:
    if isinstance(value, str):
        text = value.strip()
        try:
            moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
        except ValueError:
            moment = None
        if moment is not None:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)  # a time without zone: UTC
            return moment.timestamp()
    number = to_float(value)
    return number if number is not None and math.isfinite(number) else None


# A JSON string literal (kept as is) or a bare non-finite token in any spelling.
_NONFINITE_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"|(?<![\w.])([-+]?)(nan|inf(?:inity)?)(?![\w.])', re.IGNORECASE
)


def _json_spelling(match: re.Match[str]) -> str:
    if match.group(2) is None:
        return match.group(0)
    if match.group(2).lower() == "nan":
        return "NaN"
    return "-Infinity" if match.group(1) == "-" else "Infinity"


def loads_tolerant(text: str) -> Any:
    """``json.loads`` that also accepts bare ``nan``, ``inf``, ``-inf``... in any case."""
    try:
        return loads_bounded(text)  # a line of 2,000 brackets is garbage, not a crash
    except TooDeep:
        raise
    except ValueError:
        # Only on failure: the rewrite costs a regex pass and most lines never need it.
        return loads_bounded(_NONFINITE_TOKEN.sub(_json_spelling, text))


def new_point(step: int | None, values: dict[str, float], t: float | None) -> MetricPoint:
    # A plain dict (not a MappingProxyType) so points pickle and deep-copy; treat as read-only.
    return MetricPoint(step, values, t)


def signature(item: MetricPoint | dict[str, Any]) -> str:
    # repr, not ==: NaN must equal NaN when recognising a record already delivered.
    if isinstance(item, MetricPoint):
        return repr((item.step, sorted(item.values.items()), item.t))
    return repr(sorted(item.items(), key=lambda kv: kv[0]))
