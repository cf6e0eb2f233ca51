"""The metric stream cache (issue 24): a restart reads only what is new, and a cache
that does not describe the files as they are now is ignored, the stream then read from
the start as without one. Every test compares the restored stream, field by field, with
a stream that read the same file in full; real files throughout (a kill -9 of a real
process in the middle of writing a cache included).
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.runs.metrics import stream_cache
from cockpit.runs.metrics.stream import MetricStream
from cockpit.runs.metrics.stream_cache import (
    ONE_SHOT_TAIL,
    cache_file,
    load,
    open_stream,
    restore,
    save,
    start_at_tail,
)
from cockpit.runs.metrics.tail import seed_from_tail


def line(step: int, **values: Any) -> bytes:
    """What cockpit.report.log writes."""
    record: dict[str, Any] = {"t": 1_700_000_000.0 + step, "step": step}
    record.update(values or {"loss": 1.0 / step})
    return (json.dumps(record) + "\n").encode()


def event(kind: str, path: str, step: int) -> bytes:
    return (json.dumps({"t": 1_700_000_000.0 + step, "event": kind, "path": path,
                        "step": step}) + "\n").encode()


def write(path: Path, data: bytes, mode: str = "ab") -> None:
    with open(path, mode) as out:
        out.write(data)


def lines(first: int, last: int) -> bytes:
    return b"".join(line(s, loss=1.0 / s, **({"val": s / 10} if s % 7 == 0 else {}))
                    for s in range(first, last + 1))


def read_all(stream: MetricStream) -> MetricStream:
    for _ in range(10_000):
        stream.poll()
        if all(r.caught_up for r in stream.readers):
            return stream
    raise AssertionError("never caught up")


def fields(stream: MetricStream) -> dict[str, Any]:
    """What a restored stream must equal a full read in (times of reading aside)."""
    reader: Any = stream.readers[0]
    return {
        "latest": _nan_safe(stream.latest), "latest_step": stream.latest_step,
        "value_steps": dict(stream._value_steps),
        "recent": [(p.step, p.t, _nan_safe(p.values)) for p in stream.recent],
        "reported": list(stream.reported), "garbage": stream.garbage,
        "last_garbage_line": reader.last_garbage_line, "last_garbage": reader.last_garbage,
        "position": reader.position, "line_no": reader._line_no,
        "delivered": reader._delivered,
    }


def _nan_safe(values: Any) -> dict[str, Any]:
    return {k: "nan" if isinstance(v, float) and math.isnan(v) else v for k, v in values.items()}


def full(path: Path) -> dict[str, Any]:
    return fields(read_all(MetricStream([path])))


def saved(path: Path, cache: Path) -> MetricStream:
    """A stream that read ``path`` to its end, its cache written at ``cache``."""
    stream = read_all(MetricStream([path]))
    assert save(stream, cache)
    return stream


def reopened(path: Path, cache: Path, one_shot: bool = False) -> tuple[MetricStream, str]:
    stream = MetricStream([path])
    return stream, open_stream(stream, cache, one_shot=one_shot)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    metrics = tmp_path / "report.jsonl"
    write(metrics, lines(1, 500) + b"not json\n" + event("checkpoint_written", "ck/1", 500)
          + lines(501, 900) + b'{"step": 901, "loss": NaN}\n')
    return metrics, cache_file(tmp_path / "cache", "r1")


# ---------------------------------------------------------------- a valid cache
def test_a_restart_with_a_valid_cache_reads_only_the_new_bytes(files) -> None:
    metrics, cache = files
    first = saved(metrics, cache)
    offset = first.readers[0].position
    write(metrics, lines(902, 950) + b"garbage again\n")
    stream, how = reopened(metrics, cache)
    assert how == "cache"
    assert stream.readers[0].position == offset  # where it stopped, not 0
    new = stream.poll()
    assert stream.start_offsets == [offset]
    assert [p.step for p in new] == list(range(902, 951))  # only what is new
    assert fields(stream) == full(metrics)
    assert stream.readers[0].last_garbage_line == 953  # line numbers go on counting
    # The checkpoint report read before the restart is handed on (the scanner needs it).
    assert [e["path"] for e in stream.poll_events()] == ["ck/1"]


def test_a_restored_stream_equals_the_full_read_when_nothing_is_new(files) -> None:
    metrics, cache = files
    saved(metrics, cache)
    stream, how = reopened(metrics, cache)
    assert how == "cache" and stream.poll() == []
    assert fields(stream) == full(metrics)
    assert math.isnan(stream.latest["loss"])  # NaN survives the JSON cache


def test_a_torn_last_line_is_completed_once_after_the_restart(files) -> None:
    metrics, cache = files
    torn = line(902)
    write(metrics, torn[:10])  # the writer was cut mid-line
    first = saved(metrics, cache)
    assert first.latest_step == 901
    write(metrics, torn[10:] + line(903))
    stream, how = reopened(metrics, cache)
    assert how == "cache"
    assert [p.step for p in stream.poll()] == [902, 903]
    assert fields(stream) == full(metrics)


# ---------------------------------------------------------------- a cache that no longer fits
def _truncated(metrics: Path) -> None:
    with open(metrics, "r+b") as out:
        out.truncate(1000)


def _rewritten_same_size(metrics: Path) -> None:
    data = bytearray(metrics.read_bytes())
    data[-40:-30] = b"9" * 10  # in place: same inode, same size, other bytes
    metrics.write_bytes(bytes(data))


def _truncated_and_rewritten(metrics: Path) -> None:
    with open(metrics, "r+b") as out:  # same inode, longer than before, other content
        out.truncate(0)
        out.write(lines(1, 2000).replace(b'"loss"', b'"lost"'))


def _first_line_changed(metrics: Path) -> None:
    data = metrics.read_bytes()
    metrics.write_bytes(data.replace(b'"step": 1,', b'"step": 0,', 1))


def _replaced(metrics: Path) -> None:
    other = metrics.with_name("other.jsonl")
    other.write_bytes(metrics.read_bytes())  # the same bytes, another file
    os.replace(other, metrics)


@pytest.mark.parametrize("change", [_truncated, _rewritten_same_size, _truncated_and_rewritten,
                                    _first_line_changed, _replaced])
def test_a_cache_of_a_file_that_changed_is_ignored_and_rebuilt(files, change) -> None:
    metrics, cache = files
    saved(metrics, cache)
    change(metrics)
    stream, how = reopened(metrics, cache)
    assert how == "start" and stream.readers[0].position == 0
    assert fields(read_all(stream)) == full(metrics)
    # The engine writes the cache again from what it read: now it is valid.
    assert save(stream, cache)
    again, how = reopened(metrics, cache)
    assert how == "cache" and fields(again) == full(metrics)


def test_a_cache_of_another_file_or_version_is_ignored(files, tmp_path) -> None:
    metrics, cache = files
    other = tmp_path / "other.jsonl"
    write(other, lines(1, 300))
    saved(other, cache)  # another run's file, cached under this name
    stream, how = reopened(metrics, cache)
    assert how == "start" and fields(read_all(stream)) == full(metrics)

    saved(metrics, cache)
    body = json.loads(cache.read_bytes().split(b"\n", 1)[1])
    for key, value in [("version", 2), ("kind", "something-else")]:
        doc = dict(body, **{key: value})
        data = json.dumps(doc).encode()
        cache.write_bytes(stream_cache._sha(data).encode() + b"\n" + data)
        assert load(cache) is None
        stream, how = reopened(metrics, cache)
        assert how == "start" and fields(read_all(stream)) == full(metrics)


def test_a_corrupted_or_hostile_cache_is_ignored_never_raises(files) -> None:
    metrics, cache = files
    saved(metrics, cache)
    good = cache.read_bytes()
    expected = full(metrics)
    rng = random.Random(24)
    cuts = [good[:n] for n in rng.sample(range(len(good)), 40)]
    flips = []
    for at in rng.sample(range(len(good)), 40):
        data = bytearray(good)
        data[at] ^= 1 << rng.randrange(8)
        flips.append(bytes(data))
    for bad in [*cuts, *flips, b"", b"\x00" * 100, b"[" * 5000, good + b"x"]:
        cache.write_bytes(bad)
        stream, how = reopened(metrics, cache)
        assert how == "start"
        assert fields(read_all(stream)) == expected


@pytest.mark.parametrize("field,value", [
    ("offset", -5), ("offset", 10**12), ("offset", "12"), ("garbage", True), ("head_len", 10**9),
    ("dev", None), ("line_no", 1.5), ("header", 3)])
def test_a_cache_with_a_wrong_field_is_ignored(files, field, value) -> None:
    """Checksummed but wrong (a hostile writer can compute a SHA-256 too): every field is
    checked before anything is taken."""
    metrics, cache = files
    saved(metrics, cache)
    doc = json.loads(cache.read_bytes().split(b"\n", 1)[1])
    doc["readers"][0][field] = value
    data = json.dumps(doc).encode()
    cache.write_bytes(stream_cache._sha(data).encode() + b"\n" + data)
    stream = MetricStream([metrics])
    assert not restore(stream, load(cache) or {})
    assert stream.readers[0].position == 0 and stream.latest == {}
    assert fields(read_all(stream)) == full(metrics)


def test_recent_points_in_the_cache_stay_bounded(tmp_path) -> None:
    metrics, cache = tmp_path / "m.jsonl", tmp_path / "c.json"
    write(metrics, lines(1, 5000))
    stream = saved(metrics, cache)
    assert len(stream.recent) == 1000
    doc = load(cache)
    assert doc is not None and len(doc["recent"]) == 1000
    doc["recent"] = doc["recent"] * 2  # more than the stream keeps: not from this code
    assert not restore(MetricStream([metrics]), doc)


KILLED_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from cockpit.runs.metrics.stream import MetricStream
    from cockpit.runs.metrics.stream_cache import save
    stream = MetricStream([Path(sys.argv[1])])
    while stream.poll():
        pass
    print("ready", flush=True)
    while True:
        save(stream, Path(sys.argv[2]))
""")


