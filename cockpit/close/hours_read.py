"""The I/O edge of :mod:`cockpit.close.hours`: the inputs read from the journal's folded
state, the flight recording and the runs' metric streams.

:func:`read_hours` is what the engine (at most once a minute) and the export (once)
call. It never raises over the recording: a missing or unreadable one leaves every
GPU-hour unrecorded and says so in a note.

Per-stage throughput comes from the run's own metric stream (the recorder keeps no
steps): its steps over the stage's spans (:func:`~cockpit.close.hours.span_throughput`).
The engine hands in its live streams (their recent points: what the cockpit holds of
the run, the last :data:`~cockpit.runs.metrics.stream.RECENT_POINTS` reports); without
them (the export) each run's metric files are read once, in full, in bounded polls.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path

from cockpit.campaign.model import Campaign
from cockpit.close.hours import (
    BUSY_UTIL_PCT,
    CPU,
    HUMAN,
    GpuMinute,
    HoursBought,
    HoursInputs,
    StageSpan,
    TimeSpan,
    hours_bought,
    minute_indices,
    span_throughput,
)
from cockpit.journal.fold import DONE, RUNNING, CampaignState
from cockpit.journal.format import parse_time
from cockpit.journal.paths import CampaignFiles
from cockpit.runs.checkpoints.verifier import run_stream
from cockpit.runs.metrics.stream import MetricStream
from cockpit.runs.supervisor import stage_gpus
from cockpit.telemetry.flight import RecordingReader, RecordingUnreadable, gpu_series

MAX_POLLS = 10_000  # polls of one run's metric files at most (each reads a bounded chunk)


def stage_spans(campaign: Campaign, state: CampaignState, machine: int,
                now: datetime) -> tuple[StageSpan, ...]:
    """Every stretch a GPU stage of ``machine`` held its GPUs: the earlier attempts of
    its run (each to its end, or to the next attempt's start) and its latest one (to
    its end, or ``now`` while it runs or when no end was recorded)."""
    spans: list[StageSpan] = []
    every = campaign.package.offer.gpus
    for stage in campaign.stages:
        if stage.machine != machine or not stage.uses_gpu:
            continue
        planned = stage_gpus(stage, every)
        st = state.stages.get(stage.id)
        run = state.runs.get(stage.run) if stage.run else None
        if run is not None:
            attempts = run.attempts()
            for i, a in enumerate(attempts[:-1] if st and st.started_at else attempts):
                end = a.ended_at or (attempts[i + 1].started_at if i + 1 < len(attempts)
                                     else None)
                if a.started_at is not None and a.stage in (None, stage.id):
                    spans.append(StageSpan(stage.id, a.gpus or planned,
                                           a.started_at.timestamp(),
                                           (end or now).timestamp()))
        if st is None or st.started_at is None:
            continue
        gpus = run.gpus if run is not None and run.gpus else planned
        until = None if st.state == RUNNING else (st.ended_at or now).timestamp()
        spans.append(StageSpan(stage.id, gpus, st.started_at.timestamp(), until))
    return tuple(spans)


def other_spans(campaign: Campaign, state: CampaignState, machine: int,
                now: datetime) -> tuple[TimeSpan, ...]:
    """Every stretch a stage that holds no GPU ran: a human stage (``resource: human``;
    the one person, whatever machine it names) or this machine's CPU stage (``resource:
    cpu``; ``cpu`` when it names both), from its start to its end, or ``now`` while it
    runs or when no end was recorded."""
    spans: list[TimeSpan] = []
    for stage in campaign.stages:
        cpu = any(r.kind == CPU for r in stage.resources)
        if stage.uses_gpu or not (cpu or stage.is_human) or (cpu and stage.machine != machine):
            continue
        st = state.stages.get(stage.id)
        if st is None or st.started_at is None:
            continue
        until = None if st.state == RUNNING else (st.ended_at or now).timestamp()
        spans.append(TimeSpan(stage.id, CPU if cpu else HUMAN, st.started_at.timestamp(),
                              until))
    return tuple(spans)


def closed_at(campaign: Campaign, state: CampaignState) -> datetime | None:
    """When the campaign closed: its export stage's end once it is done (``role:
    export``, or the stage called ``export``); without one in the plan, the newest
    verified export's time. None: not closed."""
    stage = next((s for s in campaign.stages if (s.role or s.id) == "export"), None)
    if stage is not None:
        st = state.stages.get(stage.id)
        return st.ended_at if st is not None and st.state == DONE else None
    export = state.export
    if export is None or not export.get("verified"):
        return None
    try:
        return parse_time(str(export.get("t")))
    except (TypeError, ValueError):
        return None


def recorded_minutes(path: Path, gpus: int, t0: float, t1: float
                     ) -> tuple[tuple[GpuMinute, ...], str | None]:
    """Each GPU's recorded minutes from ``t0`` to ``t1``: the minute tier, and the raw
    seconds of the minutes not aggregated yet (the newest), averaged per minute. A
    recording that cannot be read gives none and a note saying why."""
    try:
        reader = RecordingReader.open(path)
    except RecordingUnreadable as exc:
        return (), f"no flight recording ({exc}): every GPU-hour is unrecorded"
    try:
        out: list[GpuMinute] = []
        for gpu in range(gpus):
            util = _per_minute(reader, gpu, "util", t0, t1)
            power = _per_minute(reader, gpu, "power", t0, t1)
            for m in sorted(set(util) | set(power)):
                u, p = util.get(m), power.get(m)
                out.append(GpuMinute(gpu, m * 60.0, u[0] if u else None,
                                     p[0] if p else None, u[1] if u else 0))
        return tuple(out), None
    except RecordingUnreadable as exc:
        return (), f"the flight recording could not be read ({exc}): every GPU-hour " \
            "is unrecorded"
    finally:
        reader.close()


