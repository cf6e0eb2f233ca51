"""A ``cockpit start`` held at a chosen moment, for the kill -9 tests (issue 14, 21).

Run as a child process (``python -m tests.engine.held_start CAMPAIGN STAGE PHASE FILE``):
it builds the Engine as ``cockpit start`` does, with an injected supervisor that holds
the start at ``PHASE`` — it writes ``FILE`` (the test's event) and then waits on an event
that never comes, under the journal lock, until the test kill -9s it. No fault hook in
the product: the moments between claim, launch and record are reached from outside.

Phases, in the order a start passes them:

- ``claimed``: the claim is journaled, the launch has not begun (no ``.out`` file);
- ``began``: inside the real launch, its output files open, before the fork;
- ``launched``: the process runs with its marker, its start not journaled;
- ``recorded``: the start returned (claim, launch and record all on disk).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any
from unittest import mock

from cockpit.campaign import load_campaign
from cockpit.campaign.model import Campaign, Stage
from cockpit.engine import Engine
from cockpit.engine.ports import ProcessSupervisor
from cockpit.runs.supervisor import Launched

PHASES = ("claimed", "began", "launched", "recorded")
ROOT = Path(__file__).resolve().parents[2]


def command(campaign: Path, stage: str, phase: str, held: Path, auto: bool = False) -> list[str]:
    """The argv of a held start (run it with ``cwd=ROOT``)."""
    assert phase in PHASES, phase
    return [sys.executable, "-m", "tests.engine.held_start", str(campaign), stage, phase,
            str(held), *(["--auto"] if auto else [])]


class HeldSupervisor(ProcessSupervisor):
    """The real supervisor, holding the launch at its phase."""

    def __init__(self, phase: str, held: Path) -> None:
        self.phase = phase
        self.held = held

    def hold(self) -> None:
        # Whole or not at all (temp file + rename): the test reads it as soon as it exists.
        tmp = self.held.with_name(f".{self.held.name}.tmp")
        tmp.write_text(self.phase)
        os.replace(tmp, self.held)
        threading.Event().wait()  # never set: the test's kill -9 ends this process

    def launch(self, campaign: Campaign, stage: Stage, now: datetime,
               marker: str | None = None) -> Launched:
        if self.phase == "claimed":
            self.hold()
        if self.phase == "began":
            def fork(*_args: Any, **_kwargs: Any) -> Any:
                self.hold()
            with mock.patch.object(subprocess, "Popen", fork):
                return super().launch(campaign, stage, now, marker=marker)
        launched = super().launch(campaign, stage, now, marker=marker)
        if self.phase == "launched":
            self.hold()
        return launched


def main(argv: list[str]) -> None:
    campaign, stage, phase, held = argv[:4]
    supervisor = HeldSupervisor(phase, Path(held))
    engine = Engine(load_campaign(Path(campaign)), supervisor=supervisor, actor="held")
    engine.start(stage, auto="--auto" in argv[4:])
    supervisor.hold()  # "recorded": every other phase held inside the start


if __name__ == "__main__":
    main(sys.argv[1:])
