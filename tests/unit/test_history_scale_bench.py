"""The history-scale bench's generator (bench/history_scale_gen.py, used by
bench/history_scale_bench.py, issue 24): its journal is what ``Journal.append`` writes,
the reader keeps every line, and it folds to the stages and runs its parameters say; in
the fleet case the peers' copies fold too, with no event refused and no warning."""

from __future__ import annotations

import importlib.util
import logging
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType

import pytest

from cockpit.campaign import load_campaign
from cockpit.journal.fold import (
    DONE,
    FAILED,
    NOT_STARTED,
    PENDING,
    STOPPED,
    SUCCEEDED,
    fold,
)
from cockpit.journal.log import Journal
from cockpit.journal.paths import CampaignFiles

BENCH = Path(__file__).resolve().parents[2] / "bench" / "history_scale_bench.py"
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("history_scale_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_generated_journal_reads_back_whole_and_folds_to_its_parameters(tmp_path: Path) -> None:
    bench = _bench()
    # 10 stages on 4 GPUs, 1 live stage (never started here). Stages 1, 5, 9 have a
    # failed first attempt (i % 4 == 1); stages 3 and 8 are stopped by a rule (i % 5 == 3).
    path = bench.generate(tmp_path / "c", 300, now=NOW, stages=10, gpus=4, live=1)
    journal = Journal(CampaignFiles.of(load_campaign(path)).journal)
    events = journal.events()
    assert journal.problems() == []
    assert len(events) == 300
    assert [ev["seq"] for ev in events] == list(range(1, 301))
    times = [ev["t"] for ev in events]
    assert times == sorted(times)

    campaign = load_campaign(path)
    state = fold(campaign, events, NOW, machine=1)
    assert state.not_folded == ()
    assert state.plan_hash == campaign.sha256 and not state.plan_changed
    history = [f"h{i:02d}" for i in range(10)]
    stopped = {"h03", "h08"}
    failed_first = {"h01", "h05", "h09"}
    assert len(state.stages) == 11 and len(state.runs) == 11
    for sid in history:
        stage, run = state.stages[sid], state.runs[sid]
        assert stage.state == (STOPPED if sid in stopped else DONE), sid
        assert run.state == (STOPPED if sid in stopped else SUCCEEDED), sid
        assert run.verdict == (None if sid in stopped else "accepted"), sid
        assert [a.state for a in run.earlier] == ([FAILED] if sid in failed_first else [])
        assert run.verified and all(ev["ok"] for ev in run.verified)
    assert state.stages["live-0"].state == PENDING
    assert state.runs["live-0"].state == NOT_STARTED
    assert len(state.fired) == len(stopped)
    # Head (3) + per stage: 3 per attempt, 2 for a failed one, 5 (stopped) or 3 at the end.
    fixed = 3 + 10 * 6 + 3 * 5 + 2 * 2
    bodies = 300 - fixed
    assert len(state.costs) == sum(1 for ev in events if ev["kind"] == "cost") > 0
    assert sum(1 for ev in events if ev["kind"] in (
        "verify_started", "checkpoint_verified", "warning", "note", "cost")) == bodies


def test_lines_are_byte_identical_to_journal_append(tmp_path: Path) -> None:
    bench = _bench()
    fields = {"stage": "h00", "text": "naïve → ok", "actor": "op", "path": Path("a/b"),
              "value": float("nan")}
    journal = Journal(tmp_path / "journal.jsonl")
    when = NOW
    for k in range(3):
        journal.append("note", now=when + timedelta(seconds=k), **fields)
    written = (tmp_path / "journal.jsonl").read_bytes()
    ours = b"".join(bench.journal_line(k + 1, when + timedelta(seconds=k), "note", fields)
                    for k in range(3))
    assert ours == written


def test_fleet_peer_copies_fold_whole_without_warnings(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The fleet case: machine 1's journal and the copies of machines 2 and 3 in
    ``.cockpit/peers/<N>/``, read by ``open_engine(..., pull="cache")`` without SSH; every
    peer event about its own stages folds (none refused, no warning), and each
    machine's stages end as their parameters say."""
    from cockpit.fleet.open import open_engine

    bench = _bench()
    path = bench.generate_fleet(tmp_path / "f", 300, now=NOW, stages=10, gpus=4, live=1,
                                machines=3)
    campaign = load_campaign(path)
    assert sorted(campaign.machines) == [1, 2, 3]
    files = CampaignFiles.of(campaign)
    for machine in (2, 3):
        copy = Journal(files.peer(machine).journal)
        assert copy.problems() == []
        events = copy.events()
        assert len(events) == 300
        assert {ev["stage"] for ev in events if ev["kind"] == "stage_claimed"} == {
            f"m{machine}h{i:02d}" for i in range(10)}
    with caplog.at_level(logging.WARNING):
        engine = open_engine(path, telemetry=False, actor="test", pull="cache")
        try:
            engine.tick()
            state = engine.state()
        finally:
            engine.close()
    assert state.not_folded == ()
    assert not [w for w in state.journal_warnings if "not folded" in w]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], \
        [r.getMessage() for r in caplog.records]
    stopped, failed_first = {3, 8}, {1, 5, 9}
    for machine in (1, 2, 3):
        for i in range(10):
            sid = bench.stage_id(i, machine)
            stage, run = state.stages[sid], state.runs[sid]
            assert stage.state == (STOPPED if i in stopped else DONE), sid
            assert run.verdict == (None if i in stopped else "accepted"), sid
            assert len(run.earlier) == (1 if i in failed_first else 0), sid
    # Each machine's history counts: the costs of all three journals are folded.
    costs = sum(1 for j in (files.journal, files.peer(2).journal, files.peer(3).journal)
                for ev in Journal(j).events() if ev["kind"] == "cost")
    assert state.costs_count == costs > 0
