"""The seam: every domain decision the TUI still makes itself, in one place.

The Textual face is meant to decide nothing: what a person may do now comes from the
Snapshot, computed by the predicates the engine's actions enforce (issue 23). Until
the Snapshot carries all of it (``RunView.accept``/``reject``, ``StageView.start``/
``stop``/``mark``, ``Snapshot.export_action``, ``Snapshot.schedule``, a typed budget,
``RunView.log_path``, ``Engine.check_acceptance``), the decisions the screen used to
code inline live here, unchanged, and this is the only TUI module that imports
``cockpit.runs`` / ``close`` / ``journal`` / ``planning``. Replacing a function below by
its Snapshot field and deleting it is the whole of the follow-up; when the module is
empty it goes, with its lines in tests/unit/test_layering.py's ``KNOWN_FACE``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.engine import Engine
from cockpit.engine.snapshot import RunView, Snapshot
from cockpit.journal.log import JournalError
from cockpit.planning.schedule import Slot, plan_campaign

__all__ = ["ACTION_ERRORS", "ExportAction", "JournalError", "Slot", "acceptable",
           "acceptance_checks", "budget_reason", "droppable", "export_action",
           "export_and_mark", "markable", "newest_logs", "rejectable", "run_needs_person",
           "runs_in_order", "schedule", "startable", "stoppable", "verifiable"]

# Besides ActionRefused and InputError (the engine's face), a journal write can fail.
ACTION_ERRORS: tuple[type[Exception], ...] = (JournalError,)


# ------------------------------------------------------------------ runs: a / r / x / v
def run_needs_person(r: RunView) -> bool:
    """Ended well, no verdict yet: a person accepts or rejects it (a / r).

    Kept as it was: it does not look at ``produces_result``, so a data check or pilot
    run is still prompted "a/r" (issue 23 names it; ``RunView.accept`` mends it)."""
    return r.state == "succeeded" and r.verdict is None


def runs_in_order(snap: Snapshot) -> list[RunView]:
    """Running first, then what needs a person, then the plan order."""
    return sorted(snap.runs, key=lambda r: 0 if r.state == "running"
                  else (1 if run_needs_person(r) else 2))


def acceptable(snap: Snapshot) -> list[str]:
    """Runs the engine would accept: ended well, never stopped (D15)."""
    return [r.id for r in runs_in_order(snap)
            if r.state == "succeeded" and r.stop_rule is None and r.produces_result
            and r.verdict != "accepted"]


def rejectable(snap: Snapshot) -> list[str]:
    return [r.id for r in runs_in_order(snap)
            if r.state in ("succeeded", "failed") and r.stop_rule is None
            and r.produces_result and r.verdict != "rejected"]


def stoppable(snap: Snapshot) -> list[str]:
    return [r.id for r in snap.active_runs if r.stop_rule is None]


def verifiable(snap: Snapshot) -> list[str]:
    return [r.id for r in snap.runs if r.state != "not_started"]


def acceptance_checks(engine: Engine, run_id: str, lock: threading.Lock) -> str:
    """The run's acceptance checks as the a / r dialogs show them (the state read under
    the engine lock, evaluated outside it: a reload takes time)."""
    from cockpit.close.acceptance import evaluate_acceptance

    try:
        with lock:
            state = engine.state()
        ok, reasons = evaluate_acceptance(engine.campaign, state, run_id)
        text = "\n".join(f"  {'✓' if ok else '·'} {why}" for why in reasons)
        return f"acceptance checks: {'✓ all pass' if ok else '✗ not all pass'}\n" + text
    except Exception as exc:  # noqa: BLE001 - shown, never raised
        return f"acceptance checks could not run: {exc}"


# ------------------------------------------------------------------ stages: s / m / d
def startable(snap: Snapshot) -> list[str]:
    return [s.id for s in snap.stages if s.state == "ready"]


def markable(snap: Snapshot) -> list[tuple[str, tuple[str, ...]]]:
    """Manual stages and what they may be marked: a stage that needs a person
    (started or done) and a running stage without a command (done)."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for s in snap.stages:
        if s.state == "needs-person":
            out.append((s.id, ("started", "done")))
        elif s.state == "running" and not s.has_command:
            out.append((s.id, ("done",)))
    return out


def droppable(snap: Snapshot) -> list[str]:
    """The stages a "limit" decision may drop: optional and not begun."""
    return [s.id for s in snap.stages if s.category != "essential"
            and s.state in ("waiting", "ready", "blocked", "needs-person")]


# ------------------------------------------------------------------ e: the export stage
@dataclass(frozen=True)
class ExportAction:
    """What ``e`` does now. ``kind``: "export" (no export stage, or it is over: export
    the bundle), "start" (start the export stage's command; ``force`` when it still
    waits for earlier stages), "export-and-mark" (export, then mark the manual export
    stage done) or "running" (the export stage runs: nothing to do)."""

    kind: str
    stage: str | None = None
    force: bool = False


def export_action(campaign: Campaign, snap: Snapshot | None) -> ExportAction:
    """One export path: with an export stage in the plan, ``e`` completes that stage
    (starts its command, or exports and marks a manual one done); else it exports."""
    stage = next((s for s in campaign.stages if (s.role or s.id) == "export"), None)
    view = snap.stage(stage.id) if snap is not None and stage is not None else None
    if stage is None or view is None or view.state in ("done", "dropped", "skipped"):
        return ExportAction("export")
    if view.state == "running":
        return ExportAction("running", stage.id)
    if stage.command is not None:
        return ExportAction("start", stage.id, force=view.state != "ready")
    return ExportAction("export-and-mark", stage.id)


def export_and_mark(engine: Engine, stage_id: str) -> list[dict[str, Any]]:
    """Export, then mark the manual export stage done with the bundle's path."""
    done = engine.export()
    marked = engine.mark(stage_id, "done", note=f"exported with e: {done.get('path') or 'bag'}")
    return [done, *marked]


# ------------------------------------------------------------------ plan, logs, budget
def schedule(campaign: Campaign) -> Sequence[Slot]:
    """The plan's slots (the timeline's "plan" lanes)."""
    return plan_campaign(campaign).slots


def newest_logs(campaign: Campaign, stage: str) -> tuple[Path | None, Path | None]:
    """The stage's newest ``.out`` and ``.err`` (the supervisor names them by start time)."""
    folder = campaign.state_dir / "logs"
    outs = sorted(folder.glob(f"{stage}.*.out"))
    if not outs:
        return None, None
    out = outs[-1]
    err = out.with_suffix(".err")
    return out, err if err.exists() else None


def budget_reason(text: str) -> str:
    """Why the rental share is undefined, without the sentence that points at lines the
    panel does not show (``close/budget.py`` writes it for the CLI's report)."""
    return text.replace("; see the cost incurred and the reasons below", "")
