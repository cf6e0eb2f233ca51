"""One run's part of the export: its files under ``data/runs/<id>/`` and its manifest entry.

Params, every metrics source, predictions, expected ids, outputs, the stop reason and the
artifact chosen for the result (the newest complete checkpoint of an accepted run, every
complete one with ``--artifacts all``), each added to the :class:`Payload` once; once a
landing began, a run's resume point (:mod:`cockpit.export.resume_points`: what the
landing saved and verified, a verdict-pending run's newest verified checkpoint); and the
run's entry in ``manifest.json`` (``runs``), which says whether an artifact is expected.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cockpit.campaign.model import Campaign, Run
from cockpit.close.acceptance import (
    awaiting_verdict,
    blind_rules_of,
    last_metrics,
    newest_checkpoint,
)
from cockpit.close.conclusion import conclusion_spec
from cockpit.export.metric_export import add_run_metrics
from cockpit.export.payload import Payload, run_status
from cockpit.export.reload_recipe import reload_entry
from cockpit.export.resume_points import add_resume_point, choose_resume_point, landing_record
from cockpit.journal.fold import NOT_STARTED, RUNNING, CampaignState, RunState
from cockpit.runs.attempts import attempt_start
from cockpit.runs.checkpoints.discovery import CheckpointInfo


@dataclass
class RunsExport:
    """What the runs put in the bag, for the manifest, the report and the reload recipe."""

    runs_json: dict[str, Any] = field(default_factory=dict)
    reload_entries: list[dict[str, Any]] = field(default_factory=list)
    metric_values: dict[str, float] = field(default_factory=dict)  # the conclusion's metric


def add_runs(payload: Payload, campaign: Campaign, state: CampaignState, artifacts: str,
             warnings: list[str], events: Iterable[Mapping[str, Any]] = ()) -> RunsExport:
    """Every run of the plan into the payload (warnings appended to ``warnings``);
    ``events``: the history, where a landing's steps are read."""
    out = RunsExport()
    spec_c = conclusion_spec(campaign)
    record = landing_record(events)
    pending = set(awaiting_verdict(campaign, state))
    for run_id, run in campaign.runs.items():
        status, reason = run_status(campaign, state, run_id)
        rs = state.runs.get(run_id)
        files = _add_run_files(payload, campaign, run_id, run, warnings)
        if status == "stopped" and rs is not None and rs.stop is not None:
            files["stop"] = _add_stop(payload, run_id, rs, reason)
        files["artifacts"] = _add_artifacts(payload, campaign, run_id, run, rs, status,
                                            artifacts, out.reload_entries, warnings)
        choice = None if artifacts == "none" or status == "accepted" else choose_resume_point(
            campaign, state, record, run_id,
            pending=run_id in pending or status == "unjudged")
        resume = None if choice is None else add_resume_point(
            payload, run, choice, out.reload_entries, warnings)
        values = last_metrics(campaign, state, run_id, [spec_c.metric]) \
            if spec_c is not None else {}
        if spec_c is not None and spec_c.metric in values:
            out.metric_values[run_id] = values[spec_c.metric]
        out.runs_json[run_id] = {
            "status": status, "reason": reason, "kind": run.kind, "result": run.result_id,
            "state": rs.state if rs else NOT_STARTED,
            "stage": rs.stage if rs and rs.stage else _stage_id_of(campaign, run_id),
            "verdict": rs.verdict if rs else None,
            "verdict_reason": rs.verdict_reason if rs else None,
            "base_model": run.base_model, "base_revision": run.base_revision,
            "model": run.model,
            # Verified means every accepted result is in the bag: an accepted run with
            # checkpoints must have its artifact here (unless --artifacts none).
            "artifact_expected": status == "accepted" and run.checkpoints is not None
            and artifacts != "none",
            "files": files,
            "blind": blind_rules_of(campaign, state, run_id),  # rules that never saw it
            # What the landing brought home of it: a resume point, not an accepted result.
            "resume_point": resume,
        }
    return out


