"""Every file and folder the cockpit writes under ``.cockpit/`` beside the campaign file.

One place names them all, so a reader finds the layout here and a writer never
spells a path of its own::

    .cockpit/
      journal.jsonl               the journal (cockpit.journal.log)
      journal.jsonl.lock          its lock (a sibling: the journal may be replaced)
      status.jsonl                the status log, a face's line per tick (rotated beside it)
      status-log.path             where headless writes it (`headless --status-log`)
      logs/<stage>.<stamp>.out    a launch's stdout, .err, .exit (cockpit.runs.supervisor)
      runs/<run>/report.jsonl     a run's cockpit.report lines (unless it names its own)
      resume-check/               scratch folders of `verify --resume`
      export/<campaign-id>/       the verified export (cockpit.export.bag; or --out)
      export-hash-cache.json      the export's hash cache
      recorder.sqlite             the flight recorder: every tick's GPU and host telemetry,
                                  SQLite in WAL mode (cockpit.telemetry.flight; -wal and
                                  -shm beside it; unreadable ones moved aside as
                                  recorder.sqlite.unreadable-<stamp>)
      cache/state.json            the folded history's cache (cockpit.journal.cache)
      cache/streams/<run>.<h>.json  where each run's metric stream stood (derived, checked
                                  before use: cockpit.runs.metrics.stream_cache)
      peers/<N>/                  a peer's copies: journal.jsonl, status.json, state.json,
                                  pull.lock (cockpit.fleet.pull)

The folder's own name and the status log's are :mod:`cockpit.common.layout`'s (what
`status --line` reads without loading anything).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cockpit.campaign.model import Campaign
from cockpit.common.layout import JOURNAL, STATE_DIR, STATUS_LOG, STATUS_LOG_POINTER


@dataclass(frozen=True)
class PeerFiles:
    """A peer's copies under ``.cockpit/peers/<N>/`` (written only by the pull)."""

    folder: Path

    @property
    def journal(self) -> Path:
        return self.folder / JOURNAL

    @property
    def status(self) -> Path:
        return self.folder / "status.json"

    @property
    def state(self) -> Path:
        return self.folder / "state.json"

    @property
    def lock(self) -> Path:
        return self.folder / "pull.lock"


@dataclass(frozen=True)
class CampaignFiles:
    """The paths under one campaign's ``.cockpit/`` folder (``root``)."""

    root: Path

    @classmethod
    def of(cls, campaign: Campaign) -> CampaignFiles:
        return cls(campaign.state_dir)

    @classmethod
    def relative(cls) -> CampaignFiles:
        """The paths relative to the campaign's folder (a peer's, in a remote script)."""
        return cls(Path(STATE_DIR))

    @classmethod
    def beside(cls, campaign_file: str | Path) -> CampaignFiles:
        """For a command that has the campaign file's path but has not loaded it."""
        return cls(Path(campaign_file).resolve().parent / STATE_DIR)

    @property
    def journal(self) -> Path:
        return self.root / JOURNAL

    @property
    def journal_lock(self) -> Path:
        return journal_lock_of(self.journal)

    @property
    def status_log(self) -> Path:
        return self.root / STATUS_LOG

    @property
    def status_log_pointer(self) -> Path:
        return self.root / STATUS_LOG_POINTER

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def launch_base(self, stage_id: str, now: datetime) -> Path:
        """A launch's ``.out``/``.err``/``.exit`` without the suffix."""
        return self.logs / f"{stage_id}.{now.strftime('%Y%m%dT%H%M%S%fZ')}"

    def run_report(self, run_id: str) -> Path:
        return self.root / "runs" / run_id / "report.jsonl"

    def save_request(self, run_id: str) -> Path:
        """The file the cockpit writes to ask a run to save now (cockpit.report)."""
        return self.root / "runs" / run_id / "save-request"

    @property
    def resume_checks(self) -> Path:
        return self.root / "resume-check"

    def export_root(self, campaign_id: str) -> Path:
        return self.root / "export" / campaign_id

    @property
    def state_cache(self) -> Path:
        """The folded history's cache (:mod:`cockpit.journal.cache`): derived, rebuilt
        whenever it does not fit."""
        return self.root / "cache" / "state.json"

    @property
    def export_hash_cache(self) -> Path:
        return self.root / "export-hash-cache.json"

    @property
    def recorder(self) -> Path:
        """The flight recorder's store (:mod:`cockpit.telemetry.flight`)."""
        return self.root / "recorder.sqlite"

    @property
    def stream_cache(self) -> Path:
        return self.root / "cache" / "streams"

    def peer(self, machine: int) -> PeerFiles:
        return PeerFiles(self.root / "peers" / str(machine))


def journal_lock_of(journal: Path) -> Path:
    """The lock of a journal at any path (a peer's copy, a test's): its sibling."""
    return journal.with_name(journal.name + ".lock")
