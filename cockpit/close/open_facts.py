"""What the open uncertainties need of the run files and the question (D24), gathered once
for ``cockpit next`` and REPORT.md alike; the list itself is the pure
:func:`cockpit.planning.calibrate.uncertainties`.

This module owns the reads: each run's checkpoint folder (its save costs, its complete
checkpoints), the last meaningful line of a failed run's stderr (the file its
``stage_started`` event names, read only inside the campaign's log folder, with a byte
bound, made printable and capped: the run wrote it) and the question's state (the
conclusion, :mod:`cockpit.close.conclusion`), in words.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.close.conclusion import Conclusion, conclude_now
from cockpit.common.event_kinds import STAGE_STARTED
from cockpit.journal.fold import FAILED, CampaignState
from cockpit.journal.paths import CampaignFiles
from cockpit.planning.calibrate import OpenFacts
from cockpit.runs.checkpoints.discovery import CheckpointScan
from cockpit.runs.checkpoints.verifier import reported_scanner
from cockpit.runs.exit_reason import last_stderr_line


def checkpoint_scans(campaign: Campaign, now: datetime | None = None
                     ) -> dict[str, CheckpointScan]:
    """Each run's checkpoint folder as it is now (the runs that name one), with every
    checkpoint the run reported written (its save costs)."""
    at = time.time() if now is None else now.timestamp()
    scans: dict[str, CheckpointScan] = {}
    for run in campaign.runs.values():
        scanner = reported_scanner(campaign, run)
        if scanner is not None:
            scans[run.id] = scanner.scan(at)
    return scans


def question_words(conclusion: Conclusion) -> str | None:
    """The open question and what it waits for, in words; None when it is closed. The
    runs it waits for are named with why (not run, still running, a crash, a stop, a
    rejection for another reason); a run dropped by a decision is not waited for."""
    if conclusion.closed:
        return None
    waits = [f"{c.run}: {c.why}" for c in conclusion.comparisons
             if not c.counted and not c.why.startswith("dropped")]
    waits = waits or list(conclusion.reasons)
    if not waits:
        return conclusion.text
    return "it waits for " + "; ".join(waits)


def failure_lines(campaign: Campaign, state: CampaignState,
                  events: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Per failed run, the last meaningful line of its current attempt's stderr: the file
    its ``stage_started`` event names (the run attempt's own seq), read only when it lies
    in the campaign's log folder (a journal line names the path; a peer's or a forged one
    is not read here)."""
    failed = {run.attempt: run_id for run_id, run in state.runs.items()
              if run.state == FAILED and run.attempt is not None}
    if not failed:
        return {}
    logs = CampaignFiles.of(campaign).logs
    try:
        folder = logs.resolve()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for ev in events:
        seq = ev.get("seq")
        run_id = failed.get(seq) if ev.get("kind") == STAGE_STARTED \
            and isinstance(seq, int) else None
        path = ev.get("stderr") if run_id is not None and ev.get("run") == run_id else None
        if run_id is None or not isinstance(path, str) or not path:
            continue
        try:
            real = Path(path).resolve()
        except (OSError, ValueError):
            continue
        if real.parent != folder or not real.is_file():
            continue
        line = last_stderr_line(str(real))
        if line:
            out[run_id] = line
    return out


def open_facts(campaign: Campaign, state: CampaignState,
               events: Iterable[Mapping[str, Any]], now: datetime | None = None, *,
               conclusion: Conclusion | None = None,
               scans: Mapping[str, CheckpointScan] | None = None) -> OpenFacts:
    """What :func:`~cockpit.planning.calibrate.uncertainties` needs beyond the journal:
    ``conclusion`` (default: judged now from the runs' files) and ``scans`` (default: each
    checkpoint folder scanned now) when the caller has them already."""
    verdict = conclusion if conclusion is not None else conclude_now(campaign, state)
    found = checkpoint_scans(campaign, now) if scans is None else scans
    return OpenFacts(
        question=question_words(verdict),
        save_measured=frozenset(r for r, scan in found.items() if scan.save_costs),
        checkpoints={r: scan.complete_count for r, scan in found.items()},
        stderr=failure_lines(campaign, state, events))
