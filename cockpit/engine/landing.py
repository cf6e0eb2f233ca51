"""The landing (``on_deadline: land``, issue 26): at the point of no return the cockpit
brings the results home by itself, each step journaled (``landing`` events, with a
once-only key) so a restarted cockpit goes on where the last one stopped:

1. ``began``: the point of no return has come (never while a clock jump holds; the
   point and the reserve's terms are journaled with it); the optional runs of this
   machine are stopped at once, and so is a run with nothing to save (no
   ``checkpoints`` in its run spec, or none written yet: no save request, no wait);
2. ``save_requested``: each other running run is asked to save now (the request file
   :mod:`cockpit.report` reads) and given :func:`save_wait_s`;
3. ``saved`` then ``verified`` (or ``verify_failed``): a new complete checkpoint came
   and that very file (its path, size and mtime are journaled) was reloaded in a fresh
   process; the export carries it as a resume point (:mod:`cockpit.export.resume_points`);
   ``save_missed``: none came in time, its newest checkpoint is what is kept;
4. ``stopped``: the run is stopped (its stop is journaled with the rule ``landing``);
5. ``exporting``, then ``exported`` when no run of this machine still runs: the
   cockpit's export, verified;
6. ``landed``: with the command that fetches the export (an alert carries it).

:func:`landing_now` is the pure part: the landing's times and the point of no return
from the state and the checkpoint scans, the one figure every face shows. It reserves
time only for what the landing will do: a save and a reload for each run it will ask to
save (:func:`saves_on_request`), nothing for the runs it will stop at once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cockpit.campaign.model import OPTIONAL_CATEGORIES, Campaign
from cockpit.common.durations import format_duration
from cockpit.common.errors import ActionRefused, InputError
from cockpit.common.event_kinds import LANDING
from cockpit.common.units import format_bytes
from cockpit.engine.evidence import Evidence
from cockpit.engine.history import History
from cockpit.engine.intents import StopRun
from cockpit.engine.launcher import Launcher
from cockpit.engine.observer import Observer
from cockpit.engine.scope import Scope
from cockpit.engine.timebase import parse_t
from cockpit.journal.fold import RUNNING, CampaignState, RunState
from cockpit.journal.paths import CampaignFiles
from cockpit.planning.deadline import (
    LandingTimes,
    closing_times,
    expected_export_bytes,
    export_size,
    landing_times,
    point_of_no_return,
    save_wait_s,
)
from cockpit.runs.checkpoints.discovery import CheckpointInfo, CheckpointScan

LANDING_RULE = "landing"  # the rule name a landing's stops are journaled with


@dataclass(frozen=True)
class LandingNow:
    """The landing's figures at one moment: what every face shows."""

    times: LandingTimes
    point: datetime  # the point of no return


def landing_now(campaign: Campaign, state: CampaignState,
                checkpoints: Mapping[str, CheckpointScan], machine: int | None) -> LandingNow:
    """The point of no return now: the running runs of ``machine`` (every machine's when
    None) that will be asked to save saved and reloaded, then the export and its
    retrieval (:mod:`planning.deadline`); the runs stopped at once reserve nothing."""
    running = [r for r in state.runs.values() if r.state == RUNNING and (
        machine is None or _machine_of(campaign, r.id) == machine)]
    savers = [r for r in running if saves_on_request(campaign, r.id, checkpoints.get(r.id))]
    saves = {r.id: _save_cost(checkpoints.get(r.id)) for r in savers}
    reloads = {r.id: _reload_cost(r) for r in savers}
    expected = expected_export_bytes(campaign, {
        run_id: scan.newest.size_bytes if scan.newest else None
        for run_id, scan in checkpoints.items()})
    export = state.export
    written = export_size(export) if export else None
    measured = export.get("seconds") if export else None
    times = landing_times(
        campaign, closing_times(campaign, expected, written), saves, reloads,
        (float(measured), written) if isinstance(measured, (int, float))
        and not isinstance(measured, bool) and measured >= 0 else None, expected,
        stopped=[r.id for r in running if r not in savers])
    return LandingNow(times, point_of_no_return(campaign, times))


