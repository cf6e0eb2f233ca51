"""`cockpit rules [ID]`: the domain rules the messages cite, from the file the package
carries (issue 23), run as a user runs it."""

from __future__ import annotations

import re

from tests.helpers.process import ROOT, run_cockpit

DOMAIN = (ROOT / "docs" / "domain.md").read_text(encoding="utf-8")


def _row(rule_id: str) -> list[str]:
    """The cells of a rule's row in docs/domain.md, read here on their own."""
    line = next(x for x in DOMAIN.splitlines() if x.startswith(f"| {rule_id} |"))
    return [c.strip() for c in line.strip("|").split(" | ")]


def test_rules_lists_every_rule_with_its_title() -> None:
    done = run_cockpit("rules")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    listed = re.findall(r"^  (D\d+) ", done.stdout, re.M)
    assert listed == [f"D{n}" for n in range(1, 25)]
    line = next(x for x in done.stdout.splitlines() if x.startswith("  D19 "))
    assert _row("D19")[1] in line  # a one-sentence rule is its own title
    assert "Interruptions and checkpoints" in done.stdout  # under its section


def test_rules_d19_prints_that_rule_whole() -> None:
    done = run_cockpit("rules", "D19")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.splitlines()[0] == "D19 · Interruptions and checkpoints"
    flat = " ".join(out.split())
    _, text, where = _row("D19")
    assert " ".join(text.split()) in flat and " ".join(where.split()) in flat
    assert "D18" not in out and "D20" not in out  # that rule only
    # The same rule however it is typed.
    assert run_cockpit("rules", "d19").stdout == out
    assert run_cockpit("rules", "19").stdout == out


def test_an_edge_rule_is_printed_with_its_rule() -> None:
    done = run_cockpit("rules", "D15")
    assert done.returncode == 0, done.stderr
    assert "\n  Edge: a run that ended blind to a stop rule" in done.stdout


def test_an_unknown_rule_is_one_located_line_and_exit_2() -> None:
    for wanted in ("D99", "X1", "\x1b[31mD1"):
        done = run_cockpit("rules", wanted)
        assert done.returncode == 2, (wanted, done.stdout)
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1, lines
        assert "no such rule in docs/domain.md" in lines[0] and "D1–D24" in lines[0]
        assert "\x1b" not in done.stderr and "Traceback" not in done.stderr
