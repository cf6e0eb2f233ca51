"""Checkpoint discovery, completeness, age, save cost and interval advice."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest

from cockpit.runs.checkpoints import discovery
from cockpit.runs.checkpoints.discovery import (
    RECHECK_NEWEST,
    SWEEP_PER_TICK,
    CheckpointScanner,
    format_duration,
    interval_advice,
    step_from_name,
)


def _write(path: Path, size: int = 10, age: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    if age is not None:
        t = time.time() - age
        os.utime(path, (t, t))
    return path


def _age(path: Path, age: float) -> None:
    t = time.time() - age
    os.utime(path, (t, t))


@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("checkpoint-1200", 1200),
        ("step=1200.pt", 1200),
        ("step_1200.pt", 1200),
        ("epoch=3-step=1200.ckpt", 1200),
        ("global_step1200", 1200),
        ("model_1200.pt", 1200),
        ("checkpoint_7", 7),
        ("epoch=3.ckpt", None),
        ("last.ckpt", None),
        ("pytorch_model.bin", None),
        ("model-00001-of-00002.safetensors", None),
    ],
)
def test_step_from_name(name, step):
    assert step_from_name(name) == step


def test_finds_every_layout_and_ignores_the_rest(tmp_path):
    _write(tmp_path / "a_100.pt", age=60)
    _write(tmp_path / "b.pth", age=60)
    _write(tmp_path / "epoch=1-step=300.ckpt", age=60)
    _write(tmp_path / "w.safetensors", age=60)
    _write(tmp_path / "pytorch_model.bin", age=60)
    _write(tmp_path / "notes.txt", age=60)
    _write(tmp_path / ".state.pt.abc.tmp", age=60)  # cockpit.resume's temp file
    hf = tmp_path / "checkpoint-500"
    for name in ("trainer_state.json", "optimizer.pt", "model.safetensors"):
        _write(hf / name, age=60)
    acc = tmp_path / "acc_state"
    for name in ("model.safetensors", "optimizer.bin", "random_states_0.pkl"):
        _write(acc / name, age=60)
    _write(tmp_path / "logs" / "events.txt", age=60)
    _age(hf, 60)
    _age(acc, 60)
    _write(tmp_path / "snap.weights", age=60)

    view = CheckpointScanner(tmp_path, pattern="*.weights").scan(time.time())
    kinds = {c.path.name: c.kind for c in view.complete}
    assert kinds == {
        "a_100.pt": "file",
        "b.pth": "file",
        "epoch=1-step=300.ckpt": "file",
        "w.safetensors": "file",
        "pytorch_model.bin": "file",
        "checkpoint-500": "hf-trainer",
        "acc_state": "accelerate",
        "snap.weights": "pattern",
    }
    steps = {c.path.name: c.step for c in view.complete}
    assert steps["checkpoint-500"] == 500 and steps["epoch=1-step=300.ckpt"] == 300
    assert view.in_progress == ()
    assert view.total_bytes == 10 * 12
    assert view.free_bytes and view.free_bytes > 0


def test_folder_that_is_itself_an_accelerate_save_is_one_checkpoint(tmp_path):
    for name in ("model.safetensors", "optimizer.bin", "scheduler.bin"):
        _write(tmp_path / name, age=60)
    _age(tmp_path, 60)
    view = CheckpointScanner(tmp_path).scan(time.time())
    assert [c.path for c in view.complete] == [tmp_path]
    assert view.complete[0].kind == "accelerate"


def test_file_completes_only_after_it_stops_changing(tmp_path):
    scanner = CheckpointScanner(tmp_path, settle_seconds=2.0)
    t0 = time.time()
    path = _write(tmp_path / "step_10.pt", size=100)
    os.utime(path, (t0, t0))
    view = scanner.scan(t0 + 0.1)
    assert view.newest is None and [c.path for c in view.in_progress] == [path]
    with path.open("ab") as f:  # still growing
        f.write(b"y" * 100)
    os.utime(path, (t0 + 0.9, t0 + 0.9))
    view = scanner.scan(t0 + 1.0)
    assert view.newest is None and view.in_progress[0].size_bytes == 200
    # Our clock saw it change at t0+1.0: not complete at t0+2.5 even if mtime is older.
    assert scanner.scan(t0 + 2.5).newest is None
    view = scanner.scan(t0 + 3.1)
    assert view.newest is not None and view.newest.path == path
    assert view.newest.step == 10 and view.newest.size_bytes == 200
    assert view.in_progress == ()
    assert 3.0 < view.newest.age_seconds + (view.newest.mtime - t0) < 3.2
    # Seen growing from its first appearance: an observed save cost exists.
    assert [c.source for c in view.save_costs] == ["observed"]
    assert view.save_costs[0].seconds == pytest.approx(0.8)


def test_no_settle_time_means_complete_even_when_the_clock_reads_earlier(tmp_path):
    """An ended run's checkpoints need no settle time: a caller whose clock reads a day
    before the file's mtime (a clock stepped back, a fixed test time) still finds it."""
    path = _write(tmp_path / "step_20.pt", size=100)
    day_before = path.stat().st_mtime - 86_400
    assert CheckpointScanner(tmp_path, settle_seconds=0.0).scan(day_before).newest.path == path
    # with a settle time, the same clock still waits (it cannot tell the file is done)
    assert CheckpointScanner(tmp_path, settle_seconds=2.0).scan(day_before).newest is None


