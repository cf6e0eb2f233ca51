"""Log view refresh benchmark (a script, not a test): the cost of one refresh of `l`.

  python bench/log_view_bench.py [--rounds 20]

A run floods its stdout with 8 MB of 1 MB lines full of escapes, or with 100k short
lines, between two refreshes. One refresh (``LogFollower.read``: bounded read, decode,
escapes shown) is timed against a baseline measured in the same run on the same bytes:
reading the last READ_BYTES of the file and splitting them into lines, which is the
least any tail view must do. Goal: the slowest refresh under 0.5 s, ratio reported.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cockpit.tui.full_screens import READ_BYTES, LogFollower  # noqa: E402

OSC0 = "\x1b]0;PWNED-TITLE\x07"


def baseline(path: Path) -> float:
    began = time.perf_counter()
    with open(path, "rb") as handle:
        size = path.stat().st_size
        handle.seek(max(size - READ_BYTES, 0))
        handle.read(READ_BYTES).decode("utf-8", errors="replace").splitlines()
    return time.perf_counter() - began


def one_round(folder: Path, payload: bytes) -> tuple[float, float]:
    path = folder / "train.out"
    path.write_bytes(b"")
    follower = LogFollower(path)
    follower.read()
    with open(path, "ab") as handle:
        handle.write(payload)
    began = time.perf_counter()
    follower.read()
    took = time.perf_counter() - began
    return took, baseline(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    floods = {
        "8 x 1 MB lines": b"".join(f"{i} {OSC0}".encode() + b"x" * 1_000_000 + b"\n"
                                   for i in range(8)),
        "100k short lines": b"\x1b[2Jshort\n" * 100_000,
    }
    print(f"{'flood':<18} {'refresh median':>15} {'slowest':>9} {'baseline':>9} {'ratio':>7}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, payload in floods.items():
            took, base = zip(*(one_round(Path(tmp), payload) for _ in range(args.rounds)),
                             strict=True)
            ratio = statistics.median(took) / max(statistics.median(base), 1e-9)
            worst = max(worst, max(took))
            print(f"{name:<18} {statistics.median(took) * 1000:>12.1f} ms "
                  f"{max(took) * 1000:>6.1f} ms {statistics.median(base) * 1000:>6.2f} ms "
                  f"{ratio:>6.1f}x")
    print(f"goal: slowest refresh < 500 ms: {'met' if worst < 0.5 else 'NOT met'} "
          f"({worst * 1000:.1f} ms)")
    return 0 if worst < 0.5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
