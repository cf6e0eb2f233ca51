"""The package's layers: every import points down (or sideways inside a package), never up,
and there is no import cycle. Read from the source (ast), so a lazy import inside a
function counts as much as one at the top.

The layers, lowest first (docs/architecture.md draws the same map):

    common    errors, safe writes, untrusted text, units        (imports nothing of ours)
    campaign  the plan model: the campaign file, loaded and checked
    telemetry NVML and psutil readings (simulated NVML in telemetry/simulated)
    journal   the event vocabulary, the append-only file, the fold, the read path
    planning  pure: schedule, forecast, deadline, calibration, advice
    runs      a run's processes, metrics, checkpoints, stop rules
    close     acceptance, conclusion, budget
    export    the verified export (a BagIt bag) and its verifier
    engine    tick(now) -> Snapshot and the actions
    fleet     many machines: peers' journals, actions on another machine
    headless  the screenless face: loop, status log, status line, text rendering
    tui       the Textual face
    serve     the browser face: the tui behind textual-serve, a token, the loopback
    cli       the commands

At the top of ``cockpit`` only what a training script imports (``report``, ``resume``),
the package data (``assets``) and ``__main__``.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cockpit"

LAYERS = ["common", "campaign", "alerts", "telemetry", "journal", "planning", "runs", "close",
          "export",
          "engine", "fleet", "headless", "tui", "serve", "cli"]
TOP_MODULES = {"__init__", "__main__", "report", "resume"}
# integrations/: what a training script imports to report from inside a framework
# (cockpit.integrations.hf, .lightning): like report and resume, it carries nothing of the
# cockpit with it.
TOP_PACKAGES = set(LAYERS) | {"assets", "integrations"}
# What a face may import of the engine: its public face and the Snapshot.
ENGINE_FACE = {"cockpit.engine", "cockpit.engine.snapshot"}
NOT_FOR_A_FACE = ("cockpit.runs", "cockpit.close", "cockpit.journal", "cockpit.planning")

def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every cockpit module ``path`` imports, anywhere in the file (``from cockpit import x``
    counts as ``cockpit.x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("cockpit"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "cockpit":
                found.update(f"cockpit.{a.name}" for a in node.names)
            elif node.module.startswith("cockpit."):
                found.add(node.module)
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py") if "assets" not in p.parts}
    return {name: {t for t in imports_of(path) if t != "cockpit.__version__"}
            for name, path in modules.items()}


def layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_the_top_of_the_package_holds_only_what_a_training_script_imports() -> None:
    loose = {p.stem for p in PACKAGE.glob("*.py")} - TOP_MODULES
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} - TOP_PACKAGES
    assert not loose, f"modules loose at cockpit/: {sorted(loose)}"
    assert not folders, f"packages outside the layer map: {sorted(folders)}"


def test_no_import_points_up_a_layer() -> None:
    upward = []
    for source, targets in graph().items():
        low = layer(source)
        for target in targets:
            high = layer(target)
            if source.count(".") == 0 or source in ("cockpit.report", "cockpit.resume") \
                    or source.startswith("cockpit.integrations"):
                # a training script's helpers carry nothing of the cockpit with them
                if target.split(".")[1] not in ("common", "report", "cli", "integrations"):
                    upward.append(f"{source} -> {target}")
            elif low is not None and high is not None and high > low:
                upward.append(f"{source} -> {target}")
    assert not upward, "imports up a layer:\n" + "\n".join(sorted(upward))


def test_there_is_no_import_cycle() -> None:
    edges = graph()
    # Resolve each import to the module file it names (a package is its __init__).
    edges = {m: {t for t in ts if t in edges and t != m} for m, ts in edges.items()}
    colour: dict[str, int] = defaultdict(int)  # 0 new, 1 on the stack, 2 done
    cycles: list[str] = []

    def visit(module: str, stack: list[str]) -> None:
        colour[module] = 1
        for target in sorted(edges[module]):
            if colour[target] == 1:
                cycles.append(" -> ".join([*stack[stack.index(target):], target]))
            elif colour[target] == 0:
                visit(target, [*stack, target])
        colour[module] = 2

    for module in sorted(edges):
        if colour[module] == 0:
            visit(module, [module])
    # A package importing its own submodules is not a cycle of meaning when the submodule
    # does not import the package back; every cycle found here does.
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_faces_use_only_the_engine_face_and_the_snapshot() -> None:
    wrong = []
    for source, targets in graph().items():
        face = source.split(".")[1] if source.count(".") else ""
        if face not in ("tui", "headless"):
            continue
        for target in targets:
            if target.startswith("cockpit.engine") and target not in ENGINE_FACE:
                wrong.append(f"{source} -> {target}")
            if target.startswith(NOT_FOR_A_FACE):
                wrong.append(f"{source} -> {target}")
    assert not wrong, "a face past the engine's face:\n" + "\n".join(sorted(wrong))


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    # The check itself can fail: a planning module importing the engine is caught.
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from cockpit.engine.core import thing\n"
                      "from cockpit import report\n")
    assert imports_of(source) == {"cockpit.engine.core", "cockpit.report"}
    assert layer("cockpit.planning.schedule") < layer("cockpit.engine.core")  # type: ignore[operator]