def test_folder_in_progress_until_its_files_settle(tmp_path):
    scanner = CheckpointScanner(tmp_path, settle_seconds=2.0)
    t0 = time.time()
    _write(tmp_path / "checkpoint-100" / "optimizer.pt")
    view = scanner.scan(t0)
    assert [c.path.name for c in view.in_progress] == ["checkpoint-100"]
    _write(tmp_path / "checkpoint-100" / "model.safetensors", size=50)
    view = scanner.scan(t0 + 1.5)
    assert view.in_progress[0].size_bytes == 60
    assert scanner.scan(t0 + 1.5 + 2.1).newest.path.name == "checkpoint-100"


def test_folder_filled_after_it_appeared_is_found_later(tmp_path):
    scanner = CheckpointScanner(tmp_path, settle_seconds=0.0)
    (tmp_path / "step_800").mkdir()
    _age(tmp_path, 100)
    assert scanner.scan(time.time()).newest is None
    for name in ("model.safetensors", "optimizer.bin"):
        _write(tmp_path / "step_800" / name, age=50)
    _age(tmp_path / "step_800", 50)
    _age(tmp_path, 100)  # the watched folder itself did not change
    view = scanner.scan(time.time())
    assert view.newest.path.name == "step_800" and view.newest.kind == "accelerate"
    assert view.newest.step == 800


def test_hf_tmp_checkpoint_never_completes_until_renamed(tmp_path):
    scanner = CheckpointScanner(tmp_path, settle_seconds=0.0)
    _write(tmp_path / "tmp-checkpoint-40" / "model.safetensors", age=100)
    view = scanner.scan(time.time())
    assert view.newest is None and view.in_progress[0].step == 40
    os.rename(tmp_path / "tmp-checkpoint-40", tmp_path / "checkpoint-40")
    view = scanner.scan(time.time() + 1)
    assert view.newest.path.name == "checkpoint-40" and view.in_progress == ()


def test_mark_written_completes_immediately_and_records_report_cost(tmp_path):
    scanner = CheckpointScanner(tmp_path, settle_seconds=60.0)
    now = time.time()
    scanner.mark_started(tmp_path / "s.pt", at=now - 3)
    path = _write(tmp_path / "s.pt")
    # Reported before the scanner ever listed it: applied when it appears.
    scanner.mark_written(path, seconds=2.5, step=77, at=now)
    view = scanner.scan(now)
    assert view.newest.path == path and view.newest.step == 77 and view.newest.reported
    assert [(c.seconds, c.source) for c in view.save_costs] == [(2.5, "report")]
    # Without seconds, started->written gives the cost.
    scanner.mark_started(tmp_path / "t.pt", at=now)
    _write(tmp_path / "t.pt")
    scanner.mark_written(tmp_path / "t.pt", at=now + 4.0)
    view = scanner.scan(now + 4.0)
    assert view.save_costs[-1].seconds == pytest.approx(4.0)
    assert view.complete_count == 2


def test_rewritten_in_place_goes_back_to_in_progress(tmp_path):
    scanner = CheckpointScanner(tmp_path, settle_seconds=2.0)
    path = _write(tmp_path / "last.ckpt", age=100)
    assert scanner.scan(time.time()).newest.path == path
    with path.open("ab") as f:
        f.write(b"more")
    view = scanner.scan(time.time())
    assert view.newest is None and view.in_progress[0].path == path