def test_a_kill_9_while_the_cache_is_written_leaves_a_valid_cache_or_none(files) -> None:
    metrics, cache = files
    expected = full(metrics)
    for delay in (0.0, 0.003, 0.01, 0.03):
        if cache.exists():
            cache.unlink()
        child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(metrics), str(cache)],
                                 stdout=subprocess.PIPE)
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        stream, how = reopened(metrics, cache)
        assert how in ("cache", "start")  # the last complete cache, or none yet
        assert fields(read_all(stream)) == expected


# ---------------------------------------------------------------- one-shot readers
def test_a_one_shot_starts_a_large_file_at_its_tail(tmp_path) -> None:
    metrics = tmp_path / "m.jsonl"
    write(metrics, lines(1, 30_000) + b"torn garbage\n" + lines(30_001, 30_010))
    size = metrics.stat().st_size
    assert size > 4 * ONE_SHOT_TAIL
    stream, how = reopened(metrics, tmp_path / "none.json", one_shot=True)
    assert how == "tail"
    reader: Any = stream.readers[0]
    assert size - ONE_SHOT_TAIL <= reader.position < size - ONE_SHOT_TAIL + 200
    assert reader.skipped == reader.position
    stream.poll()
    assert reader.caught_up and stream.latest_step == 30_010
    assert stream.latest == {"loss": 1.0 / 30_010, "val": 30_009 / 10}
    assert len(stream.recent) == 1000 and stream.recent[-1].step == 30_010
    assert stream.garbage == 1 and reader.last_garbage_line is None  # unknown, not a lie


