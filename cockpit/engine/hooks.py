"""Event hooks: run a person's command when something happens (rule fired, stage
finished, decision needed, deadline near, export done, GPU lost).

Hooks run detached (own session), with the event as JSON on stdin and in
``$COCKPIT_EVENT``, under a time limit; a failure is journaled as a warning and
never fatal. Each hook runs once per event, whichever cockpit sees it first: the
run is claimed in the journal (``hook_started`` with the event's seq). The campaign
file's ``hooks:`` section is read by :mod:`cockpit.campaign.sections_guards`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cockpit.campaign.model import Campaign, Hook
from cockpit.common.event_kinds import (
    EXPORT_DONE,
    HOOK_STARTED,
    RULE_FIRED,
    STAGE_FINISHED,
    WARNING,
)
from cockpit.engine.history import History
from cockpit.engine.snapshot import EventLine
from cockpit.engine.timebase import parse_t

HOOK_MAX_AGE_S = 600.0  # history from before this cockpit watched: no burst of old alerts


def hook_event_name(event: Mapping[str, Any], decision_points: set[str]) -> str | None:
    """Which hook event (if any) a journal event is."""
    kind = event.get("kind")
    if kind == RULE_FIRED:
        return RULE_FIRED
    if kind == STAGE_FINISHED:
        if event.get("stage") in decision_points and event.get("outcome") == "done":
            return "decision_needed"
        return STAGE_FINISHED
    if kind == EXPORT_DONE:
        return EXPORT_DONE
    if kind == "warning" and event.get("event") == "gpu_lost":
        return "gpu_lost"
    if kind == "warning" and event.get("key") == "deadline_near":
        return "deadline_near"
    return None


@dataclass
class _Running:
    hook: Hook
    proc: subprocess.Popen[bytes]
    started: float
    seq: int


class HookRunner:
    """Starts hook processes and watches their time limits and exit codes."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.running: list[_Running] = []

    def launch(self, hook: Hook, event: Mapping[str, Any], hook_event: str) -> int:
        payload = json.dumps({"hook": hook_event, **event}, default=str)
        env = dict(os.environ, COCKPIT_EVENT=payload, COCKPIT_HOOK=hook_event)
        proc = subprocess.Popen(
            hook.command if not hook.shell else str(hook.command), shell=hook.shell,  # noqa: S602
            cwd=self.cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            assert proc.stdin is not None
            proc.stdin.write(payload.encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # a hook that does not read stdin is fine
        self.running.append(_Running(hook, proc, time.monotonic(), int(event.get("seq", 0))))
        return proc.pid

    def poll(self) -> list[str]:
        """Failures since the last poll, in words."""
        failures: list[str] = []
        still: list[_Running] = []
        for item in self.running:
            code = item.proc.poll()
            if code is None:
                if time.monotonic() - item.started > item.hook.timeout_s:
                    try:
                        os.killpg(item.proc.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                    item.proc.wait()
                    failures.append(f"hook {item.hook.event} for event #{item.seq} killed after "
                                    f"{item.hook.timeout_s:g} s")
                else:
                    still.append(item)
            elif code != 0:
                failures.append(f"hook {item.hook.event} for event #{item.seq} exited {code}")
        self.running = still
        return failures


class HookDispatcher:
    """Runs the campaign's hooks for the events first seen in a tick: each once per
    event, claimed under the journal lock (``hook_started``); a failure is a warning."""

    def __init__(self, campaign: Campaign, history: History) -> None:
        self.campaign = campaign
        self.history = history
        self.runner = HookRunner(campaign.folder)
        self._deciders = {s.id for s in campaign.stages if s.decision_point}

    def run(self, fresh: tuple[EventLine, ...], now: datetime) -> None:
        hooks = self.campaign.hooks
        if not hooks:
            return
        journal = self.history.journal
        for failure in self.runner.poll():
            journal.append(WARNING, now=now, source="hook", message=failure)
        for line in fresh:
            event = dict(line.fields)
            if "machine" in event:
                continue  # another machine's event: its own cockpit runs its hooks
            name = hook_event_name(event, self._deciders)
            if name is None or name not in hooks:
                continue
            if self.history.time.age_s(event.get("seq"), parse_t(event), now) > HOOK_MAX_AGE_S:
                continue
            self._launch(hooks[name], name, event, now)

    def _launch(self, hook: Hook, name: str, event: dict[str, Any], now: datetime) -> None:
        key = f"hook:{name}:{event.get('seq')}"
        with self.history.journal.transaction() as txn:
            if txn.has_key(key):
                return
            try:
                pid = self.runner.launch(hook, event, name)
            except OSError as exc:
                txn.append(WARNING, now=now, key=key, source="hook",
                           message=f"hook {name} could not start: {exc}")
                return
            txn.append(HOOK_STARTED, now=now, key=key, hook=name, pid=pid,
                       for_seq=event.get("seq"))
