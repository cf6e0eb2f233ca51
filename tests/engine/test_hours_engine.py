"""What the hours bought, in the engine (issue 27): computed at most once a minute of
the engine's clock (a tick stays cheap), in the Snapshot and its JSON; no recording
means every GPU-hour unrecorded, with a note, never an error."""

from __future__ import annotations

from pathlib import Path

from cockpit.campaign import load_campaign
from cockpit.engine import Engine, default_samplers
from cockpit.engine.snapshot import snapshot_json
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor
from tests.helpers.campaigns import FIXED_START, write_campaign

STAGES = [{"id": "wait", "hours": 1, "resource": "human"}]


def test_computed_once_a_minute_and_in_the_snapshot(tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path, STAGES, start=FIXED_START))
    gpu, host = default_samplers(campaign, 1)
    clock = FakeClock()
    engine = Engine(campaign, gpu_sampler=gpu, host_sampler=host, clock=clock,
                    supervisor=FakeSupervisor())
    try:
        first = engine.tick()
        for _ in range(30):
            clock.advance(1)
            snap = engine.tick()
        assert engine.hours.computed == 1 and snap.hours is first.hours
        clock.advance(31)
        later = engine.tick()
        assert engine.hours.computed == 2
    finally:
        engine.close()
    assert later.hours is not None
    elapsed = int(clock.now().timestamp() - campaign.package.start.timestamp())
    assert later.hours.elapsed_s == elapsed
    o = later.hours.overall
    assert o.held_s == campaign.package.offer.gpus * elapsed
    assert o.held_s == o.busy_s + o.idle_s + o.unrecorded_s
    data = snapshot_json(later)["hours"]
    assert data["overall"]["held_gpu_s"] == o.held_s
    assert data["gaps"][0]["kind"] == "none"  # the human stage holds no GPU


def test_no_recording_is_every_hour_unrecorded_with_a_note(tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path, STAGES, start=FIXED_START))
    clock = FakeClock()
    clock.advance(600)
    engine = Engine(campaign, clock=clock, supervisor=FakeSupervisor(), read_only=True)
    try:
        snap = engine.tick()
    finally:
        engine.close()
    assert snap.hours is not None
    o = snap.hours.overall
    assert o.unrecorded_s == o.held_s > 0 and o.busy_s == o.idle_s == 0
    assert o.mean_util is None
    assert any("no flight recording" in n for n in snap.hours.notes)


def test_a_live_refresh_reads_only_the_new_minutes_and_agrees_with_a_whole_read(
        tmp_path: Path, monkeypatch) -> None:
    """Day 30 costs what day 1 did: after the first read a refresh asks the recording only
    for the last few minutes, and the minutes it holds are those of a whole read."""
    from cockpit.close import hours_read
    from cockpit.close.hours_read import RecordedMinutes, recorded_minutes
    from cockpit.telemetry.flight import FlightRecorder
    from tests.unit.test_recorder import sample

    store = tmp_path / "recorder.sqlite"
    t0 = 1_800_000_000 // 3600 * 3600
    with FlightRecorder(store) as rec:
        for s in range(0, 6 * 3600, 10):  # 6 h, a sample every 10 s
            rec.record(t0 + s, *sample(t0 + s))
        rec.flush(60.0)
    asked: list[float] = []

    def spy(path: Path, gpus: int, since: float, t1: float):  # type: ignore[no-untyped-def]
        asked.append(since)
        return recorded_minutes(path, gpus, since, t1)

    monkeypatch.setattr(hours_read, "recorded_minutes", spy)
    live = RecordedMinutes(store, 2)
    assert live.refresh(t0, t0 + 3 * 3600) is None
    assert live.refresh(t0, t0 + 6 * 3600) is None
    assert asked[0] == t0 and t0 + 3 * 3600 - asked[1] <= RecordedMinutes.REREAD_S
    whole = RecordedMinutes(store, 2)
    assert whole.refresh(t0, t0 + 6 * 3600) is None
    for gpu in (0, 1):
        assert live.index[gpu].minutes == whole.index[gpu].minutes
        assert live.index[gpu].rows == whole.index[gpu].rows
        assert len(whole.index[gpu].minutes) >= 6 * 60 - 1
        got, want = live.index[gpu].tally(t0, t0 + 6 * 3600), whole.index[gpu].tally(
            t0, t0 + 6 * 3600)
        assert (got.busy, got.idle, got.unrecorded) == (want.busy, want.idle, want.unrecorded)
