"""The environment at the first run start, journaled (D19, D22): a later change of the
interpreter or of the installed distributions during the campaign shows as a warning
in the export's verification and its REPORT.md.

The event (``environment_recorded``) holds the compact form of
:func:`cockpit.runs.provenance.compact_environment`: the interpreter, the OS, a few key
versions and one hash of every installed distribution (a few hundred bytes). It is
collected without importing torch or asking NVML, so ``start`` stays fast (~20 ms).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from cockpit.common.event_kinds import ENVIRONMENT_RECORDED
from cockpit.journal.writer import Event, JournalView
from cockpit.runs.provenance import compact_changes, compact_environment


def record_environment(txn: JournalView, now: datetime) -> list[Event]:
    """Journal the environment once, at the first run start (nothing when it is there
    already, or when it cannot be collected: a start is never refused for it)."""
    if txn.has_kind(ENVIRONMENT_RECORDED):
        return []
    try:
        fields = compact_environment()
    except Exception:  # noqa: BLE001 - odd metadata must never stop a launch
        return []
    return [txn.append(ENVIRONMENT_RECORDED, now=now, **fields)]


def recorded_environment(events: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The environment journaled at the first run start (None: not recorded)."""
    for ev in events:
        if ev.get("kind") == ENVIRONMENT_RECORDED:
            return dict(ev)
    return None


def environment_warnings(recorded: Mapping[str, Any] | None,
                         now: Mapping[str, Any]) -> list[str]:
    """The changes since the first run start, as warnings (empty: the same, or unknown)."""
    if recorded is None:
        return []
    return [f"the environment changed since the first run start: {c}"
            for c in compact_changes(recorded, now)]
