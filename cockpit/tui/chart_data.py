"""What the chart plots, as pure functions over the Snapshot (issue 25).

- :func:`chart_metrics`: the loss first — the key metric of the runs that train (not a
  data check's ``data/truncated``), then what they watch, then everything else.
- :func:`run_series`: one run's finite points, bucketed to the plot's width (each
  bucket keeps its lowest and highest value: a spike survives the thinning), and its
  non-finite values counted with the first step they appeared at (marked, not plotted).
- :func:`y_range`: a range that survives a diverging run. A run whose largest magnitude
  is more than :data:`OUTLIER_FACTOR` times the median of the other runs' is an
  outlier: the range is the others', and the outlier's points beyond it are clipped to
  the edge and named. Without an outlier, positive values spanning more than three
  decades switch the scale to log (unless the person chose a scale with ``s``).
- :func:`short_number`: tick labels in short engineering notation (``2.6e25``, ``0.31``).
- Over time (a GPU or host metric from the flight recording beside the loss): the runs'
  points by their own time and :func:`telemetry_series`, both in hours before now, so
  the two share one axis and history from before a restart is on it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from cockpit.engine import Recorded
from cockpit.engine.snapshot import RunView, Snapshot

OUTLIER_FACTOR = 100.0  # a run this many times larger than the others' median is clipped
LOG_DECADES = 3.0  # positive values spanning more decades than this: log scale (auto)
# What ``u`` puts beside the loss, from the flight recording: (metric, source, label,
# scale); the x-axis is then time (hours before now), the recorded metric on the right.
TELEMETRY = (("util", "gpu", "GPU util %", 1.0), ("mem_used", "gpu", "GPU memory GiB", 2**-30),
             ("power", "gpu", "GPU power W", 1.0), ("temp", "gpu", "GPU temp °C", 1.0),
             ("cpu_percent", "host", "host CPU %", 1.0))


def chart_metrics(snap: Snapshot) -> list[str]:
    """The metrics the runs report: the training runs' key metrics first (the loss),
    then what they watch, then the other runs' and every other metric."""
    names: list[str] = []

    def add(name: str | None, run: RunView) -> None:
        if name and name not in names and name != "max_steps" \
                and any(name in p.values for p in run.points[-50:]):
            names.append(name)

    training = [r for r in snap.runs if r.kind == "train" and r.produces_result]
    others = [r for r in snap.runs if r not in training]
    for group in (training, others):
        for r in group:
            add(r.key_metric, r)
        for r in group:
            for name in r.watched:
                add(name, r)
    for r in (*training, *others):
        for p in r.points[-50:]:
            for name in p.values:
                add(name, r)
    return names


