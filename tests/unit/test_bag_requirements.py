"""What the bag says to install and how reload.py fits a checkpoint's keys (issue 42):
requirements.txt from the code's imports (distributions, their own dependencies, markers,
local build labels), the fresh venv's reading of it as data, and the leading-module
strip rule of reload.py (strict after the strip, refused when ambiguous or partial)."""

from __future__ import annotations

import argparse
import types
from pathlib import Path
from typing import Any

import pytest

from cockpit.cli.closing import add_close_commands, check_fresh_venv
from cockpit.common.errors import InputError
from cockpit.export.fresh_venv import label_warnings, read_pins
from cockpit.export.reload_script import reload_script
from cockpit.export.requirements import (
    bag_requirements,
    derive,
    imported_modules,
    local_indexes,
    marker_holds,
    parse_requirement,
    requirements_text,
)

ENV = {"python": "3.11.7", "implementation": "CPython", "os": "Linux", "machine": "x86_64"}


class Dist:
    """An installed distribution as importlib.metadata shows one."""

    def __init__(self, name: str, version: str, *requires: str) -> None:
        self.metadata = {"Name": name}
        self.version = version
        self.requires = list(requires)


INSTALLED: dict[str, Any] = {d.metadata["Name"].lower(): d for d in (
    Dist("torch", "2.13.0+cpu", "filelock", "sympy>=1.13", 'optree>=0.13; extra == "optree"',
         'setuptools; python_version >= "3.99"'),
    Dist("filelock", "4.3.2"), Dist("sympy", "1.14.0", "mpmath<1.4"), Dist("mpmath", "1.3.0"),
    Dist("setuptools", "84.2.1"), Dist("optree", "0.13.0"),
    Dist("pytorch-lightning", "2.6.6", "torch>=2.1", "fsspec[http]>=2022.5",
         'pytest==9.0.2; extra == "test"'),
    Dist("fsspec", "2026.9.0", 'aiohttp!=4.0.0a0; extra == "http"', 'pyarrow; extra == "arrow"'),
    Dist("aiohttp", "3.14.5"), Dist("pyarrow", "20.0.0"), Dist("pytest", "9.0.2"),
    Dist("playwright", "1.50.0"), Dist("cockpit", "0.1.0", "textual>=8"), Dist("textual", "8.2.5"),
)}
PROVIDERS = {"torch": ["torch"], "pytorch_lightning": ["pytorch-lightning"],
             "cockpit": ["cockpit"], "pytest": ["pytest"], "playwright": ["playwright"],
             "lightning": ["lightning"]}


def _code(tmp_path: Path) -> list[Path]:
    (tmp_path / "train.py").write_text(
        "import os, json\nimport torch\nimport pytorch_lightning as pl\n"
        "from cockpit.integrations.lightning import CockpitCallback\nimport common\n"
        "try:\n    import lightning\nexcept ImportError:\n    pass\n"
        "from . import sibling  # relative: the campaign's own\n")
    (tmp_path / "common.py").write_text("from torch import nn\n")
    return [tmp_path / "train.py", tmp_path / "common.py"]


def test_the_imports_become_distributions_and_their_own_dependencies(tmp_path: Path) -> None:
    from packaging.markers import Marker

    files = _code(tmp_path)
    imports = imported_modules(files)
    assert imports["torch"] == ["train.py", "common.py"] and "sibling" not in imports
    derived = derive(imports, {"train", "common"}, INSTALLED, PROVIDERS, Marker)
    # torch -> filelock, sympy -> mpmath; Lightning -> fsspec[http] -> aiohttp; never an
    # extra nobody asked for (optree, pyarrow, pytest), nor a marker false here.
    assert set(derived.pins) == {"torch", "filelock", "sympy", "mpmath", "pytorch-lightning",
                                 "fsspec", "aiohttp"}
    assert derived.why["torch"] == "imported by common.py, train.py"
    assert derived.why["mpmath"] == "needed by sympy"
    assert derived.cockpit == "0.1.0" and "textual" not in derived.pins
    assert derived.not_installed == {"lightning": ["train.py"]}


def test_without_packaging_a_marked_requirement_is_kept_when_installed() -> None:
    assert marker_holds('extra == "http"', ["http"], installed=False)
    assert not marker_holds('extra == "test"', [], installed=True)
    # No packaging: a marker without an extra holds when pip installed it here.
    assert marker_holds('python_version >= "3.99"', [], installed=True)
    assert not marker_holds('python_version >= "3.99"', [], installed=False)
    derived = derive({"torch": ["train.py"]}, set(), INSTALLED, PROVIDERS, None)
    assert "setuptools" in derived.pins and "optree" not in derived.pins
    req = parse_requirement('fsspec[http, s3] (>=2022.5) ; extra == "all"')
    assert req is not None and req.name == "fsspec" and req.extras == {"http", "s3"}
    assert req.marker == 'extra == "all"'


def test_a_local_build_is_pinned_as_its_public_release_with_the_index_said(
        tmp_path: Path) -> None:
    from packaging.markers import Marker

    derived = derive(imported_modules(_code(tmp_path)), {"train", "common"}, INSTALLED,
                     PROVIDERS, Marker)
    text = requirements_text(derived, ENV)
    lines = text.splitlines()
    assert "torch==2.13.0  # imported by common.py, train.py" in lines
    assert not any(line.startswith("torch==2.13.0+cpu") for line in lines)
    assert "# torch 2.13.0+cpu was installed: '+cpu' is a local build label" in text
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text
    assert local_indexes(derived) == ["https://download.pytorch.org/whl/cpu"]
    assert "# cockpit==0.1.0: the cockpit itself (imported by train.py)" in text
    assert "# lightning: imported by train.py, not installed here" in text
    pins = [line for line in lines if not line.startswith("#")]
    assert all("pytest" not in p and "playwright" not in p for p in pins)
    assert read_pins(text) == ({"aiohttp": "3.14.5", "filelock": "4.3.2",
                                "fsspec": "2026.9.0", "mpmath": "1.3.0",
                                "pytorch-lightning": "2.6.6", "sympy": "1.14.0",
                                "torch": "2.13.0"}, None)


