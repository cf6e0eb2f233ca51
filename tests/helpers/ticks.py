"""Waiting for a headless cockpit's ticks (issue 40): each tick of a conducting
``cockpit headless`` writes one line to its status log, so N more lines prove N more
ticks ran. A "nothing more happens" check waits for them, never for a fixed time: on a
loaded machine the ticks come later, and the check waits as long as they take."""

from __future__ import annotations

from pathlib import Path

from cockpit.journal.paths import CampaignFiles
from tests.helpers.process import wait_for


def ticks_logged(campaign_file: Path) -> int:
    """The status log's lines so far (0 before the first tick wrote it)."""
    log = CampaignFiles.beside(campaign_file).status_log
    try:
        with open(log, "rb") as handle:
            return sum(1 for line in handle if line.endswith(b"\n"))
    except FileNotFoundError:
        return 0


def wait_for_ticks(campaign_file: Path, more: int, since: int | None = None,
                   timeout: float = 120.0) -> int:
    """Wait until the cockpit on ``campaign_file`` has logged ``more`` ticks after
    ``since`` lines (by default: the lines now); returns the count then."""
    start = ticks_logged(campaign_file) if since is None else since
    return int(wait_for(lambda: (n := ticks_logged(campaign_file)) >= start + more and n,
                        timeout=timeout, what=f"{more} more ticks in {campaign_file.name}'s "
                                              "status log"))
