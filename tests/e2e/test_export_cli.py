"""The close's commands through their parser: budget (reads only), export, verify-export."""

from __future__ import annotations

import argparse
import json

import pytest

from cockpit.cli.closing import add_close_commands
from cockpit.common.errors import InputError
from tests.e2e.test_export_sample import build_sample, write_sample


def run(capsys, *words: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="cockpit")
    add_close_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(words))
    code = args.handler(args)
    return code, capsys.readouterr().out


def _tree(folder):
    return sorted((str(p), p.stat().st_mtime_ns) for p in folder.rglob("*"))


def test_budget_reads_only(tmp_path, capsys):
    path = write_sample(tmp_path / "fresh")
    before = _tree(tmp_path)
    code, out = run(capsys, "budget", str(path))
    assert code == 0 and "undefined" in out and "47.14 USD" in out
    assert _tree(tmp_path) == before  # not even a .cockpit folder
    campaign, _state = build_sample(tmp_path / "c", judge="journal")
    before = _tree(tmp_path / "c")
    code, out = run(capsys, "budget", str(campaign.path), "--json")
    data = json.loads(out)
    assert data["share_per_accepted"] == {"amount": "23.57", "currency": "USD"}
    assert "beats the baseline control" in data["conclusion"]
    assert _tree(tmp_path / "c") == before


def test_export_then_verify_export(tmp_path, capsys):
    campaign, _state = build_sample(tmp_path / "c", judge="journal")
    code, out = run(capsys, "export", str(campaign.path), "--no-reload")
    assert code == 0, out
    assert "export written" in out and "rsync -av --partial" in out and "verified" in out
    root = campaign.state_dir / "export" / campaign.id
    code, out = run(capsys, "verify-export", str(root), "--no-reload", "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    (root / campaign.id / "data/runs/control/params.json").write_text("{}")
    code, out = run(capsys, "verify-export", str(root / campaign.id), "--no-reload")
    assert code == 1 and "NOT verified" in out and "params.json" in out


def test_bad_input(tmp_path, capsys):
    with pytest.raises(InputError):
        run(capsys, "verify-export", str(tmp_path / "nowhere"))
    with pytest.raises(InputError):
        run(capsys, "budget", str(tmp_path / "missing.yaml"))


def test_verify_export_of_a_folder_that_is_no_export_is_bad_input(tmp_path):
    from tests.helpers.process import run_cockpit

    (tmp_path / "notes.txt").write_text("not a bag")
    result = run_cockpit("verify-export", str(tmp_path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "not an export" in result.stderr and len(result.stderr.strip().splitlines()) == 1