def test_missing_folder_and_deleted_checkpoints(tmp_path):
    scanner = CheckpointScanner(tmp_path / "out")
    view = scanner.scan(time.time())
    assert not view.exists and view.note == "folder does not exist yet"
    assert view.free_bytes and view.free_bytes > 0
    _write(tmp_path / "out" / "a.pt", age=50)
    _write(tmp_path / "out" / "b.pt", age=10)
    view = scanner.scan(time.time())
    assert view.exists and view.newest.path.name == "b.pt" and view.complete_count == 2
    (tmp_path / "out" / "b.pt").unlink()
    view = scanner.scan(time.time())
    assert view.newest.path.name == "a.pt" and view.total_bytes == 10


def test_many_files_steady_state_does_not_relist(tmp_path, monkeypatch):
    for i in range(1000):
        (tmp_path / f"step_{i}.pt").write_bytes(b"")
    t = time.time() - 100
    for p in tmp_path.iterdir():
        os.utime(p, (t, t))
    os.utime(tmp_path, (t, t))  # an old folder mtime: not "racy"
    scanner = CheckpointScanner(tmp_path)
    view = scanner.scan(time.time())
    assert view.complete_count == 1000 and len(view.complete) == 50
    calls = []
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda *a: calls.append(a) or real(*a))
    measured: list[Path] = []
    real_measure = discovery.measure
    monkeypatch.setattr(discovery, "measure",
                        lambda path, is_dir: measured.append(path) or real_measure(path, is_dir))
    for _ in range(20):
        scanner.scan(time.time())
    assert calls == []  # folder unchanged: no listing
    # Nor a stat of every file: a steady tick re-measures only the newest few and a
    # round-robin slice of the rest, whatever the number of files.
    per_tick = len(measured) / 20
    assert 0 < per_tick <= RECHECK_NEWEST + SWEEP_PER_TICK < 1000 / 20
    (tmp_path / "step_5000.pt").write_bytes(b"z")
    view = scanner.scan(time.time() + 5)
    assert len(calls) == 1 and view.complete_count == 1001


# ------------------------------------------------------------------ interval advice


def test_interval_advice_example_from_the_brief():
    advice = interval_advice(72, 1800, 7200, 6300**2 / 144)
    assert advice.overhead == pytest.approx(0.04)
    assert advice.worst_case_loss_seconds == 1872
    assert advice.optimum_seconds == pytest.approx(6300)
    assert advice.advised_seconds == 6300
    assert advice.message == (
        "saving every 30m costs 4.0 % and risks 31m; tolerable loss is 2h: "
        "every 1h45m would cost 1.1 %"
    )


def test_interval_advice_capped_by_tolerable_loss_and_quiet_when_close():
    advice = interval_advice(60, 3600, 3600, math.inf)
    assert advice.advised_seconds == 3540  # 1h minus the save itself
    assert advice.message is not None  # current worst case (1h1m) exceeds tolerable
    close = interval_advice(60, 3000, 7200, 3000**2 / 120)
    assert close.advised_seconds == 3000 and close.message is None
    with pytest.raises(ValueError):
        interval_advice(0, 60, 60, 60)


def test_format_duration():
    assert [format_duration(s) for s in (45, 150, 1800, 6300, 7200, 93600)] == [
        "45s", "2m30s", "30m", "1h45m", "2h", "1d2h",
    ]


def test_view_is_plain_data(tmp_path):
    _write(tmp_path / "a.pt", age=5)
    view = CheckpointScanner(tmp_path).scan(time.time())
    json.dumps({"age": view.newest_age_seconds, "size": view.total_bytes})
    assert view.typical_save_seconds is None and view.last_save_seconds is None


def test_incremental_bookkeeping_matches_a_full_recount(tmp_path, monkeypatch):
    import random

    from cockpit.runs.checkpoints import discovery as checkpoints

    monkeypatch.setattr(checkpoints, "MAX_LISTED", 3)  # exercise the top-list backfill
    rng = random.Random(7)
    scanner = CheckpointScanner(tmp_path, settle_seconds=1.0)
    base = time.time() - 10_000
    for tick in range(120):
        name = tmp_path / f"s_{rng.randrange(12)}.pt"
        action = rng.random()
        if action < 0.5:
            _write(name, size=rng.randrange(1, 50))
            os.utime(name, (base + tick, base + tick))
        elif action < 0.8 and name.exists():
            name.unlink()
        view = scanner.scan(time.time() + rng.choice([0, 5]))
        files = sorted(tmp_path.glob("*.pt"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        assert view.total_bytes == sum(p.stat().st_size for p in files)
        assert view.complete_count + len(view.in_progress) == len(files)
        assert [c.path for c in view.complete] == files[: len(view.complete)] or (
            view.in_progress
        )
        assert len(view.complete) == min(3, view.complete_count)
