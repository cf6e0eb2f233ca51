"""The flight recorder under attack (issue 43), each against a real store: locked by
another process (a second process holds SQLite's exclusive lock), replaced by a
symbolic link mid-run (to a file elsewhere, to /dev/null), deleted mid-run, a file size
limit (RLIMIT_FSIZE in a real child: writes fail as on a full disk), a wall clock that
steps forward a day and back. Never a crash (every ``record`` returns), always said
(``warnings``, which the snapshot shows), history kept where it can be (a link never
written through, the replaced store's history copied aside, a deleted one recreated
and its loss said, the raw window not emptied by a clock step)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cockpit.telemetry.flight import FlightRecorder, RecordingReader
from tests.unit.test_recorder import T0, sample

ROOT = Path(__file__).resolve().parents[2]

LOCKER = textwrap.dedent("""
    import sqlite3, sys
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    print("held", flush=True)
    sys.stdin.readline()  # held until the test says
    db.execute("COMMIT")
""")


class Mono:
    """A monotonic clock that moves only when told (one second per sample)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def record(rec: FlightRecorder, first: int, last: int, mono: Mono | None = None) -> None:
    """Seconds ``first`` to ``last`` (included), flushed: the writer is done with them."""
    for sec in range(first, last + 1):
        if mono is not None:
            mono.t += 1.0
        rec.record(sec, *sample(sec))
    rec.flush()


def raw_span(path: Path) -> tuple[int, int] | None:
    with RecordingReader.open(path) as reader:
        return reader.raw_span("host")


def integrity(path: Path) -> str:
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        db.close()


