"""docs/architecture.md is the package's map (issue 40): every module of ``cockpit/`` is
named in it, and every module file it names exists (in the package, or for the tests'
part, under tests/)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text("utf-8")


def modules() -> list[Path]:
    package = ROOT / "cockpit"
    return [p for p in package.rglob("*.py")
            if "assets" not in p.relative_to(package).parts and p.name != "__init__.py"]


def test_every_module_is_on_the_map() -> None:
    missing = sorted(str(p.relative_to(ROOT)) for p in modules()
                     if not re.search(rf"\b{re.escape(p.name)}\b", DOC))
    assert not missing, f"modules docs/architecture.md does not name: {missing}"


def test_every_file_on_the_map_exists() -> None:
    known = {p.name for p in modules()} | {"__init__.py", "__main__.py"}
    known |= {p.name for p in (ROOT / "tests").rglob("*.py")}
    named = set(re.findall(r"\b([a-z_0-9]+\.py)\b", DOC))
    assert named - known == set(), f"named but nowhere: {sorted(named - known)}"
