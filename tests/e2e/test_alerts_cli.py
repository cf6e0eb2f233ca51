"""`cockpit alerts FILE [--test]` against a real HTTP server taking apprise's requests
(issue 26): targets from a file outside the campaign, a test alert to each, which took
it, and never a token on the screen."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.helpers.alert_server import AlertServer
from tests.helpers.process import SAMPLES, run_cockpit

SECRET = "tk_9f3c2a71"


def campaign(tmp_path: Path) -> Path:
    path = tmp_path / "c.yaml"
    shutil.copy(SAMPLES / "illustrative.yaml", path)
    return path


def test_a_test_alert_reaches_every_target_and_names_none_by_its_url(tmp_path: Path) -> None:
    file = campaign(tmp_path)
    with AlertServer() as server:
        alerts = tmp_path / "alerts.yaml"
        alerts.write_text(
            "targets:\n"
            f"  - label: team\n    url: json://127.0.0.1:{server.port}/hook?token={SECRET}\n"
            f"  - label: phone\n    url: ntfy://127.0.0.1:{server.port}/{SECRET}-topic\n"
            "    levels: [warn, critical]\n")
        listed = run_cockpit("alerts", str(file), env={"COCKPIT_ALERTS": str(alerts)})
        assert listed.returncode == 0, listed.stderr
        assert "team (json): info, warn, critical" in listed.stdout
        assert "phone (ntfy): warn, critical" in listed.stdout
        assert server.requests == []  # listing sends nothing

        done = run_cockpit("alerts", str(file), "--test", env={"COCKPIT_ALERTS": str(alerts)})
        assert done.returncode == 0, done.stdout + done.stderr
        assert "team (json): sent" in done.stdout and "phone (ntfy): sent" in done.stdout
        assert SECRET not in done.stdout + done.stderr + listed.stdout + listed.stderr
        by_path = {r.path.split("?")[0]: r for r in server.requests}
        assert set(by_path) == {"/hook", "/"}, list(by_path)  # ntfy publishes to its root
        hook = by_path["/hook"].json()
        assert hook["title"].startswith("cockpit info: ") and "a test alert" in hook["message"]
        assert "window" in hook["message"].splitlines()[-1]  # the time left, last
        ntfy = by_path["/"].json()
        assert ntfy["topic"] == f"{SECRET}-topic" and "a test alert" in ntfy["message"]


def test_a_target_that_is_down_is_named_and_the_others_still_get_it(tmp_path: Path) -> None:
    file = campaign(tmp_path)
    with AlertServer() as good, AlertServer(status=503) as down:
        done = run_cockpit(
            "alerts", str(file), "--test",
            "--alerts", f"json://127.0.0.1:{good.port}/ok",
            "--alerts", f"json://127.0.0.1:{down.port}/x?token={SECRET}",
            env={"COCKPIT_ALERTS": str(tmp_path / "absent.yaml")})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cli-1 (json): sent" in done.stdout
    assert "cli-2 (json): FAILED: not delivered (HTTP 503)" in done.stdout
    assert len(good.requests) == 1 and len(down.requests) == 1
    assert SECRET not in done.stdout + done.stderr


def test_no_target_or_a_bad_alerts_file_is_one_located_error(tmp_path: Path) -> None:
    file = campaign(tmp_path)
    none = run_cockpit("alerts", str(file), "--test",
                       env={"COCKPIT_ALERTS": str(tmp_path / "absent.yaml")})
    assert none.returncode == 2 and "no alert targets" in none.stderr
    assert "Traceback" not in none.stderr
    bad = tmp_path / "alerts.yaml"
    bad.write_text("targets:\n  - label: phone\n    url: not-a-url\n"
                   f"  - url: json://h/{SECRET}\n    levels: [loud]\n")
    result = run_cockpit("alerts", str(file), env={"COCKPIT_ALERTS": str(bad)})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{bad}:3:10: url: an apprise URL" in result.stderr, result.stderr
    assert f"{bad}:5:13: levels:" in result.stderr, result.stderr
    assert SECRET not in result.stderr
    cli = run_cockpit("alerts", str(file), "--alerts", f"nope{SECRET}",
                      env={"COCKPIT_ALERTS": str(tmp_path / "absent.yaml")})
    assert cli.returncode == 2 and "not an apprise URL" in cli.stderr
    assert SECRET not in cli.stderr
