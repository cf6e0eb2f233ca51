"""The state cache (issue 24): an open folds only the journal's tail when the cache fits,
and a cache that does not fit (journal rewritten, torn, another campaign or version,
corrupted, half-written by a killed process) is ignored and rebuilt, never trusted.
Every state is compared, field by field, with a full fold of the same journal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from cockpit.campaign import Campaign, load_campaign
from cockpit.engine import Engine
from cockpit.journal import cache as cache_module
from cockpit.journal.fold import CampaignState, fold
from cockpit.journal.live_fold import FoldedHistory
from cockpit.journal.log import Journal
from cockpit.journal.paths import CampaignFiles
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor
from tests.helpers.campaigns import FIXED_START, write_campaign

STAGES = [{"id": "a", "hours": 1, "resource": "gpu:0", "run": "r1", "command": ["train"]},
          {"id": "b", "hours": 1, "resource": "gpu:0", "run": "r2", "command": ["train"]}]
T0 = datetime(2026, 12, 2, 8, 0, tzinfo=timezone.utc)  # FIXED_START, the window start
NOW = T0 + timedelta(days=2)


def _campaign(tmp_path: Path, name: str = "c") -> Campaign:
    return load_campaign(write_campaign(tmp_path / name, STAGES, start=FIXED_START))


def _event(i: int) -> tuple[str, dict[str, Any]]:
    """The i-th event of a varied history: starts, checkpoints, notes, costs, warnings."""
    stage, run = ("a", "r1") if i % 2 else ("b", "r2")
    body = i % 7
    if i < 2:
        return "stage_started", {"stage": stage, "run": run, "pid": 100 + i, "attempt": None}
    if body == 0:
        return "checkpoint_verified", {"run": run, "attempt": 1, "path": f"ck/{i}.pt",
                                       "ok": i % 3 != 0, "step": i}
    if body == 1:
        return "note", {"stage": stage, "text": f"note {i}"}
    if body == 2:
        return "cost", {"label": f"storage {i % 5}", "amount": "0.25", "currency": "USD"}
    return "warning", {"source": "gpu", "message": f"warning {i}"}


def _append(campaign: Campaign, start: int, count: int) -> None:
    journal = Journal(CampaignFiles.of(campaign).journal)
    for i in range(start, start + count):
        kind, fields = _event(i)
        journal.append(kind, now=T0 + timedelta(seconds=i), **fields)


def _full(campaign: Campaign) -> CampaignState:
    return fold(campaign, Journal(CampaignFiles.of(campaign).journal).events(), NOW, machine=1)


def _opened(campaign: Campaign) -> tuple[FoldedHistory, CampaignState]:
    files = CampaignFiles.of(campaign)
    history = FoldedHistory(campaign, Journal(files.journal, bounded=True), 1,
                            cache_path=files.state_cache)
    return history, history.catch_up()


def _saved(campaign: Campaign) -> Path:
    history, _ = _opened(campaign)
    assert history.save([])
    return CampaignFiles.of(campaign).state_cache


def test_a_cache_that_fits_folds_only_the_tail_and_equals_a_full_fold(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path)
    _append(campaign, 0, 300)
    _saved(campaign)
    _append(campaign, 300, 25)
    history, state = _opened(campaign)
    assert history.from_cache and history.cache_problem is None
    assert history.fold.applied == 325  # 300 from the cache, 25 folded now
    assert state == _full(campaign)
    assert state.costs_count == sum(1 for i in range(325) if i >= 2 and i % 7 == 2)


@pytest.mark.parametrize("damage", ["truncated", "rewritten", "replaced", "edited head"])
def test_a_journal_changed_under_the_cache_is_folded_again(tmp_path: Path,
                                                           damage: str) -> None:
    campaign = _campaign(tmp_path)
    _append(campaign, 0, 200)
    _saved(campaign)
    path = CampaignFiles.of(campaign).journal
    lines = path.read_bytes().splitlines(keepends=True)
    if damage == "truncated":
        path.write_bytes(b"".join(lines[:120]))
    elif damage == "rewritten":  # the same size, other events (same inode)
        other = _campaign(tmp_path, "other")
        _append(other, 1000, 200)
        data = CampaignFiles.of(other).journal.read_bytes()
        with open(path, "r+b") as handle:
            handle.write(data)
            handle.truncate()
    elif damage == "replaced":
        copy = path.with_name("new.jsonl")
        copy.write_bytes(b"".join(lines[:150]))
        os.replace(copy, path)
    else:
        first = json.loads(lines[0])
        first["pid"] = 999  # same length: 100 -> 999
        lines[0] = (json.dumps(first) + "\n").encode()
        path.write_bytes(b"".join(lines))
    history, state = _opened(campaign)
    assert not history.from_cache and history.cache_problem
    assert state == _full(campaign)


def test_a_torn_last_line_leaves_the_cache_usable_and_is_not_folded(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path)
    _append(campaign, 0, 150)
    _saved(campaign)
    with open(CampaignFiles.of(campaign).journal, "ab") as handle:
        handle.write(b'{"seq": 151, "t": "2026-12-02T09:00:00.000000Z", "kind": "no')
    history, state = _opened(campaign)
    assert history.from_cache
    assert state == _full(campaign) and state.last_seq == 150
    _append(campaign, 150, 5)  # the fragment becomes a garbage line; the rest folds
    assert history.catch_up() == _full(campaign)


def test_a_cache_of_another_campaign_or_version_is_not_used(tmp_path: Path) -> None:
    campaign, other = _campaign(tmp_path), _campaign(tmp_path, "other")
    _append(campaign, 0, 100)
    _append(other, 0, 100)  # the same events: only the campaign differs
    other_cache = _saved(other)
    # Another campaign: its plan differs (a stage's hours).
    text = campaign.path.read_text().replace('"hours": 1', '"hours": 2', 1)
    campaign.path.write_text(text)
    campaign = load_campaign(campaign.path)
    CampaignFiles.of(campaign).state_cache.parent.mkdir(parents=True, exist_ok=True)
    CampaignFiles.of(campaign).state_cache.write_bytes(other_cache.read_bytes())
    history, state = _opened(campaign)
    assert not history.from_cache and "another campaign" in str(history.cache_problem)
    assert state == _full(campaign)
    # Another version of the cache's layout.
    cache = _saved(campaign)
    doc = json.loads(cache.read_text())
    doc["header"]["version"] += 1
    cache.write_text(json.dumps(doc))
    history, state = _opened(campaign)
    assert not history.from_cache and state == _full(campaign)


def _signed(doc: dict[str, Any]) -> bytes:
    """A forgery, not damage: its checksum made to fit, so the checks behind it decide."""
    doc["sum"] = cache_module._checksum(doc["body"])
    return json.dumps(doc).encode()


def _corruptions(cache: Path) -> list[bytes]:
    good = cache.read_bytes()
    doc = json.loads(good)
    wrong_type = json.loads(good)
    wrong_type["body"]["fold"]["folding"]["stages"] = 7
    forged_tag = json.loads(good)
    forged_tag["body"]["fold"]["folding"]["costs"] = {"$": "os.system", "v": {"x": 1}}
    bad_count = json.loads(good)
    bad_count["body"]["own_folded"] = doc["body"]["own_folded"] - 1
    bad_decimal = json.loads(good)
    bad_decimal["body"]["fold"]["folding"]["cost_totals"] = {
        "$": "dict", "v": [["USD", {"$": "Money", "v": {
            "amount": {"$": "decimal", "v": "not a number"}, "currency": "USD"}}]]}
    wrong_shape = json.loads(good)
    nested: object = "a warning"
    for _ in range(200):
        nested = {"$": "tuple", "v": [nested]}
    wrong_shape["body"]["fold"]["folding"]["warnings"] = nested
    return [good[: len(good) // 2], good[:-1], b"\x00" * 64, b"[]",
            good.replace(b'"prefix":"', b'"prefix":"0', 1),  # damage: the checksum
            json.dumps(bad_count).encode(),  # an edit without its checksum
            *(_signed(d) for d in (wrong_type, forged_tag, bad_count, bad_decimal,
                                   wrong_shape))]


def test_a_corrupted_cache_is_ignored_and_rebuilt(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path)
    _append(campaign, 0, 120)
    cache = _saved(campaign)
    full = _full(campaign)
    for corrupt in _corruptions(cache):
        cache.write_bytes(corrupt)
        history, state = _opened(campaign)
        assert not history.from_cache and history.cache_problem, corrupt[:80]
        assert state == full
    history.save([])  # rebuilt: the next open uses it again
    assert _opened(campaign)[0].from_cache


WRITER = """
import sys
from pathlib import Path
from cockpit.campaign import load_campaign
from cockpit.journal.live_fold import FoldedHistory
from cockpit.journal.log import Journal
from cockpit.journal.paths import CampaignFiles
campaign = load_campaign(Path(sys.argv[1]))
files = CampaignFiles.of(campaign)
history = FoldedHistory(campaign, Journal(files.journal, bounded=True), 1,
                        cache_path=files.state_cache)
