"""The point of no return (issue 26) is one figure on every face: `status --json`, the
tmux line, the headless window line and the Prometheus file, all from the same
computation, and in the words of the campaign's mode."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit, wait_for

WINDOW_H = 72  # the rtx4090-3d offer


def campaign(folder: Path, mode: str) -> Path:
    # The window ends in 10 h; nothing runs: export 1 h + retrieval 30 m + margin 10 m.
    start = datetime.now(timezone.utc) - timedelta(hours=WINDOW_H - 10)
    return write_campaign(folder, [{"id": "prep", "hours": 1, "resource": "human"}],
                          start=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                          extra={"on_deadline": mode, "deadline": {
                              "export_hours": 1, "retrieve_hours": "30m",
                              "landing_margin": "10m"}})


def test_status_json_and_the_line_name_the_point_of_no_return(tmp_path: Path) -> None:
    path = campaign(tmp_path / "land", "land")
    result = run_cockpit("status", str(path), "--json")
    assert result.returncode == 0, result.stderr
    window = json.loads(result.stdout)["window"]
    end = datetime.fromisoformat(window["end"].replace("Z", "+00:00"))
    point = datetime.fromisoformat(window["point_of_no_return"].replace("Z", "+00:00"))
    assert end - point == timedelta(hours=1, minutes=40)
    assert window["lands_by_itself"] is True
    assert window["point_of_no_return_from"].startswith("save 0s (nothing running)")
    line = run_cockpit("status", str(path), "--line")
    assert line.returncode == 0, line.stderr
    assert re.search(r"· lands in 8h(19|20)m ·", line.stdout), line.stdout
    # A campaign that does not land by itself names the same moment otherwise.
    other = run_cockpit("status", str(campaign(tmp_path / "warn", "warn")), "--line")
    assert re.search(r"· no return in 8h(19|20)m ·", other.stdout), other.stdout


def test_the_prometheus_file_and_the_window_line_carry_it(tmp_path: Path) -> None:
    path = campaign(tmp_path, "land")
    prom = tmp_path / "cockpit.prom"
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "headless", str(path),
                             "--interval", "0.2", "--prom", str(prom)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        text = wait_for(lambda: prom.exists() and prom.read_text(), timeout=60,
                        what="the Prometheus file")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-2000:]
    value = re.search(r'^cockpit_point_of_no_return_remaining_seconds'
                      r'\{campaign="test-campaign",machine="1"\} (\S+)$', text, re.M)
    assert value is not None, text
    assert 8 * 3600 + 18 * 60 < float(value.group(1)) <= 8 * 3600 + 20 * 60
    text_status = run_cockpit("status", str(path)).stdout  # the window line, in words
    assert re.search(r"retrieve by \S+ \S+ · lands in 8h(19|20)m", text_status), text_status
