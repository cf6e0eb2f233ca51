"""Forecast: the projected end of the campaign from what was realized (D13, D24).

Pure: the plan is never touched. Done stages count as realized, running stages
from their reported progress (step / max_steps) or elapsed vs planned, the rest as
planned — GPU stages scaled by the pilot's measured/planned ratio once the pilot is
done, unless the pilot measured nothing (D13: it failed, was stopped, or ran under
``MIN_PILOT_PROGRESS`` of its steps). Compared with the window end; when it no longer
fits, the D11 options again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from cockpit.campaign.model import Campaign
from cockpit.common.printable import printable
from cockpit.journal.fold import DONE, DROPPED, FAILED, PENDING, RUNNING, SKIPPED, CampaignState
from cockpit.planning.advice import role_of
from cockpit.planning.schedule import Option, Slot, overrun_options, schedule

# Slack under this share of the window is "tight" (amber), not "fits" (green).
TIGHT_SHARE = 0.05


@dataclass(frozen=True)
class Forecast:
    end: datetime
    window_end: datetime
    slack_s: float  # window end minus forecast end; negative: exceeds
    pilot_ratio: float | None
    slots: tuple[Slot, ...]
    options: tuple[Option, ...]
    stage_end: Mapping[str, datetime]

    window_hours: float = 72.0
    pilot_note: str | None = None  # why the pilot gave no ratio (D13)

    @property
    def fits(self) -> bool:
        return self.slack_s >= 0

    @property
    def verdict(self) -> str:
        """fits (green) / tight (amber: under 5 % of the window left) / exceeds (red)."""
        if self.slack_s < 0:
            return "exceeds"
        return "tight" if self.slack_s < TIGHT_SHARE * self.window_hours * 3600 else "fits"


# D13: a pilot that reported its progress (step / max_steps) and stopped short of this
# share of its planned steps measured nothing (a crash after its start-up, an early stop).
MIN_PILOT_PROGRESS = 0.10


@dataclass(frozen=True)
class PilotMeasure:
    """The pilot's measured/planned duration (D13), or why there is none."""

    ratio: float | None
    note: str | None = None  # "pilot measured nothing: ..." when a pilot ended without one


def pilot_measure(campaign: Campaign, state: CampaignState,
                  progress: Mapping[str, float] | None = None) -> PilotMeasure:
    """The first pilot (D21: by position) that ended and measured something.

    A pilot measured nothing when its stage failed or was stopped, its run failed or was
    stopped by a rule, or it reported progress under ``MIN_PILOT_PROGRESS`` of its
    planned steps; then it gives no ratio and the plan's durations stand. A pilot that
    ended done without reporting progress measured its own duration.
    """
    progress = progress or {}
    note: str | None = None
    for stage in campaign.stages:
        st = state.stages[stage.id]
        if role_of(stage) != "pilot" or not (st.started_at and st.ended_at) \
                or stage.seconds <= 0:
            continue
        run = state.runs.get(stage.run or "")
        done = progress.get(stage.id)
        why = None
        if st.state != DONE:
            # The reason may be a run's own stderr line: shown, never sent (escapes).
            why = f"{stage.id} {st.state}" + (f" ({printable(st.reason)})" if st.reason else "")
        elif run is not None and run.state == FAILED:
            why = f"its run {run.id} failed (exit code {run.exit_code})"
        elif run is not None and run.stop is not None:
            why = f"its run {run.id} was stopped by {run.stop.rule}"
        elif done is not None and done < MIN_PILOT_PROGRESS:
            why = (f"{stage.id} reached {done:.0%} of its steps (under "
                   f"{MIN_PILOT_PROGRESS:.0%})")
        if why is None:
            return PilotMeasure(max(st.elapsed_s(st.ended_at), 1.0) / stage.seconds)
        note = note or f"pilot measured nothing: {why}; the plan's durations stand (D13)"
    return PilotMeasure(None, note)


def pilot_ratio(campaign: Campaign, state: CampaignState,
                progress: Mapping[str, float] | None = None) -> float | None:
    """Measured / planned duration of the pilot, if one ended having measured something."""
    return pilot_measure(campaign, state, progress).ratio


def forecast(campaign: Campaign, state: CampaignState, now: datetime,
             progress: Mapping[str, float] | None = None) -> Forecast:
    """``progress``: fraction done (0..1] per running stage, from its run's reports."""
    start = campaign.package.start
    window_h = campaign.package.offer.window_hours
    now_h = max((now - start).total_seconds() / 3600.0, 0.0)
    progress = progress or {}
    measure = pilot_measure(campaign, state, progress)
    ratio = measure.ratio

    fixed: dict[str, tuple[float, float]] = {}
    durations: dict[str, float] = {}
    dropped = {sid for sid, st in state.stages.items()
               if st.state == DROPPED or (st.state == SKIPPED and st.started_at is None)}
    for stage in campaign.stages:
        st = state.stages[stage.id]
        planned_h = stage.hours * (ratio if ratio and stage.uses_gpu else 1.0)
        if st.state == PENDING or st.started_at is None or stage.id in dropped:
            durations[stage.id] = planned_h
            continue
        begun = (st.started_at - start).total_seconds() / 3600.0
        if st.state == RUNNING:
            elapsed = st.elapsed_s(now) / 3600.0
            fraction = progress.get(stage.id)
            expected = elapsed / fraction if fraction and fraction > 0 else planned_h
            fixed[stage.id] = (begun, begun + max(expected, elapsed))
        else:
            ended = st.ended_at or now
            fixed[stage.id] = (begun, (ended - start).total_seconds() / 3600.0)

    def end_hours(drops: set[str]) -> float:
        slots = schedule(campaign.stages, campaign.package.offer.gpus, durations=durations,
                         dropped=dropped | drops, fixed=fixed, not_before=now_h)
        live = [s.end for s in slots if not s.dropped]
        return max(live) if live else now_h

    slots = schedule(campaign.stages, campaign.package.offer.gpus, durations=durations,
                     dropped=dropped, fixed=fixed, not_before=now_h)
    live_ends = [s.end for s in slots if not s.dropped]
    end_h = max(live_ends) if live_ends else now_h
    slack_h = window_h - end_h
    options: tuple[Option, ...] = ()
    if slack_h < 0:
        pending = [s.id for s in campaign.stages
                   if state.stages[s.id].state == PENDING and s.id not in dropped]
        options = overrun_options(campaign, end_h, end_hours, pending,
                                  elapsed_hours=now_h, dropped=dropped)
    return Forecast(
        end=start + timedelta(hours=end_h),
        window_end=campaign.package.end,
        slack_s=slack_h * 3600.0,
        pilot_ratio=ratio,
        slots=slots,
        options=options,
        stage_end={s.stage.id: start + timedelta(hours=s.end) for s in slots},
        window_hours=window_h,
        pilot_note=measure.note,
    )