def test_the_real_environment_maps_an_import_to_its_distribution(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "prep.py").write_text("import yaml\nimport pytest  # imported: kept\n")
    text, derived = bag_requirements(tmp_path, [tmp_path / "prep.py"], {}, ENV)
    assert f"PyYAML=={yaml.__version__}  # imported by prep.py" in text.splitlines()
    assert "pytest" in derived.pins  # the code imports it, so it is needed


@pytest.mark.parametrize("line", ["-e git+https://example.org/x.git#egg=x",
                                  "--index-url https://evil.example/simple",
                                  "https://example.org/x-1.0.whl", "./local-pkg",
                                  "torch>=2.0"])
def test_the_fresh_venv_installs_plain_pins_only(line: str) -> None:
    pins, why = read_pins(f"# header\nnumpy==2.4.6  # imported by train.py\n{line}\n")
    assert pins == {} and why is not None and "line 3 is not a plain pin" in why


def test_a_local_build_not_installed_is_a_warning_naming_its_index() -> None:
    warnings = label_warnings({"torch": "2.13.0", "numpy": "2.4.6"},
                              {"torch": "2.13.0", "numpy": "2.4.6"},
                              {"torch": "2.13.0+cpu", "numpy": "2.4.6"})
    assert warnings == ["torch: 2.13.0 installed, the export used the local build 2.13.0+cpu "
                        "(--pip-extra-index https://download.pytorch.org/whl/cpu)"]
    assert label_warnings({"torch": "2.13.0"}, {"torch": "2.13.0+cpu"},
                          {"torch": "2.13.0+cpu"}) == []


def _verify_args(*words: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_close_commands(parser.add_subparsers())
    return parser.parse_args(["verify-export", "BAG", *words])


@pytest.mark.parametrize(("words", "said"), [
    (("--fresh-venv",), "add --rebuild"),
    (("--rebuild", "--pip-extra-index", "https://download.pytorch.org/whl/cpu"),
     "go with --fresh-venv"),
    (("--rebuild", "--fresh-venv", "--pip-extra-index", "download.pytorch.org"),
     "not an http(s):// or file:// URL"),
])
def test_fresh_venv_options_out_of_place_are_bad_input(words: tuple[str, ...],
                                                       said: str) -> None:
    with pytest.raises(InputError) as exc:
        check_fresh_venv(_verify_args(*words))
    assert said in str(exc.value) and "verify-export" in str(exc.value)
    check_fresh_venv(_verify_args("--rebuild", "--fresh-venv", "--pip-extra-index",
                                  "https://download.pytorch.org/whl/cpu"))


# ---------------------------------------------------------------- the strip rule


@pytest.fixture(scope="module")
def reload_module() -> types.ModuleType:
    """The bag's reload.py as a module (no run in its table; torch not imported)."""
    module = types.ModuleType("reload_under_test")
    module.__file__ = "reload.py"
    exec(compile(reload_script("t", {}), "reload.py", "exec"), module.__dict__)  # noqa: S102
    return module


class Model:
    """What load_state asks of a model: its state dict's keys and a strict load."""

    def __init__(self, *keys: str) -> None:
        self.keys = keys
        self.loaded: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, int]:
        return {k: 0 for k in self.keys}

    def load_state_dict(self, state: dict[str, Any], strict: bool) -> None:
        assert strict, "reload.py never loads non-strictly"
        if set(state) != set(self.keys):
            differ = sorted(set(state) ^ set(self.keys))
            raise RuntimeError(f"Error(s) in loading state_dict: {differ}")
        self.loaded = state


def test_a_lightning_prefix_is_stripped_when_that_alone_makes_the_keys_fit(
        reload_module: types.ModuleType) -> None:
    model = Model("0.weight", "0.bias", "2.weight")
    out: dict[str, Any] = {}
    reload_module.load_state(model, {"model.0.weight": 1, "model.0.bias": 2,
                                     "model.2.weight": 3}, out)
    assert model.loaded == {"0.weight": 1, "0.bias": 2, "2.weight": 3}
    assert out["prefix_stripped"] == "model." and out["missing_keys"] == []
    assert out["unexpected_keys"] == [] and out["tensors"] == 3
    exact = Model("w")
    reload_module.load_state(exact, {"w": 1}, out := {})
    assert exact.loaded == {"w": 1} and "prefix_stripped" not in out


@pytest.mark.parametrize(("state", "why"), [
    ({"model.0.weight": 1, "ema.0.weight": 2}, "several leading modules (ema., model.)"),
    ({"model.0.weight": 1}, "fit only in part (1 missing, 0 unexpected)"),
    ({"model.0.weight": 1, "model.0.bias": 2, "model.9.x": 3}, "1 unexpected"),
    ({"weight": 1, "model.0.bias": 2}, "carry no leading module"),
])
def test_an_ambiguous_or_partial_prefix_is_refused(reload_module: types.ModuleType,
                                                   state: dict[str, int], why: str) -> None:
    model = Model("0.weight", "0.bias")
    out: dict[str, Any] = {}
    with pytest.raises(RuntimeError, match="Error"):
        reload_module.load_state(model, state, out)
    assert model.loaded is None and why in out["prefix_refused"]
    assert "prefix_stripped" not in out and out["missing_keys"]
