"""`cockpit fleet`: the read-only engine over every machine, whose actions run on the
machine that owns the stage, as that machine's own ``cockpit`` command over SSH.

The fleet has no journal of its own; what an action wrote is the remote command's
output (``journal #N …`` lines), and the events themselves arrive with the next pull.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime

from cockpit.common.errors import ActionRefused
from cockpit.engine import Engine
from cockpit.fleet.ssh import SshError, remote_cockpit, remote_limited, run_ssh
from cockpit.journal.fields import Event

ACTION_TIMEOUT_S = 120.0  # a stop waits for its grace period there
ACTION_OUTPUT_BYTES = 4 * 1024 * 1024  # what a remote cockpit command may print
WRITTEN = re.compile(r"journal #(\d+) (\S+) (.*)")


class FleetEngine(Engine):
    """Every machine's stages, read from their journals; actions over SSH."""

    def remote(self, machine: int, words: Sequence[str]) -> list[Event]:
        spec = self.campaign.machines.get(machine)
        if spec is None:
            raise ActionRefused(f"machine {machine} has no entry under machines:")
        args = [words[0], self.campaign.path.name, *words[1:]]
        try:
            # Bounded there too: an action the client gave up on does not live on.
            done = run_ssh(spec, remote_limited(remote_cockpit(spec, args),
                                                ACTION_TIMEOUT_S - 1),
                           timeout=ACTION_TIMEOUT_S, max_stdout=ACTION_OUTPUT_BYTES)
        except SshError as exc:
            raise ActionRefused(str(exc)) from None
        text = done.stdout.decode("utf-8", "replace")
        if done.code in (124, 137):  # `timeout` there ended it
            raise ActionRefused(f"on machine {machine}: no answer within "
                                f"{ACTION_TIMEOUT_S - 1:g} s (stopped there)")
        if done.code != 0:
            why = done.stderr.decode("utf-8", "replace").strip() or text.strip()
            raise ActionRefused(f"on machine {machine}: {why or f'exit {done.code}'}")
        if self.peers is not None:
            self.peers.pull_now(timeout=10.0)  # show what it wrote on the next tick
        out: list[Event] = []
        for line in text.splitlines():
            found = WRITTEN.match(line)
            if found:
                out.append({"seq": int(found[1]), "t": found[2], "kind": "remote",
                            "machine": machine, "text": found[3]})
        return out

    def _owner(self, stage_id: str) -> int:
        return self._stage(stage_id).machine

    def _run_owner(self, run_id: str) -> int:
        stage = self.campaign.stage_of_run(run_id) if run_id in self.campaign.runs else None
        if stage is None:
            return self._stage(run_id).machine
        return stage.machine

    # The actions, as the faces call them; each runs where its stage lives.
    def start(self, stage_id: str, *, force: bool = False, now: datetime | None = None,
              auto: bool = False) -> list[Event]:
        return self.remote(self._owner(stage_id),
                           ["start", stage_id, *(["--force"] if force else [])])

    def stop(self, target: str, reason: str, now: datetime | None = None,
             rule: str = "manual") -> Event:
        written = self.remote(self._run_owner(target), ["stop", target, "--reason", reason])
        return written[0] if written else {"kind": "remote", "text": f"stop {target}"}

    def mark(self, stage_id: str, what: str, note: str | None = None,
             now: datetime | None = None) -> list[Event]:
        return self.remote(self._owner(stage_id),
                           ["mark", stage_id, what, *(["--note", note] if note else [])])

    def decide(self, outcome: str, *, stage: str | None = None, drops: Iterable[str] = (),
               note: str, now: datetime | None = None) -> list[Event]:
        if stage is None:
            pending = self.state().pending_decisions
            if not pending:
                raise ActionRefused("no decision is pending on any machine")
            stage = pending[0]
        words = ["decide", outcome, "--stage", stage, "--note", note]
        drops = list(drops)
        if drops:
            words += ["--drop", *drops]
        return self.remote(self._owner(stage), words)

    def accept(self, run_id: str, note: str | None = None, now: datetime | None = None,
               *, override: bool = False) -> Event | None:
        words = ["accept", run_id, *(["--note", note] if note else []),
                 *(["--override"] if override else [])]
        written = self.remote(self._run_owner(run_id), words)
        return written[0] if written else None

    def reject(self, run_id: str, note: str, now: datetime | None = None
               ) -> Event | None:
        written = self.remote(self._run_owner(run_id), ["reject", run_id, "--note", note])
        return written[0] if written else None

    def note(self, stage_id: str, text: str, now: datetime | None = None) -> Event:
        written = self.remote(self._owner(stage_id), ["note", stage_id, text])
        return written[0] if written else {"kind": "remote", "text": f"note on {stage_id}"}

    def cost(self, label: str, amount: str, currency: str = "USD",
             now: datetime | None = None) -> Event:
        written = self.remote(min(self.campaign.machines),
                              ["cost", label, amount, "--currency", currency])
        return written[0] if written else {"kind": "remote", "text": f"cost {label}"}