@dataclass(frozen=True)
class Series:
    """One run's points of one metric, ready to plot."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]
    non_finite: int = 0  # values that were NaN or ±inf (not plotted)
    first_non_finite: float | None = None  # the step of the first one


def run_series(run: RunView, metric: str, width: int, log: bool = False,
               now: float | None = None) -> Series:
    """The run's finite values of ``metric`` over steps (with ``now``: over time, in
    hours before ``now``; a point without its time is left out), at most ``2 × width``
    points (min and max per bucket); with ``log``, values ≤ 0 are left out like
    non-finite."""
    xs: list[float] = []
    ys: list[float] = []
    bad, first_bad = 0, None
    for i, p in enumerate(run.points):
        v = p.values.get(metric)
        if v is None or (now is not None and (p.t is None or not math.isfinite(p.t))):
            continue
        x = (p.t - now) / 3600 if now is not None and p.t is not None \
            else float(p.step if p.step is not None else i)
        if not math.isfinite(v):
            bad += 1
            first_bad = x if first_bad is None else first_bad
            continue
        if log and v <= 0:
            continue
        xs.append(x)
        ys.append(v)
    bx, by = bucketed(xs, ys, max(1, width))
    return Series(tuple(bx), tuple(by), bad, first_bad)


def telemetry_series(points: Sequence[tuple[float, float]], now: float,
                     scale: float = 1.0) -> Series:
    """Recorded ``(t, value)`` points in hours before ``now``, values times ``scale``
    (bytes → GiB); a gap in the recording stays a gap (no point is made up)."""
    kept = [(t, v) for t, v in points if math.isfinite(t) and math.isfinite(v)]
    return Series(tuple((t - now) / 3600 for t, _ in kept), tuple(v * scale for _, v in kept))


Overlay = tuple[str, tuple[tuple[str, "Series"], ...]]


def telemetry_lines(choice: int | None, recorded: Recorded | None, now: float,
                    most: int) -> Overlay:
    """The chosen :data:`TELEMETRY` metric's lines (one per GPU, at most ``most``) and
    what its axis says: also when there is nothing to draw, and why."""
    if choice is None:
        return "", ()
    metric, source, label, scale = TELEMETRY[choice]
    if recorded is None:
        return f"{label}: reading the recording…", ()
    if recorded.state != "read":
        why = "no recording yet" if recorded.state == "absent" else "recording unreadable"
        return f"{label}: {why}", ()
    keys = [k for k in recorded.series if k.metric == metric and k.source == source]
    lines = tuple((f"{'host' if k.source == 'host' else 'gpu ' + k.key} {metric}",
                   telemetry_series([(p.t, p.value) for p in recorded.series[k]], now, scale))
                  for k in keys[:most])
    if not any(s.xs for _, s in lines):
        return f"{label}: nothing recorded", lines
    return label, lines


def bucketed(xs: Sequence[float], ys: Sequence[float], buckets: int
             ) -> tuple[list[float], list[float]]:
    """At most ``2 × buckets`` points: each bucket of consecutive points keeps its
    lowest and highest (in step order), so the picture at that width is the same."""
    if len(xs) <= 2 * buckets:
        return list(xs), list(ys)
    size = math.ceil(len(xs) / buckets)
    out_x: list[float] = []
    out_y: list[float] = []
    for start in range(0, len(xs), size):
        chunk = range(start, min(start + size, len(xs)))
        lo = min(chunk, key=lambda j: ys[j])
        hi = max(chunk, key=lambda j: ys[j])
        for j in sorted({lo, hi}):
            out_x.append(xs[j])
            out_y.append(ys[j])
    return out_x, out_y


@dataclass(frozen=True)
class YRange:
    lo: float
    hi: float
    clipped: tuple[str, ...] = ()  # runs with points beyond the range (drawn at its edge)
    log: bool = False  # the scale the range was chosen for


def y_range(series: dict[str, Series], log: bool | None = None,
            include: Sequence[float] = ()) -> YRange | None:
    """The plot's y-range (see the module text); ``log`` None: chosen here. ``include``:
    values to show too (a rule's or a check's bound) when they are not outliers."""
    values = {run: s.ys for run, s in series.items() if s.ys}
    if not values:
        return None
    size = {run: max(abs(v) for v in ys) for run, ys in values.items()}
    outliers = set()
    if len(size) >= 2:
        for run, m in size.items():
            ref = statistics.median(v for r, v in size.items() if r != run)
            if m > OUTLIER_FACTOR * max(ref, 1e-12):
                outliers.add(run)
    kept = [v for run, ys in values.items() if run not in outliers for v in ys] or \
        [v for ys in values.values() for v in ys]
    lo, hi = min(kept), max(kept)
    reach = OUTLIER_FACTOR * max(abs(lo), abs(hi), 1e-12)
    for value in include:
        if math.isfinite(value) and abs(value) <= reach and (value > 0 or not log):
            lo, hi = min(lo, value), max(hi, value)
    if log is None:
        log = not outliers and lo > 0 and math.log10(hi / lo) > LOG_DECADES
    if hi == lo:
        lo, hi = (lo - 1.0, hi + 1.0) if lo == 0 else (lo - abs(lo) * 0.1, hi + abs(hi) * 0.1)
    elif not log:
        pad = (hi - lo) * 0.05
        lo, hi = lo - pad, hi + pad
    clipped = tuple(sorted(run for run, ys in values.items()
                           if any(v > hi or v < lo for v in ys)))
    return YRange(lo, hi, clipped, log)


def clipped(ys: Sequence[float], bounds: YRange) -> list[float]:
    return [min(max(v, bounds.lo), bounds.hi) for v in ys]


def ticks(bounds: YRange, count: int = 5) -> tuple[list[float], list[str]]:
    """``count`` tick positions over the range and their short labels."""
    if bounds.log and bounds.lo > 0:
        a, b = math.log10(bounds.lo), math.log10(bounds.hi)
        values = [10 ** (a + (b - a) * i / (count - 1)) for i in range(count)]
    else:
        values = [bounds.lo + (bounds.hi - bounds.lo) * i / (count - 1) for i in range(count)]
    return values, [short_number(v) for v in values]


def short_number(value: float) -> str:
    """``2.6e25``, ``1.2e-05`` → ``1.2e-5``, ``0.312``, ``1,250`` → ``1250``: at most
    about seven characters for any finite float."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e5:
        text = f"{value:.3g}"
    else:
        text = f"{value:.2g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text