class RecordedMinutes:
    """The recording's GPU minutes for a live engine, one :class:`MinuteIndex` per GPU,
    read incrementally: each :meth:`refresh` reads only from :data:`REREAD_S` before
    where the last one ended (older minutes no longer change), so what a refresh costs
    does not grow with the campaign. A recording that cannot be read empties it."""

    REREAD_S = 180  # the newest minutes are read again (their samples may still come)

    def __init__(self, path: Path, gpus: int, threshold: float = BUSY_UTIL_PCT) -> None:
        self.path, self.gpus, self.threshold = path, gpus, threshold
        self.index = minute_indices((), gpus, threshold)
        self._to: float | None = None  # read up to here

    def refresh(self, t0: float, t1: float) -> str | None:
        """Read what is new up to ``t1``; a note when the recording cannot be read."""
        since = t0 if self._to is None else max(t0, (self._to - self.REREAD_S) // 60 * 60)
        minutes, note = recorded_minutes(self.path, self.gpus, since, t1)
        if note is not None:
            self.index, self._to = minute_indices((), self.gpus, self.threshold), None
            return note
        by_gpu: dict[int, list[GpuMinute]] = {g: [] for g in self.index}
        for m in minutes:
            by_gpu[m.gpu].append(m)
        for gpu, rows in by_gpu.items():
            self.index[gpu].put(rows, since_minute=int(since // 60))
        self._to = t1
        return None


def _per_minute(reader: RecordingReader, gpu: int, metric: str, t0: float, t1: float
                ) -> dict[int, tuple[float, int]]:
    """Minute -> (mean, samples) of one GPU series: the minute tier, then the raw tier's
    seconds after its last aggregated minute."""
    key = gpu_series(gpu, metric)
    out = {int(p.t // 60): (p.value, p.n) for p in reader.minutes(key, t0, t1)
           if math.isfinite(p.value)}
    after = (max(out) + 1) * 60.0 if out else t0
    sums: dict[int, tuple[float, int]] = {}
    for p in reader.series(key, max(after, t0), t1):
        if p.span_s == 1 and p.t >= after and math.isfinite(p.value):
            total, n = sums.get(int(p.t // 60), (0.0, 0))
            sums[int(p.t // 60)] = (total + p.value, n + 1)
    out.update({m: (total / n, n) for m, (total, n) in sums.items() if n})
    return out


def _points(stream: MetricStream, live: bool) -> Iterator[tuple[int | None, float | None]]:
    """(step, time) of a run's points: the live stream's recent ones, or every one of
    its files read now."""
    if live:
        for p in stream.recent:
            yield p.step, p.t
        return
    for _ in range(MAX_POLLS):
        points = stream.poll()
        for p in points:
            yield p.step, p.t
        if not points and all(r.caught_up for r in stream.readers):
            return


def stage_throughput(campaign: Campaign, spans: tuple[StageSpan, ...],
                     streams: Mapping[str, MetricStream] | None) -> dict[str, float | None]:
    """Steps per second of each stage's run over the stage's spans (None: unknown)."""
    out: dict[str, float | None] = {}
    for stage_id in dict.fromkeys(s.stage for s in spans):
        run_id = campaign.stage(stage_id).run
        if run_id is None:
            out[stage_id] = None
            continue
        windows = [(s.start, s.end) for s in spans if s.stage == stage_id]
        live = streams is not None
        stream = streams.get(run_id) if streams is not None else run_stream(campaign, run_id)
        out[stage_id] = None if stream is None else span_throughput(
            _points(stream, live), windows)
    return out


def read_hours(campaign: Campaign, state: CampaignState, now: datetime,
               machine: int | None = 1,
               streams: Mapping[str, MetricStream] | None = None,
               recorded: RecordedMinutes | None = None) -> HoursBought:
    """What this machine's GPU-hours bought up to ``now`` (``machine`` None: the fleet
    view, machine 1's); ``recorded``: a live engine's minutes, refreshed (else the
    recording is read whole, once)."""
    pkg = campaign.package
    mine = machine or 1
    spans = stage_spans(campaign, state, mine, now)
    t0 = pkg.start.timestamp()
    t1 = min(now, pkg.end).timestamp()
    minutes: tuple[GpuMinute, ...] = ()
    if recorded is None:
        minutes, note = recorded_minutes(CampaignFiles.of(campaign).recorder,
                                         pkg.offer.gpus, t0, t1)
    else:
        note = recorded.refresh(t0, t1)
    notes: tuple[str, ...] = (note,) if note else ()
    closed = closed_at(campaign, state)
    return hours_bought(HoursInputs(
        start=t0, end=pkg.end.timestamp(), now=now.timestamp(), gpus=pkg.offer.gpus,
        spans=spans, others=other_spans(campaign, state, mine, now),
        closed_at=None if closed is None else closed.timestamp(), minutes=minutes,
        throughput=stage_throughput(campaign, spans, streams), notes=notes, machine=mine,
        index=None if recorded is None else recorded.index))
