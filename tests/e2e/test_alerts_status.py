"""A failing alert target on the screen and in ``cockpit status`` (issue 26): a real HTTP
server answering 500, a headless cockpit whose stage fails (a critical alert), then
``status`` and ``status --json`` name the failing target by label and scheme, with the
error's words, never its URL."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from tests.helpers.alert_server import AlertServer
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit

SECRET = "tk_9f3a1b"
FAILING = re.compile(r"alerts: cli-1 \(json\) failing since \d\d:\d\d UTC: not delivered "
                     r"\(HTTP 500\) \(1 alert unsent\)")


def test_a_target_answering_500_is_shown_by_label_in_status(tmp_path: Path) -> None:
    start = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")  # no deadline near
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "cpu",
         "command": [sys.executable, "-c", "import sys; sys.exit(3)"]},
    ], start=start)
    env = {**os.environ, "COCKPIT_ALERTS": str(tmp_path / "absent.yaml")}
    with AlertServer(status=500) as server:
        url = f"json://127.0.0.1:{server.port}/hook?token={SECRET}"
        headless = subprocess.run(
            [sys.executable, "-m", "cockpit", "headless", str(path), "--auto", "--until-done",
             "--interval", "0.05", "--alerts", url],
            capture_output=True, text=True, timeout=120, env=env)
        assert headless.returncode == 1, headless.stdout[-2000:] + headless.stderr[-2000:]
        assert server.requests, "the stage's failure never reached the target"
        port = str(server.port)
    text = run_cockpit("status", str(path), env={"COCKPIT_ALERTS": env["COCKPIT_ALERTS"]})
    assert text.returncode == 0, text.stderr
    shown = [line for line in text.stdout.splitlines() if "alerts:" in line]
    assert len(shown) == 1 and FAILING.search(shown[0]), text.stdout
    as_json = run_cockpit("status", str(path), "--json")
    assert as_json.returncode == 0, as_json.stderr
    warnings = [w for w in json.loads(as_json.stdout)["warnings"] if w.startswith("alerts:")]
    assert len(warnings) == 1 and FAILING.fullmatch(warnings[0]), warnings
    for output in (text.stdout, as_json.stdout):
        assert SECRET not in output and "127.0.0.1" not in output
    assert port not in shown[0] and port not in warnings[0]
