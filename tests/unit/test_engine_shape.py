"""The engine is composed of parts, not stacked (issue 23): no class in cockpit/engine/
inherits from another engine class (Protocols, dataclasses and exceptions from outside
are fine), the engine imports nothing of the fleet, and ``tick`` reads as a list of named
steps, each a few calls on named parts. Read from the source (ast)."""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "cockpit" / "engine"
ALLOWED_BASES = {"Protocol", "Exception", "ValueError", "RuntimeError"}


def _classes() -> dict[str, tuple[str, list[str]]]:
    """Every class defined in cockpit/engine: name -> (module, base names)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for path in sorted(ENGINE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b)
                         for b in node.bases]
                out[node.name] = (path.stem, bases)
    return out


def test_no_engine_class_inherits_another_engine_class() -> None:
    classes = _classes()
    stacked = [f"{module}.{name}({base})" for name, (module, bases) in classes.items()
               for base in bases if base in classes]
    assert stacked == [], stacked


def test_the_check_sees_a_stacked_class(tmp_path: Path) -> None:
    tree = ast.parse("class A:\n    pass\nclass B(A):\n    pass\n")
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    based = [b.id for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
             for b in n.bases if isinstance(b, ast.Name)]
    assert set(based) & names == {"A"}


def test_the_engine_imports_nothing_of_the_fleet() -> None:
    found = []
    for path in sorted(ENGINE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.stem} -> {n}" for n in names if n.startswith("cockpit.fleet")]
    assert found == []


def test_tick_is_a_short_pipeline_over_named_parts() -> None:
    tree = ast.parse((ENGINE / "facade.py").read_text(encoding="utf-8"))
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    methods = {n.name: n for n in engine.body if isinstance(n, ast.FunctionDef)}
    for name in ("tick", "_step"):
        body = methods[name]
        assert body.end_lineno is not None and body.end_lineno - body.lineno < 60
    # _step runs the named steps of Engine.TICK_STEPS, each a short method calling named
    # parts (issue 40: the tick reads as its docstring).
    assert "TICK_STEPS" in ast.unparse(methods["_step"])
    listed = next(n for n in engine.body if isinstance(n, ast.AnnAssign)
                  and ast.unparse(n.target) == "TICK_STEPS")
    steps = [e.id for e in listed.value.elts] if isinstance(listed.value, ast.Tuple) else []
    assert len(steps) >= 10, steps
    calls: set[str] = set()
    for step in steps:
        body = methods[step]
        assert body.end_lineno is not None and body.end_lineno - body.lineno < 25, step
        calls |= {ast.unparse(c.func) for c in ast.walk(body) if isinstance(c, ast.Call)}
    for call in ("self.observer.observe", "guards.rule_firings", "self.exits.record",
                 "self.past.state", "self.past.announce", "self.hooks.run",
                 "self.landing.step", "self.alerting.run"):
        assert call in calls, call