def saves_on_request(campaign: Campaign, run_id: str, scan: CheckpointScan | None) -> bool:
    """Whether the landing asks this run to save (and waits): an essential run that
    declares ``checkpoints`` and has written a complete one. An optional run, or one with
    nothing to save, is stopped at once."""
    stage = campaign.stage_of_run(run_id)
    if stage is not None and stage.category in OPTIONAL_CATEGORIES:
        return False
    spec = campaign.runs.get(run_id)
    return spec is not None and spec.checkpoints is not None \
        and _newest_complete(scan) is not None


def _machine_of(campaign: Campaign, run_id: str) -> int | None:
    stage = campaign.stage_of_run(run_id)
    return None if stage is None else stage.machine


def _save_cost(scan: CheckpointScan | None) -> float | None:
    return None if scan is None else scan.typical_save_seconds


def _reload_cost(run: RunState) -> float | None:
    """The newest reload check's whole time (a fresh process: its start, the imports and
    the load), else its load time alone (a journal from before the whole was kept)."""
    for event in reversed(run.verified):
        for field in ("wall_seconds", "load_seconds"):
            seconds = event.get(field)
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) \
                    and seconds >= 0:
                return float(seconds)
    return None


def _newest_complete(scan: CheckpointScan | None) -> CheckpointInfo | None:
    return scan.complete[0] if scan is not None and scan.complete else None


@dataclass
class _Asked:
    """A run asked to save: what its newest checkpoint was then, and since when."""

    attempt: int | None
    before: str | None  # the newest complete checkpoint's path when it was asked
    before_mtime: float | None
    at_mono: float
    wait_s: float


