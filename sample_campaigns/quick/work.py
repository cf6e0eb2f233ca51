"""A tiny, real training job for the quick sample: SGD on a linear regression.

Deterministic (seeded), pure Python, seconds long. With a learning rate that is too
high the updates overshoot and grow until the loss overflows to inf and then NaN:
the divergence comes from the learning rate, not from injected values.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

from cockpit import report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", required=True)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--sleep", type=float, default=0.05)
    parser.add_argument("--check-data", action="store_true")
    args = parser.parse_args()

    rng = random.Random(7)
    xs = [rng.uniform(-1, 1) for _ in range(200)]
    data = [(x, 3.0 * x + 1.0 + rng.gauss(0, 0.1)) for x in xs]
    if args.check_data:
        truncated = sum(1 for x, y in data if not (math.isfinite(x) and math.isfinite(y)))
        report.truncated(truncated)
        print(f"data check: {len(data)} rows, {truncated} truncated")
        return 0

    w, b = 0.0, 0.0
    for step in range(1, args.steps + 1):
        x, y = data[step % len(data)]
        err = (w * x + b) - y
        w -= args.lr * 2 * err * x * 10
        b -= args.lr * 2 * err * 10
        loss = sum(((w * xi + b) - yi) * ((w * xi + b) - yi) for xi, yi in data) / len(data)
        report.log(step, loss=loss, **{"val/accuracy": 1.0 / (1.0 + loss)})
        report.progress(step, args.steps)
        time.sleep(args.sleep)
    out = Path("out") / args.run
    out.mkdir(parents=True, exist_ok=True)
    (out / "predictions.json").write_text(json.dumps(
        [{"id": i, "y": w * x + b} for i, (x, _) in enumerate(data[:20])]))
    print(f"{args.run}: w={w:.3f} b={b:.3f} loss={loss:.5f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
