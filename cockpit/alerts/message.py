"""What an alert says (pure): the campaign and machine, what happened, what the cockpit
did, what the person can do (the exact command), the time left in the window and the
delivery's stable id (``alert id alert:KEY:LABEL``).

Every field is made printable and bounded (a run's name or a rule's reason is
untrusted text); the words are the same on every target.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from cockpit.common.durations import format_duration
from cockpit.common.printable import printable

FIELD_LIMIT = 300  # characters of one line of an alert (a phone shows a few lines)
# The person's command is kept whole up to this (a fetch command cut short fetches
# nothing; a deep campaign folder makes an rsync line longer than FIELD_LIMIT).
COMMAND_LIMIT = 2000


@dataclass(frozen=True)
class Alert:
    """One alert. ``key`` dedupes it (the journal records each key sent or failed)."""

    key: str
    level: str  # info / warn / critical
    what: str  # what happened
    did: str  # what the cockpit did about it
    todo: str  # what the person can do: the exact command, or "nothing"
    # Its family (rule_fired, decision, gpu…: cockpit.campaign.model.ALERT_KINDS), which
    # the campaign's ``alerts.send`` routes by; empty: every target.
    kind: str = ""
    # How late it goes out, when late (issue 43): "from 11m ago, while no cockpit ran".
    late: str = ""


def title(alert: Alert, campaign: str, machine: int | None) -> str:
    where = f" · machine {machine}" if machine is not None else ""
    return printable(f"cockpit {alert.level}: {campaign}{where}", FIELD_LIMIT)


def body(alert: Alert, window_end: datetime | None, now: datetime, alert_id: str = "") -> str:
    """The lines a phone shows: what happened (and how late it goes out), what was
    done, what to do, time left, and the delivery's stable id (the same in a repeat:
    a receiver can drop the second)."""
    if window_end is None:
        left = "window end unknown"
    elif window_end <= now:
        left = "the rental window has ended"
    else:
        left = f"{format_duration((window_end - now).total_seconds())} left in the window"
    late = printable(f" ({alert.late})", FIELD_LIMIT // 2) if alert.late else ""
    lines = [printable(alert.what, FIELD_LIMIT - len(late)) + late,
             printable(f"done: {alert.did}", FIELD_LIMIT),
             printable(f"you: {alert.todo}", COMMAND_LIMIT), printable(left)]
    if alert_id:
        lines.append(printable(f"alert id {alert_id}", FIELD_LIMIT))
    return "\n".join(lines)


def test_alert(now: datetime) -> Alert:
    """``cockpit alerts FILE --test``: proves a target receives, changes nothing."""
    return Alert(key=f"test:{now.isoformat()}", level="info",
                 what="a test alert from `cockpit alerts --test`",
                 did="nothing (a test)", todo="nothing: this target works")
