"""What the GPU-hours bought, for the Snapshot: computed at most once a minute.

The computation reads the flight recording (SQLite: only the minutes new since the last
computation, :class:`~cockpit.close.hours_read.RecordedMinutes`) and is pure after that
(:mod:`cockpit.close.hours_read`, :mod:`cockpit.close.hours`); a tick must stay cheap,
so a live engine reuses the last result for :data:`EVERY_S` seconds of its clock (a
one-shot command computes it once). The runs' throughput comes from the engine's live
metric streams (no file is read again for it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from cockpit.campaign.model import Campaign
from cockpit.close.hours import HoursBought
from cockpit.close.hours_read import RecordedMinutes, read_hours
from cockpit.journal.fold import CampaignState
from cockpit.journal.paths import CampaignFiles
from cockpit.runs.metrics.stream import MetricStream

EVERY_S = 60.0  # how long a result stands (seconds of the engine's clock)


class HoursCache:
    """The last :class:`HoursBought` and when it was computed."""

    def __init__(self, campaign: Campaign, machine: int | None,
                 streams: Callable[[], Mapping[str, MetricStream]]) -> None:
        self.campaign = campaign
        self.machine = machine
        self.streams = streams
        self._at: datetime | None = None
        self._value: HoursBought | None = None
        # The recording's minutes, read incrementally (a refresh reads what is new).
        self._recorded = RecordedMinutes(CampaignFiles.of(campaign).recorder,
                                         campaign.package.offer.gpus)
        self.computed = 0  # how many times it was computed (tests read it)

    def get(self, state: CampaignState, now: datetime) -> HoursBought:
        """The result of at most :data:`EVERY_S` ago; a clock that stepped back
        recomputes."""
        if self._value is not None and self._at is not None \
                and 0 <= (now - self._at).total_seconds() < EVERY_S:
            return self._value
        self._value = read_hours(self.campaign, state, now, self.machine, self.streams(),
                                 self._recorded)
        self._at = now
        self.computed += 1
        return self._value