history.catch_up()
print("ready", flush=True)
while True:
    history.save([])
"""


def test_a_kill_during_the_cache_write_leaves_a_cache_that_fits_or_none(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path)
    _append(campaign, 0, 400)
    full = _full(campaign)
    cache = CampaignFiles.of(campaign).state_cache
    for delay in (0.0, 0.013, 0.031, 0.057, 0.09):
        if cache.exists():
            cache.unlink()
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(campaign.path)],
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        time.sleep(delay)
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=10)
        history, state = _opened(campaign)
        assert history.cache_problem is None  # absent, or whole and fitting
        assert state == full


def test_an_engine_saves_the_cache_at_close_and_a_restart_starts_from_it(tmp_path: Path
                                                                        ) -> None:
    campaign = _campaign(tmp_path)
    _append(campaign, 0, 200)
    engine = Engine(campaign, clock=FakeClock(), supervisor=FakeSupervisor())
    engine.tick()
    engine.note("a", "before the restart")
    engine.close()
    _append(campaign, 200, 10)
    again = Engine(campaign, clock=FakeClock(), supervisor=FakeSupervisor())
    snap = again.tick()
    assert again.past.folded.from_cache
    assert again.state() == _full(campaign)
    assert any(e.kind == "note" for e in snap.events)  # the newest history is shown
    again.close()
    read_only = Engine(campaign, clock=FakeClock(), supervisor=FakeSupervisor(),
                       read_only=True)
    before = CampaignFiles.of(campaign).state_cache.stat().st_mtime_ns
    read_only.tick()
    read_only.close()
    assert CampaignFiles.of(campaign).state_cache.stat().st_mtime_ns == before
