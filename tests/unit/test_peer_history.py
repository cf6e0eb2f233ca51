"""A peer's history read from its copy: every event, the newest parsed in memory, the
older ones read again from the copy, equal to what a plain read of the file gives."""

from __future__ import annotations

import bisect
import json
from pathlib import Path

import pytest

from cockpit.fleet import history as peer_history
from cockpit.fleet.history import PeerHistory


def _line(seq: int, text: str) -> bytes:
    return (json.dumps({"seq": seq, "t": f"2026-12-02T09:{seq // 60 % 60:02d}:"
                        f"{seq % 60:02d}.000000Z", "kind": "note", "stage": "s2",
                        "text": text}) + "\n").encode()


def _expected(path: Path, machine: int) -> list[dict[str, object]]:
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            ev = json.loads(raw)
        except ValueError:
            continue
        if isinstance(ev, dict) and isinstance(ev.get("text"), str):
            out.append({**ev, "machine": machine})
    return out


def test_older_events_are_read_again_and_equal_the_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer_history, "PARSED_KEPT", 5)
    monkeypatch.setattr(peer_history, "READ_CHUNK", 300)  # several reads per slice
    path = tmp_path / "journal.jsonl"
    with open(path, "wb") as f:
        for seq in range(1, 41):
            f.write(_line(seq, f"note {seq} " + "y" * (seq % 7) * 20))
            if seq == 17:
                f.write(b"not json\n")  # skipped, located
            if seq == 23:
                f.write(b"\n")  # blank: nothing
    history = PeerHistory(path, 3)
    history.refresh()
    events = history.events()
    expected = _expected(path, 3)
    assert len(events) == len(expected) == 40
    assert list(events) == expected  # most read again from the copy
    assert events[0] == expected[0] and events[-1] == expected[-1]
    assert events[3:29] == expected[3:29] and events[38:] == expected[38:]
    assert events[::7] == expected[::7]
    with pytest.raises(IndexError):
        events[40]
    assert [p.line for p in history.problems()] == [18]
    # A search by time reads a few events, and finds what a list search finds.
    t = "2026-12-02T09:00:20.000000Z"
    assert bisect.bisect_right(events, t, key=lambda ev: ev["t"]) == \
        bisect.bisect_right(expected, t, key=lambda ev: ev["t"]) == 20


def test_a_view_keeps_its_length_while_the_copy_grows_and_a_new_one_sees_more(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer_history, "PARSED_KEPT", 4)
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"".join(_line(s, f"n{s}") for s in range(1, 11)))
    history = PeerHistory(path, 2)
    history.refresh()
    before = history.events()
    with open(path, "ab") as f:
        f.write(b"".join(_line(s, f"n{s}") for s in range(11, 31)))
        f.write(b'{"seq": 31, "kind": "note", "te')  # a pull mid-line: not an event yet
    history.refresh()
    after = history.events()
    assert len(before) == 10 and [e["text"] for e in before] == [f"n{s}" for s in range(1, 11)]
    assert [e["text"] for e in after] == [f"n{s}" for s in range(1, 31)]
    assert history.events() is after  # nothing new: the same view


def test_a_replaced_copy_starts_again(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"".join(_line(s, f"old{s}") for s in range(1, 6)))
    history = PeerHistory(path, 2)
    history.refresh()
    new = tmp_path / "new.jsonl"
    new.write_bytes(b"".join(_line(s, f"new{s}") for s in range(1, 4)))
    new.replace(path)
    history.refresh()
    assert [e["text"] for e in history.events()] == ["new1", "new2", "new3"]


def test_memory_holds_no_list_of_every_event(tmp_path: Path) -> None:
    """Twenty thousand notes: the history keeps the newest few thousand parsed."""
    path = tmp_path / "journal.jsonl"
    with open(path, "wb") as f:
        for seq in range(1, 20_001):
            f.write(_line(seq, f"note {seq}"))
    history = PeerHistory(path, 2)
    history.refresh()
    generation = history.events()._generation
    assert generation is not None
    first, parsed = generation.parsed
    assert len(history.events()) == 20_000
    assert len(parsed) < 2 * peer_history.PARSED_KEPT and first > 0
    assert history.events()[0]["text"] == "note 1"
