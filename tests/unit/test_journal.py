"""Tests for cockpit.journal.log: atomic appends, damage tolerance, incremental reads, claims."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cockpit.journal.log import (
    Journal,
    JournalError,
    JournalProblem,
    format_time,
    parse_time,
    sha256_file,
)

NOW = datetime(2024, 12, 2, 9, 15, 0, 123456, tzinfo=timezone.utc)
REPO = Path(__file__).resolve().parents[2]


def _journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / ".cockpit" / "journal.jsonl")


def _run_python(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return out


def test_append_returns_event_and_reads_back(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    assert journal.events() == []  # reading a missing journal creates nothing
    assert not journal.path.parent.exists()
    first = journal.append("plan_recorded", now=NOW, sha256="ab" * 32, path="campaign.yaml")
    second = journal.append("note", now=NOW + timedelta(hours=1), stage="pilot", text="héllo")
    assert first == {
        "seq": 1,
        "t": "2024-12-02T09:15:00.123456Z",
        "kind": "plan_recorded",
        "sha256": "ab" * 32,
        "path": "campaign.yaml",
    }
    assert second["seq"] == 2 and second["t"] == "2024-12-02T10:15:00.123456Z"
    assert journal.events() == [first, second]
    assert Journal(journal.path).events() == [first, second]
    assert journal.problems() == []
    assert journal.path.read_bytes().endswith(b"\n")


def test_default_now_is_utc_and_other_zones_are_converted(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    before = datetime.now(timezone.utc)
    event = journal.append("note", text="x")
    assert before - timedelta(seconds=1) <= parse_time(event["t"]) <= datetime.now(timezone.utc)
    plus2 = timezone(timedelta(hours=2))
    # Another writer (this one never writes a time before its last: see the next test).
    other = Journal(journal.path)
    event = other.append("note", now=datetime(2024, 1, 1, 12, tzinfo=plus2), text="y")
    assert event["t"] == "2024-01-01T10:00:00.000000Z"


def test_times_never_go_back_within_one_writer(tmp_path: Path) -> None:
    """A wall-clock step back is not written as time going back: ``t`` stays at the last
    time this writer wrote until the clock passes it (seq keeps the order)."""
    journal = _journal(tmp_path)
    noon = datetime(2026, 12, 2, 12, tzinfo=timezone.utc)
    journal.append("note", now=noon, text="a")
    back = journal.append("note", now=noon - timedelta(hours=1), text="b")
    assert parse_time(back["t"]) == noon
    later = journal.append("note", now=noon + timedelta(seconds=5), text="c")
    assert parse_time(later["t"]) == noon + timedelta(seconds=5)


def test_naive_datetime_and_reserved_fields_rejected(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    with pytest.raises(ValueError, match="naive"):
        journal.append("note", now=datetime(2024, 1, 1), text="x")  # noqa: DTZ001
    with pytest.raises(ValueError, match="seq"):
        journal.append("note", now=NOW, seq=5)
    with pytest.raises(ValueError):
        journal.append("", now=NOW)
    with pytest.raises(ValueError, match="naive"):
        format_time(datetime(2024, 1, 1))  # noqa: DTZ001
    assert journal.events() == []


def test_nan_and_infinity_values_are_recorded(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    journal.append("rule_fired", now=NOW, run="A1", rule="finite_loss", value=float("nan"))
    journal.append("rule_fired", now=NOW, run="A1", rule="finite_loss", value=float("-inf"))
    values = [e["value"] for e in Journal(journal.path).events()]
    assert math.isnan(values[0]) and values[1] == float("-inf")


def test_non_json_values_become_strings(tmp_path: Path) -> None:
    from decimal import Decimal

    journal = _journal(tmp_path)
    event = journal.append("cost", now=NOW, label="disk", amount=Decimal("4.10"), currency="USD")
    assert event["amount"] == "4.10"


def test_torn_last_line_is_reported_and_sealed_by_next_append(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    for i in range(3):
        journal.append("note", now=NOW, text=str(i))
    with open(journal.path, "ab") as handle:  # kill -9 in the middle of a write
        handle.write(b'{"seq": 4, "t": "2024-12-02T09:15:00.000000Z", "kind": "no')
    reader = Journal(journal.path)
    assert len(reader.events()) == 3
    assert reader.torn is not None and reader.torn.line == 4
    assert reader.problems() == [reader.torn]
    assert "torn" in reader.torn.message

    event = Journal(journal.path).append("note", now=NOW, text="after")
    assert event["seq"] == 4
    lines = journal.path.read_bytes().split(b"\n")
    assert json.loads(lines[4])["text"] == "after"  # the fragment stayed on line 4
    assert [e["text"] for e in reader.events()] == ["0", "1", "2", "after"]
    assert reader.torn is None
    assert [p.line for p in reader.problems()] == [4]


def test_partial_line_waits_for_its_newline(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    journal.append("note", now=NOW, text="a")
    line = json.dumps({"seq": 2, "t": format_time(NOW), "kind": "note", "text": "b"}).encode()
    with open(journal.path, "ab", buffering=0) as handle:
        handle.write(line[:10])
        assert len(journal.events()) == 1 and journal.torn is not None
        handle.write(line[10:] + b"\n")
    assert [e["text"] for e in journal.events()] == ["a", "b"]
    assert journal.torn is None and journal.problems() == []


def test_garbage_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    journal.append("note", now=NOW, text="a")
    with open(journal.path, "ab") as handle:
        handle.write(b"this is not json\n")
        handle.write(b"[1, 2, 3]\n")
        handle.write(b'{"no_kind": true}\n')
        handle.write(b"\xff\xfe\n")
        handle.write(b"\n")  # blank: harmless, not reported
    event = journal.append("note", now=NOW, text="b")
    assert event["seq"] == 2
    assert [e["text"] for e in Journal(journal.path).events()] == ["a", "b"]
    problems = Journal(journal.path).problems()
    assert [p.line for p in problems] == [2, 3, 4, 5]
    assert all(isinstance(p, JournalProblem) and "skipped" in p.message for p in problems)


def test_out_of_sequence_event_is_kept_and_reported(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    journal.path.parent.mkdir(parents=True)
    journal.path.write_text('{"seq": 7, "t": "2024-12-02T09:15:00.000000Z", "kind": "note"}\n')
    assert len(journal.events()) == 1
    assert "expected" in journal.problems()[0].message


def test_incremental_read_sees_appends_from_another_process(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    journal.append("note", now=NOW, text="mine")
    assert len(journal.events()) == 1
    offset_before = journal._offset
    proc = _run_python(
        """
        import sys
        from pathlib import Path
        from cockpit.journal.log import Journal
        j = Journal(Path(sys.argv[1]))
        for i in range(3):
            j.append("note", text=f"theirs {i}")
        """,
        str(journal.path),
    )
    _finish(proc)
    events = journal.events()
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    assert events[-1]["text"] == "theirs 2"
    assert journal._offset > offset_before  # read on from where it was


def test_truncated_or_replaced_journal_is_read_again(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    for i in range(5):
        journal.append("note", now=NOW, text=str(i))
    assert len(journal.events()) == 5

    # Replaced by another file (new inode) with fewer events.
    other = tmp_path / "other.jsonl"
    Journal(other).append("note", now=NOW, text="new")
    os.replace(other, journal.path)
    assert [e["text"] for e in journal.events()] == ["new"]

    # Truncated in place, then rewritten to a bigger size with other content.
    for i in range(3):
        journal.append("note", now=NOW, text=f"x{i}")
    assert len(journal.events()) == 4
    content = journal.path.read_bytes()
    with open(journal.path, "r+b") as handle:
        handle.truncate(0)
        handle.write(content.replace(b'"new"', b'"NEW"'))
    assert [e["text"] for e in journal.events()] == ["NEW", "x0", "x1", "x2"]

    journal.path.unlink()
    assert journal.events() == []


def test_folder_at_journal_path_is_a_clear_error(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    journal.path.mkdir(parents=True)
    with pytest.raises(JournalError, match="folder is where the journal file should be"):
        journal.events()
    with pytest.raises(JournalError, match="folder is where the journal file should be"):
        journal.append("note", now=NOW)


def test_file_where_folder_should_be_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".cockpit").write_text("oops")
    with pytest.raises(JournalError, match=r"journal .*journal\.jsonl: a parent .* is a file"):
        _journal(tmp_path).append("note", now=NOW)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores modes")
def test_permission_denied_is_a_clear_error(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    journal.append("note", now=NOW)
    journal.path.chmod(0o000)
    try:
        with pytest.raises(JournalError, match="permission denied"):
            Journal(journal.path).events()
    finally:
        journal.path.chmod(0o644)


def test_transaction_reads_under_lock_and_appends(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    journal.append("stage_started", now=NOW, stage="pilot")
    with journal.transaction() as txn:
        assert [e["stage"] for e in txn.events] == ["pilot"]
        event = txn.append("stage_started", now=NOW, stage="control")
        assert event["seq"] == 2
        assert len(txn.events) == 2
        with pytest.raises(JournalError, match="txn.append"):
            journal.append("note", now=NOW)
    with pytest.raises(JournalError, match="after its block"):
        txn.append("note", now=NOW)
    assert len(journal.events()) == 2


def test_transaction_that_raises_writes_nothing_more(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    with pytest.raises(RuntimeError), journal.transaction():
        raise RuntimeError("boom")
    assert journal.events() == []
    journal.append("note", now=NOW)  # the lock was released
    assert len(journal.events()) == 1


_APPENDER = """
    import sys, time
    from pathlib import Path
    from cockpit.journal.log import Journal
    j = Journal(Path(sys.argv[1]))
    start = float(sys.argv[3])
    while time.time() < start:
        time.sleep(0.001)
    for i in range(int(sys.argv[2])):
        j.append("note", who=sys.argv[4], i=i)
    """


@pytest.mark.slow  # 20,000 fsynced appends
def test_two_processes_appending_never_interleave_or_lose(tmp_path: Path) -> None:
    path = tmp_path / ".cockpit" / "journal.jsonl"
    n = 10_000
    start = str(time.time() + 1.0)  # both begin together, after the interpreters are up
    procs = [_run_python(_APPENDER, str(path), str(n), start, who) for who in ("a", "b")]
    for proc in procs:
        _finish(proc, timeout=300)  # a hang guard: 2 x 10,000 fsynced appends on a busy box
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    events = [json.loads(line) for line in lines[:-1]]  # every line parses
    assert len(events) == 2 * n
    assert [e["seq"] for e in events] == list(range(1, 2 * n + 1))
    for who in ("a", "b"):
        assert [e["i"] for e in events if e["who"] == who] == list(range(n))
    journal = Journal(path)
    assert len(journal.events()) == 2 * n and journal.problems() == []


_CLAIMER = """
    import sys, time
    from pathlib import Path
    from cockpit.journal.log import Journal
    j = Journal(Path(sys.argv[1]))
    start = float(sys.argv[3])
    while time.time() < start:
        time.sleep(0.001)
    won = 0
    for k in range(int(sys.argv[2])):
        stage = f"stage{k}"
        with j.transaction() as txn:
            if not any(e["kind"] == "stage_started" and e["stage"] == stage for e in txn.events):
                txn.append("stage_started", stage=stage, by=sys.argv[4])
                won += 1
    print(won)
    """


def test_processes_racing_to_claim_a_stage_start_it_once(tmp_path: Path) -> None:
    path = tmp_path / ".cockpit" / "journal.jsonl"
    stages = 200
    start = str(time.time() + 1.0)
    procs = [_run_python(_CLAIMER, str(path), str(stages), start, str(w)) for w in range(3)]
    wins = [int(_finish(proc)) for proc in procs]
    assert sum(wins) == stages
    started = [e["stage"] for e in Journal(path).events() if e["kind"] == "stage_started"]
    assert sorted(started) == sorted(f"stage{k}" for k in range(stages))


def test_sha256_file_and_parse_time(tmp_path: Path) -> None:
    path = tmp_path / "campaign.yaml"
    path.write_bytes(b"abc")
    assert sha256_file(path) == ("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    assert parse_time(format_time(NOW)) == NOW
    with pytest.raises(ValueError):
        parse_time("2024-01-01T00:00:00")
