"""The conductor's effects have one table (:data:`cockpit.engine.conductor.CONDUCTOR_EFFECTS`,
issue 39), and the package is held to it: every call that does one of those effects
stands in a function the table names for it, read from the source (ast)."""

from __future__ import annotations

import ast
from pathlib import Path

from cockpit.engine.conductor import CONDUCTOR_EFFECTS

PACKAGE = Path(__file__).resolve().parents[2] / "cockpit"


def _dotted(node: ast.expr) -> str:
    """``self.past.save_cache`` for the called expression (the names that can be read)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _call_sites() -> list[tuple[str, str]]:
    """(called dotted name, ``module:function``) for every call in the package."""
    sites: list[tuple[str, str]] = []
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        tree = ast.parse(path.read_text("utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Call):
                    sites.append((_dotted(node.func), f"{module}:{func.name}"))
    return sites


def test_every_conductor_effect_is_done_only_where_the_table_says() -> None:
    sites = _call_sites()
    seen: dict[str, set[str]] = {name: set() for name in CONDUCTOR_EFFECTS}
    wrong: list[str] = []
    for name, effect in CONDUCTOR_EFFECTS.items():
        for called, where in sites:
            if any(called == c or called.endswith("." + c) for c in effect.calls):
                seen[name].add(where)
                if where not in effect.sites:
                    wrong.append(f"{name}: {called} in {where}")
    assert not wrong, "conductor effects outside the table's sites:\n" + "\n".join(wrong)
    # The table names real places: each effect is done somewhere, each site does it.
    for name, effect in CONDUCTOR_EFFECTS.items():
        assert seen[name], f"{name}: no call of {effect.calls} found in the package"
        assert set(effect.sites) <= seen[name] | {s for s in effect.sites
                                                  if s.endswith(":wait_stopped")}, \
            f"{name}: the table names sites that do not do it: {set(effect.sites) - seen[name]}"


def test_the_acting_half_of_a_tick_runs_only_when_this_engine_conducts() -> None:
    """``_step`` (every engine-side effect's site) is called from ``tick`` alone, and
    there behind ``_conduct_now()``."""
    tree = ast.parse((PACKAGE / "engine" / "facade.py").read_text("utf-8"))
    callers = [f.name for f in ast.walk(tree)
               if isinstance(f, ast.FunctionDef)
               for n in ast.walk(f) if isinstance(n, ast.Call) and _dotted(n.func) == "self._step"]
    assert callers == ["tick"]
    tick = next(f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "tick")
    guarded = [n for n in ast.walk(tick) if isinstance(n, ast.If)
               and "_conduct_now" in ast.unparse(n.test)
               and any(isinstance(c, ast.Call) and _dotted(c.func) == "self._step"
                       for b in n.body for c in ast.walk(b))]
    assert guarded, "tick calls _step outside `if self._conduct_now():`"
    # The steps (the effects' sites) run only through _step: Engine.TICK_STEPS names them
    # and nothing calls one directly.
    from cockpit.engine.facade import Engine
    steps = {step.__name__ for step in Engine.TICK_STEPS}
    assert {"_judge_rules", "_start_next", "_land", "_announce"} <= steps
    direct = [f"{f.name} calls {_dotted(n.func)}" for f in ast.walk(tree)
              if isinstance(f, ast.FunctionDef) for n in ast.walk(f)
              if isinstance(n, ast.Call) and _dotted(n.func).split(".")[-1] in steps]
    assert not direct, direct
    step = next(f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                and f.name == "_step")
    assert "TICK_STEPS" in ast.unparse(step)
