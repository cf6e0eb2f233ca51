"""The incremental fold equals the full fold (issue 24): events applied one at a time,
read from a real journal as they are appended, merged with a peer's events arriving in
any order, or cut at any point by a save to the state cache and a restart, always give
the state a fold of the whole history gives."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.campaign import Campaign
from cockpit.journal import live_fold as folded
from cockpit.journal.events import event_problem
from cockpit.journal.fields import Event
from cockpit.journal.fold import IncrementalFold, fold
from cockpit.journal.live_fold import FoldedHistory, _decode_fold, _encode_fold
from cockpit.journal.log import Journal
from cockpit.journal.read import history_of
from tests.unit.test_journal_kinds import _PLAN, T0, _event, _plan

FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _plan_once(factory: pytest.TempPathFactory) -> Campaign:
    if "plan" not in _PLAN:
        _PLAN["plan"] = _plan(factory.mktemp("plan"))
    return _PLAN["plan"]


def _valid(raw: list[dict[str, Any]], start: int = 0) -> list[Event]:
    """The generated events the journal's reader would keep, numbered and timed."""
    events: list[Event] = []
    for ev in raw:
        t = (T0 + timedelta(minutes=start + len(events))).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        candidate = {**ev, "seq": len(events) + 1, "t": t}
        if event_problem(candidate) is None:
            events.append(cast(Event, candidate))
    return events


@FAST
@given(raw=st.lists(_event, max_size=40), machine=st.sampled_from([None, 1]),
       cut=st.integers(0, 40))
def test_events_applied_one_at_a_time_equal_the_full_fold(
        tmp_path_factory: pytest.TempPathFactory, raw: list[dict[str, Any]],
        machine: int | None, cut: int) -> None:
    plan = _plan_once(tmp_path_factory)
    events = _valid(raw)
    full = fold(plan, events, T0, machine)
    running = IncrementalFold(plan, machine)
    for i, ev in enumerate(events):
        if i == cut:  # a save to the cache and a restart, in the middle
            body = json.loads(json.dumps(_encode_fold(running)))
            running = _decode_fold(plan, machine, body)
        running.apply(ev)
        if i % 3 == 0:
            running.state()  # a frozen state in between changes nothing after
    assert running.state() == full


def _write(path: Path, events: list[Event]) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        for ev in events:
            handle.write(json.dumps(ev) + "\n")


@FAST
@given(raw=st.lists(_event, max_size=25), steps=st.lists(st.integers(1, 5), max_size=10))
def test_a_journal_read_as_it_grows_folds_as_a_whole(
        tmp_path_factory: pytest.TempPathFactory, raw: list[dict[str, Any]],
        steps: list[int]) -> None:
    plan = _plan_once(tmp_path_factory)
    events = _valid(raw)
    path = tmp_path_factory.mktemp("j") / "journal.jsonl"
    history = FoldedHistory(plan, Journal(path, bounded=True), 1)
    written = 0
    for step in [*steps, len(events)]:
        _write(path, events[written:written + step])
        written = min(len(events), written + step)
        assert history.catch_up() == fold(plan, events[:written], T0, 1)


def _tagged(events: list[Event], machine: int) -> list[Event]:
    return [cast(Event, {**ev, "machine": machine}) for ev in events]


@FAST
@given(own_raw=st.lists(_event, max_size=20), peer_raw=st.lists(_event, max_size=20),
       shifts=st.lists(st.integers(-30, 30), min_size=20, max_size=20),
       order=st.lists(st.booleans(), max_size=40), early=st.integers(0, 3),
       window=st.integers(1, 4))
def test_a_peers_events_merged_in_any_arrival_order_equal_the_full_merge(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        own_raw: list[dict[str, Any]], peer_raw: list[dict[str, Any]], shifts: list[int],
        order: list[bool], early: int, window: int) -> None:
    """A peer's copy grows while this journal grows; its events may be older than ones
    already folded (a late pull), and a long read merges the peers' early (``early``:
    every that many own events; 0: never); the merge takes ``window`` of the peer's
    events at a time: the result is the full merge's, whatever arrives when."""
    plan = _plan_once(tmp_path_factory)
    own = _valid(own_raw)
    peer = _tagged(_valid(peer_raw, start=7), 2)
    for i, ev in enumerate(peer):  # the peer's clock: off by up to half an hour, in order
        ev["t"] = (T0 + timedelta(minutes=7 + i + shifts[i] / 10)).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ")
    peer.sort(key=lambda ev: str(ev["t"]))
    path = tmp_path_factory.mktemp("j") / "journal.jsonl"
    n_own = n_peer = 0
    history = FoldedHistory(plan, Journal(path, bounded=True), 1, peers=True,
                            peer_source=(lambda: [peer[:n_peer]]) if early else None)
    monkeypatch.setattr(folded, "PENDING_MAX", early or 10_000)
    monkeypatch.setattr(folded, "PEER_WINDOW", window)
    for own_next in [*order, True, False]:
        if own_next and n_own < len(own):
            _write(path, own[n_own:n_own + 1 + early])  # a few at once: a long read
            n_own = min(len(own), n_own + 1 + early)
        elif not own_next and n_peer < len(peer):
            n_peer += 1
        state = history.catch_up([peer[:n_peer]])
        assert state == history_of(plan, own[:n_own], [peer[:n_peer]], 1, T0)[0]
    _write(path, own[n_own:])
    state = history.catch_up([peer])
    assert state == history_of(plan, own, [peer], 1, T0)[0]