def test_a_one_shot_uses_a_cache_near_the_end_and_the_tail_when_far(tmp_path) -> None:
    metrics, cache = tmp_path / "m.jsonl", tmp_path / "c.json"
    write(metrics, b"bad\n" + lines(1, 20_000))
    saved(metrics, cache)
    write(metrics, lines(20_001, 20_100))  # a little more: the cache is near
    stream, how = reopened(metrics, cache, one_shot=True)
    assert how == "cache"
    stream.poll()
    assert fields(stream) == full(metrics)  # garbage counted since line 1
    write(metrics, lines(20_101, 40_000))  # far behind: the tail is cheaper
    stream, how = reopened(metrics, cache, one_shot=True)
    assert how == "tail"
    stream.poll()
    assert stream.latest_step == 40_000


def test_a_one_shot_learns_a_csv_header_from_the_first_line(tmp_path) -> None:
    metrics = tmp_path / "metrics.csv"
    rows = "".join(f"{s},{1.0 / s},{'' if s % 5 else s / 100}\n" for s in range(1, 40_000))
    write(metrics, ("step,loss,val\n" + rows).encode())
    stream = MetricStream([metrics])
    assert start_at_tail(stream.readers[0])  # type: ignore[arg-type]
    stream.poll()
    assert stream.latest_step == 39_999
    assert stream.latest == {"loss": 1.0 / 39_999, "val": 399.95}


