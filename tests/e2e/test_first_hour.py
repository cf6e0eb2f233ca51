"""Rough edges a newcomer hit in the first hour: each one as a test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cockpit import cli
from cockpit.assets import asset, asset_path
from cockpit.campaign import load_campaign
from cockpit.cli import dispatch
from cockpit.cli import parser as cli_parser
from cockpit.cli.demo import failed_stage_logs
from cockpit.engine import Engine
from cockpit.journal.fold import FAILED
from tests.helpers.campaigns import step_command, write_campaign
from tests.helpers.process import run_cockpit, wait_for


def test_start_refuses_a_stage_whose_after_stages_have_not_run(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, stages=[
        {"id": "first", "duration": "5m", "resource": "cpu", "command": step_command(2)},
        {"id": "second", "duration": "5m", "resource": "cpu", "after": ["first"],
         "command": step_command(2)},
    ])
    refused = run_cockpit("start", str(path), "second")
    assert refused.returncode == 1
    assert "waits for first (pending)" in refused.stderr and "--force" in refused.stderr
    journal = tmp_path / ".cockpit" / "journal.jsonl"
    assert not journal.exists() or "stage_started" not in journal.read_text()
    forced = run_cockpit("start", str(path), "second", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "stage second started" in forced.stdout


def test_an_internal_error_is_exit_70_and_says_it_is_a_bug(monkeypatch, capsys) -> None:
    def broken(_args: object) -> int:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(cli_parser, "cmd_check", broken)  # the parser binds the handlers
    monkeypatch.delenv("COCKPIT_DEBUG", raising=False)
    assert cli.main(["check", "whatever.yaml"]) == dispatch.EXIT_INTERNAL == 70
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError" in err and "bug" in err
    assert "Traceback" not in err


def test_the_demo_names_the_failed_stage_its_log_and_its_last_lines(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, stages=[{
        "id": "prep-data", "duration": "5m", "resource": "cpu",
        "command": [sys.executable, "-c",
                    "import sys; sys.stderr.write('the corpus is gone: marker-417\\n'); "
                    "sys.exit(3)"]}])
    engine = Engine(load_campaign(path), auto=True)
    try:
        wait_for(lambda: engine.tick() and engine.state().stages["prep-data"].state == FAILED,
                 timeout=60, what="the stage to fail")
        text = failed_stage_logs(engine.state())
    finally:
        engine.close()
    assert "stage prep-data failed" in text and "marker-417" in text
    (err,) = (tmp_path / ".cockpit" / "logs").glob("prep-data.*.err")
    assert str(err) in text


@pytest.mark.parametrize("parts", [("themes", "default.tcss"),
                                   ("sample_campaigns", "digits", "campaign.yaml"),
                                   ("sample_campaigns", "digits", "data", "digits.csv.gz")])
def test_runtime_data_ships_inside_the_package(parts: tuple[str, ...]) -> None:
    """Themes and the demo's campaign are package resources (a wheel carries them)."""
    assert asset(*parts).is_file()
    assert asset_path(*parts).stat().st_size > 0