class Landing:
    """Carries the landing out, one step per tick (see the module text)."""

    def __init__(self, scope: Scope, past: History, observer: Observer, launcher: Launcher,
                 evidence: Evidence, actor: str = "cockpit") -> None:
        self.campaign = scope.campaign
        self.scope = scope
        self.past = past
        self.observer = observer
        self.launcher = launcher
        self.evidence = evidence
        self.actor = actor
        self._asked: dict[str, _Asked] = {}
        self._loaded = False
        self._latest: tuple[datetime, float] | None = None  # (time decided on, mono)

    @property
    def began(self) -> bool:
        return "landing:began" in self.past.keys

    @property
    def landed(self) -> bool:
        return "landing:landed" in self.past.keys

    def timeline(self) -> tuple[str, ...]:
        """The landing's steps as journaled, each with its time (newest last)."""
        lines = []
        for event in self.past.journal.recent():
            ev: Mapping[str, Any] = event
            if ev.get("kind") == LANDING and isinstance(ev.get("t"), str):
                lines.append(f"{ev['t'][11:19]} {ev.get('phase')}: {ev.get('text')}")
        return tuple(lines)

    def step(self, state: CampaignState, now: datetime, *, holding: bool) -> None:
        """One step of the landing (nothing unless ``on_deadline: land``)."""
        if self.campaign.on_deadline != "land" or self.landed:
            return
        when = self._decide_on(now)
        if not self.began:
            if holding or not self._due(state, when):
                return  # a clock that just jumped decides nothing on the window
            point = landing_now(self.campaign, state, self.observer.checkpoints,
                                self.scope.machine)
            self._record("began", "landing:began", now,
                         f"the point of no return ({point.point:%H:%M:%S} UTC) has come: "
                         f"{point.times.words()}", point=point.point.isoformat(),
                         reserve=point.times.terms())
        self._load(now)
        mine = [r for r in state.runs.values()
                if r.state == RUNNING and self.scope.mine_run(r.id)]
        for run in mine:
            self._land_run(run, now)
        if any(r.state == RUNNING for r in self.past.state(now).runs.values()
               if self.scope.mine_run(r.id)):
            return  # stopping: the export waits for every run of this machine to end
        self._export(now)

    def _decide_on(self, now: datetime) -> datetime:
        """The time the landing decides on: the engine's, never less than the last one
        plus the monotonic time since (a wall clock stepped back never delays the
        landing past the point it was heading for; one stepped forward is believed only
        once the engine believes it)."""
        mono = self.past.time.mono()
        if self._latest is not None:
            then, at = self._latest
            now = max(now, then + timedelta(seconds=max(0.0, mono - at)))
        self._latest = (now, mono)
        return now

    def _due(self, state: CampaignState, now: datetime) -> bool:
        """The point of no return has come, inside the window (or past its end while a
        run of this machine still runs: a clock that stepped past the end never skips
        the landing), and there is something to land: a run of this machine still
        running, or no verified export yet."""
        pkg = self.campaign.package
        running = any(r.state == RUNNING and self.scope.mine_run(r.id)
                      for r in state.runs.values())
        if now < pkg.start or (now >= pkg.end and not running):
            return False
        export = state.export
        if not running and export is not None and export.get("verified"):
            return False
        point = landing_now(self.campaign, state, self.observer.checkpoints,
                            self.scope.machine).point
        return now >= point

    def _land_run(self, run: RunState, now: datetime) -> None:
        stage = self.campaign.stage_of_run(run.id)
        if run.stop is not None:
            return  # being stopped (by the landing or before it)
        if stage is not None and stage.category in OPTIONAL_CATEGORIES:
            self._stop(run, now, "optional: stopped at once")
            return
        key = f"landing:save:{run.id}:{run.attempt}"
        scan = self.observer.checkpoints.get(run.id)
        if key not in self.past.keys and not saves_on_request(self.campaign, run.id, scan):
            spec = self.campaign.runs.get(run.id)
            self._stop(run, now, "nothing to save: " + (
                "no checkpoints declared" if spec is None or spec.checkpoints is None
                else "no checkpoint written yet") + "; not asked to save")
            return
        asked = self._asked.get(run.id)
        if key not in self.past.keys or asked is None or asked.attempt != run.attempt:
            newest = _newest_complete(scan)
            wait = save_wait_s(_save_cost(scan))
            if key not in self.past.keys:
                self._request_save(run.id, now)
                self._record("save_requested", key, now,
                             f"{run.id} asked to save now; waiting up to "
                             f"{format_duration(wait)}", run=run.id, attempt=run.attempt,
                             limit_s=round(wait, 1))
            self._asked[run.id] = asked = _Asked(
                run.attempt, str(newest.path) if newest else None,
                newest.mtime if newest else None, self.past.time.mono(), wait)
            return
        newest = _newest_complete(scan)
        fresh = newest is not None and (str(newest.path) != asked.before
                                        or newest.mtime != asked.before_mtime)
        waited = self.past.time.mono() - asked.at_mono
        if fresh and newest is not None:
            # The very file saved (path, size, mtime): what is verified and exported,
            # never a newer one the run may write before it stops.
            self._record("saved", f"landing:saved:{run.id}:{run.attempt}", now,
                         f"{run.id} saved {newest.path.name} "
                         f"({format_bytes(newest.size_bytes)}) after {waited:.0f} s",
                         run=run.id, attempt=run.attempt, path=str(newest.path.absolute()),
                         size_bytes=newest.size_bytes, mtime=newest.mtime, step=newest.step)
            self._verify(run, newest, now)
            self._stop(run, now, "its checkpoint saved on request")
        elif waited >= asked.wait_s:
            self._record("save_missed", f"landing:missed:{run.id}:{run.attempt}", now,
                         f"{run.id} wrote no new checkpoint in {format_duration(waited)}: "
                         "its newest checkpoint is what is kept", run=run.id,
                         attempt=run.attempt)
            self._stop(run, now, "no checkpoint came in time")

    def _verify(self, run: RunState, saved: CheckpointInfo, now: datetime) -> None:
        """Reload the checkpoint just saved (that path, not whatever is newest now)."""
        try:
            event = self.evidence.verify(run.id, str(saved.path.absolute()), now=now)
        except (ActionRefused, InputError, OSError) as exc:
            ok, why = False, str(exc)
        else:
            ok, why = bool(event.get("ok")), str(event.get("error") or "")
        self._record("verified" if ok else "verify_failed",
                     f"landing:verified:{run.id}:{run.attempt}", self.past.time.steady_now(),
                     f"{run.id}'s new checkpoint {saved.path.name} " + (
                         "reloads in a fresh process" if ok else f"does NOT reload: {why}"),
                     run=run.id, attempt=run.attempt, path=str(saved.path.absolute()), ok=ok,
                     size_bytes=saved.size_bytes, mtime=saved.mtime)

    def _stop(self, run: RunState, now: datetime, why: str) -> None:
        self.launcher.carry_out([StopRun(run.id, f"landing before the window ends: {why}",
                                         LANDING_RULE)], now)
        self._record("stopped", f"landing:stopped:{run.id}:{run.attempt}", now,
                     f"{run.id} stopped ({why})", run=run.id, attempt=run.attempt)

    def _export(self, now: datetime) -> None:
        if "landing:exported" not in self.past.keys:
            self._record("exporting", "landing:exporting", now,
                         "every run of this machine has ended: exporting")
            try:
                event = self.evidence.export(now)
            except ActionRefused as exc:
                self._record("exported", "landing:exported", self.past.time.steady_now(),
                             f"the export FAILED: {exc}", ok=False)
                self._record("landed", "landing:landed", self.past.time.steady_now(),
                             f"landed WITHOUT a verified export: {exc}; run cockpit "
                             f"export {self.campaign.path.name}", ok=False)
                return
            verified = bool(event.get("verified"))
            fetch = event.get("fetch")
            self._record("exported", "landing:exported", self.past.time.steady_now(),
                         f"export {'verified' if verified else 'NOT verified'}: "
                         f"{event.get('tar') or event.get('path')}", ok=verified)
            self._record("landed", "landing:landed", self.past.time.steady_now(),
                         (f"landed: fetch it now: {fetch}" if verified else
                          "landed WITHOUT a verified export: run cockpit export "
                          f"{self.campaign.path.name}"), ok=verified, fetch=fetch)

    def _request_save(self, run_id: str, now: datetime) -> None:
        """The request file cockpit.report reads: a new token, written whole."""
        path = CampaignFiles.of(self.campaign).save_request(run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{os.getpid()}")
        temp.write_text(f"landing {now.isoformat()}\n")
        os.replace(temp, path)

    def _record(self, phase: str, key: str, now: datetime, text: str, **fields: Any) -> None:
        self.past.journal_once(LANDING, key, now, phase=phase, text=text,
                               actor=self.actor, **fields)

    def _load(self, now: datetime) -> None:
        """After a restart mid-landing: each run asked to save is waited for from when
        it was asked (its journal line), not from now."""
        if self._loaded:
            return
        self._loaded = True
        for event in self.past.journal.recent():
            ev: Mapping[str, Any] = event
            if ev.get("kind") != LANDING or ev.get("phase") != "save_requested":
                continue
            run_id, limit = ev.get("run"), ev.get("limit_s")
            if not isinstance(run_id, str) or not isinstance(limit, (int, float)):
                continue
            age = self.past.time.age_s(ev.get("seq"), parse_t(ev), now)
            scan = self.observer.checkpoints.get(run_id)
            newest = _newest_complete(scan)
            # Which checkpoint was newest when it was asked is not kept: one written
            # since the request (by mtime) counts as the answer.
            asked_at = now.timestamp() - age
            self._asked[run_id] = _Asked(
                ev.get("attempt") if isinstance(ev.get("attempt"), int) else None,
                None if newest is None or newest.mtime > asked_at else str(newest.path),
                None if newest is None or newest.mtime > asked_at else newest.mtime,
                self.past.time.mono() - age, float(limit))
