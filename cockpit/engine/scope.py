"""What this cockpit may touch: the campaign's stages and runs, by id, and which of
them are this machine's (D12: a machine launches, stops and supervises only its own
stages; verdicts and decisions are written where their stage runs).

Pure lookups over the plan; a bad id is bad input (``InputError``, located at the
campaign file), another machine's stage is a refusal (``ActionRefused``, naming
where to do it instead).
"""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.campaign.model import Campaign, Stage
from cockpit.common.errors import ActionRefused, InputError
from cockpit.engine.affordances import machine_refusal


@dataclass(frozen=True)
class Scope:
    """The campaign as seen from one machine (``machine`` None: `cockpit fleet`)."""

    campaign: Campaign
    machine: int | None

    def mine(self, stage_id: str | None) -> bool:
        """Whether a stage (by id) is this machine's to launch, stop and supervise."""
        if stage_id is None:
            return False
        try:
            return self.campaign.stage(stage_id).machine == self.machine
        except KeyError:
            return False

    def mine_run(self, run_id: str) -> bool:
        stage = self.campaign.stage_of_run(run_id)
        return stage is not None and stage.machine == self.machine

    def stage(self, stage_id: str) -> Stage:
        try:
            return self.campaign.stage(stage_id)
        except KeyError:
            known = ", ".join(s.id for s in self.campaign.stages)
            raise InputError(f"{self.campaign.path}: no stage {stage_id!r} (stages: {known})") \
                from None

    def run_of(self, target: str) -> str:
        """The run of a run id or of a stage id."""
        if target in self.campaign.runs:
            return target
        try:
            stage = self.campaign.stage(target)
        except KeyError:
            raise InputError(f"{self.campaign.path}: no run or stage {target!r}") from None
        if stage.run:
            return stage.run
        # A stage without a run id is supervised under its own name.
        raise InputError(f"{self.campaign.path}: stage {target!r} has no run; "
                         "give it `run: ID` to supervise and stop it")

    def refuse_other_machine(self, stage: Stage, what: str) -> None:
        if refusal := machine_refusal(stage, self.machine, what):
            raise ActionRefused(refusal)

    def refuse_other_run(self, run_id: str, what: str) -> None:
        """A verdict or a verification is written by the run's own machine (the
        ownership table): elsewhere it would never be folded."""
        owner = self.campaign.stage_of_run(run_id)
        if owner is not None:
            self.refuse_other_machine(owner, what)

    def stage_owner(self, stage_id: str) -> int:
        """The machine a stage runs on."""
        return self.stage(stage_id).machine

    def run_owner(self, target: str) -> int:
        """The machine a run (or the run of a stage) runs on."""
        stage = self.campaign.stage_of_run(target) if target in self.campaign.runs else None
        return self.stage(target).machine if stage is None else stage.machine
