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
