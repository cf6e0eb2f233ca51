"""The fields a journal event may carry, each with its one type.

A field has the same meaning (and type) in every event kind that carries it, so one
registry (``FIELD_TYPES``) serves all kinds: the table of kinds
(:mod:`cockpit.journal.events`) names each kind's fields and takes their types from here,
and the reader checks every line against it (a line whose fields do not fit is skipped
with a located problem, like a torn line: one bad line never stops ``status``,
``headless`` or ``budget``). A field with no check here (``ANY``) is free-form JSON
that its readers treat as untrusted. ``Event`` is the same vocabulary for mypy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

Check = Callable[[Any], bool]


@dataclass(frozen=True)
class FieldType:
    """How a field's value is checked on read, and what it is, in words."""

    check: Check
    expected: str
    # Exact types that always fit (checked without a call: the read's hot path).
    quick: frozenset[type] = frozenset()

    def fits(self, value: object) -> bool:
        return self.check(value)

    def problem(self, name: str, value: object) -> str | None:
        """What is wrong with a field ``name`` holding ``value``, in words (None: fits)."""
        return None if self.check(value) else \
            f"field {name!r} is {_shown(value)}, not {self.expected}"


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
        parsed = datetime.fromisoformat(value)  # with its "Z" (Python 3.11 on)
    except ValueError:
        if not value.endswith("Z"):
            return False
        try:  # Python 3.10 reads no "Z"
            parsed = datetime.fromisoformat(value[:-1] + "+00:00")
        except ValueError:
            return False
    return parsed.tzinfo is not None


def _optional(check: Check) -> Check:
    return lambda value: value is None or check(value)


def _list_of(check: Check) -> Check:
    return lambda value: isinstance(value, list) and all(check(v) for v in value)


def _bounds(value: Any) -> bool:
    # A rule's bound as it names it: a number, a word ("finite"), or {min|max: number}.
    return value is None or _number(value) or _text(value) or (
        isinstance(value, dict) and all(_number(x) or x is None for x in value.values()))


_STR: frozenset[type] = frozenset({str, type(None)})
_INT: frozenset[type] = frozenset({int, type(None)})
_NUM: frozenset[type] = frozenset({int, float, type(None)})
_JSON: frozenset[type] = frozenset({str, int, float, bool, type(None), list, dict})
ANY = FieldType(lambda _value: True, "any value", _JSON)  # every type JSON reads into
_TEXT = FieldType(_optional(_text), quick=_STR, expected="a text")
_SECONDS = FieldType(_optional(_number), quick=_NUM, expected="a number of seconds")
_SEQ = FieldType(_optional(_int), quick=_INT, expected="a journal seq")
_PID = FieldType(_optional(_int), quick=_INT, expected="a process id")
_HASH = FieldType(_optional(_text), quick=_STR, expected="a hash")

