"""``cockpit prometheus --dashboard | --rules | --metrics``: what a team's monitoring
needs to watch many cockpits (the Grafana dashboard, the alert rules, the metric table),
printed from the package. It reads only and needs no campaign."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cockpit.cli.common import EXIT_OK


def cmd_prometheus(args: argparse.Namespace) -> int:
    from cockpit.headless.prom_assets import alert_rules_yaml, dashboard_json, metrics_table

    text = {"dashboard": dashboard_json, "rules": alert_rules_yaml,
            "metrics": metrics_table}[args.what]()
    sys.stdout.write(text)
    return EXIT_OK


def add_prometheus_command(sub: Any) -> None:
    p = sub.add_parser("prometheus", help="the Grafana dashboard, the Prometheus alert rules "
                                          "or the metric table, for many cockpits")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--dashboard", dest="what", action="store_const", const="dashboard",
                      help="the Grafana dashboard (JSON: import it as is)")
    what.add_argument("--rules", dest="what", action="store_const", const="rules",
                      help="the alert rules (YAML, a Prometheus rule file)")
    what.add_argument("--metrics", dest="what", action="store_const", const="metrics",
                      help="every metric, its labels and meaning (a Markdown table)")
    p.set_defaults(handler=cmd_prometheus)
