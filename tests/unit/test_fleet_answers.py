"""`cockpit fleet` reads what an action did on another machine only as the JSON list its
cockpit prints with ``--json``: a human text, a JSON that is not a list of events, or a
hostile text is refused with a located reason, never parsed by pattern (issue 23)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cockpit.campaign import load_campaign
from cockpit.common.errors import ActionRefused
from cockpit.fleet import remote
from cockpit.fleet.remote import RemoteActions, parse_written
from cockpit.fleet.ssh import SshResult
from tests.helpers.campaigns import recent_start, step_command, write_campaign


def test_a_json_list_of_events_is_read_and_tagged_with_its_machine() -> None:
    text = '[{"seq": 7, "t": "2026-12-02T09:00:00Z", "kind": "note", "stage": "a", ' \
           '"text": "ok", "machine": 9}]\n'
    (event,) = parse_written(2, text)
    assert (event["seq"], event["kind"], event["machine"]) == (7, "note", 2)


@pytest.mark.parametrize(("answer", "why"), [
    ("journal #3 2026-12-02T09:00:00Z note on a: ok", "is not JSON"),
    ('{"seq": 3, "kind": "note"}', "is not a JSON list of events (a dict)"),
    ('[{"seq": "3", "kind": "note"}]', "item 0 is not an event"),
    ('[{"seq": 3}]', "item 0 is not an event"),
    ('[{"seq": 3, "kind": "decision", "drops": 5}]', "event #3: field 'drops' is 5"),
    ("[" * 500 + "]" * 500, "is not JSON"),
])
def test_an_answer_that_is_not_the_json_list_is_refused_with_where(answer: str,
                                                                    why: str) -> None:
    with pytest.raises(ActionRefused) as refused:
        parse_written(2, answer)
    assert str(refused.value).startswith("on machine 2: the answer of its cockpit")
    assert why in str(refused.value)


def test_hostile_text_in_a_refused_answer_is_shown_printable() -> None:
    with pytest.raises(ActionRefused) as refused:
        parse_written(2, "journal #1 \x1b]52;c;ZXZpbA==\x07 rm -rf\x1b[2J")
    assert "\x1b" not in str(refused.value) and "\x07" not in str(refused.value)


def test_a_remote_action_whose_cockpit_answers_in_words_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_campaign(tmp_path, [
        {"id": "a", "hours": 1, "resource": "gpu:0", "machine": 2,
         "command": step_command(1, 0.01)},
    ], extra={"package": {"offer": "rtx4090-3d", "start": recent_start(),
                          "count": 2},
              "machines": {1: {"ssh": "one", "path": "/m1"}, 2: {"ssh": "two", "path": "/m2"}}})
    asked: list[str] = []

    def answer_in_words(machine: Any, command: str, **kwargs: Any) -> SshResult:
        asked.append(command)
        return SshResult(0, b"journal #4 2026-12-02T09:00:00Z note on a: hello\n", b"")

    monkeypatch.setattr(remote, "run_ssh", answer_in_words)
    actions = RemoteActions(load_campaign(path), state=lambda: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ActionRefused, match="on machine 2: the answer of its cockpit is not JSON"):
        actions.note("a", "hello")
    assert asked and "--json" in asked[0]
