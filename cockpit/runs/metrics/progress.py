"""How far each stage is, from its run's reports: latest step / ``max_steps``.

The engine asks it of the streams it polls every tick (:func:`progress_of`); the close
(``cockpit next``, REPORT.md), where no engine polls, reads each run's files once
(:func:`reported_progress`).
"""

from __future__ import annotations

from collections.abc import Mapping

from cockpit.campaign.model import Campaign
from cockpit.journal.fold import CampaignState
from cockpit.runs.metrics.stream import MetricStream


def progress_of(campaign: Campaign, streams: Mapping[str, MetricStream]
                ) -> tuple[dict[str, float], dict[str, int]]:
    """Fraction done per running stage and max_steps per run, from the runs' reports."""
    progress: dict[str, float] = {}
    max_steps: dict[str, int] = {}
    for run_id, stream in streams.items():
        ms = stream.latest.get("max_steps")
        stage = campaign.stage_of_run(run_id)
        if ms and stream.latest_step is not None and stage is not None:
            max_steps[run_id] = int(ms)
            progress[stage.id] = min(max(stream.latest_step / ms, 0.0), 1.0)
    return progress, max_steps


def reported_progress(campaign: Campaign, state: CampaignState) -> dict[str, float]:
    """Fraction done per started stage, read once from its run's files (its latest
    step / max_steps): for the close (``next``, REPORT.md), where no engine polls."""
    return reported_steps(campaign, state)[0]


def reported_steps(campaign: Campaign, state: CampaignState
                   ) -> tuple[dict[str, float], dict[str, int]]:
    """:func:`progress_of` for the close: fraction done per started stage and max_steps
    per run, each run's files read once."""
    from cockpit.journal.paths import CampaignFiles
    from cockpit.runs.attempts import attempt_start
    from cockpit.runs.checkpoints.verifier import run_stream
    from cockpit.runs.metrics.stream_cache import cache_file, open_stream

    streams: dict[str, MetricStream] = {}
    for run_id, run in state.runs.items():
        if run.started_at is None or run_id not in campaign.runs:
            continue
        stream = run_stream(campaign, run_id, attempt_start(run))  # this attempt's files
        # Read-only: from a cache near the end, else a large file from its tail.
        open_stream(stream, cache_file(CampaignFiles.of(campaign).stream_cache, run_id),
                    one_shot=True, since=run.started_at.timestamp() - 1.0)
        stream.poll()
        streams[run_id] = stream
    return progress_of(campaign, streams)
