"""The campaign file's ``alerts:`` section (issue 26): which kinds of alert go to which
target labels, and how long a decision or a verdict may wait before a person is told::

    alerts:
      pending_after_minutes: 30
      send:
        rule_fired: [phone]
        export: [phone, mail]

A kind not named goes to every target. The labels name targets of the alerts file,
which is each person's own (outside the campaign: its URLs hold tokens), so a label no
configured target has is not an error here; an unknown kind is.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from cockpit.campaign.checker import Checker, kind_of
from cockpit.campaign.model import ALERT_KINDS, AlertsSpec
from cockpit.campaign.yamlread import KeyPath

ALERTS_KEYS = ("pending_after_minutes", "send")
LABEL = re.compile(r"[A-Za-z0-9_.-]{1,40}\Z")  # as a target's label in the alerts file
MAX_PENDING_MINUTES = 7 * 24 * 60  # a week: longer is a typo, not a wish


def read_alerts(check: Checker, value: Any, path: KeyPath) -> AlertsSpec:
    if value is None:
        return AlertsSpec()
    entry = check.mapping(value, path, ALERTS_KEYS, what="alerts")
    if entry is None:
        return AlertsSpec()
    pending_s = AlertsSpec().pending_after_s
    if "pending_after_minutes" in entry:
        where = path + ("pending_after_minutes",)
        minutes = check.positive(entry["pending_after_minutes"], where,
                                 "alerts.pending_after_minutes")
        if minutes is not None and minutes > MAX_PENDING_MINUTES:
            check.err(where, f"alerts.pending_after_minutes {minutes:g} is more than a week "
                             f"({MAX_PENDING_MINUTES})")
        elif minutes is not None:
            pending_s = minutes * 60.0
    return AlertsSpec(pending_after_s=pending_s, send=_send(check, entry.get("send"),
                                                            path + ("send",)))


def _send(check: Checker, value: Any, path: KeyPath) -> dict[str, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        check.err(path, f"alerts.send must be a mapping (alert kind: [labels]), not "
                        f"{kind_of(value)}")
        return {}
    send: dict[str, tuple[str, ...]] = {}
    for kind, labels in value.items():
        where = path + (kind,)
        if not isinstance(kind, str) or kind not in ALERT_KINDS:
            hint = difflib.get_close_matches(str(kind), ALERT_KINDS, n=1)
            extra = f"did you mean {hint[0]!r}? " if hint else ""
            check.err(where, f"unknown alert kind {kind!r} in alerts.send ({extra}the kinds: "
                             f"{', '.join(ALERT_KINDS)})", key=True)
            continue
        items = [labels] if isinstance(labels, str) else labels
        if not isinstance(items, list) or not all(isinstance(i, str) and LABEL.match(i)
                                                  for i in items):
            check.err(where, f"alerts.send.{kind}: a target label or a list of them (1-40 "
                             "letters, digits, '.', '_' or '-'); [] sends it nowhere")
            continue
        send[kind] = tuple(dict.fromkeys(items))
    return send
