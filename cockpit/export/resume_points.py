"""Resume points in the export (issue 41): checkpoints the landing brings home that are not
accepted results.

A run the landing stopped is never accepted (D15), and the export's artifacts are those
of accepted runs: without this module the checkpoint the landing saved would stay on the
box. Once a landing began (a ``landing`` event ``began`` in the history), the export
carries, for each run that declares ``checkpoints``:

- saved by the landing: the very checkpoint its ``saved`` and ``verified`` landing
  events name (path, size and mtime journaled), never a newer file the run wrote before
  it stopped; one that changed or went since is not exported, and the export does not
  verify (the landing promised it);
- its save missed or its verify failed, or ended and awaiting a verdict: its newest
  checkpoint that reloaded (``checkpoint_verified`` with ``ok``) and has not changed
  since that check (its mtime not after the check's time).

Each is written under ``data/runs/<id>/resume/`` with a reload entry marked
``resume_point`` (never ``chosen_for_result``), and the run's manifest entry says
``resume_point`` with :data:`RESUME_NOTE`; ``verify-export`` checks that an expected one
is in the bag and reloads it in a fresh process, as it does an accepted artifact.
This module owns reading the landing from the history (:func:`landing_record`), the
choice (:func:`choose_resume_point`) and adding the choice to the payload.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cockpit.campaign.model import Campaign, Run
from cockpit.close.acceptance import newest_checkpoint
from cockpit.common.event_kinds import LANDING
from cockpit.export.payload import Payload
from cockpit.export.reload_recipe import reload_entry
from cockpit.journal.fold import CampaignState
from cockpit.runs.attempts import attempt_start
from cockpit.runs.checkpoints.discovery import CheckpointInfo

RESUME_NOTE = "a resume point, not an accepted result"


@dataclass(frozen=True)
class LandingRecord:
    """The landing as journaled: its steps in order, and per run (its newest attempt's)
    ``saved`` event, its ``verified``/``verify_failed`` event, whether its save missed."""

    steps: tuple[Mapping[str, Any], ...]
    saved: Mapping[str, Mapping[str, Any]]
    verified: Mapping[str, Mapping[str, Any]]
    missed: frozenset[str]

    @property
    def began(self) -> bool:
        return any(ev.get("phase") == "began" for ev in self.steps)


def landing_record(events: Iterable[Mapping[str, Any]]) -> LandingRecord:
    """The landing's events of a history (none: a record whose ``began`` is False)."""
    steps: list[Mapping[str, Any]] = []
    saved: dict[str, Mapping[str, Any]] = {}
    verified: dict[str, Mapping[str, Any]] = {}
    missed: set[str] = set()
    for ev in events:
        if ev.get("kind") != LANDING:
            continue
        steps.append(ev)
        run, phase = ev.get("run"), ev.get("phase")
        if not isinstance(run, str):
            continue
        if phase == "saved":
            saved[run] = ev
            verified.pop(run, None)
            missed.discard(run)
        elif phase in ("verified", "verify_failed"):
            verified[run] = ev
        elif phase == "save_missed":
            missed.add(run)
    return LandingRecord(tuple(steps), saved, verified, frozenset(missed))


@dataclass(frozen=True)
class ResumeChoice:
    """What the export carries for one run as its resume point."""

    run: str
    why: str  # how it was chosen, in words
    source: str | None  # the checkpoint's path on the box
    info: CheckpointInfo | None  # None: not to be exported (``problem`` says why)
    problem: str | None = None
    expected: bool = True  # verify-export fails when it is not in the bag


def choose_resume_point(campaign: Campaign, state: CampaignState, record: LandingRecord,
                        run_id: str, *, pending: bool) -> ResumeChoice | None:
    """The run's resume point once a landing began (see the module); None when it has
    none to carry. ``pending``: the run ended and awaits a verdict."""
    run = campaign.runs.get(run_id)
    if not record.began or run is None or run.checkpoints is None:
        return None
    rs = state.runs.get(run_id)
    since = None if rs is None else attempt_start(rs)  # this attempt's checkpoints only
    on_disk = {os.path.abspath(c.path): c for c in
               newest_checkpoint(campaign, run_id, ended=True, all_complete=True,
                                 since=since)}
    saved, checked = record.saved.get(run_id), record.verified.get(run_id)
    if saved is not None and checked is not None and checked.get("phase") == "verified" \
            and checked.get("path") == saved.get("path"):
        return _landed(run_id, saved, on_disk)
    if saved is None and run_id not in record.missed and not pending:
        return None
    why = ("its verify failed" if saved is not None else "its save missed"
           if run_id in record.missed else "it ended and awaits a verdict")
    return _newest_verified(run_id, state, on_disk, why)


def _landed(run_id: str, saved: Mapping[str, Any],
            on_disk: Mapping[str, CheckpointInfo]) -> ResumeChoice:
    """The checkpoint the landing saved and verified, if it is still that very file."""
    path = str(saved.get("path"))
    why = "saved on the landing's request and reloaded in a fresh process"
    info = on_disk.get(os.path.abspath(path))
    if info is None:
        return ResumeChoice(run_id, why, path, None,
                            f"{path} is no longer a complete checkpoint on the box")
    size, mtime = saved.get("size_bytes"), saved.get("mtime")
    if (isinstance(size, int) and size != info.size_bytes) or (
            isinstance(mtime, (int, float)) and mtime != info.mtime):
        return ResumeChoice(run_id, why, path, None,
                            f"{path} changed after the landing verified it: not the "
                            "verified file")
    return ResumeChoice(run_id, why, path, info)


def _newest_verified(run_id: str, state: CampaignState,
                     on_disk: Mapping[str, CheckpointInfo], why: str) -> ResumeChoice | None:
    """The run's newest checkpoint that reloaded and has not changed since that check."""
    rs = state.runs.get(run_id)
    for ev in reversed(rs.verified if rs is not None else []):
        path = ev.get("path")
        info = on_disk.get(os.path.abspath(path)) if isinstance(path, str) and path else None
        when = _epoch(ev.get("t"))
        if ev.get("ok") is True and info is not None and when is not None \
                and info.mtime <= when:
            return ResumeChoice(run_id, f"{why}: its newest checkpoint that reloaded in a "
                                        "fresh process", str(info.path), info)
    return None


def _epoch(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def add_resume_point(payload: Payload, run: Run, choice: ResumeChoice,
                     reload_entries: list[dict[str, Any]], warnings: list[str]
                     ) -> dict[str, Any]:
    """The choice into the payload (a reload entry appended to ``reload_entries``); the
    run's manifest ``resume_point``."""
    out: dict[str, Any] = {"note": RESUME_NOTE, "why": choice.why, "source": choice.source,
                           "expected": choice.expected, "path": None, "step": None,
                           "size": None, "sha256": None, "problem": choice.problem}
    info = choice.info
    if info is None:
        warnings.append(f"run {run.id}: its resume point is not in this export: "
                        f"{choice.problem}")
        return out
    base = f"runs/{run.id}/resume/{info.path.name}"
    added = payload.add_path(base, info.path, artifact=True)
    if not added:
        out["problem"] = f"{info.path} was not exported (see not exported)"
        warnings.append(f"run {run.id}: its resume point {out['problem']}")
        return out
    rel = added[0].path if info.path.is_file() else f"data/{base}"
    entry = reload_entry(run, info, rel, added, False, warnings)
    entry.update(resume_point=True, note=RESUME_NOTE, why=choice.why)
    reload_entries.append(entry)
    out.update(path=rel, step=info.step, size=sum(f.size for f in added),
               sha256=added[0].sha256 if len(added) == 1 else None,
               source=payload.source_label(info.path))
    return out
