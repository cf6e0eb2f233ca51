"""The longest engine tick while a slow verification runs. Not a test: prints numbers
for the README.

A run writes a checkpoint and ends; its acceptance check ``checkpoint: reloads`` uses a
``verify_command`` that sleeps (5 s by default), so the check runs for that long in the
background verifier while the engine keeps ticking every ``--interval`` seconds. A
second run keeps writing metrics meanwhile (the tick has real work). Printed: the
median tick of the whole run (the baseline, measured in the same run), the longest
tick while the slow check was in flight, and their ratio. Before issue 14 the tick ran
the reload itself: the longest tick was the verify command's whole duration.

    python bench/tick_bench.py                   # the README's figure
    python bench/tick_bench.py --verify-seconds 30 --interval 0.1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

TRAIN = textwrap.dedent("""
    import os
    from cockpit import report
    os.makedirs("ckpt/judged", exist_ok=True)
    with open("ckpt/judged/step-1.pt", "wb") as handle:
        handle.write(b"weights")
    report.checkpoint_written("ckpt/judged/step-1.pt", step=1)
    report.log(1, loss=0.5)
""")
BUSY = textwrap.dedent("""
    import time
    from cockpit import report
    step = 0
    while True:
        step += 1
        report.log(step, loss=1.0 / step)
        time.sleep(0.02)
""")


def campaign(folder: Path, verify_seconds: float) -> Path:
    (folder / "train.py").write_text(TRAIN)
    (folder / "busy.py").write_text(BUSY)
    slow = [sys.executable, "-c", f"import time; time.sleep({verify_seconds})"]
    doc = {
        "campaign": "tick-bench", "question": "does a tick wait?",
        "package": {"offer": "b200-3d", "start": "2026-12-02T08:00:00Z"},
        "stages": [
            {"id": "judged", "hours": 1, "resource": "gpu:0", "run": "judged",
             "command": [sys.executable, "train.py"]},
            {"id": "busy", "hours": 1, "resource": "gpu:1", "run": "busy",
             "command": [sys.executable, "busy.py"]},
        ],
        "runs": {"judged": {"checkpoints": "ckpt/judged", "verify_command": slow,
                            "acceptance": [{"checkpoint": "reloads"}]}},
        "stop_rules": [{"id": "finite-loss", "kind": "non_finite", "metric": "loss"}],
        "settings": {"stop_grace": "2s"},
    }
    path = folder / "campaign.yaml"
    path.write_text(json.dumps(doc, indent=2))
    return path


def verdict(path: Path) -> bool:
    text = (path.parent / ".cockpit" / "journal.jsonl").read_text()
    return any(json.loads(line)["kind"] in ("result_accepted", "result_rejected")
               for line in text.splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verify-seconds", type=float, default=5.0)
    parser.add_argument("--interval", type=float, default=0.05)
    args = parser.parse_args()

    from cockpit.campaign import load_campaign
    from cockpit.engine import Engine

    with tempfile.TemporaryDirectory() as tmp:
        path = campaign(Path(tmp), args.verify_seconds)
        engine = Engine(load_campaign(path), actor="bench")
        engine.start("busy")
        engine.start("judged")
        ticks: list[float] = []
        during: list[float] = []
        deadline = time.monotonic() + args.verify_seconds * 3 + 60
        try:
            while not verdict(path):
                if time.monotonic() > deadline:
                    print("the verdict never arrived", file=sys.stderr)
                    return 1
                checking = engine._verifier.busy  # a slow check in flight before this tick
                began = time.perf_counter()
                engine.tick()
                took = time.perf_counter() - began
                ticks.append(took)
                if checking:
                    during.append(took)
                time.sleep(args.interval)
        finally:
            try:
                engine.stop("busy", "benchmark over")
                engine.wait_stopped("busy", timeout=10)
            finally:
                engine.close()
    median = statistics.median(ticks)
    longest = max(during) if during else float("nan")
    print(f"verify command: {args.verify_seconds:g} s; ticks: {len(ticks)} "
          f"({len(during)} while the slow check ran), interval {args.interval:g} s")
    print(f"median tick (baseline, same run): {median * 1000:.1f} ms")
    print(f"longest tick while the slow check ran: {longest * 1000:.1f} ms "
          f"({longest / median:.1f}x the median)")
    print(f"longest tick of the whole run: {max(ticks) * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
