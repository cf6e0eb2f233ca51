"""One deadline model (D19): the results must be out of the box before the window ends.

    retrieve by = window end − (export time + retrieval time)

- export time: the plan's export stage (``role: export`` or the id ``export``), else
  ``deadline.export_hours`` (default 2 h);
- retrieval time: the larger of the plan's retrieval stage (``role: retrieval`` or the
  id ``retrieval``) and the export's size at ``settings.transfer_rate_mb_s`` (MB = 2**20
  bytes, as everywhere), where the size is the expected one (the newest checkpoints)
  before an export is written and its real size (the tar, or the bag without one) after,
  or the expected one if checkpoints written since make that larger. Without a
  retrieval stage the size at the rate alone; with neither known,
  ``deadline.retrieve_hours`` (default 1 h).

``cockpit status``, the TUI, headless and the deadline guard all read this one number:
the work before the closing stages must end by then.

The *point of no return* (``on_deadline: land``, issue 26) is earlier still: the last
moment a landing can begin and the results still be home by the window end::

    point of no return = window end − (save wait + reload checks + export
                                       + retrieval + deadline.landing_margin)

each running run that will be asked to save (an essential one with a checkpoint
written: the landing stops the others at once, so no time is reserved for them) being
given twice its measured save cost (at least :data:`SAVE_WAIT_MIN_S`) to save on
request, its reload check as measured (else :data:`UNMEASURED_S`, said as assumed), and
the export as measured when one ran (scaled by the size it will have), else as above.
Pure functions; the caller says which runs save, how big the export is expected to be
and how big the one written is (``export_size`` of its ``export_done`` event).
:func:`planned_landing_times` is the reserve ``cockpit plan`` compares with the window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cockpit.campaign.model import OPTIONAL_CATEGORIES, Campaign, Stage
from cockpit.common.event_kinds import EXPORT_DONE
from cockpit.common.units import format_bytes, format_duration

CLOSING_ROLES = ("export", "retrieval")


@dataclass(frozen=True)
class ClosingTimes:
    export_s: float
    export_from: str
    retrieve_s: float
    retrieve_from: str

    @property
    def total_s(self) -> float:
        return self.export_s + self.retrieve_s

    def words(self) -> str:
        return (f"export {format_duration(self.export_s)} ({self.export_from}) + retrieval "
                f"{format_duration(self.retrieve_s)} ({self.retrieve_from})")


def is_closing(stage: Stage) -> bool:
    return stage.effective_role in CLOSING_ROLES


def closing_times(campaign: Campaign, expected_bytes: int | None = None,
                  export_bytes: int | None = None) -> ClosingTimes:
    """Export and retrieval times (see the module). ``expected_bytes``: the export's
    expected size; ``export_bytes``: the real size of the export written (None: none)."""
    export = next((s for s in campaign.stages if s.effective_role == "export"), None)
    if export is not None:
        export_s, export_from = export.seconds, f"stage {export.id}"
    else:
        export_s, export_from = campaign.deadline.export_s, "deadline.export_hours"
    retrieve_s, retrieve_from = retrieval_time(campaign, expected_bytes, export_bytes)
    return ClosingTimes(export_s, export_from, retrieve_s, retrieve_from)


def retrieval_time(campaign: Campaign, expected_bytes: int | None,
                   export_bytes: int | None) -> tuple[float, str]:
    """(seconds, where from): the time reserved to bring the export home (D19)."""
    stage = next((s for s in campaign.stages if s.effective_role == "retrieval"), None)
    rate = campaign.settings.transfer_rate_bytes_s
    size = max(export_bytes or 0, expected_bytes or 0)
    by_size: tuple[float, str] | None = None
    if size and rate:
        what = "export" if export_bytes and export_bytes >= (expected_bytes or 0) \
            else "expected export"
        by_size = (size / rate, f"{format_bytes(size)} {what} at {rate / 2**20:g} MB/s")
    if stage is not None:
        if by_size is not None and by_size[0] > stage.seconds:
            return by_size[0], f"{by_size[1]}, more than stage {stage.id}"
        return stage.seconds, f"stage {stage.id}"
    if by_size is not None:
        return by_size
    return campaign.deadline.retrieve_s, "deadline.retrieve_hours"


def export_size(event: Mapping[str, Any]) -> int | None:
    """The real size of the export an ``export_done`` event wrote: its tar (what is
    fetched), else the bag; None for another event or for an export kept beside the
    current one after failing verification (the current one is still what is fetched)."""
    if event.get("kind") != EXPORT_DONE or event.get("kept_failed"):
        return None
    for key in ("tar_size", "size"):
        value = event.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def expected_export_bytes(campaign: Campaign, newest_sizes: Mapping[str, int | None]
                          ) -> int | None:
    """The export's expected size: the newest checkpoint of every run that produces a
    result (what a default export carries); None when none is known yet."""
    sizes = [size for run_id, size in newest_sizes.items()
             if size and run_id in campaign.runs and campaign.runs[run_id].produces_result]
    return sum(sizes) if sizes else None


UNMEASURED_S = 120.0  # a save or a reload check never measured yet
# A run asked to save gets twice its save cost, never less than this: it reads the
# request at most once a second (cockpit.report), between steps.
SAVE_WAIT_MIN_S = 30.0


def save_wait_s(save_cost_s: float | None) -> float:
    """How long a run asked to save is given (see :data:`SAVE_WAIT_MIN_S`)."""
    cost = UNMEASURED_S if save_cost_s is None else save_cost_s
    return max(2 * cost, SAVE_WAIT_MIN_S)


@dataclass(frozen=True)
class LandingTimes:
    """What must fit between the point of no return and the window end."""

    wait_s: float  # the save requested of each run that saves (twice its cost), in parallel
    wait_from: str
    reload_s: float  # the reload checks of the new checkpoints, one after another
    reload_from: str
    export_s: float
    export_from: str
    retrieve_s: float
    retrieve_from: str
    margin_s: float

    @property
    def total_s(self) -> float:
        return self.wait_s + self.reload_s + self.export_s + self.retrieve_s + self.margin_s

    def words(self) -> str:
        parts = [f"save {format_duration(self.wait_s)} ({self.wait_from})",
                 f"reload {format_duration(self.reload_s)} ({self.reload_from})",
                 f"export {format_duration(self.export_s)} ({self.export_from})",
                 f"retrieval {format_duration(self.retrieve_s)} ({self.retrieve_from})",
                 f"margin {format_duration(self.margin_s)}"]
        return " + ".join(parts)

    def terms(self) -> dict[str, Any]:
        """The reserve's parts, as journaled with the landing's start (and REPORT.md)."""
        return {"save_s": round(self.wait_s, 1), "save_from": self.wait_from,
                "reload_s": round(self.reload_s, 1), "reload_from": self.reload_from,
                "export_s": round(self.export_s, 1), "export_from": self.export_from,
                "retrieval_s": round(self.retrieve_s, 1), "retrieval_from": self.retrieve_from,
                "margin_s": round(self.margin_s, 1), "total_s": round(self.total_s, 1)}


def _wait_words(save_costs: Mapping[str, float | None], waits: Mapping[str, float],
                stopped: Sequence[str]) -> tuple[float, str]:
    """The save wait (the longest: they save in parallel) and where it comes from."""
    if not waits:
        if not stopped:
            return 0.0, "nothing running"
        return 0.0, (f"{', '.join(sorted(stopped))}: no checkpoint to save, stopped without a save "
                     "request")
    run = max(waits, key=lambda r: waits[r])
    cost = save_costs[run]
    if cost is None:
        return waits[run], (f"{run}: save not measured: {format_duration(UNMEASURED_S)} "
                            "assumed, 2 × that")
    return waits[run], (f"{run}: 2 × its save" if 2 * cost >= SAVE_WAIT_MIN_S
                        else f"{run}: at least {format_duration(SAVE_WAIT_MIN_S)}")


def _reload_words(reloads: Sequence[float | None], stopped: Sequence[str]) -> tuple[float, str]:
    """The reload checks, one after another, and where they come from."""
    total = sum(UNMEASURED_S if r is None else r for r in reloads)
    if not reloads:
        return total, "nothing running" if not stopped else "nothing saved to reload"
    blind = sum(1 for r in reloads if r is None)
    if not blind:
        return total, "measured"
    assumed = f"not measured: {format_duration(UNMEASURED_S)} assumed"
    return total, (f"reload {assumed}" if blind == len(reloads)
                   else f"{blind} of {len(reloads)} reloads {assumed} each")


def landing_times(campaign: Campaign, closing: ClosingTimes,
                  save_costs: Mapping[str, float | None],
                  reload_costs: Mapping[str, float | None],
                  export_measured: tuple[float, int | None] | None,
                  expected_bytes: int | None, stopped: Sequence[str] = ()) -> LandingTimes:
    """The landing's times (see the module). ``save_costs`` and ``reload_costs``: per
    run the landing will ask to save, its measured save and reload check (None: never
    measured); ``stopped``: the running runs it will stop without a save (nothing is
    reserved for them: named only); ``export_measured``: (seconds, bytes) of the newest
    export written, if any."""
    waits = {run: save_wait_s(cost) for run, cost in save_costs.items()}
    wait_s, wait_from = _wait_words(save_costs, waits, stopped)
    reload_s, reload_from = _reload_words([reload_costs.get(run) for run in save_costs],
                                          stopped)
    export_s, export_from = closing.export_s, closing.export_from
    if export_measured is not None:
        seconds, size = export_measured
        scale = max(1.0, (expected_bytes or 0) / size) if size else 1.0
        export_s, export_from = seconds * scale, "the last export, measured" + (
            f", × {scale:.1f} for its size now" if scale > 1.0 else "")
    return LandingTimes(wait_s, wait_from, reload_s, reload_from, export_s, export_from,
                        closing.retrieve_s, closing.retrieve_from,
                        campaign.deadline.landing_margin_s)


def planned_landing_times(campaign: Campaign) -> LandingTimes:
    """The landing reserve as planned, before anything is measured: one essential run
    that declares checkpoints saving and reloading at the assumed cost (when the plan
    has one), the export and the retrieval as planned, the margin."""
    saver = next((s.run for s in campaign.stages
                  if s.run is not None and s.category not in OPTIONAL_CATEGORIES
                  and s.run in campaign.runs and campaign.runs[s.run].checkpoints is not None),
                 None)
    costs: dict[str, float | None] = {saver: None} if saver is not None else {}
    return landing_times(campaign, closing_times(campaign), costs, costs, None, None)


def window_shorter_than_reserve(campaign: Campaign) -> str | None:
    """``cockpit plan``'s warning when the whole window is shorter than the landing
    reserve: the point of no return would come before the window opens."""
    times = planned_landing_times(campaign)
    window_s = (campaign.package.end - campaign.package.start).total_seconds()
    if times.total_s < window_s:
        return None
    return (f"the window ({window_s / 3600:.2f} h) is shorter than the landing reserve "
            f"({times.total_s / 3600:.2f} h: {times.words()}): the point of no return "
            "comes before the window opens, so nothing can run and still land (D19)")


def point_of_no_return(campaign: Campaign, times: LandingTimes) -> datetime:
    """The last moment a landing can begin and the results be home by the window end."""
    return campaign.package.end - timedelta(seconds=times.total_s)


def retrieve_by(campaign: Campaign, times: ClosingTimes) -> datetime:
    return campaign.package.end - timedelta(seconds=times.total_s)


def work_end(campaign: Campaign, stage_end: Mapping[str, datetime]) -> datetime | None:
    """When the forecast's work before the closing stages ends (None: no such stage)."""
    ends = [stage_end[s.id] for s in campaign.stages
            if not is_closing(s) and s.id in stage_end]
    return max(ends) if ends else None


