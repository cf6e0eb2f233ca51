"""``cockpit alerts FILE``: the alert targets in force (from the alerts file outside the
campaign, and ``--alerts URL``) by label and scheme; with ``--test``, one test alert to
each, and which took it (exit 0 all, 1 when one failed, 2 when there is none)."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import Any

from cockpit.cli.common import EXIT_OK
from cockpit.common.errors import InputError

EXIT_SOME_FAILED = 1


def cmd_alerts(args: argparse.Namespace) -> int:
    from cockpit.alerts import message
    from cockpit.alerts.targets import alerts_path, load_targets
    from cockpit.campaign import load_campaign

    campaign = load_campaign(args.file)
    path = alerts_path()
    targets = load_targets(path, args.alerts or ())
    if not targets:
        raise InputError(f"no alert targets: write {path} (targets: - url: ntfy://ntfy.sh/"
                         "TOPIC) or set COCKPIT_ALERTS, or pass --alerts URL")
    sources = [str(path)] if path.exists() else []
    sources += ["--alerts"] if args.alerts else []
    print(f"alert targets (from {' and '.join(sources)}):")
    for t in targets:
        levels = ", ".join(lv for lv in ("info", "warn", "critical") if t.takes(lv))
        print(f"  {t.shown}: {levels}")
    if not args.test:
        return EXIT_OK
    from cockpit.alerts.deliver import send

    now = datetime.now(timezone.utc)
    alert = message.test_alert(now)
    title = message.title(alert, campaign.id, None)
    body = message.body(alert, campaign.package.end, now)
    failed = 0
    for t in targets:
        why = send(t, title, body, alert.level)
        print(f"{t.shown}: {'sent' if why is None else 'FAILED: ' + why}")
        failed += why is not None
    return EXIT_SOME_FAILED if failed else EXIT_OK


def add_alerts_command(sub: Any) -> None:
    p = sub.add_parser("alerts", help="the alert targets in force; --test sends one test "
                                      "alert to each and says which took it")
    p.add_argument("file", metavar="FILE", help="the campaign file")
    p.add_argument("--test", action="store_true", help="send a test alert to every target")
    p.add_argument("--alerts", action="append", metavar="URL",
                   help="an apprise URL beside the alerts file's targets (repeatable)")
    p.set_defaults(handler=cmd_alerts)
