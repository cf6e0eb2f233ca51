"""The Prometheus registry, its text, its HTTP endpoint and what is shipped with it.

A real engine's snapshot (simulated GPUs) is rendered and checked by Debian's own
`promtool check metrics` and by prometheus_client's parser; hostile text (a GPU UUID
with quotes, a newline, an escape code) stays one printable, escaped label value; an
unknown figure is absent, never 0; every metric the dashboard and the alert rules name
exists in the registry, and docs/prometheus.md holds the registry's table word for word.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from cockpit.common.printable import printable
from cockpit.engine.snapshot import MachineView, Snapshot
from cockpit.fleet.open import open_engine
from cockpit.headless.prom_assets import (
    ALERTS,
    PANELS,
    alert_rules,
    dashboard,
    metrics_table,
)
from cockpit.headless.prom_http import MetricsEndpoint
from cockpit.headless.prometheus import (
    CONTENT_TYPE,
    FAMILIES,
    LABEL_LIMIT,
    RULE_STATES,
    bounded_label,
    currency_name,
    render,
)
from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import ROOT, run_cockpit
from tests.helpers.prometheus import PROMTOOL, free_port, missing

HOSTILE = 'GPU-"x"\\y\nz\x1b]52;c;AAAA\x07\u202e' + "u" * 300


def snapshot(tmp_path: Path) -> Snapshot:
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=3, sleep=0.0)}], rules=[FINITE])
    engine = open_engine(path, simulate_gpus=2)
    try:
        return engine.tick()
    finally:
        engine.close()


def families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {f.name: [(s.labels, s.value) for s in f.samples]
            for f in text_string_to_metric_families(text)}


def test_a_real_snapshot_renders_clean_for_promtool_and_the_parser(tmp_path: Path) -> None:
    text = render(snapshot(tmp_path))
    parsed = families(text)
    names = {f.name for f in FAMILIES if not f.money} | {"cockpit_budget_committed_usd",
                                                          "cockpit_budget_incurred_usd"}
    assert names <= set(parsed)
    # Every series carries the campaign and the machine.
    assert all(labels["campaign"] == "test-campaign" and labels["machine"] == "1"
               for samples in parsed.values() for labels, _ in samples)
    rule = {labels["state"]: v for labels, v in parsed["cockpit_rule_state"]}
    assert rule == {s: (1.0 if s == "waiting" else 0.0) for s in RULE_STATES}
    # Simulated GPUs are said: the readings' source is a state of its own.
    status = {labels["status"]: v for labels, v in parsed["cockpit_gpu_reading_status"]}
    assert status["simulated"] == 1.0 and status["ok"] == 0.0
    if missing() is None:
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, text=True,
                              capture_output=True, timeout=60)
        assert lint.returncode == 0, lint.stdout + lint.stderr


def test_unknown_figures_are_absent_never_zero(tmp_path: Path) -> None:
    parsed = families(render(snapshot(tmp_path)))
    # The run has not started: no step, no checkpoint age, no cost per result.
    assert not parsed.get("cockpit_run_step")
    assert not parsed.get("cockpit_run_checkpoint_age_seconds")
    assert "cockpit_cost_per_accepted_result_usd" not in parsed
    reload = {labels["state"]: v for labels, v in parsed["cockpit_run_checkpoint_reload"]}
    assert reload["none"] == 1.0 and reload["ok"] == 0.0  # no checkpoint is not "reloads"
    verdict = {labels["verdict"]: v for labels, v in parsed["cockpit_run_verdict"]}
    assert verdict == {"accepted": 0.0, "rejected": 0.0, "none": 1.0}


def test_hostile_text_is_one_printable_bounded_label_value(tmp_path: Path) -> None:
    snap = snapshot(tmp_path)
    gpus = tuple(replace(g, uuid=HOSTILE) for g in snap.gpus.gpus)
    text = render(replace(snap, gpus=replace(snap.gpus, gpus=gpus)))
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    uuids = {labels["uuid"] for labels, _ in families(text)["cockpit_gpu_temperature_celsius"]}
    assert uuids == {bounded_label(HOSTILE)} and bounded_label(HOSTILE).startswith(
        printable(HOSTILE)[:40])
    assert all(len(u) <= LABEL_LIMIT for u in uuids)
    # The text format's lines stay lines: nothing a label held started a new sample.
    strays = [line for line in text.splitlines()
              if not re.match(r"^(# (HELP|TYPE) cockpit_\w+ |cockpit_\w+\{)", line)]
    assert strays == []


def test_the_host_the_disks_and_the_peers_are_measured_or_absent(tmp_path: Path) -> None:
    snap = snapshot(tmp_path)
    parsed = families(render(snap))
    disks = parsed["cockpit_disk_free_bytes"]
    assert disks and all(v > 0 for _, v in disks)
    assert {labels["path"] for labels, _ in disks} == {d.path for d in snap.host.disks}
    assert parsed["cockpit_host_memory_total_bytes"][0][1] > 0
    landing = {labels["state"]: v for labels, v in parsed["cockpit_landing_state"]}
    assert landing == {"off": 1.0, "armed": 0.0, "landing": 0.0, "landed": 0.0}
    peers = (MachineView(2, "box2", None, None, "no pull yet", 0),
             MachineView(3, "box3", False, 95.0, "timed out", 10),
             MachineView(4, "box4", True, 2.0, None, 10))
    parsed = families(render(replace(snap, machines=peers)))
    reachable = {labels["peer"]: v for labels, v in parsed["cockpit_peer_reachable"]}
    assert reachable == {"3": 0.0, "4": 1.0}  # machine 2, never reached, is not "up"
    ages = {labels["peer"]: v for labels, v in parsed["cockpit_peer_data_age_seconds"]}
    assert ages == {"3": 95.0, "4": 2.0}


def test_a_state_the_code_does_not_list_is_shown_not_hidden(tmp_path: Path) -> None:
    snap = snapshot(tmp_path)
    odd = replace(snap, rules=tuple(replace(r, state="paused") for r in snap.rules))
    rule = {labels["state"]: v for labels, v in families(render(odd))["cockpit_rule_state"]}
    assert rule["paused"] == 1.0 and rule["ok"] == 0.0


def test_money_is_named_in_its_currency() -> None:
    assert currency_name("cockpit_budget_committed_usd", "EUR") == "cockpit_budget_committed_eur"
    assert all(f.name.endswith("_usd") for f in FAMILIES if f.money)


def test_every_metric_the_dashboard_and_the_rules_name_is_in_the_registry() -> None:
    known = {f.name for f in FAMILIES}
    exprs = [p.expr for p in PANELS] + [a.expr for a in ALERTS]
    named = {m for e in exprs for m in re.findall(r"\b(cockpit_[a-z_]+)\b", e)}
    assert named and named <= known, sorted(named - known)
    # The alerts cover the events the cockpit's own alerts send.
    alerts = {a.name for a in ALERTS}
    assert {"CockpitRuleFired", "CockpitRuleBlind", "CockpitRunFailed", "CockpitGpuLost",
            "CockpitCheckpointDoesNotReload", "CockpitNotWatched", "CockpitDiskLow",
            "CockpitPeerUnreachable", "CockpitDecisionNeeded", "CockpitLanding",
            "CockpitNotConducted"} <= alerts


def test_the_dashboard_is_a_grafana_model_that_imports_as_is() -> None:
    board = json.loads(run_cockpit("prometheus", "--dashboard").stdout)
    assert board == json.loads(json.dumps(dashboard()))
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) == len(PANELS)
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24 and pos["h"] > 0
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"][0]["expr"]
    variables = {v["name"] for v in board["templating"]["list"]}
    used = {m for p in board["panels"] for m in re.findall(r"\$\{?(\w+)",
                                                         json.dumps(p["targets"]))}
    assert used <= variables == {"datasource", "campaign", "machine"}
    assert board["uid"] and board["title"] and isinstance(board["schemaVersion"], int)


def test_the_rules_are_a_rule_file_promtool_accepts(tmp_path: Path) -> None:
    printed = run_cockpit("prometheus", "--rules").stdout
    assert yaml.safe_load(printed) == alert_rules()
    if missing() is None:
        (tmp_path / "rules.yml").write_text(printed)
        checked = subprocess.run([PROMTOOL, "check", "rules", str(tmp_path / "rules.yml")],
                                 capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0 and f"{len(ALERTS)} rules found" in checked.stdout


def test_the_docs_hold_the_registrys_table_word_for_word() -> None:
    assert metrics_table() in (ROOT / "docs" / "prometheus.md").read_text("utf-8")
    assert run_cockpit("prometheus", "--metrics").stdout == metrics_table()


def test_the_endpoint_answers_503_then_the_published_text_and_nothing_else() -> None:
    endpoint = MetricsEndpoint("127.0.0.1", 0)
    url = f"http://127.0.0.1:{endpoint.port}"
    try:
        with pytest.raises(urllib.error.HTTPError) as before:
            urllib.request.urlopen(f"{url}/metrics", timeout=5)
        assert before.value.code == 503
        endpoint.publish("cockpit_x 1.0\n")
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as reply:
            assert reply.read() == b"cockpit_x 1.0\n"
            assert reply.headers["Content-Type"] == CONTENT_TYPE
        with pytest.raises(urllib.error.HTTPError) as other:
            urllib.request.urlopen(f"{url}/../journal.jsonl", timeout=5)
        assert other.value.code == 404
    finally:
        endpoint.close()


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [{"id": "a", "hours": 1, "resource": "human"}])
    port = free_port()
    held = MetricsEndpoint("127.0.0.1", port)
    try:
        result = run_cockpit("headless", str(path), "--prom-port", str(port), timeout=60)
    finally:
        held.close()
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"cockpit headless: --prom-port {port}: cannot listen on 127.0.0.1:{port}: "
        "Address already in use"]
    assert not (tmp_path / ".cockpit" / "journal.jsonl").exists()  # nothing was opened
