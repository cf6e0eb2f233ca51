"""The located checker every section reader uses: typed reads of plain YAML data that
collect FILE:LINE:COL problems instead of stopping at the first."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any

from cockpit.campaign.yamlread import KeyPath, Located
from cockpit.common.errors import InputError, Problem
from cockpit.common.units import DURATION_BOUND, MAX_DURATION_S, parse_duration

# Ids of offers, stages, runs and rules.
NAME_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


class Checker:
    """Collects located problems while reading plain YAML data."""

    def __init__(self, loc: Located) -> None:
        self.loc = loc
        self.problems: list[Problem] = []

    def err(self, path: KeyPath, message: str, *, key: bool = False) -> None:
        self.problems.append(self.loc.problem(path, message, key=key))

    def mapping(
        self,
        value: Any,
        path: KeyPath,
        known: Iterable[str],
        required: Iterable[str] = (),
        what: str = "section",
    ) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.err(path, f"{what} must be a mapping (key: value), not {kind_of(value)}")
            return None
        known = tuple(known)
        for key in value:
            if not isinstance(key, str) or key not in known:
                hint = difflib.get_close_matches(str(key), known, n=1)
                extra = f" (did you mean {hint[0]!r}?)" if hint else ""
                self.err(path + (key,), f"unknown key {key!r} in {what}{extra}", key=True)
        for key in required:
            if key not in value:
                self.err(path, f"{what} needs {key!r}")
        return value

    def string(self, value: Any, path: KeyPath, what: str, pattern: re.Pattern[str] | None = None,
               hint: str = "") -> str | None:
        if not isinstance(value, str) or not value.strip():
            self.err(path, f"{what} must be a non-empty text, not {kind_of(value)}")
            return None
        if pattern is not None and not pattern.match(value):
            self.err(path, f"{what} {value!r} is not valid{hint}")
            return None
        return value

    def integer(self, value: Any, path: KeyPath, what: str, minimum: int = 1) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.err(path, f"{what} must be a whole number, not {kind_of(value)}")
            return None
        if value < minimum:
            self.err(path, f"{what} must be at least {minimum}, not {value}")
            return None
        return value

    def positive(self, value: Any, path: KeyPath, what: str) -> float | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.err(path, f"{what} must be a number, not {kind_of(value)}")
            return None
        if not value > 0 or value != value or value == float("inf"):
            self.err(path, f"{what} must be a positive finite number, not {value}")
            return None
        return float(value)

    def boolean(self, value: Any, path: KeyPath, what: str) -> bool:
        if not isinstance(value, bool):
            self.err(path, f"{what} must be true or false, not {kind_of(value)}")
            return False
        return value

    def hours(self, value: Any, path: KeyPath, what: str) -> float | None:
        """Seconds from a positive number of hours, within the duration bound."""
        hours = self.positive(value, path, what)
        if hours is None:
            return None
        if hours * 3600.0 > MAX_DURATION_S:
            self.err(path, f"{what} {value} h is too long: {DURATION_BOUND}")
            return None
        return hours * 3600.0

    def duration(self, value: Any, path: KeyPath, what: str) -> float | None:
        """Seconds from "90m"-style text, or a bare number of hours."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return self.hours(value, path, what)
        if not isinstance(value, str):
            self.err(path, f"{what} must be a duration like 90m or 1h30m, not {kind_of(value)}")
            return None
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.err(path, f"{what}: {exc}")
            return None

    def str_list(self, value: Any, path: KeyPath, what: str) -> list[str]:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            self.err(path, f"{what} must be a text or a list of texts")
            return []
        return list(items)

    def raise_if_any(self) -> None:
        if self.problems:
            self.problems.sort(key=lambda p: (p.line, p.col))
            raise InputError(self.problems)


def kind_of(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    return repr(value)
