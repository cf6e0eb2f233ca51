"""Tests for cockpit.runs.metrics.stream: incremental JSONL / CSV / trainer_state readers."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cockpit.runs.metrics.stream import (
    CsvMetricsReader,
    JsonlMetricsReader,
    MetricPoint,
    MetricStream,
    TrainerStateReader,
    loads_tolerant,
    open_reader,
    to_float,
)

REPO = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _append(path: Path, text: str | bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(text.encode() if isinstance(text, str) else text)


def _steps(points: list[MetricPoint]) -> list[int | None]:
    return [p.step for p in points]


# ---------------------------------------------------------------- JSON lines
def test_report_written_by_another_process_is_read_incrementally(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    stream = MetricStream([path])
    assert stream.poll() == [] and not stream.readers[0].exists
    code = textwrap.dedent(
        """
        import sys
        from cockpit import report
        report.open_report(sys.argv[1])
        start, stop = int(sys.argv[2]), int(sys.argv[3])
        for step in range(start, stop):
            report.log(step=step, loss=1.0 / (step + 1), lr=1e-4)
            report.metric("val/accuracy", 0.5, step=step)
        report.checkpoint_started("/ckpt/step", step=stop)
        report.checkpoint_written("/ckpt/step", step=stop, seconds=2.5)
        report.log(step=stop, loss=float("nan"))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for start, stop in ((0, 50), (50, 80)):
        subprocess.run(
            [sys.executable, "-c", code, str(path), str(start), str(stop)], env=env, check=True
        )
        points = stream.poll()
        loss_steps = [p.step for p in points if "loss" in p.values]
        assert loss_steps == [*range(start, stop), stop]
        assert math.isnan(points[-1].values["loss"])
        assert all(isinstance(p.t, float) for p in points)
        events = stream.poll_events()
        assert [e["event"] for e in events] == ["checkpoint_started", "checkpoint_written"]
        assert events[1]["seconds"] == 2.5 and events[1]["step"] == stop
    assert stream.poll() == [] and stream.poll_events() == []
    assert stream.latest["val/accuracy"] == 0.5 and math.isnan(stream.latest["loss"])
    assert stream.latest_step == 80
    assert stream.last_value_step("val/accuracy") == 79
    assert stream.last_value_step("loss") == 80
    assert stream.last_value_step("unknown") is None
    assert stream.garbage == 0


def test_partial_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    reader = JsonlMetricsReader(path)
    _append(path, '{"step": 1, "loss": 0.5}\n{"step": 2, "lo')
    assert _steps(reader.poll().points) == [1]
    assert reader.poll().points == []
    _append(path, 'ss": 0.4}')
    assert reader.poll().points == []  # still no newline
    _append(path, "\n")
    points = reader.poll().points
    assert points == [MetricPoint(2, {"loss": 0.4}, None)]
    assert reader.garbage == 0


@pytest.mark.parametrize(
    "spelling",
    [
        "NaN",
        "nan",
        "NAN",
        "nAn",
        "Infinity",
        "infinity",
        "INFINITY",
        "inf",
        "Inf",
        "INF",
        "+inf",
        "-inf",
        "-Inf",
        "-INF",
        "-Infinity",
        "-infinity",
        "+Infinity",
    ],
)
def test_non_finite_spellings_are_values(tmp_path: Path, spelling: str) -> None:
    path = tmp_path / "m.jsonl"
    _append(path, f'{{"step": 1, "loss": {spelling}, "s": "{spelling}", "note": "x"}}\n')
    _append(path, f'{{"step": 2, "nested": [1, {spelling}], "a": "nan inf"}}\n')
    reader = JsonlMetricsReader(path)
    points = reader.poll().points
    assert reader.garbage == 0
    expected = math.nan if "n" == spelling.lower().lstrip("+-")[0] else math.inf
    if spelling.startswith("-"):
        expected = -expected
    for value in (points[0].values["loss"], points[0].values["s"]):
        assert isinstance(value, float)
        assert (math.isnan(value) and math.isnan(expected)) or value == expected
    assert "note" not in points[0].values  # a non-numeric string is not a metric
    assert points[1].step == 2 and dict(points[1].values) == {}


def test_tolerant_json_leaves_strings_alone() -> None:
    record = loads_tolerant('{"name": "inf nan -inf", "x": -inf, "y": nan, "z": inf}')
    assert record["name"] == "inf nan -inf"
    assert record["x"] == -math.inf and math.isnan(record["y"]) and record["z"] == math.inf
    with pytest.raises(ValueError):
        loads_tolerant('{"x": infinite}')


