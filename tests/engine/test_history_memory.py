"""Bounded memory (issue 24): a running engine's memory stays flat while 30,000 events are
appended to its journal (notes, costs, checkpoint verifications, warnings): the journal
keeps a window, the fold keeps the newest of each list and running totals."""

from __future__ import annotations

import gc
import json
import tracemalloc
from datetime import timedelta
from pathlib import Path

import pytest

from cockpit.engine import Engine
from cockpit.journal.paths import CampaignFiles
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor
from tests.engine.test_state_cache import T0, _campaign, _event

BATCH, BATCHES = 5_000, 6


def _write_batch(path: Path, start: int, first_seq: int) -> None:
    """Events as ``Journal.append`` writes them (seq, t, kind first), without its fsync."""
    with open(path, "a", encoding="utf-8") as handle:
        for n, i in enumerate(range(start, start + BATCH)):
            kind, fields = _event(i)
            t = (T0 + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            event = {"seq": first_seq + n, "t": t, "kind": kind, **fields}
            handle.write(json.dumps(event) + "\n")


@pytest.mark.slow
def test_memory_stays_flat_while_a_running_engine_reads_30k_events(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path)
    path = CampaignFiles.of(campaign).journal
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = Engine(campaign, clock=FakeClock(), supervisor=FakeSupervisor())
    engine.tick()
    tracemalloc.start()
    try:
        held = []
        for b in range(BATCHES):
            _write_batch(path, b * BATCH, engine.journal.count + 1)
            engine.tick()
            gc.collect()
            held.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    state = engine.state()
    engine.close()
    assert state.last_seq == engine.journal.count >= BATCH * BATCHES  # all read and folded
    assert engine.journal.problems() == []
    assert state.costs_count == sum(1 for i in range(2, BATCH * BATCHES) if i % 7 == 2)
    # After the windows fill (the first 2 batches: every window holds at most 4,096),
    # 20,000 more events hold under 1 MB (every event kept would be ~20 MB: about 1 KB
    # each; a leak of 50 bytes an event would show).
    growth = held[-1] - held[1]
    assert growth < 2**20, [f"{h / 2**20:.1f} MB" for h in held]
