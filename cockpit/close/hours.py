"""What the package's GPU-hours bought (issue 27): held, busy, idle and unrecorded.

This module owns the pure computation :func:`hours_bought` (inputs in
:class:`HoursInputs`, the result a frozen :class:`HoursBought` with its one JSON shape,
``as_json``) and its short line for a face. It reads no file: the recording's minutes,
the stages' spans and their throughput arrive as values (:mod:`cockpit.close.hours_read`
is the I/O edge that reads them).

The words
    *held*: the GPU-seconds of one machine's window elapsed so far (GPUs × (min(now,
    end) − start)): what the package paid for, busy or not (D8: paid whole).
    *busy*: held seconds in a recorded minute whose mean utilization is at least
    :data:`BUSY_UTIL_PCT`. *idle*: in a recorded minute below it. *unrecorded*: in a
    minute the recording holds nothing for (the cockpit was not running, a GPU was
    lost, no recording at all): never counted busy or idle. A minute counts as recorded
    when at least one sample of it was kept; a partial minute (the window's first, a
    stage's edge, ``now``) is attributed by its overlap, to the second.

Exactness: every time is rounded to the whole second and every amount is an integer of
GPU-seconds, so ``held == busy + idle + unrecorded`` holds exactly, per stage, between
stages and overall; hours are derived from them for display.

A stage's GPUs are its run's (as the journal recorded them at its start), else those
its resources name (``gpu``: every GPU of the machine). Two stages on one GPU at once
(a forced start) each count the overlap; otherwise the stages' held plus the
*between stages* held equals the overall held.

The stretches in which no stage holds any GPU (:class:`IdleGap`) are said in time only:
seconds, and their share of the window (and of the held GPU-hours), never in money (D8:
the price covers the whole duration; a gap priced by its seconds would be an hourly rate
in disguise). Each has a kind: an *idle gap* (``before`` the first GPU stage,
``between`` two, ``after`` the last, ``none``: no GPU stage ran) when nothing ran; a
``human`` or ``cpu`` stretch while a human or CPU stage ran (its own kind of time, not
GPU idleness; ``cpu`` wins when both ran); and, once the campaign closed (its export
stage done), the rest of the window to its end is ``after_close``: unused after the
close, never a gap (an early, correct close is no waste).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from cockpit.common.durations import format_duration
from cockpit.common.units import format_share

# A GPU-minute whose mean utilization is at least this is busy. NVML's utilization is the
# share of the sample period in which a kernel ran: a training or evaluation step keeps
# it far above 20 %, while a GPU that holds a model and waits (for data, a checkpoint
# save, a person) flickers at a few percent; 20 % sits between the two with a margin
# for a bursty input pipeline that still computes.
BUSY_UTIL_PCT = 20.0

# The kinds of a stretch of the window in which no stage held any GPU (see the module
# text): the idle gaps' (nothing ran), then a human's or the CPU's time, then the unused
# rest of the window after the close.
IDLE_KINDS = ("before", "between", "after", "none")
HUMAN, CPU, AFTER_CLOSE = "human", "cpu", "after_close"
GAP_KINDS = (*IDLE_KINDS, HUMAN, CPU, AFTER_CLOSE)


@dataclass(frozen=True)
class StageSpan:
    """One stretch a stage held its GPUs (an attempt): epoch seconds, ``end`` None while
    it runs."""

    stage: str
    gpus: tuple[int, ...]
    start: float
    end: float | None


@dataclass(frozen=True)
class TimeSpan:
    """One stretch a stage that holds no GPU ran: ``kind`` :data:`HUMAN` or :data:`CPU`;
    epoch seconds, ``end`` None while it runs."""

    stage: str
    kind: str
    start: float
    end: float | None


@dataclass(frozen=True)
class GpuMinute:
    """One recorded minute of one GPU: ``t`` its start (epoch seconds, a multiple of
    60), the mean utilization (%) and power (W), None when not reported; ``n`` samples."""

    gpu: int
    t: float
    util: float | None
    power: float | None
    n: int


@dataclass(frozen=True)
class HoursInputs:
    """What :func:`hours_bought` reads: the window, ``now``, the machine's GPUs, the
    GPU stages' spans, the human and CPU stages' (``others``), when the campaign closed
    (``closed_at``, None: not closed), the recorded minutes, each stage's throughput
    (steps per second, when known) and notes to pass on. No price: time is never priced
    here (D8)."""

    start: float
    end: float
    now: float
    gpus: int
    spans: tuple[StageSpan, ...] = ()
    others: tuple[TimeSpan, ...] = ()
    closed_at: float | None = None
    minutes: tuple[GpuMinute, ...] = ()
    throughput: Mapping[str, float | None] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    machine: int = 1
    threshold: float = BUSY_UTIL_PCT
    # The minutes already indexed per GPU (a live engine's, kept between computations;
    # built with this threshold); None: built from ``minutes``.
    index: Mapping[int, MinuteIndex] | None = None


@dataclass(frozen=True)
class GpuHours:
    """GPU-seconds held, busy, idle and unrecorded (``held`` is exactly the sum of the
    other three), the mean utilization over the recorded part and the energy."""

    held_s: int = 0
    busy_s: int = 0
    idle_s: int = 0
    unrecorded_s: int = 0
    mean_util: float | None = None  # None: nothing recorded
    kwh: float | None = None  # None: no power reported

    @property
    def held_h(self) -> float:
        return self.held_s / 3600.0

    @property
    def busy_h(self) -> float:
        return self.busy_s / 3600.0

    @property
    def idle_h(self) -> float:
        return self.idle_s / 3600.0

    @property
    def unrecorded_h(self) -> float:
        return self.unrecorded_s / 3600.0

    def as_json(self) -> dict[str, Any]:
        return {"held_gpu_s": self.held_s, "busy_gpu_s": self.busy_s,
                "idle_gpu_s": self.idle_s, "unrecorded_gpu_s": self.unrecorded_s,
                "held_gpu_h": round(self.held_h, 4), "busy_gpu_h": round(self.busy_h, 4),
                "idle_gpu_h": round(self.idle_h, 4),
                "unrecorded_gpu_h": round(self.unrecorded_h, 4),
                "mean_util_pct": None if self.mean_util is None else round(self.mean_util, 2),
                "kwh": None if self.kwh is None else round(self.kwh, 4)}


@dataclass(frozen=True)
class StageHours:
    """One stage: its GPUs, the seconds it held them in the window, its GPU-hours and
    its throughput (steps per second over its span; None: unknown)."""

    stage: str
    gpus: tuple[int, ...]
    seconds: int
    hours: GpuHours
    throughput: float | None

    def as_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "gpus": list(self.gpus), "seconds": self.seconds,
                **self.hours.as_json(), "throughput_steps_s": self.throughput}


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole > 0 else None


def _rounded(share: float | None) -> float | None:
    return None if share is None else round(share, 6)


_WHERE = {"before": "before the first stage", "between": "between stages",
          "after": "after the last stage", "none": "(no stage ran)"}


@dataclass(frozen=True)
class IdleGap:
    """A stretch of the window in which no stage held any GPU, of a kind in
    :data:`GAP_KINDS` (see the module text); ``stages``: the human or CPU stages that ran
    in it; ``window_s``: the whole window's seconds, its share is of those. Time only,
    never money (D8)."""

    start: float
    end: float
    kind: str
    window_s: int
    stages: tuple[str, ...] = ()

    @property
    def seconds(self) -> int:
        return int(self.end - self.start)

    @property
    def idle(self) -> bool:
        """An idle gap: nothing ran (not a human's or the CPU's time, not after the close)."""
        return self.kind in IDLE_KINDS

    @property
    def window_share(self) -> float | None:
        return _ratio(self.seconds, self.window_s)

    def what(self) -> str:
        """In words: ``idle gap between stages``, ``a human stage ran: review``,
        ``CPU stage: data-check``, ``unused after the close``."""
        names = ", ".join(self.stages)
        return {HUMAN: f"a human stage ran: {names}", CPU: f"CPU stage: {names}",
                AFTER_CLOSE: "unused after the close"}.get(self.kind) \
            or f"idle gap {_WHERE.get(self.kind, self.kind)}"

    def words(self) -> str:
        """:meth:`what`, its length and its share of the window, e.g. ``a human stage
        ran: review 2h (2.8 % of the window)``."""
        return f"{self.what()} {format_duration(self.seconds)} " \
            f"({format_share(self.window_share)} of the window)"

    def as_json(self) -> dict[str, Any]:
        return {"start": _iso(self.start), "end": _iso(self.end), "seconds": self.seconds,
                "window_share": _rounded(self.window_share), "kind": self.kind,
                "stages": list(self.stages)}


# The totals of ``gaps_by_kind``: the idle gaps' kinds together, then each other kind.
KIND_TOTALS = {"idle": IDLE_KINDS, HUMAN: (HUMAN,), CPU: (CPU,), AFTER_CLOSE: (AFTER_CLOSE,)}
KIND_LABELS = {"idle": "idle gaps", HUMAN: "human stages", CPU: "CPU stages",
               AFTER_CLOSE: "unused after the close"}


@dataclass(frozen=True)
class HoursBought:
    """What the GPU-hours bought (see the module text). ``gaps_s``: the idle gaps'
    seconds (nothing ran; the human, CPU and after-the-close stretches are not gaps)."""

    machine: int
    gpus: int
    threshold: float
    start: float
    end: float
    elapsed_s: int
    overall: GpuHours
    stages: tuple[StageHours, ...]
    between: GpuHours
    gaps: tuple[IdleGap, ...]
    gaps_s: int
    notes: tuple[str, ...] = ()

    @property
    def kwh(self) -> float | None:
        return self.overall.kwh

    @property
    def window_s(self) -> int:
        return int(self.end - self.start)

    def seconds_of(self, *kinds: str) -> int:
        """The seconds of the stretches of these kinds."""
        return sum(g.seconds for g in self.gaps if g.kind in kinds)

    def window_share(self, seconds: int) -> float | None:
        """``seconds`` as a share of the whole window (None: an empty window)."""
        return _ratio(seconds, self.window_s)

    @property
    def gaps_held_share(self) -> float | None:
        """The idle gaps' share of the held GPU-hours (no stage held a GPU in them)."""
        return _ratio(self.gaps_s * self.gpus, self.overall.held_s)

    def kind_totals(self) -> dict[str, int]:
        """Seconds per total of :data:`KIND_TOTALS` (``idle``, ``human``, ``cpu``,
        ``after_close``)."""
        return {name: self.seconds_of(*kinds) for name, kinds in KIND_TOTALS.items()}

    def time_parts(self, names: Iterable[str] = tuple(KIND_TOTALS)) -> list[str]:
        """The totals of ``names`` (of :data:`KIND_TOTALS`) that are not zero, in hours
        and as a share of the window, e.g. ``idle gaps 3h10m (4.4 % of the window)``,
        ``unused after the close 2d12h (83.3 % of the window)``: never money (D8)."""
        totals = self.kind_totals()
        return [f"{KIND_LABELS[name]} {format_duration(totals[name])} "
                f"({format_share(self.window_share(totals[name]))} of the window)"
                for name in names if totals.get(name)]

    def as_json(self) -> dict[str, Any]:
        """The ``hours`` section of ``status --json``, the bag's manifest and REPORT.md."""
        return {
            "machine": self.machine, "gpus": self.gpus, "busy_util_pct": self.threshold,
            "window": {"start": _iso(self.start), "end": _iso(self.end),
                       "elapsed_s": self.elapsed_s},
            "overall": self.overall.as_json(),
            "stages": [s.as_json() for s in self.stages],
            "between_stages": self.between.as_json(),
            "gaps": [g.as_json() for g in self.gaps],
            "gaps_total": {"seconds": self.gaps_s,
                           "window_share": _rounded(self.window_share(self.gaps_s)),
                           "held_share": _rounded(self.gaps_held_share)},
            "gaps_by_kind": {name: {"seconds": seconds,
                                    "window_share": _rounded(self.window_share(seconds))}
                             for name, seconds in self.kind_totals().items()},
            "kwh": None if self.kwh is None else round(self.kwh, 4),
            "notes": list(self.notes),
        }

    def short_line(self) -> str:
        """One line: busy of held GPU-hours, the unrecorded ones and the idle gaps in
        hours and as a share of the window, e.g. ``GPU-h 41.2/72.0 busy · 3.1
        unrecorded · idle gaps 3h10m (4.4 % of the window)``."""
        o = self.overall
        line = f"GPU-h {o.busy_h:.1f}/{o.held_h:.1f} busy"
        if o.unrecorded_s:
            line += f" · {o.unrecorded_h:.1f} unrecorded"
        if self.gaps_s:
            line += f" · idle gaps {format_duration(self.gaps_s)} " \
                f"({format_share(self.window_share(self.gaps_s))} of the window)"
        return line


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class _Tally:
    """GPU-seconds counted so far, with the weights of the means."""

    busy: int = 0
    idle: int = 0
    unrecorded: int = 0
    util_sum: float = 0.0  # Σ util × seconds over recorded seconds
    energy_ws: float = 0.0  # Σ power × seconds (watt-seconds) where power was reported
    powered: bool = False

    def add(self, other: _Tally) -> None:
        self.busy += other.busy
        self.idle += other.idle
        self.unrecorded += other.unrecorded
        self.util_sum += other.util_sum
        self.energy_ws += other.energy_ws
        self.powered = self.powered or other.powered

    def hours(self) -> GpuHours:
        recorded = self.busy + self.idle
        return GpuHours(self.busy + self.idle + self.unrecorded, self.busy, self.idle,
                        self.unrecorded, self.util_sum / recorded if recorded else None,
                        self.energy_ws / 3.6e6 if self.powered else None)