# The checked fields (every other field of a kind is ``ANY``).
FIELD_TYPES: Mapping[str, FieldType] = {
    "seq": FieldType(_int, quick=frozenset({int}), expected="a whole number"),
    "t": FieldType(_time, "a time with a timezone"),
    "kind": FieldType(_text, quick=frozenset({str}), expected="a text"),
    "stage": FieldType(_optional(_text), quick=_STR, expected="a stage id"),
    "run": FieldType(_optional(_text), quick=_STR, expected="a run id"),
    "pid": _PID,
    "pgid": FieldType(_optional(_int), quick=_INT, expected="a process group id"),
    "create_time": _SECONDS,
    "code": FieldType(_optional(_int), quick=_INT, expected="an exit code"),
    "attempt": _SEQ,
    "exit_file": FieldType(_optional(_text), quick=_STR, expected="a path"),
    "claim": _SEQ,
    "marker": FieldType(_optional(_text), quick=_STR, expected="a launch marker"),
    "outcome": _TEXT,
    "drops": FieldType(_optional(_list_of(_text)), "a list of stage ids"),
    "gpus": FieldType(_optional(_list_of(_int)), "a list of GPU indexes"),
    "params_hash": _HASH,
    "sha256": _HASH,
    "rule": FieldType(_optional(_text), quick=_STR, expected="a rule id"),
    "step": FieldType(_optional(_int), quick=_INT, expected="a step number"),
    "threshold": FieldType(_bounds, "a number, a text or a mapping of bounds"),
    "action": _TEXT,
    "label": _TEXT,
    "currency": FieldType(_optional(_text), quick=_STR, expected="a currency code"),
    "amount": FieldType(lambda v: isinstance(v, str) or _number(v), "an amount"),
    "manual": FieldType(_optional(lambda v: isinstance(v, bool)), "true or false"),
    "note": _TEXT,
    "target": FieldType(_optional(_text), quick=_STR, expected="an alert target (label (scheme))"),
    "level": FieldType(_optional(_text), quick=_STR, expected="an alert level"),
    "what": _TEXT,
    "alert": FieldType(_optional(_text), quick=_STR, expected="an alert key"),
    "phase": FieldType(_optional(_text), quick=_STR, expected="a landing step"),
    "fetch": _TEXT,
    "text": _TEXT,
    # Monotonic measures and claim owners (issue 21: time that cannot jump, claims expire).
    "elapsed_s": _SECONDS,
    "owner_pid": _PID,
    "owner_start": _SECONDS,
    "limit_s": _SECONDS,
}


def field_type(name: str) -> FieldType:
    """The type of a field (``ANY`` when it has no check)."""
    return FIELD_TYPES.get(name, ANY)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ``from`` and ``to`` (a clock jump) are Python keywords: named in the functional form.
_Keywords = TypedDict("_Keywords", {"from": Any, "to": Any}, total=False)


class Event(_Keywords, total=False):
    """A journal event as read back (every field optional to a reader: an older journal,
    a hand-edited line). The fields of every kind in the table
    (:data:`cockpit.journal.events.EVENT_KINDS`), plus ``machine``: a peer's copy tags
    its events with the machine that wrote them. Types: as checked on read."""

    seq: int
    t: str
    kind: str
    machine: int
    stage: str | None
    run: str | None
    pid: int | None
    pgid: int | None
    create_time: float | None
    code: int | None
    attempt: int | None
    exit_file: str | None
    claim: int | None
    marker: str | None
    outcome: str | None
    drops: list[str] | None
    gpus: list[int] | None
    params_hash: str | None
    sha256: str | None
    rule: str | None
    step: int | None
    threshold: Any
    action: str | None
    label: str | None
    currency: str | None
    amount: str | float
    manual: bool | None
    note: str | None
    text: str | None
    elapsed_s: float | None
    owner_pid: int | None
    owner_start: float | None
    limit_s: float | None
    target: str | None
    level: str | None
    what: str | None
    alert: str | None
    phase: str | None
    fetch: str | None
    # Fields with no check on read: free-form JSON, untrusted.
    path: Any
    text_z: Any
    python: Any
    implementation: Any
    os: Any
    arch: Any
    distributions: Any
    distributions_sha256: Any
    count: Any
    forced: Any
    auto: Any
    actor: Any
    out: Any
    command: Any
    stdout: Any
    stderr: Any
    warning: Any
    reconciled: Any
    report: Any
    signal: Any
    reason: Any
    value: Any
    key: Any
    metric: Any
    ended: Any
    result: Any
    checks: Any
    override: Any
    failed: Any
    ok: Any
    from_step: Any
    compared: Any
    diverged_step: Any
    title: Any
    body: Any
    covers: Any
    targets: Any
    final: Any
    message: Any
    seconds: Any
    retry: Any
    layout: Any
    missing: Any
    warnings: Any
    error: Any
    load_seconds: Any
    wall_seconds: Any
    summary: Any
    source: Any
    gpu: Any
    event: Any
    root: Any
    size: Any
    tar: Any
    tar_size: Any
    verified: Any
    artifacts: Any
    reload_checked: Any
    failures: Any
    kept_failed: Any
    current: Any
    facts: Any
    settle_s: Any
    hook: Any
    for_seq: Any
    size_bytes: Any
    mtime: Any
    point: Any
    reserve: Any
