"""Measure journal append throughput (one process, fsync per event) and read speed.

Run: python bench/journal_bench.py [N] [FOLDER]
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from cockpit.journal import Journal


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    with tempfile.TemporaryDirectory(dir=sys.argv[2] if len(sys.argv) > 2 else None) as tmp:
        path = Path(tmp) / ".cockpit" / "journal.jsonl"
        journal = Journal(path)
        now = datetime(2024, 12, 2, 9, 0, tzinfo=timezone.utc)
        start = time.perf_counter()
        for i in range(n):
            journal.append("note", now=now, stage="pilot", text=f"note {i}")
        spent = time.perf_counter() - start
        print(f"append: {n} events in {spent:.2f} s = {n / spent:,.0f} events/s (fsync each)")
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
