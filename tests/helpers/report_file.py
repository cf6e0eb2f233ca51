"""The in-process integrations' report file (tests of cockpit.integrations): a fixture
that points cockpit.report at a file with a save request pending, and its lines read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cockpit import report


@pytest.fixture
def reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """cockpit.report writing to tmp_path/report.jsonl, a save request pending."""
    request = tmp_path / "save-request"
    request.write_text(f"landing-{tmp_path.name}\n")
    monkeypatch.setenv(report.SAVE_ENV_VAR, str(request))
    monkeypatch.setattr(report, "_save_checked_at", None)
    report.open_report(tmp_path / "report.jsonl")
    yield tmp_path / "report.jsonl"
    report.open_report(None)


def report_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
