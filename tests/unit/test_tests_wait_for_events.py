"""The tests wait for what they mean (issue 40), read from their source (ast): no
``time.sleep``, ``pilot.pause`` or Playwright ``wait_for_timeout`` of a constant (a test waits for a
journal line, a screen line, a file, a message: :func:`tests.helpers.process.wait_for`
polls for it), and no assertion on measured wall time (timing belongs in ``bench/``).

Code that a test hands to a child process as text (a training script's ``time.sleep``
between steps) is the child's behaviour, not a wait: it is a string here and not read.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# The only places a constant sleep is the point: the poll helper itself, and the
# helpers whose pace is the behaviour under test.
ALLOWED_SLEEPS = {
    "helpers/process.py:wait_for": "the documented poll helper: its interval between looks",
    "helpers/process.py:pilot_until": "the same for a TUI test (between pilot.pause()s)",
}
CLOCKS = {"monotonic", "time", "perf_counter", "monotonic_ns", "perf_counter_ns"}


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _constant(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float))


def _called(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr if not isinstance(func.value, ast.Name) else f"{func.value.id}.{func.attr}"
    return func.id if isinstance(func, ast.Name) else ""


def _reads_clock(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _called(n).split(".")[-1] in CLOCKS
               and _called(n) != "pilot.pause" for n in ast.walk(node))


def _elapsed(node: ast.AST) -> bool:
    """A subtraction with a clock reading on one side: ``time.monotonic() - began``."""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub)
               and (_reads_clock(n.left) or _reads_clock(n.right)) for n in ast.walk(node))


def violations() -> list[str]:
    """Each offending line once, named by its innermost function."""
    found: dict[tuple[str, int], str] = {}
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        tree = ast.parse(path.read_text("utf-8"))
        for func in _functions(tree):
            where = f"{rel}:{func.name}"
            measured = {t.id for n in ast.walk(func) if isinstance(n, ast.Assign)
                        and _elapsed(n.value) for t in n.targets if isinstance(t, ast.Name)}
            for node in ast.walk(func):
                if isinstance(node, ast.Call) and node.args and _constant(node.args[0]):
                    name = _called(node)
                    if name in ("time.sleep", "sleep", "asyncio.sleep"):
                        found[rel, node.lineno] = (
                            "" if where in ALLOWED_SLEEPS else
                            f"{where}:{node.lineno}: {name}({ast.unparse(node.args[0])})")
                    if name == "pilot.pause" or name.endswith("wait_for_timeout"):
                        found[rel, node.lineno] = f"{where}:{node.lineno}: {name}(constant)"
                if isinstance(node, ast.Assert) and (
                        _elapsed(node.test) or any(isinstance(n, ast.Name) and n.id in measured
                                                   for n in ast.walk(node.test))):
                    found[rel, node.lineno] = f"{where}:{node.lineno}: asserts on wall time"
    return [text for _, text in sorted(found.items()) if text]


def test_no_test_waits_a_fixed_time_or_asserts_on_wall_time() -> None:
    found = violations()
    assert not found, "wait for the event instead (tests/helpers/process.py wait_for):\n" \
        + "\n".join(found)


def test_the_check_finds_what_it_forbids(tmp_path: Path) -> None:
    """The reading itself: a fixed sleep, a fixed pause and an elapsed assertion are
    found; a sleep inside a child's script text and a deadline poll are not."""
    sample = ast.parse(
        "import time\n"
        "def test_x(pilot):\n"
        "    began = time.monotonic()\n"
        "    time.sleep(0.5)\n"
        "    pilot.pause(0.2)\n"
        "    pilot.pause()\n"
        "    spent = time.monotonic() - began\n"
        "    assert spent < 2\n"
        "    SCRIPT = 'import time; time.sleep(600)'\n")
    func = _functions(sample)[0]
    sleeps = [n for n in ast.walk(func) if isinstance(n, ast.Call) and n.args
              and _constant(n.args[0]) and _called(n) in ("time.sleep", "pilot.pause")]
    assert len(sleeps) == 2
    asserts = [n for n in ast.walk(func) if isinstance(n, ast.Assert)]
    measured = {t.id for n in ast.walk(func) if isinstance(n, ast.Assign)
                and _elapsed(n.value) for t in n.targets if isinstance(t, ast.Name)}
    assert measured == {"spent"} and asserts
