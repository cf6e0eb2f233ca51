"""One alert to one target through apprise; the answer in words, never the URL.

apprise is imported here only (its import costs ~0.2 s: the status line and the
one-shot commands never pay it). A level maps to apprise's notify type (the icon and
colour on Slack, Discord…) and, for ntfy, to the message priority.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import quote, urlsplit

from cockpit.alerts.targets import Target

SEND_TIMEOUT_S = 10.0
ID_HEADER = "X-Cockpit-Alert-Id"
HEADER_SCHEMES = frozenset({"json", "jsons", "xml", "xmls", "form", "forms"})
_NTFY_PRIORITY = {"info": "default", "warn": "high", "critical": "max"}


def send(target: Target, title: str, body: str, level: str, alert_id: str = "",
         timeout: float = SEND_TIMEOUT_S) -> str | None:
    """Send; None when the target took it, else why not (in words, without the URL).
    ``alert_id`` (the delivery's stable id, also in the body) goes in an
    ``X-Cockpit-Alert-Id`` header where the service's URL takes one."""
    import apprise  # noqa: PLC0415 - deferred: see the module text

    kind = {"info": apprise.NotifyType.INFO, "warn": apprise.NotifyType.WARNING,
            "critical": apprise.NotifyType.FAILURE}.get(level, apprise.NotifyType.INFO)
    box = apprise.Apprise()
    if not box.add(_with_id(_with_priority(target.url, level), alert_id)):
        return "apprise does not understand this URL"
    errors = _Errors()
    logger = logging.getLogger("apprise")
    logger.addHandler(errors)
    try:
        # The words are plain text: said so, apprise escapes them for an HTML or a
        # Markdown target and keeps the lines (unsaid, an email's four ran together).
        ok = box.notify(body=body, title=title, notify_type=kind,
                        body_format=apprise.NotifyFormat.TEXT, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - a plugin's bug is a failed send, not ours
        return exc.__class__.__name__
    finally:
        logger.removeHandler(errors)
    if ok:
        return None
    return "not delivered" + (f" ({errors.first})" if errors.first else "")


def _with_priority(url: str, level: str) -> str:
    """ntfy URLs get the level's priority unless they name one."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("ntfy", "ntfys") or "priority=" in parts.query:
        return url
    joiner = "&" if parts.query else "?"
    return f"{url}{joiner}priority={_NTFY_PRIORITY.get(level, 'default')}"


def _with_id(url: str, alert_id: str) -> str:
    """apprise's generic webhooks (json://, xml://, form:// and their secure forms) take
    a header from a ``+Name=value`` URL parameter: the id goes there (ntfy, Slack, mail…
    take none: their body carries it)."""
    parts = urlsplit(url)
    if not alert_id or parts.scheme.lower() not in HEADER_SCHEMES or "#" in url:
        return url
    joiner = "&" if parts.query else "?"
    return f"{url}{joiner}+{ID_HEADER}={quote(alert_id, safe='')}"


class _Errors(logging.Handler):
    """Why apprise says a send failed, reduced to what holds no secret (its messages
    may name the host, the topic or the token): an HTTP status or a connection error."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.first: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.first is not None:
            return
        message = record.getMessage()
        status = re.search(r"error=(\d{3})|HTTP Error (\d{3})", message)
        if status:
            self.first = f"HTTP {status.group(1) or status.group(2)}"
        elif "connection" in message.lower() or "timed out" in message.lower():
            self.first = "no connection"
