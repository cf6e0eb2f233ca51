"""`cockpit fleet`'s actions: each runs on the machine that owns the stage, as that
machine's own ``cockpit ACTION FILE ... --json`` command over SSH.

The fleet has no journal of its own. What an action wrote is the remote command's
answer: one JSON list of the events it journaled (bounded, parsed as untrusted data:
text in it is shown through ``printable`` by whoever prints it); anything else is
refused with a located reason. The events themselves arrive with the next pull.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import cast

from cockpit.campaign.model import Campaign
from cockpit.common.errors import ActionRefused
from cockpit.common.printable import printable
from cockpit.common.safe_json import loads_bounded
from cockpit.engine.scope import Scope
from cockpit.fleet.ssh import SshError, remote_cockpit, remote_limited, run_ssh
from cockpit.journal.events import event_problem
from cockpit.journal.fields import Event
from cockpit.journal.fold import CampaignState

ACTION_TIMEOUT_S = 120.0  # a stop waits for its grace period there
ACTION_OUTPUT_BYTES = 4 * 1024 * 1024  # what a remote cockpit command may print
MAX_WRITTEN = 1000  # events one action may report (a stop writes a handful)


def parse_written(machine: int, text: str) -> list[Event]:
    """The events a remote ``cockpit ACTION ... --json`` reports having written, each
    tagged with its machine; ActionRefused, saying where and why, for anything else."""
    where = f"on machine {machine}: the answer of its cockpit"
    try:
        value = loads_bounded(text.strip())
    except (ValueError, RecursionError) as exc:
        raise ActionRefused(f"{where} is not JSON ({printable(exc, 200)}): "
                            f"{printable(text.strip(), 200)}") from None
    if not isinstance(value, list):
        raise ActionRefused(f"{where} is not a JSON list of events "
                            f"(a {type(value).__name__})")
    if len(value) > MAX_WRITTEN:
        raise ActionRefused(f"{where} lists {len(value)} events, over {MAX_WRITTEN}")
    out = []
    for i, event in enumerate(value):
        if not isinstance(event, dict) or not isinstance(event.get("kind"), str) \
                or not isinstance(event.get("seq"), int) or isinstance(event.get("seq"), bool):
            raise ActionRefused(f"{where}: item {i} is not an event (an object with an "
                                "integer seq and a kind)")
        wrong = event_problem(event)  # the checks of every journal line read
        if wrong is not None:
            raise ActionRefused(f"{where}: event #{event['seq']}: {printable(wrong, 200)}")
        out.append(cast(Event, {**event, "machine": machine}))  # checked just above
    return out


class RemoteActions:
    """The actions, as the faces call them; each runs where its stage lives."""

    def __init__(self, campaign: Campaign, *, pull: Callable[[], None] | None = None,
                 state: Callable[[], CampaignState]) -> None:
        self.campaign = campaign
        self.scope = Scope(campaign, None)
        self._pull = pull  # after an action: pull, so the next tick shows what it wrote
        self._state = state

    def remote(self, machine: int, words: Sequence[str]) -> list[Event]:
        spec = self.campaign.machines.get(machine)
        if spec is None:
            raise ActionRefused(f"machine {machine} has no entry under machines:")
        args = [words[0], self.campaign.path.name, *words[1:], "--json"]
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
        written = parse_written(machine, text)
        if self._pull is not None:
            self._pull()
        return written

    def start(self, stage_id: str, *, force: bool = False, now: datetime | None = None,
              auto: bool = False) -> list[Event]:
        return self.remote(self.scope.stage_owner(stage_id),
                           ["start", stage_id, *(["--force"] if force else [])])

    def stop(self, target: str, reason: str, now: datetime | None = None,
             rule: str = "manual") -> Event:
        written = self.remote(self.scope.run_owner(target), ["stop", target, "--reason", reason])
        return written[0] if written else {"kind": "remote", "text": f"stop {target}"}

    def mark(self, stage_id: str, what: str, note: str | None = None,
             now: datetime | None = None) -> list[Event]:
        return self.remote(self.scope.stage_owner(stage_id),
                           ["mark", stage_id, what, *(["--note", note] if note else [])])

    def decide(self, outcome: str, *, stage: str | None = None, drops: Iterable[str] = (),
               note: str, now: datetime | None = None) -> list[Event]:
        if stage is None:
            pending = self._state().pending_decisions
            if not pending:
                raise ActionRefused("no decision is pending on any machine")
            stage = pending[0]
        words = ["decide", outcome, "--stage", stage, "--note", note]
        drops = list(drops)
        if drops:
            words += ["--drop", *drops]
        return self.remote(self.scope.stage_owner(stage), words)

    def accept(self, run_id: str, note: str | None = None, now: datetime | None = None,
               *, override: bool = False) -> Event | None:
        words = ["accept", run_id, *(["--note", note] if note else []),
                 *(["--override"] if override else [])]
        written = self.remote(self.scope.run_owner(run_id), words)
        return written[0] if written else None

    def reject(self, run_id: str, note: str, now: datetime | None = None
               ) -> Event | None:
        written = self.remote(self.scope.run_owner(run_id), ["reject", run_id, "--note", note])
        return written[0] if written else None

    def note(self, stage_id: str, text: str, now: datetime | None = None) -> Event:
        written = self.remote(self.scope.stage_owner(stage_id), ["note", stage_id, text])
        return written[0] if written else {"kind": "remote", "text": f"note on {stage_id}"}

    def cost(self, label: str, amount: str, currency: str = "USD",
             now: datetime | None = None) -> Event:
        written = self.remote(min(self.campaign.machines),
                              ["cost", label, amount, "--currency", currency])
        return written[0] if written else {"kind": "remote", "text": f"cost {label}"}


__all__ = ["ACTION_OUTPUT_BYTES", "ACTION_TIMEOUT_S", "RemoteActions", "parse_written"]
