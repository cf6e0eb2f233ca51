"""Journal append throughput (one process, fsync per event) against a bare
write+fsync loop on the same disk in the same run, and read costs.

Run: python bench/journal_bench.py [--events N] [--dir FOLDER]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from cockpit.journal.log import Journal


def bare(path: Path, n: int) -> float:
    """The floor: one O_APPEND write and an fsync per line, no lock, no JSON."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    line = b'{"seq": 1, "kind": "note", "text": "note"}\n'
    start = time.perf_counter()
    for _ in range(n):
        os.write(fd, line)
        os.fsync(fd)
    spent = time.perf_counter() - start
    os.close(fd)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    n = args.events
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / ".cockpit" / "journal.jsonl"
        journal = Journal(path)
        now = datetime(2026, 12, 2, 9, 0, tzinfo=timezone.utc)
        start = time.perf_counter()
        for i in range(n):
            journal.append("note", now=now, stage="pilot", text=f"note {i}")
        spent = time.perf_counter() - start
        floor = bare(Path(tmp) / "bare.log", n)
        print(f"append: {n / spent:,.0f} events/s (fsync each); bare write+fsync "
              f"{n / floor:,.0f} lines/s; journal/bare time {spent / floor:.2f}x")
        start = time.perf_counter()
        events = Journal(path).events()
        spent = time.perf_counter() - start
        print(f"cold read: {len(events)} events in {spent * 1000:.1f} ms")
        start = time.perf_counter()
        for _ in range(1000):
            journal.events()
        spent = time.perf_counter() - start
        print(f"idle tick (events() with nothing new): {spent * 1000:.3f} µs per call")


if __name__ == "__main__":
    main()
