"""REPORT.md lists the plan's edits from the journal and the file, whether or not a tick
ran after the edit (D24): ``status`` and the export read the same facts."""

from __future__ import annotations

import json
from pathlib import Path

from cockpit.journal.log import Journal
from tests.helpers.campaigns import step_command, write_campaign
from tests.helpers.process import run_cockpit


def test_an_edit_exported_at_once_is_in_the_report(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, stages=[
        {"id": "control", "duration": "5m", "resource": "cpu", "run": "control",
         "command": step_command(2, 0.01)}])
    done = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1")
    assert done.returncode == 0, done.stdout + done.stderr
    path.write_text(path.read_text().replace('"5m"', '"50m"'))  # edited, no tick since
    status = json.loads(run_cockpit("status", str(path), "--json").stdout)
    assert any("changed after the plan was decided" in w for w in status["warnings"])
    exported = run_cockpit("export", str(path))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    # The export wrote no plan_changed: the edit came from the file, not the journal.
    events = Journal(tmp_path / ".cockpit" / "journal.jsonl").events()
    assert [e["kind"] for e in events].count("plan_changed") == 0
    (report,) = (tmp_path / ".cockpit" / "export").glob("*/*/data/REPORT.md")
    text = report.read_text()
    assert "changed 1 time(s) after the plan was decided" in text
    assert "## Changes to the plan after it was decided" in text
    assert '-      "duration": "5m",' in text and '+      "duration": "50m",' in text
