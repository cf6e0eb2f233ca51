"""What the hours bought (issue 27), pure: exact numbers and the parts that always add up;
time is never priced (issue 41, D8): gaps in hours and shares of the window, a human or
CPU stage's time its own kind, the rest of the window after the close unused."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.close.hours import (
    BUSY_UTIL_PCT,
    GpuMinute,
    HoursBought,
    HoursInputs,
    IdleGap,
    StageSpan,
    TimeSpan,
    hours_bought,
    lost_hours,
    span_throughput,
)
from cockpit.common.units import format_share
from cockpit.export.hours_md import hours_section

T0 = 1_700_000_040  # a whole minute (T0 % 60 == 0)
DAY = 86_400
# A currency next to a duration, either order: what no hour may ever carry (D8).
PRICED_TIME = re.compile(
    r"(\d+h|\d+m|\d+ ?s|hours?)\b[^\n]{0,30}\b\d+(\.\d+)? ?(USD|EUR)"
    r"|\b\d+(\.\d+)? ?(USD|EUR)\b[^\n]{0,30}\b(\d+h|\d+m|\d+ ?s|hours?)\b")


def minutes(gpu: int, t0: int, t1: int, util: float | None, power: float | None = None
            ) -> tuple[GpuMinute, ...]:
    return tuple(GpuMinute(gpu, float(t), util, power, 60) for t in range(t0, t1, 60))


def test_exact_hours_two_stages_a_gap_and_an_unrecorded_stretch() -> None:
    # 2 GPUs, 3-day window, 10 h elapsed. Stage a: GPU 0, 1 h → 3 h, busy (90 %) at
    # 300 W. Stage b: both GPUs, 4 h → 6 h, GPU 0 idle (5 %), GPU 1 recorded only
    # from 5 h (busy). Nothing else recorded.
    h = 3600
    recorded = (minutes(0, T0 + h, T0 + 3 * h, 90.0, 300.0)
                + minutes(0, T0 + 4 * h, T0 + 6 * h, 5.0)
                + minutes(1, T0 + 5 * h, T0 + 6 * h, 50.0))
    out = hours_bought(HoursInputs(
        start=T0, end=T0 + 3 * DAY, now=T0 + 10 * h, gpus=2,
        spans=(StageSpan("a", (0,), T0 + h, T0 + 3 * h), StageSpan("b", (0, 1), T0 + 4 * h,
                                                                    T0 + 6 * h)),
        minutes=recorded, throughput={"a": 12.5}))
    o = out.overall
    assert (o.held_s, o.busy_s, o.idle_s, o.unrecorded_s) == (20 * h, 3 * h, 2 * h, 15 * h)
    a, b = out.stages
    assert (a.stage, a.gpus, a.seconds) == ("a", (0,), 2 * h)
    assert (a.hours.held_s, a.hours.busy_s, a.hours.idle_s, a.hours.unrecorded_s) == \
        (2 * h, 2 * h, 0, 0)
    assert a.hours.mean_util == 90.0 and a.throughput == 12.5
    assert a.hours.kwh == 0.6  # 300 W × 2 h
    assert (b.hours.held_s, b.hours.busy_s, b.hours.idle_s, b.hours.unrecorded_s) == \
        (4 * h, h, 2 * h, h)
    assert b.hours.kwh is None  # no power reported in its span
    assert b.throughput is None
    assert out.between.held_s == 20 * h - 2 * h - 4 * h
    # Gaps: before a, between a and b, after b up to now.
    assert [(g.kind, g.seconds) for g in out.gaps] == \
        [("before", h), ("between", h), ("after", 4 * h)]
    # 1 h of a 72 h window; 6 h of gaps are 6/72 of it and 12 of the 20 GPU-hours held.
    assert out.gaps[1].window_share == 1 / 72
    assert out.gaps_s == 6 * h
    assert out.as_json()["gaps_total"] == {"seconds": 6 * h, "window_share": 0.083333,
                                           "held_share": 0.6}
    assert out.short_line() == \
        "GPU-h 3.0/20.0 busy · 15.0 unrecorded · idle gaps 6h (8.3 % of the window)"


def test_partial_minutes_are_attributed_by_their_overlap_to_the_second() -> None:
    # The window starts 17 s into a minute; a stage ends 23 s into another.
    start = T0 + 17
    stage_end = T0 + 120 + 23
    out = hours_bought(HoursInputs(
        start=start, end=start + DAY, now=T0 + 300, gpus=1,
        spans=(StageSpan("s", (0,), start, stage_end),),
        minutes=minutes(0, T0, T0 + 120, 80.0) + minutes(0, T0 + 120, T0 + 180, 10.0)))
    s = out.stages[0].hours
    assert s.held_s == stage_end - start == 126
    assert (s.busy_s, s.idle_s, s.unrecorded_s) == (103, 23, 0)
    assert out.overall.held_s == 300 - 17
    assert (out.overall.busy_s, out.overall.idle_s, out.overall.unrecorded_s) == \
        (103, 60, 120)
    assert [(g.kind, g.start, g.seconds) for g in out.gaps] == \
        [("after", float(stage_end), T0 + 300 - stage_end)]


def test_no_recording_means_every_hour_unrecorded_never_busy_or_idle() -> None:
    out = hours_bought(HoursInputs(start=T0, end=T0 + DAY, now=T0 + 7200, gpus=8,
                                   spans=(StageSpan("s", (), T0, None),),
                                   notes=("no flight recording",)))
    o = out.overall
    assert (o.held_s, o.busy_s, o.idle_s, o.unrecorded_s) == (8 * 7200, 0, 0, 8 * 7200)
    assert o.mean_util is None and o.kwh is None
    assert [(g.kind, g.seconds) for g in out.gaps] == [("none", 7200)]
    assert out.as_json()["notes"] == ["no flight recording"]
    assert "unrecorded" in out.short_line()


def test_a_running_stage_counts_to_now_and_the_window_stops_at_its_end() -> None:
    out = hours_bought(HoursInputs(start=T0, end=T0 + 3600, now=T0 + 9000, gpus=1,
                                   spans=(StageSpan("s", (0,), T0 + 600, None),),
                                   minutes=minutes(0, T0, T0 + 3600, BUSY_UTIL_PCT)))
    assert out.elapsed_s == 3600
    assert out.stages[0].hours.held_s == 3000
    assert out.stages[0].hours.busy_s == 3000  # at the threshold counts busy
    assert [(g.kind, g.seconds, format_share(g.window_share)) for g in out.gaps] == \
        [("before", 600, "16.7 %")]


def test_throughput_is_the_steps_over_the_stage_span() -> None:
    points = [(0, 100.0), (10, 110.0), (50, 150.0), (None, 151.0), (900, 500.0)]
    assert span_throughput(points, [(100.0, 150.0)]) == 1.0
    assert span_throughput(points, [(100.0, None)]) == 900 / 400
    assert span_throughput(points, [(200.0, 300.0)]) is None
    assert span_throughput([(5, 1.0), (5, 2.0)], [(0.0, None)]) is None


def test_json_carries_exact_seconds_and_hours() -> None:
    out = hours_bought(HoursInputs(start=T0, end=T0 + DAY, now=T0 + 5400, gpus=2,
                                   spans=(StageSpan("s", (1,), T0, T0 + 1800),),
                                   minutes=minutes(1, T0, T0 + 1800, 99.0, 200.0)))
    data = out.as_json()
    assert data["overall"]["held_gpu_s"] == 2 * 5400
    assert data["overall"]["held_gpu_h"] == 3.0
    assert data["stages"][0]["busy_gpu_s"] == 1800
    assert data["stages"][0]["kwh"] == 0.1
    assert data["between_stages"]["held_gpu_s"] == 2 * 5400 - 1800
    assert data["gaps"] == [{"start": data["gaps"][0]["start"], "end": data["gaps"][0]["end"],
                             "seconds": 3600, "window_share": 0.041667, "kind": "after",
                             "stages": []}]
    assert data["kwh"] == 0.1


span_st = st.builds(
    lambda stage, gpus, a, d, running: StageSpan(stage, tuple(gpus), T0 + a,
                                                 None if running else T0 + a + d),
    st.sampled_from(["a", "b", "c"]), st.lists(st.integers(-1, 4), max_size=4),
    st.integers(-3000, 30_000), st.integers(0, 20_000), st.booleans())
minute_st = st.builds(
    lambda gpu, m, util, power, n: GpuMinute(gpu, float(T0 + 60 * m), util, power, n),
    st.integers(0, 3), st.integers(-10, 600),
    st.one_of(st.none(), st.floats(0, 100)), st.one_of(st.none(), st.floats(0, 700)),
    st.integers(0, 60))


@settings(max_examples=300, deadline=None)
@given(spans=st.lists(span_st, max_size=6), recorded=st.lists(minute_st, max_size=80),
       gpus=st.integers(0, 4), start=st.integers(-100, 100), now=st.integers(-200, 40_000),
       length=st.integers(1, 30_000))
def test_the_parts_always_add_up_to_held(spans: list[StageSpan], recorded: list[GpuMinute],
                                         gpus: int, start: int, now: int,
                                         length: int) -> None:
    out = hours_bought(HoursInputs(start=T0 + start, end=T0 + start + length, now=T0 + now,
                                   gpus=gpus, spans=tuple(spans),
                                   minutes=tuple(recorded)))
    parts = [out.overall, out.between, *(s.hours for s in out.stages)]
    for p in parts:
        assert p.held_s == p.busy_s + p.idle_s + p.unrecorded_s
        assert min(p.busy_s, p.idle_s, p.unrecorded_s) >= 0
    assert out.overall.held_s == gpus * out.elapsed_s
    assert 0 <= out.elapsed_s <= length
    # Stages may overlap on a GPU here (each counts it): the stages' held plus between
    # stages is at least the overall held (equal without overlaps: the test below).
    assert sum(s.hours.held_s for s in out.stages) + out.between.held_s >= \
        out.overall.held_s
    assert sum(g.seconds for g in out.gaps) == out.gaps_s <= out.elapsed_s


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(0, 20_000), min_size=2, max_size=8, unique=True),
       gpus=st.integers(1, 3), recorded=st.lists(minute_st, max_size=80))
def test_without_overlap_stages_plus_between_is_exactly_held(
        cuts: list[int], gpus: int, recorded: list[GpuMinute]) -> None:
    # Back-to-back stages on every GPU, separated by gaps: a partition of the window.
    cuts = sorted(cuts)
    spans = tuple(StageSpan(f"s{i}", tuple(range(gpus)), T0 + a, T0 + b)
                  for i, (a, b) in enumerate(zip(cuts[::2], cuts[1::2], strict=False)))
    out = hours_bought(HoursInputs(start=T0, end=T0 + 3 * DAY, now=T0 + 20_000, gpus=gpus,
                                   spans=spans, minutes=tuple(recorded)))
    for field in ("held_s", "busy_s", "idle_s", "unrecorded_s"):
        assert sum(getattr(s.hours, field) for s in out.stages) \
            + getattr(out.between, field) == getattr(out.overall, field)
    covered = sum(s.seconds for s in out.stages)
    assert covered + out.gaps_s == out.elapsed_s == 20_000


def test_lost_hours_names_the_longest_gaps_and_the_underfed_stage() -> None:
    """What `cockpit next` says of where the hours went: the split, the gaps longest
    first in hours and as a share of the window, and stage b, whose GPUs idled 2 of its
    3 recorded GPU-hours (stage a, busy throughout, is not named)."""
    h = 3600
    out = hours_bought(HoursInputs(
        start=T0, end=T0 + 3 * DAY, now=T0 + 10 * h, gpus=2,
        spans=(StageSpan("a", (0,), T0 + h, T0 + 3 * h),
               StageSpan("b", (0, 1), T0 + 4 * h, T0 + 6 * h)),
        minutes=(minutes(0, T0 + h, T0 + 3 * h, 90.0) + minutes(0, T0 + 4 * h, T0 + 6 * h, 5.0)
                 + minutes(1, T0 + 5 * h, T0 + 6 * h, 50.0))))
    lines = lost_hours(out)
    assert lines[0] == ("busy 3.0 of 20.0 GPU-hours held (utilization at least 20 %), "
                        "idle 2.0, unrecorded 15.0")
    gaps = [x for x in lines if x.startswith("idle gap")]
    assert [g.split(":")[0] for g in gaps] == [
        "idle gap after the last stage", "idle gap before the first stage",
        "idle gap between stages"]
    assert gaps[0].endswith("(4h, 5.6 % of the window)")  # 4/72 = 0.0555...
    assert [x for x in lines if x.startswith("stage ")] == [
        "stage b: its GPUs idled 67% of its recorded time (2.0 GPU-hours, mean utilization "
        "20 %): input-bound or stuck"]  # (2 h × 5 + 1 h × 50) / 3 h
    assert lines[-1].startswith("75% of the held GPU-hours were not recorded")


def _naive(rows: dict[int, GpuMinute], a: int, b: int, threshold: float) -> tuple:
    """Minute by minute, each by its overlap: what MinuteIndex must agree with."""
    busy = idle = 0
    energy = 0.0
    for m in range(a // 60, (b - 1) // 60 + 1) if b > a else ():
        d = min(b, 60 * m + 60) - max(a, 60 * m)
        rec = rows.get(m)
        if rec is not None and rec.power is not None:
            energy += rec.power * d
        if rec is not None and rec.util is not None and rec.n > 0:
            busy += d * (rec.util >= threshold)
            idle += d * (rec.util < threshold)
    return busy, idle, (b - a) - busy - idle, energy


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 300), st.tuples(
           st.one_of(st.none(), st.sampled_from([0.0, 5.0, 19.9, 20.0, 85.0])),
           st.one_of(st.none(), st.sampled_from([0.0, 120.0, 300.0])), st.integers(0, 60)),
           max_size=120),
       st.lists(st.tuples(st.integers(0, 300 * 60), st.integers(0, 2000)), max_size=8),
       st.integers(1, 4))
def test_the_minute_index_agrees_with_minute_by_minute_and_grows_in_pieces(
        recorded: dict, intervals: list, pieces: int) -> None:
    """Running sums give the same tally as a walk over every minute, for any interval;
    and an index fed in pieces, each re-reading from where the last one ended (as a live
    engine's), is the index built at once."""
    from cockpit.close.hours import MinuteIndex

    rows = {m: GpuMinute(0, float(m * 60), u, p, n) for m, (u, p, n) in recorded.items()}
    whole = MinuteIndex()
    whole.put(rows.values())
    grown = MinuteIndex()
    cuts = sorted({0, *(300 * k // pieces for k in range(1, pieces)), 301})
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        re_read = max(lo - 2, 0)  # the newest minutes read again
        grown.put([r for m, r in rows.items() if re_read <= m < hi], since_minute=re_read)
    assert grown.minutes == whole.minutes
    for a, length in intervals:
        want = _naive(rows, a, a + length, BUSY_UTIL_PCT)
        for index in (whole, grown):
            got = index.tally(a, a + length)
            assert (got.busy, got.idle, got.unrecorded) == want[:3]
            assert abs(got.energy_ws - want[3]) < 1e-6 * max(1.0, want[3])


def _keys(value: Any) -> set[str]:
    """Every key of a JSON value, at any depth."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def _texts(out: HoursBought) -> list[str]:
    """Every text a person reads of these hours: the short line, the report's section,
    `cockpit next`'s lines and each stretch in words."""
    return [out.short_line(), hours_section(out), *lost_hours(out),
            *(g.words() for g in out.gaps), *out.time_parts()]


def test_the_hours_of_a_window_with_gaps_carry_no_money() -> None:
    """Issue 41, D8: the gaps are said in hours and as shares of the window and of the
    held GPU-hours; no field, key or text of the hours carries a price."""
    h = 3600
    out = hours_bought(HoursInputs(
        start=T0, end=T0 + 3 * DAY, now=T0 + 10 * h, gpus=1,
        spans=(StageSpan("a", (0,), T0 + h, T0 + 3 * h),
               StageSpan("b", (0,), T0 + 5 * h, T0 + 6 * h)),
        minutes=minutes(0, T0, T0 + 10 * h, 50.0)))
    assert [(g.kind, g.seconds) for g in out.gaps] == \
        [("before", h), ("between", 2 * h), ("after", 4 * h)]
    money = {"price", "share", "gaps_share", "amount", "currency"}
    for cls in (HoursInputs, HoursBought, IdleGap):
        assert not money & {f.name for f in dataclasses.fields(cls)}, cls
    data = out.as_json()
    assert not money & _keys(data)
    assert data["gaps_total"] == {"seconds": 7 * h, "window_share": 0.097222,
                                  "held_share": 0.7}
    assert data["gaps_by_kind"]["idle"] == {"seconds": 7 * h, "window_share": 0.097222}
    assert [g["window_share"] for g in data["gaps"]] == [0.013889, 0.027778, 0.055556]
    texts = _texts(out)
    assert "idle gaps 7h (9.7 % of the window)" in out.short_line()
    assert "idle gap between stages 2h (2.8 % of the window)" in texts
    for text in texts:
        assert not PRICED_TIME.search(text), text
        assert "USD" not in text and "price" not in text, text
    # The regex does catch what it is for (the old line of the panel and of `next`).
    assert PRICED_TIME.search("gaps 3h10m = 2.05 USD")
    assert PRICED_TIME.search("idle gap before the first stage: (3h, 1.96 USD of the price)")


def test_a_gap_while_a_human_or_cpu_stage_runs_has_its_own_kind() -> None:
    """Between two GPU stages a CPU data check runs (0.5 h), then nothing (0.5 h), then
    a person reviews (2 h, the CPU check of another half hour beside it): those are not
    an idle GPU. Only the half hour nothing ran is an idle gap."""
    h = 3600
    out = hours_bought(HoursInputs(
        start=T0, end=T0 + 3 * DAY, now=T0 + 6 * h, gpus=1,
        spans=(StageSpan("pilot", (0,), T0, T0 + h),
               StageSpan("control", (0,), T0 + 4 * h, T0 + 5 * h)),
        others=(TimeSpan("data-check", "cpu", T0 + h, T0 + h + 1800),
                TimeSpan("review", "human", T0 + 2 * h, T0 + 4 * h + 600),
                TimeSpan("lint", "cpu", T0 + 3 * h, T0 + 3 * h + 1800),
                TimeSpan("late", "human", T0 + 5 * h + 1200, None))))
    assert [(g.kind, g.seconds, g.stages) for g in out.gaps] == [
        ("cpu", 1800, ("data-check",)), ("between", 1800, ()), ("human", h, ("review",)),
        ("cpu", 1800, ("review", "lint")), ("human", 1800, ("review",)),
        ("after", 1200, ()), ("human", 2400, ("late",))]
    assert out.gaps_s == 1800 + 1200  # the idle gaps only
    assert out.gaps[0].words() == "CPU stage: data-check 30m (0.7 % of the window)"
    assert out.gaps[2].words() == "a human stage ran: review 1h (1.4 % of the window)"
    assert out.kind_totals() == {"idle": 3000, "human": 2 * h + 600, "cpu": h,
                                 "after_close": 0}
    assert out.as_json()["gaps"][3]["stages"] == ["review", "lint"]
    lines = lost_hours(out)
    assert "human stages ran 2h10m while no GPU stage did (3.0 % of the window: review, " \
        "late): not GPU idleness" in lines
    assert [x.split(":")[0] for x in lines if x.startswith("idle gap")] == \
        ["idle gap between stages", "idle gap after the last stage"]
    # Without a GPU stage at all, a person's stage is still a person's time.
    alone = hours_bought(HoursInputs(start=T0, end=T0 + DAY, now=T0 + h, gpus=1,
                                     others=(TimeSpan("prep", "human", T0, T0 + 1800),)))
    assert [(g.kind, g.seconds) for g in alone.gaps] == [("human", 1800), ("none", 1800)]


def test_after_the_close_the_rest_of_the_window_is_unused_not_a_gap() -> None:
    """The export stage ended at 6 h of a 72 h window (an early, correct close); a person
    fetched the results for 30 min after it. From the close to the window's end the
    time is unused after the close, never an idle gap; before it, the half hour nothing
    ran after the last GPU stage is."""
    h = 3600
    inp = HoursInputs(
        start=T0, end=T0 + 3 * DAY, now=T0 + 8 * h, gpus=1,
        spans=(StageSpan("control", (0,), T0, T0 + 5 * h),),
        others=(TimeSpan("export", "cpu", T0 + 5 * h + 1800, T0 + 6 * h),
                TimeSpan("retrieval", "human", T0 + 6 * h, T0 + 6 * h + 1800)),
        closed_at=T0 + 6 * h)
    out = hours_bought(inp)
    assert [(g.kind, g.seconds) for g in out.gaps] == [
        ("after", 1800), ("cpu", 1800), ("human", 1800), ("after_close", 66 * h - 1800)]
    tail = out.gaps[-1]
    assert not tail.idle and tail.end == T0 + 3 * DAY  # the rest of the window
    assert tail.words() == "unused after the close 2d17h (91.0 % of the window)"
    assert out.gaps_s == 1800
    assert out.as_json()["gaps_by_kind"]["after_close"] == {"seconds": 66 * h - 1800,
                                                             "window_share": 0.909722}
    assert out.short_line() == "GPU-h 0.0/8.0 busy · 8.0 unrecorded · idle gaps 30m " \
        "(0.7 % of the window)"
    assert "unused after the close: 2d17h (91.0 % of the window): the campaign closed, " \
        "not a gap" in lost_hours(out)
    first = out.gaps[0].as_json()
    assert [x for x in lost_hours(out) if x.startswith("idle gap")] == [
        f"idle gap after the last stage: {first['start']} to {first['end']} (30m, 0.7 % of "
        "the window)"]  # only the half hour before the close
    for text in _texts(out):
        assert not PRICED_TIME.search(text), text
    # A GPU stage started after the "close": the campaign went on, so it was none.
    reopened = hours_bought(dataclasses.replace(inp, spans=(
        *inp.spans, StageSpan("variant", (0,), T0 + 7 * h, T0 + 7 * h + 600))))
    assert "after_close" not in {g.kind for g in reopened.gaps}
    assert reopened.gaps[-1].end == T0 + 8 * h  # up to now, as for an open campaign


other_st = st.builds(
    lambda stage, kind, a, d, running: TimeSpan(stage, kind, T0 + a,
                                                None if running else T0 + a + d),
    st.sampled_from(["p", "q"]), st.sampled_from(["human", "cpu"]),
    st.integers(-3000, 30_000), st.integers(0, 20_000), st.booleans())


@settings(max_examples=200, deadline=None)
@given(spans=st.lists(span_st, max_size=5), others=st.lists(other_st, max_size=5),
       closed=st.one_of(st.none(), st.integers(-200, 30_000)), gpus=st.integers(1, 3),
       now=st.integers(0, 40_000), length=st.integers(1, 30_000))
def test_the_stretches_without_a_gpu_stage_tile_the_time_no_gpu_stage_held(
        spans: list[StageSpan], others: list[TimeSpan], closed: int | None, gpus: int,
        now: int, length: int) -> None:
    """Whatever the stages and the close: the stretches are in order, never overlap,
    each has a known kind (a human's or the CPU's names its stages), and together they
    are exactly the elapsed time no GPU stage held a GPU in, plus, once closed, the rest
    of the window."""
    out = hours_bought(HoursInputs(start=T0, end=T0 + length, now=T0 + now, gpus=gpus,
                                   spans=tuple(spans), others=tuple(others),
                                   closed_at=None if closed is None else T0 + closed))
    stop = T0 + min(now, length)
    held = sorted((max(round(s.start), T0), min(stop if s.end is None else round(s.end), stop))
                  for s in spans if any(0 <= g < gpus for g in s.gpus))
    covered, at = 0, T0
    for a, b in held:
        covered += max(0, b - max(a, at))
        at = max(at, b)
    after = sum(g.seconds for g in out.gaps if g.kind == "after_close")
    assert sum(g.seconds for g in out.gaps) == out.elapsed_s - covered + (
        T0 + length - stop if after else 0)
    for first, second in zip(out.gaps, out.gaps[1:], strict=False):
        assert first.end <= second.start
    for g in out.gaps:
        assert g.seconds > 0 and g.kind in ("before", "between", "after", "none", "human",
                                            "cpu", "after_close")
        assert bool(g.stages) == (g.kind in ("human", "cpu"))
        assert not PRICED_TIME.search(g.words())
    assert out.gaps_s == sum(g.seconds for g in out.gaps if g.idle) <= out.elapsed_s
