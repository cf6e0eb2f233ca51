"""JSON from files the cockpit did not write itself (journal lines, metric lines):
parsed with a nesting bound, so a line of 2,000 brackets is a skipped line, not a
RecursionError that stops every command.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64

# json.loads's own decoder, its raw_decode called directly on the common case (a text
# that starts with its value): the same parse with two Python frames fewer per call (a
# journal of a million lines is read a line at a time).
RAW_DECODE = json.JSONDecoder().raw_decode


class TooDeep(ValueError):
    """A JSON text nested deeper than the bound."""


def nesting_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of a JSON text, brackets inside strings ignored."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def loads_bounded(text: str, max_depth: int = MAX_DEPTH, **kwargs: Any) -> Any:
    """``json.loads`` that refuses (TooDeep) a text nested deeper than ``max_depth``."""
    # Cheap first: a text with fewer brackets than the bound cannot be too deep.
    if text.count("[") + text.count("{") > max_depth and nesting_depth(text) > max_depth:
        raise TooDeep(f"nested deeper than {max_depth} levels")
    if not kwargs and isinstance(text, str):
        try:
            value, end = RAW_DECODE(text)
        except ValueError:
            pass  # not a value at its start (or leading space): json.loads says which
        else:
            if end == len(text) or not text[end:].strip(" \t\n\r"):  # JSON's whitespace
                return value
    return json.loads(text, **kwargs)
