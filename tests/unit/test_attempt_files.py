"""Issue 42: what an earlier attempt left in a run's folders never counts for the new
one (its metric points, its checkpoints), and a save's cost is measured from the
checkpoint's own files when nobody reports it. Real files; the writers are real
processes (their waits are theirs: the test waits for their exit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from cockpit.runs.attempts import MTIME_SLACK_S, older_than
from cockpit.runs.checkpoints.discovery import CheckpointScanner
from cockpit.runs.checkpoints.layout import write_span
from cockpit.runs.metrics.stream import MetricStream

HOUR = 3600.0


def _age(path: Path, seconds: float) -> None:
    """Make ``path`` (and a folder's files) look written ``seconds`` ago: an earlier
    attempt's."""
    when = time.time() - seconds
    for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.utime(item, (when, when))


def _read_all(stream: MetricStream) -> list:  # type: ignore[type-arg]
    points = []
    while batch := stream.poll():
        points.extend(batch)
    return points


def test_older_than_allows_the_file_systems_granularity() -> None:
    start = 1_000_000.0
    assert older_than(start - MTIME_SLACK_S - 0.01, start)
    assert not older_than(start - MTIME_SLACK_S + 0.01, start)  # coarse clocks: this one's
    assert not older_than(0.0, None)  # no attempt: everything counts


def test_an_earlier_attempts_lightning_csv_counts_only_once_rewritten(tmp_path: Path) -> None:
    csv = tmp_path / "version_0" / "metrics.csv"
    csv.parent.mkdir()
    csv.write_text("step,train_loss\n998,0.3\n999,0.25\n")
    _age(csv, HOUR)
    stream = MetricStream([csv], since=time.time())
    assert _read_all(stream) == [] and stream.latest_step is None and stream.latest == {}
    # Lightning's CSVLogger deletes the old file and writes its own: read whole
    csv.unlink()
    assert _read_all(stream) == []
    csv.write_text("step,train_loss\n1,0.5\n")
    (point,) = _read_all(stream)
    assert (point.step, point.values["loss"]) == (1, 0.5) and stream.latest_step == 1


def test_lines_appended_to_an_earlier_attempts_file_count(tmp_path: Path) -> None:
    csv = tmp_path / "metrics.csv"
    csv.write_text("step,train_loss\n999,0.25\n")
    _age(csv, HOUR)
    stream = MetricStream([csv], since=time.time())
    assert _read_all(stream) == []
    with open(csv, "a") as handle:
        handle.write("1,0.5\n")
    (point,) = _read_all(stream)  # the header learned from the old first line
    assert (point.step, point.values["train_loss"]) == (1, 0.5)


def test_records_with_their_own_time_before_the_attempt_are_dropped(tmp_path: Path) -> None:
    report = tmp_path / "report.jsonl"
    now = time.time()
    report.write_text(json.dumps({"t": now - HOUR, "step": 999, "loss": 0.25}) + "\n"
                      + json.dumps({"t": now - HOUR, "event": "checkpoint_written",
                                    "path": "old.pt"}) + "\n"
                      + json.dumps({"t": now + 1, "step": 1, "loss": 0.5}) + "\n")
    stream = MetricStream([report], since=now)
    assert [p.step for p in _read_all(stream)] == [1]
    assert stream.poll_events() == [] and stream.latest_step == 1


def test_an_earlier_attempts_trainer_checkpoint_is_not_read(tmp_path: Path) -> None:
    out = tmp_path / "out"
    old = out / "checkpoint-500"
    old.mkdir(parents=True)
    state = {"global_step": 500, "max_steps": 1000, "log_history": [{"step": 500, "loss": 0.1}]}
    (old / "trainer_state.json").write_text(json.dumps(state))
    _age(old, HOUR)
    stream = MetricStream([out], since=time.time())
    assert _read_all(stream) == [] and stream.latest_step is None
    assert stream.readers[0].exists  # there (not "does not exist"), but not this attempt's
    new = out / "checkpoint-10"  # the new attempt's first save (a lower N than the old)
    new.mkdir()
    state = {"global_step": 10, "max_steps": 20, "log_history": [{"step": 10, "loss": 0.9}]}
    (new / "trainer_state.json").write_text(json.dumps(state))
    points = _read_all(stream)
    assert [(p.step, p.values.get("loss")) for p in points] == [(10, 0.9), (10, None)]
    assert stream.latest["max_steps"] == 20.0 and stream.latest_step == 10


def test_an_earlier_attempts_checkpoint_is_not_this_attempts(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "step=999.ckpt").write_bytes(b"old")
    _age(folder / "step=999.ckpt", HOUR)
    scanner = CheckpointScanner(folder, settle_seconds=0)
    scanner.since = time.time()
    view = scanner.scan(time.time())
    assert view.newest is None and view.complete == () and view.complete_count == 0
    assert view.earlier == 1 and view.total_bytes == 3  # still on the disk
    (folder / "step=1.ckpt").write_bytes(b"new!")
    view = scanner.scan(time.time())
    assert view.newest is not None and view.newest.path.name == "step=1.ckpt"
    assert (view.complete_count, view.earlier) == (1, 1)
    scanner.since = None  # no attempt scope (a whole-campaign look): both count
    assert scanner.scan(time.time()).complete_count == 2


# Writes a checkpoint folder as the Hugging Face Trainer does, one file after another
# with waits between (a save that takes time), then a single file in two writes; it
# records its own times around each so the test compares with what really happened.
WRITER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    folder, single, pause = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    times = {}
    folder.mkdir(parents=True)
    times["folder_start"] = time.time()
    (folder / "config.json").write_text("{}")
    time.sleep(pause)
    (folder / "model.safetensors").write_bytes(b"w" * 4096)
    time.sleep(pause)
    (folder / "trainer_state.json").write_text("{}")
    times["folder_end"] = time.time()
    times["single_start"] = time.time()
    with open(single, "wb") as handle:
        handle.write(b"a" * 4096)
        handle.flush()
        time.sleep(pause)
        handle.write(b"b" * 4096)
    times["single_end"] = time.time()
    Path(sys.argv[4]).write_text(json.dumps(times))
""")


def test_a_saves_cost_is_measured_from_its_files(tmp_path: Path) -> None:
    (tmp_path / "writer.py").write_text(WRITER)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    folder, single, times_file = ckpt / "checkpoint-5", ckpt / "step=6.pt", tmp_path / "t.json"
    since = time.time()
    subprocess.run([sys.executable, str(tmp_path / "writer.py"), str(folder), str(single),
                    "0.3", str(times_file)], check=True, timeout=60)
    times = json.loads(times_file.read_text())
    scanner = CheckpointScanner(ckpt, settle_seconds=0)
    scanner.since = since
    view = scanner.scan(time.time())
    costs = {c.path.name: c for c in view.save_costs}
    assert {c.source for c in costs.values()} == {"files"}
    # between the writer's own time of its first write's end and of its whole save
    # (file times are a kernel tick coarse: a few ms of allowance)
    wrote_folder = times["folder_end"] - times["folder_start"]
    assert 2 * 0.3 - 0.02 <= costs["checkpoint-5"].seconds <= wrote_folder + 0.02
    wrote_file = times["single_end"] - times["single_start"]
    assert 0.3 - 0.02 <= costs["step=6.pt"].seconds <= wrote_file + 0.02
    assert view.typical_save_seconds is not None and view.typical_save_seconds >= 0.28
    # a file read since it was written no longer tells its creation: not measured
    single.read_bytes()
    assert write_span(single, False) is None or os.stat(single).st_atime <= os.stat(
        single).st_mtime  # (a mount that never updates access times keeps it)
    # an earlier save into the same path: only what was written since counts
    assert write_span(folder, True, floor_ns=time.time_ns() + 10**9) is None
