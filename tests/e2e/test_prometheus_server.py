"""Many cockpits in a real Prometheus: three headless cockpits of a real campaign (two
scraped through `headless --prom-port`, one through node_exporter's textfile collector),
a real Prometheus server scraping them with the shipped alert rules, and the shipped
dashboard's own queries asked of its HTTP API.

What must hold: every dashboard query is valid PromQL and answers for the three
campaigns; the window left agrees with `status --json` once each is placed at the time
it was taken; a stop rule that fires in a campaign is in Prometheus within two scrape
intervals and fires the shipped `CockpitRuleFired` alert; the accepted results and the
cost per accepted result equal `cockpit budget`'s. Every process the test starts is
ended by its pid.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cockpit.headless.prom_assets import PANELS, SEL, alert_rules_yaml, since_last_tick
from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import end, run_cockpit, wait_for
from tests.helpers.prometheus import PROMTOOL, Prometheus, missing, node_exporter

pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")

SCRAPE_S = 2.0
TICK_S = 0.2
# Panels whose series may not exist in a campaign of a few seconds on one machine: no
# run saves a checkpoint here, the hours bought are summed once a minute, and there is no
# peer machine to be unreachable.
MAY_BE_EMPTY = {"Checkpoint age", "GPU-hours idle of held", "Peer machines not answering"}


def campaign(folder: Path, name: str) -> Path:
    """A control that succeeds (to be accepted), then a variant whose loss turns NaN
    after its fifth second: the finite-loss rule stops it."""
    return write_campaign(folder, [
        {"id": "control", "hours": 1, "resource": "gpu", "run": "r-control",
         "command": step_command(steps=30, sleep=0.1)},
        {"id": "variant", "hours": 1, "resource": "gpu", "run": "r-variant",
         "after": ["control"], "command": step_command(steps=400, sleep=0.1, nan_at=50)},
    ], rules=[FINITE], extra={"campaign": name})


def headless(path: Path, *outputs: str) -> subprocess.Popen[bytes]:
    """A headless cockpit, its output in files beside its campaign (never a pipe
    nobody reads: a full pipe would stop its ticks)."""
    with (path.parent / "headless.out").open("wb") as out, \
            (path.parent / "headless.err").open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "cockpit", "headless", str(path), "--auto", "--interval",
             f"{TICK_S:g}", "--simulate-gpus", "1", *outputs], stdout=out, stderr=err)


def endpoint_port(path: Path) -> int:
    """The port `--prom-port 0` picked, from the line headless prints on stderr."""
    err = path.parent / "headless.err"
    found = wait_for(lambda: re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics",
                                       err.read_text()), timeout=60, what="the metrics line")
    return int(found.group(1))


def journal_kinds(path: Path, kind: str) -> list[dict[str, Any]]:
    journal = path.parent / ".cockpit" / "journal.jsonl"
    if not journal.exists():
        return []
    return [e for e in map(json.loads, journal.read_text().splitlines()) if e["kind"] == kind]


def dashboard_query(expr: str) -> str:
    return expr.replace("$campaign", ".*").replace("$machine", ".*")


@pytest.mark.slow
def test_three_cockpits_in_a_real_prometheus(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(alert_rules_yaml())
    checked = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    paths = {name: campaign(tmp_path / name, name) for name in ("alpha", "beta", "gamma")}
    textfiles = tmp_path / "textfiles"
    textfiles.mkdir()
    started: list[subprocess.Popen[Any]] = []
    server: Prometheus | None = None
    try:
        exporter, exporter_port = node_exporter(tmp_path, textfiles)
        started.append(exporter)
        alpha = headless(paths["alpha"], "--prom-port", "0")
        beta = headless(paths["beta"], "--prom-port", "0")
        gamma = headless(paths["gamma"], "--prom", str(textfiles / "gamma.prom"))
        started += [alpha, beta, gamma]
        targets = {"cockpit": [f"127.0.0.1:{endpoint_port(paths['alpha'])}",
                               f"127.0.0.1:{endpoint_port(paths['beta'])}"],
                   "node": [f"127.0.0.1:{exporter_port}"]}
        server = Prometheus(tmp_path, targets, rules, SCRAPE_S)
        started.append(server.proc)
        wait_for(server.ready, timeout=60, what="Prometheus ready")
        wait_for(lambda: server.targets_up() == 3, timeout=60, what="3 targets up")

        # The rule fires in each campaign, and Prometheus has it (how soon after, two
        # scrape intervals at most, is a latency: bench/, not here).
        for name, path in paths.items():
            wait_for(lambda p=path: journal_kinds(p, "rule_fired"), timeout=120,
                     what=f"{name}'s finite-loss rule")
            expr = (f'cockpit_rule_state{{campaign="{name}",rule="finite-loss",'
                    f'run="r-variant",state="fired"}} == 1')
            wait_for(lambda e=expr: server.query(e), timeout=60, what=f"{name} fired")
        alerts = wait_for(lambda: server.query(
            'ALERTS{alertname="CockpitRuleFired",alertstate="firing"}'), timeout=30,
            what="the CockpitRuleFired alert")
        assert {a["metric"]["campaign"] for a in alerts} <= set(paths)
        wait_for(lambda: len(server.query(
            'ALERTS{alertname="CockpitRuleFired",alertstate="firing"}')) == 3, timeout=30,
            what="the alert for all three campaigns")

        # A verdict through the command line reaches Prometheus: accepted results and
        # the cost per accepted result are cockpit budget's.
        for path in paths.values():
            wait_for(lambda p=path: any(e.get("run") == "r-control"
                                        for e in journal_kinds(p, "run_exited")),
                     timeout=60, what="the control's exit")
            accepted = run_cockpit("accept", str(path), "r-control")
            assert accepted.returncode == 0, accepted.stdout + accepted.stderr
        for name, path in paths.items():
            budget = json.loads(run_cockpit("budget", str(path), "--json").stdout)
            assert budget["accepted"] == 1 and budget["share_per_accepted"]["currency"] == "USD"
            want = float(budget["share_per_accepted"]["amount"])
            sel = f'{{campaign="{name}"}}'
            wait_for(lambda s=sel: server.value(f"cockpit_accepted_results{s}") == 1.0,
                     timeout=30, what=f"{name}'s accepted result in Prometheus")
            wait_for(lambda s=sel, w=want: server.value(
                f"cockpit_cost_per_accepted_result_usd{s}") == w, timeout=30,
                what=f"{name}'s cost per result in Prometheus")

        # The window left: Prometheus's and status --json's, each at its own time.
        for name, path in paths.items():
            status = json.loads(run_cockpit("status", str(path), "--json").stdout)
            sel = f'{{campaign="{name}"}}'
            # Both at one evaluation time: from the same scrape (asked one after the
            # other, a scrape between them put a second between the two).
            at = time.time()
            left = server.value(f"cockpit_window_remaining_seconds{sel}", at)
            taken = server.value(f"cockpit_snapshot_timestamp_seconds{sel}", at)
            assert left is not None and taken is not None
            status_at = _unix(status["taken_at"])
            assert abs(status_at - taken) <= SCRAPE_S + 5.0  # both fresh
            assert abs((left - (status_at - taken)) - status["window"]["remaining_s"]) <= 1.0

        # Every panel's query of the shipped dashboard answers for the three campaigns.
        for panel in PANELS:
            result = server.query(dashboard_query(panel.expr))
            if panel.title in MAY_BE_EMPTY:
                continue
            campaigns = {r["metric"].get("campaign") for r in result}
            assert campaigns == set(paths), (panel.title, panel.expr, result)
        # A cockpit that ends takes its endpoint with it: the "not watched" query still
        # sees it (its last hour), while the ones still ticking stay fresh.
        end(beta)
        # (A live cockpit's figures are at most a scrape and a tick old: 8 s is margin.)
        quiet = f"({dashboard_query(since_last_tick('{' + SEL + '}'))}) > 8"
        gone = wait_for(lambda: server.query(quiet), timeout=40, what="beta not watched")
        assert {r["metric"]["campaign"] for r in gone} == {"beta"}

        # Simulated GPUs are never shown as real readings.
        readings = server.query(dashboard_query(next(
            p.expr for p in PANELS if p.title == "GPU readings not from NVML")))
        assert {r["metric"]["status"] for r in readings} == {"simulated"}
    finally:
        if server is not None:
            server.close()
        for proc in reversed(started):
            end(proc)
    for proc in started:
        assert proc.poll() is not None  # ended, each by its pid


def _unix(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
