"""What the keys offer now, read from the Snapshot: the face decides nothing.

Each answer comes from a field the engine computed with the predicates its actions
enforce (``RunView.accept``/``reject``/``stop``, ``StageView.start``/``mark``,
``Snapshot.export_action``); this module only picks and orders them for the keys and
the runs table.
"""

from __future__ import annotations

from pathlib import Path

from cockpit.engine.snapshot import RunView, Snapshot


def run_needs_person(r: RunView) -> bool:
    """Ended well, no verdict yet, and a verdict is offered: a person accepts or rejects
    it (a / r). A data check or pilot run produces no result: never prompted; a run its
    acceptance checks are judging waits for them first."""
    return r.verdict is None and r.accept.ok and not r.judging


def runs_in_order(snap: Snapshot) -> list[RunView]:
    """Running first, then what needs a person, then the plan order."""
    return sorted(snap.runs, key=lambda r: 0 if r.state == "running"
                  else (1 if run_needs_person(r) else 2))


def acceptable(snap: Snapshot) -> list[str]:
    return [r.id for r in runs_in_order(snap) if r.accept.ok]


def rejectable(snap: Snapshot) -> list[str]:
    return [r.id for r in runs_in_order(snap) if r.reject.ok]


def stoppable(snap: Snapshot) -> list[str]:
    return [r.id for r in snap.active_runs if r.stop.ok]


def verifiable(snap: Snapshot) -> list[str]:
    """Runs that have started: they may have a checkpoint to reload."""
    return [r.id for r in snap.runs if r.state != "not_started"]


def startable(snap: Snapshot) -> list[str]:
    return [s.id for s in snap.stages if s.start.ok]


def markable(snap: Snapshot) -> list[tuple[str, tuple[str, ...]]]:
    """Manual stages and the marks offered on each."""
    return [(s.id, s.mark_as) for s in snap.stages if s.mark.ok and s.mark_as]


def droppable(snap: Snapshot) -> list[str]:
    """The stages a "limit" decision may drop: optional and not begun."""
    return [s.id for s in snap.stages if s.category != "essential"
            and s.state in ("waiting", "ready", "blocked", "needs-person")]


def run_logs(snap: Snapshot, run_id: str) -> tuple[Path | None, Path | None]:
    """The run's current attempt's ``.out`` and ``.err`` (the journal names them; the
    error file may not exist yet)."""
    view = next((r for r in snap.runs if r.id == run_id), None)
    paths = view.log_path if view is not None else None
    if paths is None:
        return None, None
    err = Path(paths.err)
    return Path(paths.out), err if err.exists() else None
