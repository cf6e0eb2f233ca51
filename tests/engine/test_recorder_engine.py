"""The engine's flight recorder (issue 27): a writing engine that samples telemetry
records each tick's readings at the tick's time; a read-only engine (and one asked not
to) has none; a store the recorder had to move aside is a warning in the snapshot, and
the tick goes on."""

from __future__ import annotations

from pathlib import Path

from cockpit.campaign import load_campaign
from cockpit.engine import Engine, default_samplers
from cockpit.journal.paths import CampaignFiles
from cockpit.telemetry.flight import RecordingReader, gpu_series, host_series
from tests.engine.test_engine_guards import START, FakeClock, FakeSupervisor
from tests.helpers.campaigns import FIXED_START, write_campaign

STAGES = [{"id": "wait", "hours": 1, "resource": "human"}]


def test_a_writing_engine_records_each_tick_at_its_time(tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path, STAGES, start=FIXED_START))
    gpu, host = default_samplers(campaign, 2)
    clock = FakeClock()
    engine = Engine(campaign, gpu_sampler=gpu, host_sampler=host, clock=clock,
                    supervisor=FakeSupervisor())
    for _ in range(20):
        snap = engine.tick()
        clock.advance(1)
    assert engine.flight is not None and engine.flight.recording
    assert not [w for w in snap.warnings if "flight recorder" in w]
    engine.close()
    t0 = START.timestamp()
    with RecordingReader.open(CampaignFiles.of(campaign).recorder) as reader:
        assert reader.raw_span("gpu") == (int(t0), int(t0) + 19)
        util = reader.series(gpu_series(1, "util"), t0, t0 + 60)
        assert [p.t for p in util] == [t0 + i for i in range(20)]
        assert all(0 <= p.value <= 100 for p in util)
        assert len(reader.series(host_series("mem_used"), t0, t0 + 60)) == 20


def test_read_only_engines_and_engines_told_not_to_record_nothing(tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path, STAGES, start=FIXED_START))
    for kwargs in ({"read_only": True}, {"record": False}):
        gpu, host = default_samplers(campaign, 1)
        engine = Engine(campaign, gpu_sampler=gpu, host_sampler=host, clock=FakeClock(),
                        supervisor=FakeSupervisor(), **kwargs)  # type: ignore[arg-type]
        engine.tick()
        engine.close()
        assert engine.flight is None
    # Nor one that samples nothing (a one-shot action's engine).
    assert Engine(campaign, clock=FakeClock(), supervisor=FakeSupervisor()).flight is None
    assert not CampaignFiles.of(campaign).recorder.exists()


def test_a_corrupt_store_is_a_warning_in_the_snapshot_and_the_tick_goes_on(
        tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path, STAGES, start=FIXED_START))
    store = CampaignFiles.of(campaign).recorder
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_bytes(b"not a database, " * 1000)
    gpu, host = default_samplers(campaign, 1)
    clock = FakeClock()
    engine = Engine(campaign, gpu_sampler=gpu, host_sampler=host, clock=clock,
                    supervisor=FakeSupervisor())
    snap = engine.tick()
    said = [w for w in snap.warnings if "flight recorder" in w]
    assert len(said) == 1 and "moved aside" in said[0], snap.warnings
    for _ in range(10):
        clock.advance(1)
        engine.tick()
    engine.close()
    with RecordingReader.open(store) as reader:
        assert reader.raw_span("host") == (int(START.timestamp()), int(START.timestamp()) + 10)
    assert len(list(store.parent.glob("recorder.sqlite.unreadable-*"))) == 1
