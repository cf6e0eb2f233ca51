"""One journal line to one event: the common line's fast path and every odd line agree
with the rule (bounded JSON, an object with a string kind, fields that fit)."""

from __future__ import annotations

import json
import re

import pytest

from cockpit.common.safe_json import MAX_DEPTH
from cockpit.journal.lines import SkippedLine, event_of_line

GOOD = {"seq": 1, "t": "2026-12-04T10:00:00.000000Z", "kind": "note", "stage": "pilot",
        "note": "ok"}


@pytest.mark.parametrize("line", [
    json.dumps(GOOD),
    json.dumps(GOOD).encode(),  # a block that was not UTF-8: its good lines are bytes
    "  " + json.dumps(GOOD) + " \t",  # space around it: still the event
    json.dumps({**GOOD, "deep": [[[1]]]}),
])
def test_an_event_line_is_read_the_same_on_every_path(line: str | bytes) -> None:
    event = event_of_line(line)
    assert event is not None and event["kind"] == "note" and event["note"] == "ok"


@pytest.mark.parametrize("line", ["", "   ", b"  \t", "\x0c"])
def test_a_blank_line_carries_nothing(line: str | bytes) -> None:
    assert event_of_line(line) is None


@pytest.mark.parametrize(("line", "why"), [
    ('{"seq": 1, "kind": "note"', "not valid JSON"),
    (json.dumps(GOOD) + " {}", "not valid JSON"),  # two values on a line
    ("[1, 2]", "not an event"),
    ('{"seq": 1, "kind": 7}', "not an event"),
    ("{" * (MAX_DEPTH + 1) + "}" * (MAX_DEPTH + 1), "not"),
    ('{"kind": "note", "x": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}",
     "nested deeper"),
    (json.dumps({**GOOD, "t": "yesterday"}), "field 't' is 'yesterday'"),
    (json.dumps({**GOOD, "stage": 12}), "field 'stage' is 12"),
    (b'{"kind": "note", "note": "\xff"}', "UnicodeDecodeError"),
])
def test_an_odd_line_is_skipped_with_its_reason(line: str | bytes, why: str) -> None:
    with pytest.raises(SkippedLine, match=re.escape(why)):
        event_of_line(line)
