"""Errors that reach the user as one located line and exit code 2 (bad input)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One problem in an input file, located at 1-based line and column."""

    path: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.message}"


class InputError(Exception):
    """Bad input: the CLI prints each problem on its own line and exits 2."""

    def __init__(self, problems: list[Problem] | Problem | str) -> None:
        if isinstance(problems, str):
            self.problems: list[Problem] = []
            self.text = problems
        else:
            self.problems = [problems] if isinstance(problems, Problem) else list(problems)
            self.text = "\n".join(str(p) for p in self.problems)
        super().__init__(self.text)


class ActionRefused(Exception):
    """An action that cannot be done now (exit 1 with the reason): not bad input."""
