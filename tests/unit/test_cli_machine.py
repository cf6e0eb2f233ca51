"""``--machine`` is a value (issue 23): the command line reads COCKPIT_MACHINE as the
default of ``--machine`` and hands the machine on; it never writes the environment."""

from __future__ import annotations

import argparse
import ast

import pytest

from cockpit.cli.common import machine_of
from cockpit.common.errors import InputError
from tests.helpers.process import ROOT

WRITERS = {"pop", "update", "setdefault", "clear", "popitem", "__setitem__", "__delitem__"}


def _environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def test_the_cli_never_writes_the_environment() -> None:
    found = []
    for path in sorted((ROOT / "cockpit" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else []
            if any(isinstance(t, ast.Subscript) and _environ(t.value) for t in targets):
                found.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    (node.func.attr in WRITERS and _environ(node.func.value))
                    or node.func.attr in ("putenv", "unsetenv")):
                found.append(f"{path.name}:{node.lineno}")
    assert not found, f"the environment written at {found}"


def test_the_machine_is_the_option_else_the_variable_else_1(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COCKPIT_MACHINE", raising=False)
    assert machine_of(argparse.Namespace()) == 1
    monkeypatch.setenv("COCKPIT_MACHINE", "3")
    assert machine_of(argparse.Namespace(machine=None)) == 3
    assert machine_of(argparse.Namespace(machine=2)) == 2
    monkeypatch.setenv("COCKPIT_MACHINE", "0")
    with pytest.raises(InputError, match="COCKPIT_MACHINE='0'"):
        machine_of(argparse.Namespace(machine=None))