def locker(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", LOCKER, str(path)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.wait(timeout=30) == 0


def test_a_store_locked_by_another_process_is_said_and_recording_resumes(
        tmp_path: Path) -> None:
    path = tmp_path / "recorder.sqlite"
    rec = FlightRecorder(path).open()
    record(rec, T0, T0 + 20)
    assert rec.committed_s == T0 + 20
    held = locker(path)
    try:
        for start in range(T0 + 21, T0 + 61, 5):  # eight batches against the lock
            record(rec, start, start + 4)
        assert any("another process holds" in w for w in rec.warnings), rec.warnings
        assert rec.committed_s == T0 + 20 and rec.dropped > 0
    finally:
        release(held)
    record(rec, T0 + 61, T0 + 70)
    assert rec.warnings == () and rec.committed_s == T0 + 70
    rec.close()
    assert raw_span(path) == (T0, T0 + 70)  # what came before the lock is kept
    # A cockpit that starts while the lock is held says so, and records once it goes.
    held = locker(path)
    try:
        late = FlightRecorder(path).open()
        assert any("locked" in w for w in late.warnings), late.warnings
        record(late, T0 + 71, T0 + 80)  # paused: tried again a minute on
    finally:
        release(held)
    record(late, T0 + 81, T0 + 200)
    assert late.warnings == () and late.committed_s == T0 + 200
    late.close()
    assert integrity(path) == "ok"


@pytest.mark.parametrize("target", ["victim", "/dev/null"])
def test_a_store_replaced_by_a_link_mid_run_is_never_written_through(
        tmp_path: Path, target: str) -> None:
    path = tmp_path / "recorder.sqlite"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    rec = FlightRecorder(path).open()
    record(rec, T0, T0 + 30)
    link = tmp_path / "link"
    link.symlink_to(victim if target == "victim" else Path(target))
    os.replace(link, path)  # swapped under the running writer
    record(rec, T0 + 31, T0 + 60)
    said = " | ".join(rec.warnings)
    assert "was replaced while recording" in said and "symbolic link" in said, said
    assert rec.warnings and rec.dropped > 0
    assert victim.read_text() == "precious\n" and path.is_symlink()
    if target == "/dev/null":
        assert Path("/dev/null").is_char_device()
    # The history the replaced store held was copied aside, whole and readable.
    (kept,) = [p for p in tmp_path.glob("recorder.sqlite.replaced-*")
               if not p.name.endswith(("-wal", "-shm"))]
    assert kept.name in said
    assert raw_span(kept) == (T0, T0 + 30) and integrity(kept) == "ok"
    path.unlink()  # the person removes the link: a new recording, a minute on
    record(rec, T0 + 61, T0 + 200)
    assert rec.recording, rec.warnings
    assert not any("symbolic link" in w for w in rec.warnings)
    rec.close()
    span = raw_span(path)
    assert span is not None and span[1] == T0 + 200
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("what", ["the store and its WAL", "the store alone"])
def test_a_store_deleted_mid_run_is_recreated_and_the_loss_said(
        tmp_path: Path, what: str) -> None:
    path = tmp_path / "recorder.sqlite"
    rec = FlightRecorder(path).open()
    record(rec, T0, T0 + 30)
    doomed = [path] + ([Path(f"{path}-wal"), Path(f"{path}-shm")]
                       if what == "the store and its WAL" else [])
    for file in doomed:
        file.unlink(missing_ok=True)
    record(rec, T0 + 31, T0 + 60)
    said = " | ".join(rec.warnings)
    assert "was deleted while recording" in said and "is lost" in said, said
    assert rec.recording and rec.committed_s == T0 + 60
    record(rec, T0 + 61, T0 + 90)
    rec.close()
    assert path.exists() and integrity(path) == "ok"
    span = raw_span(path)
    assert span is not None and T0 + 30 < span[0] <= T0 + 35 and span[1] == T0 + 90


FSIZE_WRITER = textwrap.dedent("""
    import resource, signal, sys
    from pathlib import Path
    from tests.unit.test_recorder import sample, T0
    from cockpit.telemetry.flight import FlightRecorder
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit: EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]),) * 2)
    rec = FlightRecorder(Path(sys.argv[1])).open()
    sec = T0
    while not rec.warnings and sec < T0 + 6 * 3600:
        rec.record(sec, *sample(sec))
        sec += 1
        if sec % 30 == 0:
            rec.flush()
    for later in range(sec, sec + 300):  # the tick goes on against the limit
        rec.record(later, *sample(later))
    rec.flush()
    print("committed", rec.committed_s, flush=True)
    print("said", " | ".join(rec.warnings), flush=True)
    rec.close()
""")


def test_a_file_size_limit_pauses_recording_never_crashes(tmp_path: Path) -> None:
    path = tmp_path / "recorder.sqlite"
    done = subprocess.run([sys.executable, "-c", FSIZE_WRITER, str(path), str(512 * 1024)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert "flight recorder paused" in lines["said"], lines
    committed = int(lines["committed"])
    assert committed > T0
    assert integrity(path) == "ok"  # what was committed before the limit is whole
    span = raw_span(path)
    assert span is not None and span[0] == T0 and span[1] == committed


def test_a_clock_step_forward_and_back_keeps_the_raw_window(tmp_path: Path) -> None:
    path = tmp_path / "recorder.sqlite"
    mono = Mono()
    rec = FlightRecorder(path, raw_keep_s=600, monotonic=mono).open()
    record(rec, T0, T0 + 1199, mono)  # 20 minutes; the raw window holds the last 10
    before = raw_span(path)
    assert before is not None and before[1] == T0 + 1199 and before[0] <= T0 + 600
    day = 86_400
    record(rec, T0 + 1200 + day, T0 + 1290 + day, mono)  # the wall clock a day ahead
    record(rec, T0 + 1291, T0 + 1400, mono)  # and back
    assert rec.warnings == () and rec.committed_s == T0 + 1400
    rec.close()
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    seconds = [t for (t,) in db.execute("SELECT t FROM host_raw")]
    db.close()
    # The raw window is ten minutes of time that passed (the day ahead never
    # counted): the seconds from ten minutes before the end are there, one by one, the
    # ones from before the step among them.
    assert set(range(T0 + 800, T0 + 1200)) <= set(seconds)
    assert set(range(T0 + 1291, T0 + 1401)) <= set(seconds)
    assert integrity(path) == "ok"
