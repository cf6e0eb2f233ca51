"""The one read path: this machine's journal and its peers' copies, merged, filtered by
ownership and folded — what ``status``, ``budget``, ``export`` (REPORT.md and the bag's
journal), ``next`` and the faces' engine all read.

``history_of`` is the pure part: merge the own events with the peers' (ordered by time,
then machine), then ``fold_history`` keeps only what each writer owns and returns the
state and the events folded. ``read_history`` is its I/O edge for the one-shot
commands: the own journal folded by :class:`~cockpit.journal.live_fold.FoldedHistory`
(from the state cache when it fits, which it never writes), and the peers' events,
handed in by the caller (the CLI reads the copies under ``.cockpit/peers/<N>/`` through
the fleet, after one pull, as ``status`` does): the journal layer knows no fleet. The
events themselves are read only when a command asks for them (:attr:`History.events`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cockpit.campaign.model import Campaign
from cockpit.common.errors import InputError
from cockpit.journal.fold import CampaignState, fold_history
from cockpit.journal.live_fold import FoldedHistory
from cockpit.journal.merge import Events
from cockpit.journal.writer import Event


@dataclass(frozen=True)
class History:
    """What happened in a campaign, across its machines, as this machine reads it."""

    campaign: Campaign  # the plan folded over (the plan as decided for ``next``)
    state: CampaignState
    folded: FoldedHistory = field(repr=False)
    peers: Sequence[Events] = field(default=(), repr=False)

    @property
    def events(self) -> list[Event]:
        """The events folded (a peer's tagged ``machine``), read from the journal now."""
        return self.folded.events(self.peers)

    @property
    def warnings(self) -> tuple[str, ...]:
        """The events not folded, one line each (the first few), for a command's stderr."""
        return tuple(w for w in self.state.journal_warnings
                     if "not folded" in w)


def history_of(campaign: Campaign, own: list[Event],
               peers: Sequence[Events], machine: int | None,
               now: datetime) -> tuple[CampaignState, list[Event]]:
    """Merge, filter by ownership, fold (pure)."""
    from cockpit.journal.merge import merge_events

    merged = merge_events(own, peers, machine or 0) if peers else own
    return fold_history(campaign, merged, now, machine)


def read_history(campaign: Campaign, machine: int | None,
                 peers: Sequence[Events] = (), *, as_decided: bool = False) -> History:
    """The merged, filtered history of ``campaign`` as machine ``machine`` reads it.

    ``peers``: each other machine's events, tagged ``machine`` (none for a campaign on
    one machine). ``as_decided`` folds over the plan as decided (D24; its record is this
    machine's own)."""
    from cockpit.journal.log import Journal, JournalError
    from cockpit.journal.paths import CampaignFiles
    from cockpit.journal.plan_record import decided_campaign

    files = CampaignFiles.of(campaign)
    try:
        journal = Journal(files.journal, bounded=True)
        if as_decided:
            campaign = decided_campaign(campaign, journal.scan())
        folded = FoldedHistory(campaign, journal, machine, peers=bool(peers),
                               cache_path=files.state_cache)
        state = folded.catch_up(peers)
    except JournalError as exc:
        raise InputError(str(exc)) from None
    return History(campaign, state, folded, peers)
