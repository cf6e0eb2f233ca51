"""The types of journal event fields, checked on every line read.

A field has the same meaning (and type) in every event kind that carries it, so one
table serves all kinds. A line whose fields do not fit is skipped with a located
warning, like a torn line: one bad line never stops ``status``, ``headless`` or
``budget``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

Check = Callable[[Any], bool]


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _time(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parsed = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        return False
    return parsed.tzinfo is not None


def _optional(check: Check) -> Check:
    return lambda value: value is None or check(value)


def _list_of(check: Check) -> Check:
    return lambda value: isinstance(value, list) and all(check(v) for v in value)


FIELD_CHECKS: Mapping[str, tuple[Check, str]] = {
    "seq": (_int, "a whole number"),
    "t": (_time, "a time with a timezone"),
    "kind": (_text, "a text"),
    "stage": (_optional(_text), "a stage id"),
    "run": (_optional(_text), "a run id"),
    "pid": (_optional(_int), "a process id"),
    "pgid": (_optional(_int), "a process group id"),
    "create_time": (_optional(_number), "a number of seconds"),
    "code": (_optional(_int), "an exit code"),
    "attempt": (_optional(_int), "a journal seq"),
    "exit_file": (_optional(_text), "a path"),
    "claim": (_optional(_int), "a journal seq"),
    "marker": (_optional(_text), "a launch marker"),
    "outcome": (_optional(_text), "a text"),
    "drops": (_optional(_list_of(_text)), "a list of stage ids"),
    "gpus": (_optional(_list_of(_int)), "a list of GPU indexes"),
    "params_hash": (_optional(_text), "a hash"),
    "sha256": (_optional(_text), "a hash"),
    "rule": (_optional(_text), "a rule id"),
    "step": (_optional(_int), "a step number"),
    # A rule's bound as it names it: a number, a word ("finite"), or {min|max: number}.
    "threshold": (lambda v: v is None or _number(v) or _text(v) or (
        isinstance(v, dict) and all(_number(x) or x is None for x in v.values())),
        "a number, a text or a mapping of bounds"),
    "action": (_optional(_text), "a text"),
    "label": (_optional(_text), "a text"),
    "currency": (_optional(_text), "a currency code"),
    "amount": (lambda v: isinstance(v, str) or _number(v), "an amount"),
    "manual": (_optional(lambda v: isinstance(v, bool)), "true or false"),
    "note": (_optional(_text), "a text"),
    "text": (_optional(_text), "a text"),
    # Monotonic measures and claim owners (issue 21: time that cannot jump, claims expire).
    "elapsed_s": (_optional(_number), "a number of seconds"),
    "owner_pid": (_optional(_int), "a process id"),
    "owner_start": (_optional(_number), "a number of seconds"),
    "limit_s": (_optional(_number), "a number of seconds"),
}


def event_problem(event: Mapping[str, Any]) -> str | None:
    """What is wrong with an event's fields, in words (None: it fits)."""
    for name, (check, expected) in FIELD_CHECKS.items():
        if name in event and not check(event[name]):
            return f"field {name!r} is {_shown(event[name])}, not {expected}"
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
