"""What `cockpit prometheus` prints for a team's monitoring: a Grafana dashboard, the
Prometheus alert rules, the metric table. Pure data built from the registry's names
(:mod:`cockpit.headless.prometheus`), so a renamed metric breaks a test, not a dashboard.

The dashboard is a fleet view: every campaign and machine a Prometheus server scrapes,
filtered by two variables (``$campaign``, ``$machine``) and a datasource variable, so
it imports as is (Grafana: Dashboards → New → Import, paste the JSON). The alert rules
match the events the cockpit's own alerts send, for teams that route alerts through
Alertmanager; each names the campaign and machine in its summary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from cockpit.headless.prometheus import FAMILIES

SEL = 'campaign=~"$campaign",machine=~"$machine"'


def since_last_tick(selector: str = "") -> str:
    """Seconds since a cockpit last ticked. Over the last hour's samples, not the last
    one: a textfile keeps its old figures (the value says how old), but an endpoint
    whose cockpit ended takes its series with it (stale at once), and only the range
    still remembers them."""
    return f"time() - max_over_time(cockpit_snapshot_timestamp_seconds{selector}[1h])"

DASHBOARD_UID = "cockpit-campaigns"


@dataclass(frozen=True)
class Panel:
    title: str
    expr: str
    kind: str  # stat | table | timeseries
    unit: str = "none"
    legend: str = "{{campaign}} m{{machine}}"
    width: int = 8


PANELS: tuple[Panel, ...] = (
    Panel("Window left", f"cockpit_window_remaining_seconds{{{SEL}}}", "stat", "s"),
    Panel("Point of no return in", f"cockpit_point_of_no_return_remaining_seconds{{{SEL}}}",
          "stat", "s"),
    Panel("Seconds since a cockpit ticked (not watched when high)",
          since_last_tick(f"{{{SEL}}}"), "stat", "s"),
    Panel("Forecast", f"cockpit_forecast_verdict{{{SEL}}} == 1", "table",
          legend="{{campaign}} m{{machine}} {{verdict}}"),
    Panel("Stages: elapsed of planned",
          f"cockpit_stage_elapsed_seconds{{{SEL}}} / cockpit_stage_planned_seconds{{{SEL}}}",
          "table", "percentunit", "{{campaign}} m{{machine}} {{stage}}"),
    Panel("Stage states", f"cockpit_stage_state{{{SEL}}} == 1", "table",
          legend="{{campaign}} m{{machine}} {{stage}} {{state}}"),
    Panel("Stop rules fired or blind", f'cockpit_rule_state{{{SEL},state=~"fired|blind"}} == 1',
          "table", legend="{{campaign}} m{{machine}} {{rule}}@{{run}} {{state}}"),
    Panel("Checkpoint age", f"cockpit_run_checkpoint_age_seconds{{{SEL}}}", "table", "s",
          "{{campaign}} m{{machine}} {{run}}"),
    Panel("Checkpoint reloads", f"cockpit_run_checkpoint_reload{{{SEL}}} == 1", "table",
          legend="{{campaign}} m{{machine}} {{run}} {{state}}"),
    Panel("GPU utilization", f"cockpit_gpu_utilization_ratio{{{SEL}}}", "timeseries",
          "percentunit", "{{campaign}} m{{machine}} gpu{{gpu}}", 12),
    Panel("Key metric (loss)", f"cockpit_run_key_metric{{{SEL}}}", "timeseries", "none",
          "{{campaign}} m{{machine}} {{run}}", 12),
    Panel("GPU readings not from NVML", f'cockpit_gpu_reading_status{{{SEL},status!="ok"}} == 1',
          "table", legend="{{campaign}} m{{machine}} {{status}}"),
    Panel("Disk free", f"cockpit_disk_free_bytes{{{SEL}}}", "table", "bytes",
          "{{campaign}} m{{machine}} {{path}}"),
    Panel("Peer machines not answering", f"cockpit_peer_reachable{{{SEL}}} == 0", "table",
          legend="{{campaign}} m{{machine}} peer {{peer}}"),
    Panel("Accepted results", f"cockpit_accepted_results{{{SEL}}}", "stat"),
    Panel("Cost per accepted result", f"cockpit_cost_per_accepted_result_usd{{{SEL}}}",
          "stat", "currencyUSD"),
    Panel("Decisions waiting", f"cockpit_decisions_pending{{{SEL}}}", "stat"),
    Panel("GPU-hours idle of held", f"cockpit_gpu_idle_seconds{{{SEL}}} / "
          f"cockpit_gpu_held_seconds{{{SEL}}}", "stat", "percentunit"),
)


def _panel(index: int, panel: Panel, x: int, y: int) -> dict[str, Any]:
    height = 8 if panel.kind != "stat" else 5
    return {
        "id": index + 1,
        "type": panel.kind,
        "title": panel.title,
        "gridPos": {"x": x, "y": y, "w": panel.width, "h": height},
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {},
        "targets": [{"refId": "A", "expr": panel.expr, "legendFormat": panel.legend,
                     "instant": panel.kind != "timeseries",
                     "datasource": {"type": "prometheus", "uid": "${datasource}"}}],
    }


def _variable(name: str, query: str) -> dict[str, Any]:
    return {"name": name, "type": "query", "label": name, "query": query,
            "definition": query, "refresh": 2, "includeAll": True, "multi": True,
            "allValue": ".*", "current": {"text": "All", "value": "$__all"},
            "datasource": {"type": "prometheus", "uid": "${datasource}"}}


def dashboard() -> dict[str, Any]:
    """The Grafana dashboard (JSON model, schema 39), every panel from :data:`PANELS`."""
    panels, x, y, row_height = [], 0, 0, 0
    for index, panel in enumerate(PANELS):
        if x + panel.width > 24:
            x, y, row_height = 0, y + row_height, 0
        built = _panel(index, panel, x, y)
        panels.append(built)
        x += panel.width
        row_height = max(row_height, built["gridPos"]["h"])
    return {
        "uid": DASHBOARD_UID,
        "title": "cockpit: GPU campaigns",
        "tags": ["cockpit"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "label": "Prometheus",
             "query": "prometheus", "current": {}},
            _variable("campaign", "label_values(cockpit_info, campaign)"),
            _variable("machine", 'label_values(cockpit_info{campaign=~"$campaign"}, machine)'),
        ]},
        "panels": panels,
    }


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str


WHO = "{{ $labels.campaign }} machine {{ $labels.machine }}"
ALERTS: tuple[Alert, ...] = (
    Alert("CockpitRuleFired", 'cockpit_rule_state{state="fired"} == 1', "0m", "critical",
          f"{WHO}: stop rule {{{{ $labels.rule }}}} fired on run {{{{ $labels.run }}}}"),
    Alert("CockpitRuleBlind", 'cockpit_rule_state{state="blind"} == 1', "5m", "warning",
          f"{WHO}: stop rule {{{{ $labels.rule }}}} is blind on run {{{{ $labels.run }}}} "
          "(its metric was never reported)"),
    Alert("CockpitRunFailed", 'cockpit_run_state{state="failed"} == 1', "0m", "critical",
          f"{WHO}: run {{{{ $labels.run }}}} failed"),
    Alert("CockpitDecisionNeeded", "cockpit_decisions_pending > 0", "0m", "warning",
          f"{WHO}: a decision waits for a person (cockpit decide)"),
    Alert("CockpitVerdictWaiting",
          'cockpit_run_verdict{verdict="none"} == 1 and on(campaign, machine, run) '
          'cockpit_run_state{state="succeeded"} == 1', "30m", "warning",
          f"{WHO}: run {{{{ $labels.run }}}} ended and waits for its verdict"),
    Alert("CockpitCheckpointDoesNotReload", 'cockpit_run_checkpoint_reload{state="failed"} == 1',
          "0m", "critical", f"{WHO}: the newest checkpoint of run {{{{ $labels.run }}}} does "
          "not reload"),
    Alert("CockpitGpuLost", "cockpit_gpu_lost == 1", "0m", "critical",
          f"{WHO}: GPU {{{{ $labels.gpu }}}} is lost"),
    Alert("CockpitGpuHot", "cockpit_gpu_temperature_celsius > 88", "5m", "warning",
          f"{WHO}: GPU {{{{ $labels.gpu }}}} at {{{{ $value }}}} °C"),
    Alert("CockpitForecastExceedsWindow", 'cockpit_forecast_verdict{verdict="exceeds"} == 1',
          "10m", "warning", f"{WHO}: the forecast ends after the window (cockpit plan: "
          "the options)"),
    Alert("CockpitPointOfNoReturnNear",
          "cockpit_point_of_no_return_remaining_seconds < 3600 and on(campaign, machine) "
          "cockpit_exported == 0", "0m", "warning",
          f"{WHO}: the point of no return is within the hour"),
    Alert("CockpitWindowEndingNotClosed",
          "cockpit_window_remaining_seconds < 21600 and on(campaign, machine) "
          "cockpit_exported == 0", "0m", "critical",
          f"{WHO}: under 6 h left and no verified export"),
    Alert("CockpitExportStale", "cockpit_export_stale == 1", "10m", "warning",
          f"{WHO}: the export predates a verdict, a verified checkpoint or the answer: "
          "cockpit export again"),
    Alert("CockpitGpuReadingsUnavailable",
          'cockpit_gpu_reading_status{status="unavailable"} == 1', "5m", "warning",
          f"{WHO}: no GPU readings (NVML unavailable): utilization and memory unknown"),
    Alert("CockpitDiskLow", "cockpit_disk_low == 1", "0m", "warning",
          f"{WHO}: {{{{ $labels.path }}}} is nearly full (checkpoints and the export fail "
          "on a full disk)"),
    Alert("CockpitPeerUnreachable", "cockpit_peer_reachable == 0", "5m", "warning",
          f"{WHO}: machine {{{{ $labels.peer }}}} does not answer its pulls"),
    Alert("CockpitLanding", 'cockpit_landing_state{state="landing"} == 1', "0m", "warning",
          f"{WHO}: the point of no return passed: the cockpit is landing the results"),
    Alert("CockpitNotConducted", "cockpit_conducted == 0", "1m", "critical",
          f"{WHO}: faces are open but none conducts: nobody runs the stop rules, the "
          "alerts or the recording"),
    Alert("CockpitNotWatched", f"{since_last_tick()} > 120", "0m", "critical",
          f"{WHO}: no cockpit has ticked for over 2 minutes (for an hour after it ended; "
          "then its series are gone: watch `up` too)"),
)


def alert_rules() -> dict[str, Any]:
    """The Prometheus rule file (``promtool check rules`` clean)."""
    return {"groups": [{"name": "cockpit", "rules": [
        {"alert": a.name, "expr": a.expr, "for": a.for_,
         "labels": {"severity": a.severity},
         "annotations": {"summary": a.summary}}
        for a in ALERTS]}]}


def metrics_table() -> str:
    """The registry as a Markdown table (docs/prometheus.md holds it word for word)."""
    lines = ["| metric | labels (besides campaign, machine) | what it is |",
             "|---|---|---|"]
    for family in FAMILIES:
        labels = ", ".join(family.labels) or "—"
        name = f"`{family.name}`"
        if family.money:
            name += " (the package's currency: `_eur` for EUR …)"
        lines.append(f"| {name} | {labels} | {family.help} |")
    return "\n".join(lines) + "\n"


def dashboard_json() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def alert_rules_yaml() -> str:
    header = ("# cockpit's alert rules for Prometheus (cockpit prometheus --rules); load "
              "with rule_files:\n")
    return header + yaml.safe_dump(alert_rules(), sort_keys=False, allow_unicode=True,
                                   width=100)