def test_to_float_rules() -> None:
    assert to_float(True) is None and to_float(False) is None
    assert to_float(3) == 3.0 and isinstance(to_float(3), float)
    assert to_float(" 0.25 ") == 0.25
    assert to_float("abc") is None and to_float(None) is None and to_float([1]) is None


def test_values_are_floats_steps_ints_bools_excluded(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _append(path, '{"step": 3.0, "t": "2024-12-02T09:00:00Z", "n": 4, "ok": true, "x": 1.5}\n')
    _append(path, '{"step": "7", "n": 1}\n{"step": 1.5, "n": 2}\n')
    (first, second, third) = JsonlMetricsReader(path).poll().points
    assert first.step == 3 and isinstance(first.step, int)
    assert dict(first.values) == {"n": 4.0, "x": 1.5}
    assert isinstance(first.values["n"], float)
    assert first.t == 1733130000.0
    assert second.step == 7 and third.step is None


def test_garbage_lines_are_counted_never_fatal(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _append(path, '{"step": 1, "loss": 1}\nnot json\n[1, 2]\n\n"text"\n')
    _append(path, b'\xff\xfe{"step": 2}\n{"step": 3, "loss": 0.5}\n{"step": 4,\n')
    reader = JsonlMetricsReader(path)
    points = reader.poll().points
    assert _steps(points) == [1, 3]
    assert reader.garbage == 5
    assert reader.last_garbage_line == 8
    _append(path, '{"step": 5, "loss": 0.4}\n')
    assert _steps(reader.poll().points) == [5]
    assert reader.garbage == 5


def test_over_long_line_is_garbage_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _append(path, b'{"step": 1, "x": 1}\n' + b"y" * (1024 * 1024 + 10))
    reader = JsonlMetricsReader(path)
    assert _steps(reader.poll().points) == [1]
    assert reader.garbage == 1
    _append(path, b'yyy\n{"step": 2, "x": 2}\n')
    assert _steps(reader.poll().points) == [2]
    assert reader.garbage == 1


def test_jsonl_truncated_or_replaced_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    clock = FakeClock()
    reader = JsonlMetricsReader(path, clock)
    _append(path, "".join(f'{{"t": 1.0, "step": {s}, "loss": 1}}\n' for s in range(10)))
    assert len(reader.poll().points) == 10

    # Truncated and restarted by a new run (different records): all delivered again.
    path.write_text('{"t": 2.0, "step": 0, "loss": 9}\n')
    assert _steps(reader.poll().points) == [0] and reader.resets == 1

    # Replaced by a new inode with new content.
    other = tmp_path / "other.jsonl"
    other.write_text('{"t": 3.0, "step": 0, "loss": 7}\n{"t": 3.0, "step": 1, "loss": 6}\n')
    os.replace(other, path)
    points = reader.poll().points
    assert _steps(points) == [0, 1] and points[0].values["loss"] == 7
    assert reader.resets == 2

    # Replaced by a copy of the same records plus new ones (rsync, copy-back):
    # only the new ones are delivered.
    other.write_text(path.read_text() + '{"t": 3.0, "step": 2, "loss": 5}\n')
    os.replace(other, path)
    assert _steps(reader.poll().points) == [2]

    # Rewritten in place to a larger size with a different first record.
    path.write_text(path.read_text().replace('"loss": 7', '"loss": 8') + "\n")
    points = reader.poll().points
    assert _steps(points) == [0, 1, 2] and points[0].values["loss"] == 8

    # Removed, then back.
    path.unlink()
    assert reader.poll().points == [] and not reader.exists
    path.write_text('{"t": 4.0, "step": 0, "loss": 1}\n')
    assert _steps(reader.poll().points) == [0] and reader.exists


def test_reader_times_show_staleness(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    clock = FakeClock(100.0)
    stream = MetricStream([path], clock=clock)
    reader = stream.readers[0]
    stream.poll()
    assert reader.last_read_at == 100.0 and reader.last_change_at is None
    assert stream.stale_seconds(100.0) is None
    _append(path, '{"step": 1, "loss": 1}\n')
    clock.t = 110.0
    stream.poll()
    assert reader.last_change_at == 110.0 and reader.last_record_at == 110.0
    _append(path, "garbage\n")
    clock.t = 120.0
    stream.poll()
    assert reader.last_change_at == 120.0 and reader.last_record_at == 110.0
    clock.t = 130.0
    stream.poll()
    assert reader.last_read_at == 130.0 and reader.last_change_at == 120.0
    assert stream.stale_seconds(140.0) == 30.0
    assert stream.garbage == 1


def test_stream_keeps_only_bounded_recent_points(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _append(path, "".join(f'{{"step": {s}, "loss": 1}}\n' for s in range(50)))
    stream = MetricStream([path], recent=10)
    assert len(stream.poll()) == 50
    assert [p.step for p in stream.recent] == list(range(40, 50))


# ---------------------------------------------------------------- Lightning CSV
class LightningCsvWriter:
    """Mimics lightning's CSVLogger writer: append rows; a new key rewrites the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys: list[str] = []

    def save(self, rows: list[dict[str, float]]) -> None:
        new = sorted({k for row in rows for k in row} - set(self.keys))
        exists = self.path.is_file()
        if new and exists:
            with open(self.path, newline="") as handle:
                old = list(csv.DictReader(handle))
            self.keys.extend(new)
            with open(self.path, "w", newline="") as handle:  # same inode, truncated
                writer = csv.DictWriter(handle, fieldnames=self.keys)
                writer.writeheader()
                writer.writerows(old)
        else:
            self.keys.extend(new)
        with open(self.path, "a" if exists else "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=self.keys)
            if not exists:
                writer.writeheader()
            writer.writerows(rows)


def test_lightning_csv_sparse_rows_and_header_growth(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    writer = LightningCsvWriter(path)
    reader = open_reader(path)
    assert isinstance(reader, CsvMetricsReader)
    writer.save([{"epoch": 0, "step": s, "train_loss": 1.0 - s / 10} for s in range(3)])
    points = reader.poll().points
    assert _steps(points) == [0, 1, 2]
    assert dict(points[0].values) == {"epoch": 0.0, "train_loss": 1.0}

    writer.save([{"epoch": 0, "step": 3, "train_loss": 0.7}])
    assert _steps(reader.poll().points) == [3]

    # A validation metric appears: the whole file is rewritten with a wider header.
    size_before = path.stat().st_size
    writer.save(
        [{"epoch": 0, "step": 4, "train_loss": 0.6}, {"epoch": 0, "step": 4, "val_acc": 0.8}]
    )
    assert path.stat().st_size > size_before
    points = reader.poll().points
    assert _steps(points) == [4, 4]  # the rewritten old rows are not replayed
    assert dict(points[1].values) == {"epoch": 0.0, "val_acc": 0.8}  # sparse: no train_loss
    assert reader.header == ["epoch", "step", "train_loss", "val_acc"]
    assert reader.resets == 1 and reader.garbage == 0

    writer.save([{"epoch": 1, "step": 5, "train_loss": float("nan")}])
    (point,) = reader.poll().points
    assert point.step == 5 and math.isnan(point.values["train_loss"])


def test_csv_rewrite_seen_half_done_is_not_replayed(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss\n1,0.9\n2,0.8\n3,0.7\n")
    reader = CsvMetricsReader(path)
    assert _steps(reader.poll().points) == [1, 2, 3]
    with open(path, "w") as handle:  # the rewrite, caught after two rows
        handle.write("step,loss,acc\n1,0.9,\n2,0.8,\n")
        handle.flush()
        assert reader.poll().points == []
        handle.write("3,0.7,\n4,0.6,0.5\n")
    points = reader.poll().points
    assert _steps(points) == [4] and dict(points[0].values) == {"loss": 0.6, "acc": 0.5}


def test_csv_truncated_with_new_content_and_garbage(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("epoch,step,loss\n0,0,1.0\n0,1,0.9\n")
    reader = CsvMetricsReader(path)
    assert len(reader.poll().points) == 2
    path.write_text("epoch,step,loss\n0,0,5.0\n")  # a new run: different first row
    points = reader.poll().points
    assert _steps(points) == [0] and points[0].values["loss"] == 5.0
    _append(path, "0,1,2.0,9,9\n0,2,inf\n0,3,oops\n,,\n")
    points = reader.poll().points
    assert _steps(points) == [2, 3]
    assert points[0].values["loss"] == math.inf and "loss" not in points[1].values
    assert reader.garbage == 1 and reader.last_garbage_line == 3


# ---------------------------------------------------------------- trainer_state.json
def _state(history: list[dict[str, float]], max_steps: int = 1000) -> str:
    step = max((int(e["step"]) for e in history), default=0)
    return json.dumps(
        {"global_step": step, "max_steps": max_steps, "epoch": 0.1, "log_history": history}
    )


def _save_checkpoint(out: Path, step: int, history: list[dict[str, float]]) -> Path:
    folder = out / f"checkpoint-{step}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trainer_state.json").write_text(_state(history))
    return folder / "trainer_state.json"


def test_trainer_state_newest_checkpoint_and_rewrites(tmp_path: Path) -> None:
    out = tmp_path / "output"
    reader = open_reader(out)
    assert isinstance(reader, TrainerStateReader)
    assert reader.poll().points == [] and not reader.exists

    h = [{"step": 10, "loss": 2.0, "learning_rate": 1e-4, "epoch": 0.01}]
    h.append({"step": 20, "loss": 1.5, "learning_rate": 1e-4, "epoch": 0.02})
    _save_checkpoint(out, 20, h)
    points = reader.poll().points
    assert _steps(points) == [10, 20, 20]
    assert dict(points[-1].values) == {"max_steps": 1000.0}
    assert reader.source == out / "checkpoint-20" / "trainer_state.json"

    h += [{"step": 30, "loss": 1.2}, {"step": 30, "eval_loss": 1.3, "eval_runtime": 4.0}]
    _save_checkpoint(out, 100, h)  # newest by N, not by name order ("100" < "20")
    points = reader.poll().points
    assert _steps(points) == [30, 30]
    assert dict(points[1].values) == {"eval_loss": 1.3, "eval_runtime": 4.0}
    assert reader.source == out / "checkpoint-100" / "trainer_state.json"
    assert reader.poll().points == []


def test_trainer_state_half_written_keeps_previous_data(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.json"
    stream = MetricStream([path])
    history = [{"step": 5, "loss": 3.0}]
    path.write_text(_state(history))
    stream.poll()
    assert stream.latest == {"loss": 3.0, "max_steps": 1000.0}

    history.append({"step": 10, "loss": float("nan")})
    full = _state(history)
    path.write_text(full[: len(full) // 2])
    assert stream.poll() == []
    assert stream.garbage == 1 and stream.latest["loss"] == 3.0
    assert stream.poll() == [] and stream.garbage == 1  # counted once, not every tick

    path.write_text(full)
    points = stream.poll()
    assert _steps(points) == [10] and math.isnan(stream.latest["loss"])
    assert stream.latest_step == 10 and stream.garbage == 1


def test_trainer_state_resumed_from_earlier_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.json"
    reader = TrainerStateReader(path)
    path.write_text(_state([{"step": s, "loss": 1.0} for s in (10, 20, 30)]))
    assert _steps(reader.poll().points) == [10, 20, 30, 30]
    # Resumed from step 20: history is rewritten from there on.
    path.write_text(_state([{"step": s, "loss": 0.5} for s in (10, 20, 25, 40)]))
    assert _steps(reader.poll().points) == [40]


# ---------------------------------------------------------------- choosing readers
def test_open_reader_by_name(tmp_path: Path) -> None:
    assert isinstance(open_reader(tmp_path / "a.jsonl"), JsonlMetricsReader)
    assert isinstance(open_reader(tmp_path / "a.json"), JsonlMetricsReader)
    assert isinstance(open_reader(tmp_path / "trainer_state.json"), TrainerStateReader)
    assert isinstance(open_reader(tmp_path / "metrics.CSV"), CsvMetricsReader)
    assert isinstance(open_reader(tmp_path), TrainerStateReader)
    assert isinstance(open_reader(tmp_path / "hf_output"), TrainerStateReader)
    with pytest.raises(ValueError, match="no metrics reader"):
        open_reader(tmp_path / "events.out.tfevents")


def test_stream_combines_readers_and_degrades(tmp_path: Path) -> None:
    jsonl, state = tmp_path / "m.jsonl", tmp_path / "out"
    folder_as_file = tmp_path / "dir.jsonl"
    folder_as_file.mkdir()
    stream = MetricStream([jsonl, state, folder_as_file])
    _append(jsonl, '{"step": 1, "loss": 0.9}\n')
    _save_checkpoint(state, 2, [{"step": 2, "eval_loss": 0.8}])
    points = stream.poll()
    assert {k for p in points for k in p.values} == {"loss", "eval_loss", "max_steps"}
    assert stream.latest["eval_loss"] == 0.8 and stream.latest["loss"] == 0.9
    assert stream.readers[2].error is not None and "not a regular file" in stream.readers[2].error
    assert stream.paths == [jsonl, state, folder_as_file]


def test_report_never_crashes_on_values_without_a_scalar(tmp_path: Path) -> None:
    from cockpit import report

    class MultiElementTensor:  # what torch does for .item() on a tensor of 2 elements
        def item(self) -> float:
            raise RuntimeError("a Tensor with 2 elements cannot be converted to Scalar")

        def __str__(self) -> str:
            return "tensor([1., 2.])"

    path = tmp_path / "m.jsonl"
    report.open_report(path)
    try:
        report.log(step=1, grads=MultiElementTensor(), loss=0.5)
    finally:
        report.open_report(None)
    (point,) = JsonlMetricsReader(path).poll().points
    assert dict(point.values) == {"loss": 0.5}
