"""The engine's parts (issue 23): the constructor reads no journal and starts no
sampler (``open`` does, once); reading the state announces nothing (only the tick
does); a tick folds again only when something wrote the journal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from cockpit.journal.fold import IncrementalFold
from cockpit.journal.log import Journal
from cockpit.telemetry import GpuReading
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor
from tests.helpers.campaigns import FIXED_START, write_campaign

STAGES = [{"id": "a", "hours": 1, "resource": "gpu:0", "run": "r1", "command": ["train"]}]


class CountingJournal(Journal):
    reads = 0

    def refresh(self) -> None:
        self.reads += 1
        super().refresh()

    def recent(self, n: int = 4096) -> list[dict[str, Any]]:
        self.reads += 1
        return super().recent(n)


class CountingGpu:
    starts = 0

    def start(self) -> None:
        self.starts += 1

    def sample(self) -> GpuReading:
        return GpuReading("unavailable", "test", (), (), (), None)

    def close(self) -> None:
        pass


def test_the_constructor_reads_no_journal_and_starts_no_sampler(tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path, STAGES, start=FIXED_START))
    journal, gpu = CountingJournal(campaign.state_dir / "journal.jsonl"), CountingGpu()
    engine = Engine(campaign, journal=journal, gpu_sampler=gpu, clock=FakeClock(),
                    supervisor=FakeSupervisor())
    assert (journal.reads, gpu.starts) == (0, 0)
    engine.open()
    engine.open()
    assert gpu.starts == 1 and journal.reads >= 1
    engine.tick()  # already open: nothing started twice
    assert gpu.starts == 1


def test_reading_the_state_announces_nothing_only_the_tick_does(tmp_path: Path) -> None:
    engine = Engine(load_campaign(write_campaign(tmp_path, STAGES, start=FIXED_START)),
                    clock=FakeClock(), supervisor=FakeSupervisor())
    engine.tick()
    engine.note("a", "why this stage")
    engine.state()
    engine.state()
    assert engine.past.fresh == () and not any(e.kind == "note" for e in engine.past.recent)
    snap = engine.tick()
    assert [e.kind for e in snap.new_events] == ["note"]
    assert engine.tick().new_events == ()


def test_a_quiet_tick_folds_nothing_again(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(load_campaign(write_campaign(tmp_path, STAGES, start=FIXED_START)),
                    clock=FakeClock(), supervisor=FakeSupervisor())
    applied: list[str] = []
    real = IncrementalFold.apply

    def counting(self: IncrementalFold, ev: Any) -> bool:
        applied.append(str(ev["kind"]))
        return real(self, ev)

    monkeypatch.setattr(IncrementalFold, "apply", counting)
    engine.note("a", "the first note")
    engine.tick()
    first = len(applied)
    engine.tick()
    engine.tick()
    assert first >= 1 and len(applied) == first  # nothing written: nothing folded
    engine.note("a", "a note")
    engine.tick()
    assert applied[first:] == ["note"]  # one event written: that one folded, only
