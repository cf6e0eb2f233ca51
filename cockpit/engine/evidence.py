"""What a person runs to prove the results, now: a checkpoint reloaded in a fresh
process (``verify``), a resume compared with the run it continues (``verify_resume``,
D17), and the verified export (``export``, D19). Each waits for its process and
journals its result when done (the tick's own background checks are
:mod:`cockpit.engine.verification`'s). ``export_state`` says whether the newest export
still says what is true and whether the question is answered (issue 41), once per
folded state.
"""

from __future__ import annotations

from datetime import datetime

from cockpit.campaign.model import Run
from cockpit.close.conclusion import conclude_now
from cockpit.close.export_state import ExportState, export_state
from cockpit.common.errors import ActionRefused, InputError
from cockpit.common.event_kinds import CHECKPOINT_VERIFIED, RESUME_VERIFIED
from cockpit.engine.history import History
from cockpit.engine.scope import Scope
from cockpit.journal.fields import Event
from cockpit.journal.state import CampaignState
from cockpit.runs.attempts import attempt_start
from cockpit.runs.checkpoints.discovery import CheckpointInfo
from cockpit.runs.checkpoints.verifier import (
    checkpoint_step,
    choose_checkpoint,
    report_fields,
    resume_equivalence,
    verify_run_checkpoint,
)


class Evidence:
    """Verify a checkpoint, verify a resume, export (see the module text)."""

    def __init__(self, scope: Scope, history: History, *, actor: str) -> None:
        self.scope = scope
        self.campaign = scope.campaign
        self.history = history
        self.clock = history.time.clock
        self.actor = actor
        self._export_state: tuple[CampaignState, ExportState] | None = None

    def export_state(self, state: CampaignState) -> ExportState:
        """The newest verified export against the facts now, and the question's answer
        (:mod:`cockpit.close.export_state`): worked out again only for a new state (the
        conclusion reads the runs' metric files)."""
        held = self._export_state
        if held is not None and held[0] is state:
            return held[1]
        exported = bool(state.export and state.export.get("verified"))
        conclusion = conclude_now(self.campaign, state) \
            if exported and self.campaign.conclusion is not None else None
        value = export_state(self.campaign, state, conclusion)
        self._export_state = (state, value)
        return value

    def _run(self, target: str) -> Run:
        run = self.campaign.runs.get(target) or self.campaign.runs.get(
            self.scope.run_of(target))
        if run is None:
            raise InputError(f"{self.campaign.path}: no run {target!r}")
        self.scope.refuse_other_run(run.id, "verify")
        return run

    def _since(self, run_id: str) -> float | None:
        """The run's current attempt's start: an earlier attempt's checkpoint is not
        verified as this one's (:mod:`cockpit.runs.attempts`)."""
        run = self.history.state().runs.get(run_id)
        return None if run is None else attempt_start(run)

    def verify(self, run_id: str, which: str = "newest",
               now: datetime | None = None) -> Event:
        """Reload a run's checkpoint in a fresh process now and journal the result."""
        run = self._run(run_id)
        chosen = choose_checkpoint(self.campaign, run, which,
                                   (now or self.clock.now()).timestamp(), self._since(run.id))
        path = chosen.path if isinstance(chosen, CheckpointInfo) else chosen
        report = verify_run_checkpoint(self.campaign, run, path)
        attempt = self.history.state().runs[run.id].attempt
        # Stamped when the reload has finished (it can take minutes).
        return self.history.journal.append(
            CHECKPOINT_VERIFIED, now=now or self.clock.now(), run=run.id, attempt=attempt,
            auto=False, actor=self.actor, **report_fields(report))

    def verify_resume(self, run_id: str, which: str = "first",
                      now: datetime | None = None) -> Event:
        """Resume equivalence (D17): restart from a checkpoint, compare the metric."""
        run = self._run(run_id)
        now = now or self.clock.now()
        chosen = choose_checkpoint(self.campaign, run, which, now.timestamp(),
                                   self._since(run.id))
        path = chosen.path if isinstance(chosen, CheckpointInfo) else chosen
        result = resume_equivalence(self.campaign, run, path, checkpoint_step(chosen), now)
        return self.history.journal.append(
            RESUME_VERIFIED, now=self.clock.now(), run=run.id, ok=result.ok,
            path=result.checkpoint, from_step=result.from_step, compared=result.compared,
            diverged_step=result.diverged_step, message=result.message,
            seconds=round(result.seconds, 3), actor=self.actor)

    def export(self, now: datetime | None = None) -> Event:
        """Write and verify the export now (the TUI's `e`); returns its export_done event."""
        from cockpit.export import ExportError, export_campaign

        now = now or self.clock.now()
        try:
            result = export_campaign(self.campaign, self.history.state(now), now=now,
                                     history=self.history.events(now))
        except ExportError as exc:
            raise ActionRefused(str(exc)) from None
        if result.event is None:
            raise ActionRefused(f"export written to {result.bag_dir} but not journaled")
        return result.event