class MinuteIndex:
    """One GPU's recorded minutes in minute order, with running sums of whole minutes
    (busy and idle seconds, utilization × seconds, watt-seconds): an interval's tally
    costs two bisections and its two edge minutes, whatever the campaign's length.
    :meth:`put` extends it as minutes arrive (a live engine keeps one per GPU)."""

    def __init__(self, threshold: float = BUSY_UTIL_PCT) -> None:
        self.threshold = threshold
        self.minutes: list[int] = []  # minute numbers (t // 60), increasing
        self.rows: list[GpuMinute] = []
        # Running sums before each row: [0] = 0, [i + 1] = through row i.
        self._busy, self._idle, self._powered = [0], [0], [0]
        self._util, self._energy = [0.0], [0.0]

    def put(self, rows: Iterable[GpuMinute], since_minute: int | None = None) -> None:
        """Add ``rows`` (this GPU's); with ``since_minute``, the rows held from that
        minute on are replaced by these (a re-read of the newest minutes)."""
        fresh = sorted(rows, key=lambda r: r.t)
        if since_minute is None:
            since_minute = int(fresh[0].t // 60) if fresh else None
        if since_minute is not None:
            self._truncate(bisect_left(self.minutes, since_minute))
        for row in fresh:
            m = int(row.t // 60)
            if self.minutes and m <= self.minutes[-1]:
                self._truncate(bisect_left(self.minutes, m))  # the later row of a minute wins
            counted = row.util is not None and row.n > 0
            busy = counted and row.util is not None and row.util >= self.threshold
            self.minutes.append(m)
            self.rows.append(row)
            self._busy.append(self._busy[-1] + (60 if busy else 0))
            self._idle.append(self._idle[-1] + (60 if counted and not busy else 0))
            self._util.append(self._util[-1] + (row.util or 0.0) * 60 * counted)
            self._energy.append(self._energy[-1] + (row.power or 0.0) * 60)
            self._powered.append(self._powered[-1] + (row.power is not None))

    def _truncate(self, i: int) -> None:
        del self.minutes[i:], self.rows[i:]
        for sums in (self._busy, self._idle, self._util, self._energy, self._powered):
            del sums[i + 1:]

    def tally(self, a: int, b: int) -> _Tally:
        """Seconds ``a`` to ``b``: whole minutes from the running sums, the two edge
        minutes by their overlap; what no counted minute covers is unrecorded."""
        out = _Tally()
        if b <= a:
            return out
        first, last = a // 60, (b - 1) // 60
        whole_from = first if a % 60 == 0 else first + 1
        whole_to = b // 60  # minutes [whole_from, whole_to) lie wholly inside
        if whole_from < whole_to:
            i = bisect_left(self.minutes, whole_from)
            j = bisect_left(self.minutes, whole_to)
            out.busy = self._busy[j] - self._busy[i]
            out.idle = self._idle[j] - self._idle[i]
            out.util_sum = self._util[j] - self._util[i]
            out.energy_ws = self._energy[j] - self._energy[i]
            out.powered = self._powered[j] > self._powered[i]
        for m in {first, last}:
            if not whole_from <= m < whole_to:  # an edge minute, partly inside
                self._edge(out, m, min(b, 60 * m + 60) - max(a, 60 * m))
        out.unrecorded = (b - a) - out.busy - out.idle
        return out

    def _edge(self, out: _Tally, m: int, d: int) -> None:
        i = bisect_left(self.minutes, m)
        if i == len(self.minutes) or self.minutes[i] != m:
            return
        rec = self.rows[i]
        if rec.power is not None:
            out.energy_ws += rec.power * d
            out.powered = True
        if rec.util is not None and rec.n > 0:
            out.util_sum += rec.util * d
            if rec.util >= self.threshold:
                out.busy += d
            else:
                out.idle += d


def minute_indices(minutes: Iterable[GpuMinute], gpus: int,
                   threshold: float = BUSY_UTIL_PCT) -> dict[int, MinuteIndex]:
    """One :class:`MinuteIndex` per GPU of the machine (GPUs beyond ``gpus`` ignored)."""
    by_gpu: dict[int, list[GpuMinute]] = {g: [] for g in range(gpus)}
    for m in minutes:
        if m.gpu in by_gpu:
            by_gpu[m.gpu].append(m)
    out = {}
    for gpu, rows in by_gpu.items():
        out[gpu] = MinuteIndex(threshold)
        out[gpu].put(rows)
    return out


def _union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _complement(covered: list[tuple[int, int]], a: int, b: int) -> list[tuple[int, int]]:
    out, at = [], a
    for lo, hi in covered:
        if lo > at:
            out.append((at, lo))
        at = max(at, hi)
    if at < b:
        out.append((at, b))
    return out


def _stage_intervals(inp: HoursInputs, start: int, stop: int
                     ) -> dict[str, dict[int, list[tuple[int, int]]]]:
    """Stage -> GPU -> its held intervals in the elapsed window (merged)."""
    by_stage: dict[str, dict[int, list[tuple[int, int]]]] = {}
    for span in inp.spans:
        a = max(round(span.start), start)
        b = min(stop if span.end is None else round(span.end), stop)
        per_gpu = by_stage.setdefault(span.stage, {})
        for gpu in span.gpus:
            if 0 <= gpu < inp.gpus and b > a:
                per_gpu.setdefault(gpu, []).append((a, b))
    return {s: {g: _union(iv) for g, iv in gpus.items()} for s, gpus in by_stage.items()}


def _closed_at(inp: HoursInputs, start: int, stop: int) -> int | None:
    """When the campaign closed, inside the elapsed window; None: not closed, or a GPU
    stage started after it (the campaign went on: that was no close)."""
    if inp.closed_at is None:
        return None
    closed = max(start, min(round(inp.closed_at), stop))
    if any(round(span.start) > closed for span in inp.spans if span.gpus):
        return None
    return closed


def _others(inp: HoursInputs, start: int, stop: int) -> list[tuple[int, int, str, str]]:
    """The human and CPU stages' stretches in the elapsed window: (from, to, kind, stage)."""
    out = []
    for span in inp.others:
        a = max(round(span.start), start)
        b = min(stop if span.end is None else round(span.end), stop)
        if b > a and span.kind in (HUMAN, CPU):
            out.append((a, b, span.kind, span.stage))
    return out


def _gaps(inp: HoursInputs, intervals: Mapping[str, Mapping[int, list[tuple[int, int]]]],
          start: int, stop: int, end: int) -> list[IdleGap]:
    """The stretches no GPU stage held a GPU in, each cut where a human or CPU stage
    starts or ends and at the close, then the pieces of one kind and stages joined
    again; once closed, they run to the window's end (the rest of it is unused)."""
    covered = _union(iv for gpus in intervals.values() for ivs in gpus.values() for iv in ivs)
    closed = _closed_at(inp, start, stop)
    others = _others(inp, start, stop)
    gaps: list[IdleGap] = []
    for a, b in _complement(covered, start, stop if closed is None else end):
        where = "none" if not covered else "before" if b <= covered[0][0] else \
            "after" if a >= covered[-1][1] else "between"
        edges = {t for lo, hi, _, _ in others for t in (lo, hi)} | \
            ({closed} if closed is not None else set())
        cuts = sorted({a, b} | {t for t in edges if a < t < b})
        for x, y in zip(cuts, cuts[1:], strict=False):
            running = [(kind, stage) for lo, hi, kind, stage in others if lo <= x and y <= hi]
            kinds = {kind for kind, _ in running}
            kind = CPU if CPU in kinds else HUMAN if HUMAN in kinds else \
                AFTER_CLOSE if closed is not None and x >= closed else where
            names = tuple(dict.fromkeys(stage for _, stage in running))
            last = gaps[-1] if gaps else None
            if last is not None and last.end == x and (last.kind, last.stages) == (kind, names):
                gaps[-1] = replace(last, end=float(y))
            else:
                gaps.append(IdleGap(float(x), float(y), kind, end - start, names))
    return gaps


def hours_bought(inp: HoursInputs) -> HoursBought:
    """What the GPU-hours bought, from ``inp`` (see the module text)."""
    start = round(inp.start)
    end = max(round(inp.end), start)
    stop = min(max(round(inp.now), start), end)
    index = inp.index if inp.index is not None else \
        minute_indices(inp.minutes, inp.gpus, inp.threshold)
    empty = MinuteIndex(inp.threshold)
    intervals = _stage_intervals(inp, start, stop)
    overall, between = _Tally(), _Tally()
    for gpu in range(inp.gpus):
        overall.add(index.get(gpu, empty).tally(start, stop))
        covered = _union(iv for gpus in intervals.values() for iv in gpus.get(gpu, ()))
        for a, b in _complement(covered, start, stop):
            between.add(index.get(gpu, empty).tally(a, b))
    stages = []
    for stage, gpus in intervals.items():
        tally = _Tally()
        for gpu, ivs in sorted(gpus.items()):
            for a, b in ivs:
                tally.add(index.get(gpu, empty).tally(a, b))
        seconds = sum(b - a for a, b in _union(iv for ivs in gpus.values() for iv in ivs))
        stages.append(StageHours(stage, tuple(sorted(gpus)), seconds, tally.hours(),
                                 inp.throughput.get(stage)))
    gaps = _gaps(inp, intervals, start, stop, end)
    return HoursBought(
        machine=inp.machine, gpus=inp.gpus, threshold=inp.threshold, start=float(start),
        end=float(end), elapsed_s=stop - start, overall=overall.hours(),
        stages=tuple(stages), between=between.hours(), gaps=tuple(gaps),
        gaps_s=sum(g.seconds for g in gaps if g.idle), notes=inp.notes)


def span_throughput(points: Iterable[tuple[int | None, float | None]],
                    spans: Iterable[tuple[float, float | None]]) -> float | None:
    """Steps per second over a stage's spans: (last step − first step) / (last time −
    first time) of the stepped, timed points (``(step, t)``) that fall in a span; None
    without two such points a positive time and step apart."""
    windows = [(a, b) for a, b in spans]
    first: tuple[int, float] | None = None
    last: tuple[int, float] | None = None
    for step, t in points:
        if step is None or t is None or not any(
                a <= t and (b is None or t <= b) for a, b in windows):
            continue
        if first is None or t < first[1]:
            first = (step, t)
        if last is None or t >= last[1]:
            last = (step, t)
    if first is None or last is None:
        return None
    dt, ds = last[1] - first[1], last[0] - first[0]
    return ds / dt if dt > 0 and ds > 0 else None


# A stage whose GPUs idled more than this share of its recorded time was underfed
# (input-bound, or stuck): the next campaign's plan says so.
UNDERFED_SHARE = 0.5


def lost_hours(hours: HoursBought, most: int = 5) -> list[str]:
    """Where the campaign lost GPU-hours, for ``cockpit next``: the overall split, the
    longest idle gaps in hours and as a share of the window (never money: D8), the time
    human and CPU stages ran while no GPU stage did (their own kind of time), the rest
    of the window unused after the close (no waste), and the stages whose GPUs idled
    more than :data:`UNDERFED_SHARE` of their recorded time (the worst first)."""
    o = hours.overall
    out = [f"busy {o.busy_h:.1f} of {o.held_h:.1f} GPU-hours held (utilization at least "
           f"{hours.threshold:g} %), idle {o.idle_h:.1f}, unrecorded {o.unrecorded_h:.1f}"]
    for gap in sorted((g for g in hours.gaps if g.idle), key=lambda g: -g.seconds)[:most]:
        out.append(f"{gap.what()}: {_iso(gap.start)} to {_iso(gap.end)} "
                   f"({format_duration(gap.seconds)}, {format_share(gap.window_share)} of "
                   "the window)")
    for kind in (HUMAN, CPU):
        seconds = hours.seconds_of(kind)
        if seconds:
            names = dict.fromkeys(n for g in hours.gaps if g.kind == kind for n in g.stages)
            out.append(f"{KIND_LABELS[kind]} ran {format_duration(seconds)} while no GPU "
                       f"stage did ({format_share(hours.window_share(seconds))} of the "
                       f"window: {', '.join(names)}): not GPU idleness")
    closed = hours.seconds_of(AFTER_CLOSE)
    if closed:
        out.append(f"unused after the close: {format_duration(closed)} "
                   f"({format_share(hours.window_share(closed))} of the window): the "
                   "campaign closed, not a gap")
    underfed = [s for s in hours.stages
                if s.hours.busy_s + s.hours.idle_s > 0
                and s.hours.idle_s > UNDERFED_SHARE * (s.hours.busy_s + s.hours.idle_s)]
    underfed.sort(key=lambda s: -s.hours.idle_s)
    for s in underfed[:most]:
        recorded = s.hours.busy_s + s.hours.idle_s
        util = "" if s.hours.mean_util is None else f", mean utilization {s.hours.mean_util:.0f} %"
        out.append(f"stage {s.stage}: its GPUs idled {s.hours.idle_s / recorded:.0%} of its "
                   f"recorded time ({s.hours.idle_h:.1f} GPU-hours{util}): input-bound or "
                   "stuck")
    if o.unrecorded_s and o.held_s and o.unrecorded_s * 10 >= o.held_s:
        out.append(f"{o.unrecorded_s / o.held_s:.0%} of the held GPU-hours were not recorded "
                   "(no cockpit conducted then: nothing recorded them): where they went is "
                   "unknown")
    return out
