"""TensorBoard event files as a metrics source (issue 15): written by the real
``tensorboard`` writer (torch's SummaryWriter), read incrementally by TensorBoardReader
through the optional ``tensorboard`` package, and treated like any other source by the
stream (and so by the rules and the chart)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from cockpit.runs.metrics.readers import FolderReader, open_reader
from cockpit.runs.metrics.stream import MetricStream
from cockpit.runs.metrics.tensorboard import TENSORBOARD_MISSING, TensorBoardReader


def writer(folder: Path):  # type: ignore[no-untyped-def]
    pytest.importorskip("tensorboard")
    tb = pytest.importorskip("torch.utils.tensorboard")
    return tb.SummaryWriter(log_dir=str(folder), flush_secs=3600)


def test_event_file_read_incrementally_by_the_real_writer(tmp_path: Path) -> None:
    w = writer(tmp_path / "version_0")
    for step in range(1, 6):
        w.add_scalar("train/loss", 1.0 / step, step)
    w.add_scalar("val/accuracy", 0.7, 5)
    w.add_histogram("weights", __import__("numpy").array([0.1, 0.2, 0.3]), 5)  # skipped
    w.add_text("note", "hello", 5)
    w.flush()
    [file] = sorted((tmp_path / "version_0").glob("events.out.tfevents.*"))

    reader = open_reader(file)
    assert isinstance(reader, TensorBoardReader)
    points = reader.poll().points
    losses = [(p.step, p.values["train/loss"]) for p in points if "train/loss" in p.values]
    assert [s for s, _ in losses] == [1, 2, 3, 4, 5]
    assert losses[-1][1] == pytest.approx(0.2)
    assert any(p.values.get("val/accuracy") == pytest.approx(0.7) for p in points)
    assert all(p.t and p.t > 1e9 for p in points)  # the events' wall time
    assert reader.exists and reader.error is None and reader.garbage == 0

    assert reader.poll().points == []  # nothing new: nothing read again
    w.add_scalar("train/loss", float("nan"), 6)
    w.flush()
    [point] = reader.poll().points  # only what is new
    assert point.step == 6 and math.isnan(point.values["train/loss"])
    w.close()


def test_folder_as_stream_like_any_source(tmp_path: Path) -> None:
    folder = tmp_path / "lightning_logs" / "version_0"
    stream = MetricStream([folder])  # the folder does not exist when the run starts
    assert isinstance(stream.readers[0], FolderReader)
    assert stream.poll() == []
    w = writer(folder)
    for step in range(1, 4):
        w.add_scalar("train_loss", 2.0 / step, step)
    w.flush()
    points = stream.poll()
    assert [p.step for p in points] == [1, 2, 3]
    assert stream.latest["train_loss"] == pytest.approx(2.0 / 3) and stream.latest_step == 3
    w.close()
    # A restarted writer adds a second file to the folder: read on, in name order.
    w2 = writer(folder)
    w2.add_scalar("train_loss", 0.5, 4)
    w2.close()
    assert [p.step for p in stream.poll()] == [4]


def test_missing_extra_says_how_to_install(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "events.out.tfevents.1.host.1.0"
    file.write_bytes(b"")
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # import tensorboard fails
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing."
                        "event_file_loader", None)
    reader = open_reader(file)
    assert reader.poll().points == []
    assert reader.error == TENSORBOARD_MISSING and "cockpit[tensorboard]" in reader.error
    assert reader.last_garbage == TENSORBOARD_MISSING and reader.garbage == 1
    reader.poll()
    assert reader.garbage == 1  # said once, not counted every tick
