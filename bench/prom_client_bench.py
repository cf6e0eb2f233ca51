"""Our Prometheus text writer against ``prometheus_client`` (a script, not a test; issue 40).

  python bench/prom_client_bench.py [--renders 500]

The issue asked the text to go through prometheus_client unless it measures worse. One
real snapshot (the illustrative sample campaign, 8 simulated GPUs), rendered both ways,
alternately, in the same run:

- ours: ``cockpit.headless.prometheus.render`` (the families' samples, escaped labels);
- prometheus_client: the same families' samples as ``GaugeMetricFamily`` objects from a
  custom collector, written by ``generate_latest`` (what a collector-based exporter does
  each scrape).

Both texts are parsed back with prometheus_client's own parser and must hold the same
samples (names, labels, values), so the comparison is of equal outputs. Printed: the
median time a render, each way, and the ratio client / ours.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.core import GaugeMetricFamily  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from cockpit.fleet.open import open_engine  # noqa: E402
from cockpit.headless.prometheus import (  # noqa: E402
    FAMILIES,
    bounded_label,
    currency_name,
    render,
)
from tests.helpers.campaigns import move_window_to_now  # noqa: E402


class SnapshotCollector:
    """The cockpit's families as prometheus_client metric families (one snapshot)."""

    def __init__(self, snap) -> None:  # type: ignore[no-untyped-def]
        self.snap = snap

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self.snap
        machine = "all" if snap.machine is None else str(snap.machine)
        made: dict[str, GaugeMetricFamily] = {}
        for family in FAMILIES:
            for values, value in family.samples(snap):
                if value is None:
                    continue
                name, labels = family.name, list(values)
                if family.money:
                    currency, labels = labels[0], labels[1:]
                    name = currency_name(family.name, currency)
                if name not in made:
                    made[name] = GaugeMetricFamily(
                        name, family.help, labels=["campaign", "machine", *family.labels])
                made[name].add_metric([bounded_label(snap.campaign), bounded_label(machine),
                                       *(bounded_label(v) for v in labels)], float(value))
        yield from made.values()


def samples(text: str) -> set[tuple[str, tuple[tuple[str, str], ...], str]]:
    out = set()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            value = "nan" if math.isnan(s.value) else repr(s.value)
            out.add((s.name, tuple(sorted(s.labels.items())), value))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "illustrative.yaml"
        shutil.copy(ROOT / "sample_campaigns" / "illustrative.yaml", path)
        move_window_to_now(path)
        engine = open_engine(path, simulate_gpus=8)
        try:
            snap = engine.tick()
        finally:
            engine.close()
    registry = CollectorRegistry()
    registry.register(SnapshotCollector(snap))  # type: ignore[arg-type]
    ours_text, theirs_text = render(snap), generate_latest(registry).decode()
    assert samples(ours_text) == samples(theirs_text), "the two texts differ"
    ours, theirs = [], []
    for _ in range(args.renders):  # alternately: the machine's noise falls on both
        started = time.perf_counter()
        render(snap)
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        generate_latest(registry)
        theirs.append(time.perf_counter() - started)
    o, t = statistics.median(ours), statistics.median(theirs)
    print(f"samples: {len(samples(ours_text))} in both texts (the same)")
    print(f"ours:              {o * 1e3:.3f} ms a render ({len(ours_text)} B)")
    print(f"prometheus_client: {t * 1e3:.3f} ms a render ({len(theirs_text)} B)")
    print(f"ratio client / ours: {t / o:.2f}x")


if __name__ == "__main__":
    main()