def _add_run_files(payload: Payload, campaign: Campaign, run_id: str, run: Run,
                   warnings: list[str]) -> dict[str, Any]:
    """Params, metrics, predictions, expected ids and outputs: their paths in the bag."""
    base = f"runs/{run_id}"
    files: dict[str, Any] = {"metrics": [], "outputs": [], "artifacts": []}
    if run.params_file is not None:
        entry = payload.add_file(f"{base}/params/{run.params_file.name}",
                                 campaign.resolve(run.params_file))
        files["params"] = entry.path if entry else None
        if entry is None:
            payload.skip(campaign.resolve(run.params_file), "params file missing")
    elif run.params:
        text = json.dumps(run.params, indent=2, sort_keys=True, default=str) + "\n"
        files["params"] = payload.add_bytes(f"{base}/params.json", text.encode()).path
    # Every metrics source, TensorBoard's event files and their scalars included.
    metrics = add_run_metrics(payload, campaign, run_id, base)
    files["metrics"] = metrics.files
    files["metric_sources"] = metrics.sources
    warnings.extend(metrics.warnings)
    if run.predictions is not None:
        found = payload.add_path(f"{base}/predictions/{run.predictions.name}",
                                 campaign.resolve(run.predictions))
        files["predictions"] = found[0].path if len(found) == 1 else [f.path for f in found]
    if run.expected_ids is not None:
        found = payload.add_path(f"{base}/expected_ids/{run.expected_ids.name}",
                                 campaign.resolve(run.expected_ids))
        files["expected_ids"] = found[0].path if found else None
    for out in run.outputs:
        name = out.name or "outputs"
        files["outputs"] += [f.path for f in payload.add_path(f"{base}/outputs/{name}",
                                                              campaign.resolve(out))]
    return files


def _add_stop(payload: Payload, run_id: str, rs: RunState, reason: str) -> str:
    """A stopped run's stop.json and STOP_REASON.txt; the path of stop.json."""
    stop = rs.stop
    assert stop is not None
    base = f"runs/{run_id}"
    stop_data = {"run": run_id, "rule": stop.rule, "reason": stop.reason,
                 "step": stop.step, "value": stop.value,
                 "at": stop.at.isoformat() if stop.at else None}
    payload.add_bytes(f"{base}/stop.json",
                      (json.dumps(stop_data, indent=2, default=str) + "\n").encode())
    payload.add_bytes(f"{base}/STOP_REASON.txt", f"{reason}\n".encode())
    return f"data/{base}/stop.json"


def _add_artifacts(payload: Payload, campaign: Campaign, run_id: str, run: Run,
                   rs: RunState | None, status: str, artifacts: str,
                   reload_entries: list[dict[str, Any]], warnings: list[str]) -> list[str]:
    """The artifact chosen for the result (newest complete), or every one with "all";
    their paths in the bag (a reload entry each, appended to ``reload_entries``)."""
    base = f"runs/{run_id}"
    paths: list[str] = []
    chosen: list[CheckpointInfo] = []
    if artifacts != "none" and run.checkpoints is not None and rs is not None \
            and rs.state != NOT_STARTED:
        ended = rs.state != RUNNING
        since = attempt_start(rs)  # an earlier attempt's checkpoints are not this result's
        if artifacts == "all":
            chosen = newest_checkpoint(campaign, run_id, ended=ended, all_complete=True,
                                       since=since)
        elif status == "accepted":
            chosen = newest_checkpoint(campaign, run_id, ended=ended, since=since)
    for i, art in enumerate(chosen):
        added = payload.add_path(f"{base}/artifacts/{art.path.name}", art.path, artifact=True)
        if not added:
            if status == "accepted" and i == 0:
                warnings.append(f"run {run_id} is accepted but its checkpoint {art.path} "
                                "was not exported (see not exported)")
            continue
        rel = added[0].path if art.path.is_file() else \
            f"data/{base}/artifacts/{art.path.name}"
        paths.append(rel)
        reload_entries.append(reload_entry(run, art, rel, added,
                                           status == "accepted" and i == 0, warnings))
    if status == "accepted" and run.checkpoints is not None and artifacts != "none" \
            and not chosen:
        warnings.append(f"run {run_id} is accepted but has no complete checkpoint to export")
    return paths


def _stage_id_of(campaign: Campaign, run_id: str) -> str | None:
    stage = campaign.stage_of_run(run_id)
    return stage.id if stage is not None else None