def test_a_small_file_is_read_whole_by_a_one_shot(tmp_path) -> None:
    metrics = tmp_path / "m.jsonl"
    write(metrics, b"bad\n" + lines(1, 100))
    stream, how = reopened(metrics, tmp_path / "none.json", one_shot=True)
    assert how == "start"
    stream.poll()
    assert fields(stream) == full(metrics)


def test_a_restored_stream_far_behind_is_seeded_from_the_tail(tmp_path, monkeypatch) -> None:
    # One poll reads _READ_LIMIT (16 MiB); here "more than a poll reads" is 10 KB.
    monkeypatch.setattr(stream_cache, "seed_from_tail",
                        functools.partial(seed_from_tail, min_size=10_000))
    metrics, cache = tmp_path / "m.jsonl", tmp_path / "c.json"
    write(metrics, lines(1, 100))
    saved(metrics, cache)
    write(metrics, lines(101, 3000))
    stream, how = reopened(metrics, cache)
    assert how == "cache" and stream.latest_step == 3000  # at once, before the poll
    assert fields(read_all(stream)) == full(metrics)
    # Nearly caught up: no seed, the poll reads the rest.
    write(metrics, lines(3001, 3010))
    assert save(stream, cache)
    stream, how = reopened(metrics, cache)
    assert how == "cache" and stream._seeded == {}


# ---------------------------------------------------------------- any history
CHUNK = st.one_of(
    st.builds(lambda s: line(s), st.integers(1, 10**6)),
    st.builds(lambda s: line(s, acc=s / 7), st.integers(1, 10**6)),
    st.builds(lambda s: event("checkpoint_written", f"ck/{s}", s), st.integers(1, 99)),
    st.sampled_from([b"garbage\n", b"\n", b"[1, 2]\n", b'{"loss": "nan"}\n', b"\xff\xfe\n"]),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.lists(CHUNK, min_size=1, max_size=30), after=st.lists(CHUNK, max_size=30),
       cut=st.integers(0, 200), saves=st.integers(1, 3))
def test_any_history_saved_anywhere_restores_to_the_full_read(tmp_path, before, after, cut,
                                                               saves) -> None:
    metrics = tmp_path / f"h{random.randrange(10**9)}.jsonl"
    cache = metrics.with_suffix(".cache")
    data_before, data_after = b"".join(before), b"".join(after)
    cut = min(cut, len(data_after))  # a torn write at the save
    write(metrics, data_before + data_after[:cut], "wb")
    stream = MetricStream([metrics])
    for _ in range(saves):  # saved, restored, saved again: still the full read's
        read_all(stream)
        assert save(stream, cache)
        stream = MetricStream([metrics])
        assert open_stream(stream, cache, one_shot=False) == "cache"
    write(metrics, data_after[cut:])
    assert fields(read_all(stream)) == full(metrics)
