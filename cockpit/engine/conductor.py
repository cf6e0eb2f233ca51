"""One conductor per campaign and machine (issue 39): what only the conductor does, who
conducts, and the campaign file watched for edits.

Any number of faces (the screen, headless, browser tabs, ``fleet --headless``) open one
campaign; the first holds the lease (:mod:`cockpit.common.lease`) and *conducts*: it alone
does the effects of :data:`CONDUCTOR_EFFECTS`. Every other face is a *viewer*: it folds
the same journal into the same Snapshot, reads the recording read-only, carries out a
person's actions through the journal lock like any command, and takes the lease within
a tick when it comes free. :data:`CONDUCTOR_EFFECTS` is the one table of those effects
and the code that does each; ``tests/unit/test_conductor_effects.py`` holds every
writer in the package to it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from cockpit.campaign.model import Campaign
from cockpit.common.errors import InputError
from cockpit.common.event_kinds import CLOCK_JUMP
from cockpit.common.lease import probe
from cockpit.engine.snapshot import ConductorView


@dataclass(frozen=True)
class Effect:
    """One of the conductor's effects: what it is, the calls that do it (the dotted
    tail of the called name), and the only functions (``module:function``) that may
    make those calls. Each of those runs only in a conducting engine or face."""

    what: str
    calls: tuple[str, ...]
    sites: tuple[str, ...]


_TICK = "cockpit.engine.facade:"  # the tick's acting steps (Engine.TICK_STEPS): conducting only
CONDUCTOR_EFFECTS: dict[str, Effect] = {
    "guards": Effect("stop rules, blind, stalled, underfed, deadline, landing-near, stop "
                     "escalation: the guards' intents carried out",
                     ("guards.rule_firings", "guards.blind_rules", "guards.stops_to_escalate",
                      "guards.deadline_guard", "guards.landing_near", "launcher.carry_out"),
                     # wait_stopped: a one-shot `stop` driving its own stop to the end
                     tuple(_TICK + s for s in ("_judge_rules", "_judge_blind",
                                               "_escalate_stops", "_start_next",
                                               "_guard_window"))
                     + ("cockpit.engine.facade:wait_stopped", "cockpit.engine.landing:_stop")),
    "auto_start": Effect("--auto starts the next stage (none the landing would cut)",
                         ("guards.auto_starts", "guards.landing_cuts"), (_TICK + "_start_next",)),
    "landing": Effect("the landing's steps", ("landing.step",), (_TICK + "_land",)),
    "verification": Effect("automatic verification and acceptance",
                           ("verification.judge_runs", "verification.auto_verify"),
                           (_TICK + "_verify",)),
    "exits": Effect("a run's end journaled", ("exits.record",),
                    (_TICK + "_record_exits", "cockpit.engine.facade:wait_stopped")),
    "plan_change": Effect("an edited campaign file journaled once",
                          ("recorder.record_plan_change",),
                          (_TICK + "_record_changes", "cockpit.engine.facade:_watch_plan")),
    CLOCK_JUMP: Effect("a wall-clock step journaled", ("recorder.record_clock_jump",),
                       (_TICK + "_record_changes",)),
    "alerts": Effect("alerts sent and journaled", ("alerting.run",), (_TICK + "_announce",)),
    "hooks": Effect("the campaign's hooks run", ("hooks.run",), (_TICK + "_announce",)),
    "flight_recorder": Effect("the flight recorder's writes",
                              ("flight.record", "FlightRecorder"),
                              (_TICK + "_record_telemetry", "cockpit.engine.facade:_conduct_now")),
    "state_cache": Effect("the state cache and the metric streams' caches",
                          ("past.save_cache", "self.save_streams"),
                          (_TICK + "_announce", "cockpit.engine.observer:poll",
                           "cockpit.engine.observer:close")),
    "status_log": Effect("the status log `status --line` reads", ("status_log.write_line",),
                         ("cockpit.headless.loop:outputs", "cockpit.tui.app:_write_status")),
    "prometheus": Effect("the Prometheus file and endpoint",
                         ("endpoint.publish",), ("cockpit.headless.loop:outputs",)),
}


def conductor_view(state_dir: Path, machine: int | None,
                   problem: str | None = None) -> ConductorView:
    """Who conducts, asked of the lease (a viewer's or ``status``'s view)."""
    held, info = probe(str(state_dir), machine)
    since = None if info is None else _utc(info.ended if not held and info.ended else info.since)
    if held and info is not None:
        return ConductorView(you=False, conducted=True, face=info.face, pid=info.pid,
                             host=info.host, since=since, problem=problem)
    return ConductorView(you=False, conducted=held, since=since if not held and info
                         and info.ended else None, problem=problem)


def _utc(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, timezone.utc)


class PlanWatch:
    """The campaign file, watched for edits: its stat at most every :data:`POLL_S`
    seconds, its text read and checked only when the stat moved. ``candidate`` is a
    valid version other than the engine's (the face reloads it once it may),
    ``refused`` the located error of an invalid one (the old plan stays in force)."""

    POLL_S = 1.0

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        self.path = Path(campaign.path)
        self._stat: tuple[int, int, int] | None = None
        self._polled: float | None = None
        self._sha: str | None = campaign.sha256  # what the file held at the last read
        self.candidate: Campaign | None = None
        self.refused: str | None = None

    def current(self, mono: float) -> str | None:
        """The hash of what the file holds now (None: it cannot be read)."""
        if self._polled is not None and mono - self._polled < self.POLL_S:
            return self._sha
        self._polled = mono
        try:
            st = os.stat(self.path)
        except OSError:
            self._stat, self._sha = None, None
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if key != self._stat:
            self._stat = key
            self._read()
        return self._sha

    def _read(self) -> None:
        from cockpit.campaign import load_campaign_text
        from cockpit.campaign.yamlread import read_text

        try:
            text = read_text(self.path)
        except InputError as exc:
            self._sha, self.candidate, self.refused = None, None, self._located(exc)
            return
        self._sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
        self.candidate, self.refused = None, None
        if self._sha == self.campaign.sha256:
            return
        try:
            self.candidate = load_campaign_text(text, self.path)
        except InputError as exc:
            self.refused = self._located(exc)

    def _located(self, exc: InputError) -> str:
        """The error as ``campaign.yaml:12:5: …``: the file's own name, so the location
        shows on a narrow screen (the full path is in ``cockpit check``'s)."""
        return str(exc).replace(str(self.path), self.path.name)
