"""Which alert targets are failing (issue 26), from the recent journal events (pure).

A target whose newest delivery line is an ``alert_failed`` is failing: the screen and
``cockpit status`` say so, by its label and scheme (never its URL), with the error's
words, since when, and how many alerts to it are unsent. The snapshot's warnings (what
every face shows) carry the lines (:func:`failing_targets`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from cockpit.common.event_kinds import ALERT_FAILED, ALERT_SENT
from cockpit.engine.snapshot import EventLine


@dataclass
class _Delivery:
    failing_since: datetime | None = None  # the first failure after its last success
    error: str = ""
    unsent: set[str] = field(default_factory=set)  # alert keys whose newest line failed


def failing_targets(events: Iterable[EventLine]) -> list[str]:
    """A warning per target whose newest delivery line (of ``events``, oldest first) is
    an ``alert_failed``: ``alerts: phone (ntfy) failing since 03:12 UTC: HTTP 503 (2
    alerts unsent)``. Another machine's lines are its own cockpit's."""
    targets: dict[str, _Delivery] = {}
    for line in events:
        fields = line.fields
        if line.kind not in (ALERT_SENT, ALERT_FAILED) or "machine" in fields:
            continue
        target, key = fields.get("target"), fields.get("alert")
        if not isinstance(target, str):
            continue
        health = targets.setdefault(target, _Delivery())
        if line.kind == ALERT_SENT:
            health.failing_since = None
            health.unsent.discard(str(key))
            continue
        if health.failing_since is None:
            health.failing_since = line.at
        health.error = str(fields.get("error") or "no reason given")
        health.unsent.add(str(key))
    out = []
    for target, health in targets.items():
        if health.failing_since is None:
            continue
        since = health.failing_since.astimezone(timezone.utc)
        count = len(health.unsent)
        out.append(f"alerts: {target} failing since {since:%H:%M} UTC: {health.error} "
                   f"({count} alert{'' if count == 1 else 's'} unsent)")
    return out
