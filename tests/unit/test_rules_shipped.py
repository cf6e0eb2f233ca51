"""The domain rules ship with the package (issue 23): ``cockpit.assets`` carries
docs/domain.md (package data, read through importlib.resources as an installed wheel
reads it), and the rules are read from it by id."""

from __future__ import annotations

import sys
from importlib.resources import files

import pytest

from cockpit.cli.rules import find_rule, parse_rules, rule_text, shipped_rules
from cockpit.common.errors import InputError
from tests.helpers.process import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project's oldest Python
    tomllib = pytest.importorskip("tomli")


def test_the_package_carries_docs_domain_md() -> None:
    shipped = files("cockpit.assets") / "domain.md"
    assert shipped.is_file()
    assert shipped.read_text(encoding="utf-8") == \
        (ROOT / "docs" / "domain.md").read_text(encoding="utf-8")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "domain.md" in data["tool"]["setuptools"]["package-data"]["cockpit.assets"]


def test_every_rule_d1_to_d24_is_read_with_its_section() -> None:
    rules = shipped_rules()
    assert [r.id for r in rules] == [f"D{n}" for n in range(1, 25)]
    assert all(r.section and r.text and r.where for r in rules)
    assert find_rule(rules, "D21").section == "Budget against the result"


def test_a_table_row_and_a_bullet_are_both_read() -> None:
    text = ("# Rules\n## First\n| | rule | where |\n|---|---|---|\n"
            "| A1 | One thing. Then more. | here \\| there |\n"
            "## Second\n- B2. A bullet rule\n  on two lines.\n- not a rule\n")
    rules = parse_rules(text)
    assert [(r.id, r.section, r.text, r.where) for r in rules] == [
        ("A1", "First", "One thing. Then more.", "here | there"),
        ("B2", "Second", "A bullet rule on two lines.", "")]
    assert rules[0].title == "One thing."
    assert rule_text(rules[1]) == "B2 · Second\n\nA bullet rule on two lines."
    with pytest.raises(InputError, match="no such rule.*A1–B2"):
        find_rule(rules, "C3")
