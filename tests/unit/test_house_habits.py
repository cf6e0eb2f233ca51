"""The house's habits, read from the source (ast): no module in ``cockpit/`` over 800
lines and no function over 80 (issue 23). A long function is split where its steps are;
a long module where its parts are.

KNOWN lists today's offenders in packages whose owners mend them in issue 23; the test
fails both on a new offender and on a mended one still listed (drop its line then), like
tests/unit/test_layering.py. KNOWN must be empty when the issue closes.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cockpit"
MAX_MODULE_LINES = 800  # issue 40: split by concept, not by size
MAX_FUNCTION_LINES = 80

KNOWN: set[str] = set()  # every module and function within the limits


def offenders() -> list[str]:
    """Each module over the limit (its path) and each function over it (path: name);
    the user's code under assets/ is the user's."""
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "assets" in path.relative_to(PACKAGE).parts:
            continue
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT).as_posix()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found.append(name)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                    found.append(f"{name}: {node.name}")
    return found


def test_no_module_over_800_lines_and_no_function_over_80() -> None:
    found = offenders()
    new = sorted(set(found) - KNOWN)
    mended = sorted(KNOWN - set(found))
    assert not new, (f"over {MAX_MODULE_LINES} lines (a module) or {MAX_FUNCTION_LINES} "
                     "(a function):\n" + "\n".join(new))
    assert not mended, "mended, remove from KNOWN:\n" + "\n".join(mended)

