"""D19 retrieve-by: the time kept for retrieval is the larger of the plan's retrieval
stage and the export's size at ``settings.transfer_rate_mb_s`` (expected before the
export, real after). Figures computed by hand; MB is 2**20 bytes, as everywhere."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from cockpit.campaign import load_campaign
from cockpit.journal.log import Journal
from cockpit.planning.deadline import closing_times, export_size, retrieve_by
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit

# 0.01 MB/s = 0.01 * 1,048,576 = 10,485.76 bytes a second.
RATE_MB_S = 0.01
MIB = 2**20


def _campaign(tmp_path: Path, fetch: str | None, rate: float = RATE_MB_S):  # type: ignore[no-untyped-def]
    stages: list[dict] = [  # type: ignore[type-arg]
        {"id": "control", "duration": "10h", "resource": "gpu"},
        {"id": "export", "duration": "2h", "resource": "cpu", "after": ["control"]},
    ]
    if fetch is not None:
        stages.append({"id": "fetch", "duration": fetch, "resource": "human",
                       "after": ["export"], "role": "retrieval"})
    path = write_campaign(tmp_path, stages, extra={
        "settings": {"transfer_rate_mb_s": rate},
        "deadline": {"export_hours": 5, "retrieve_hours": 3}})
    return load_campaign(path)


def test_the_plans_retrieval_stage_is_kept_when_larger(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path, fetch="4h")
    # Expected 54 MiB at 10,485.76 B/s: 56,623,104 / 10,485.76 = 5,400 s = 1.5 h < 4 h.
    times = closing_times(campaign, expected_bytes=54 * MIB)
    assert times.retrieve_s == 4 * 3600 and times.retrieve_from == "stage fetch"
    # The real export, 2 MiB: 200 s, still under the 4 h of the stage.
    assert closing_times(campaign, 10_486, export_bytes=2 * MIB).retrieve_s == 4 * 3600
    # retrieve by = window end - (export stage 2 h + retrieval 4 h).
    assert retrieve_by(campaign, times) == campaign.package.end - timedelta(hours=6)


def test_the_real_export_size_at_the_rate_when_larger(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path, fetch="1m")
    # Before the export: the newest checkpoint, 10,486 B: 10,486 / 10,485.76 = 1.00002 s,
    # under the stage's 60 s: the stage.
    assert closing_times(campaign, expected_bytes=10_486).retrieve_s == 60
    # After it: 2.0 MiB = 2,097,152 B / 10,485.76 B/s = 200 s > 60 s.
    times = closing_times(campaign, expected_bytes=10_486, export_bytes=2 * MIB)
    assert times.retrieve_s == 200
    assert times.retrieve_from == "2.0 MiB export at 0.01 MB/s, more than stage fetch"
    assert retrieve_by(campaign, times) == campaign.package.end - timedelta(seconds=7200 + 200)


def test_without_a_retrieval_stage_the_size_at_the_rate(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path, fetch=None)
    # Real 2 MiB (200 s) over the expected 10,486 B (1 s).
    assert closing_times(campaign, 10_486, export_bytes=2 * MIB).retrieve_s == 200
    # Checkpoints written since the export make the expected size larger: 3 MiB = 300 s.
    assert closing_times(campaign, 3 * MIB, export_bytes=2 * MIB).retrieve_s == 300
    # Nothing known: deadline.retrieve_hours (3 h).
    assert closing_times(campaign).retrieve_s == 3 * 3600


def test_the_size_of_an_export_done_event() -> None:
    assert export_size({"kind": "export_done", "size": 1900, "tar_size": 2 * MIB}) == 2 * MIB
    assert export_size({"kind": "export_done", "size": 1900, "tar_size": None}) == 1900
    # Kept beside the verified export after failing: not the one that is fetched.
    assert export_size({"kind": "export_done", "size": 1900, "kept_failed": "/x"}) is None
    assert export_size({"kind": "note", "size": 1900}) is None


def test_status_keeps_the_written_exports_real_size(tmp_path: Path) -> None:
    from cockpit.export import export_campaign

    # 0.0001 MB/s = 104.8576 B/s: the tar of even this tiny campaign takes minutes.
    campaign = _campaign(tmp_path, fetch="1m", rate=0.0001)
    result = export_campaign(campaign, verify_reload=False)
    assert result.tar_path is not None
    tar_bytes = os.path.getsize(result.tar_path)
    [event] = [e for e in Journal(campaign.state_dir / "journal.jsonl").events()
               if e["kind"] == "export_done"]
    assert event["tar_size"] == tar_bytes
    fetch_s = tar_bytes / 104.8576
    assert fetch_s > 60  # more than the plan's retrieval stage
    status = json.loads(run_cockpit("status", str(campaign.path), "--json").stdout)
    deadline = datetime.fromisoformat(status["window"]["retrieval_deadline"].replace("Z",
                                                                                      "+00:00"))
    expected = campaign.package.end - timedelta(seconds=7200 + fetch_s)
    assert abs((deadline - expected).total_seconds()) < 1, (deadline, expected)