def deadline_check(campaign: Campaign, now: datetime, work_ends: datetime | None,
                   export_exists: bool, times: ClosingTimes) -> str | None:
    """A warning when the work, then export and retrieval, no longer fit the window."""
    end = campaign.package.end
    # A running stage past its planned end is forecast to end "now": still work left.
    work_left = work_ends is not None and work_ends >= now
    need = times.retrieve_s if export_exists and not work_left else times.total_s
    start = work_ends if work_left and work_ends is not None else now
    finish = start + timedelta(seconds=need)
    if finish <= end:
        return None
    left = (end - now).total_seconds()
    what = (f"retrieval {format_duration(times.retrieve_s)} ({times.retrieve_from})"
            if need == times.retrieve_s else times.words())
    if left <= 0:
        text = "the rental window has ended: results not yet out of the box may be lost (D19)"
    elif work_left:
        text = (f"work forecast to end at {start:%Y-%m-%d %H:%M %Z} is past the retrieve-by "
                f"time {retrieve_by(campaign, times):%Y-%m-%d %H:%M %Z}: {what} needs "
                f"{format_duration(need)}, {format_duration((finish - end).total_seconds())} "
                "short (D19)")
    else:
        text = (f"{format_duration(left)} left in the window and {what} needs "
                f"{format_duration(need)}: "
                f"{'fetch' if need == times.retrieve_s else 'export'} the results now (D19)")
    if campaign.on_deadline == "stop-optional" and work_left:
        text += "; on_deadline: stop-optional — optional stages are to be stopped"
    return text
