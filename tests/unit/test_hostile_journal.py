"""A journal line that parses but does not fit (wrong field types, 2,000 nested
brackets) is skipped with a located warning; every command keeps working."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cockpit.common.safe_json import TooDeep, loads_bounded, nesting_depth
from cockpit.journal.log import Journal
from tests.helpers.campaigns import step_command, write_campaign
from tests.helpers.process import run_cockpit

GOOD = {"seq": 1, "t": "2026-12-02T08:00:00Z", "kind": "plan_recorded", "sha256": "x"}
HOSTILE = [
    ({"seq": 2, "t": "yesterday", "kind": "note", "stage": "a", "text": "x"}, "field 't'"),
    ({"seq": 3, "t": "2026-12-02T08:00:01Z", "kind": "decision", "stage": "a",
      "outcome": "limit", "drops": 5, "note": "x"}, "field 'drops'"),
    ({"seq": 4, "t": "2026-12-02T08:00:02Z", "kind": "stage_started", "stage": "a",
      "pid": "abc"}, "field 'pid'"),
    ({"seq": 5, "t": "2026-12-02T08:00:03Z", "kind": "cost", "label": "x", "amount": [1]},
     "field 'amount'"),
]
DEEP = "[" * 2000 + "]" * 2000


def _hostile_campaign(folder: Path) -> Path:
    path = write_campaign(folder, stages=[{"id": "a", "duration": "5m", "resource": "cpu",
                                           "run": "a", "command": step_command(2)}],
                          runs={"a": {}})
    journal = folder / ".cockpit" / "journal.jsonl"
    journal.parent.mkdir()
    lines = [json.dumps(GOOD)] + [json.dumps(ev) for ev, _ in HOSTILE] + [DEEP]
    journal.write_text("\n".join(lines) + "\n")
    return path


def test_bad_lines_are_skipped_with_their_line_numbers(tmp_path: Path) -> None:
    _hostile_campaign(tmp_path)
    journal = Journal(tmp_path / ".cockpit" / "journal.jsonl")
    assert [e["seq"] for e in journal.events()] == [1]
    problems = {p.line: p.message for p in journal.problems()}
    for line, (_, field) in enumerate(HOSTILE, start=2):
        assert field in problems[line] and "skipped" in problems[line]
    assert "nested deeper than 64" in problems[len(HOSTILE) + 2]


@pytest.mark.parametrize("command", [("status",), ("status", "--json"), ("budget",),
                                     ("headless", "--until-done", "--interval", "0.1")])
def test_every_command_keeps_working(tmp_path: Path, command: tuple[str, ...]) -> None:
    path = _hostile_campaign(tmp_path)
    result = run_cockpit(command[0], str(path), *command[1:])
    assert result.returncode in (0, 3), result.stderr  # 3: headless waits for a person
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert "line 3: decision event with a bad field" in result.stderr


def test_bounded_json_refuses_only_what_is_too_deep() -> None:
    with pytest.raises(TooDeep):
        loads_bounded(DEEP)
    nested_in_text = json.dumps({"note": "[" * 500})
    assert loads_bounded(nested_in_text) == {"note": "[" * 500}  # brackets in a string
    assert nesting_depth('{"a": [[1], {"b": "]]]"}]}') == 3
    assert loads_bounded("[" * 64 + "]" * 64) is not None


@pytest.mark.parametrize("which", ["journal.jsonl", "journal.jsonl.lock"])
def test_a_journal_or_lock_that_is_a_symlink_is_refused(tmp_path: Path, which: str) -> None:
    path = write_campaign(tmp_path, stages=[{"id": "a", "duration": "5m", "resource": "cpu"}])
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    (tmp_path / ".cockpit").mkdir()
    (tmp_path / ".cockpit" / which).symlink_to(target)
    result = run_cockpit("note", str(path), "a", "hello")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "symbolic link" in result.stderr
    assert target.read_text() == "precious\n"
