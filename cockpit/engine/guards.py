"""What acts on the observations: stop rules, the stop sequence, auto-start, the deadline
guard, hooks.

- A stop rule that fires on fresh metric points journals ``rule_fired`` and, for a
  ``stop`` rule, requests the stop (``stop_requested``, SIGTERM to the group). A
  ``stalled`` rule fires on a run whose step has not moved for its limit (monotonic).
- A requested stop advances on each tick: once ``stop_grace`` has passed on the
  monotonic clock (a wall-clock step never delays or hastens it) and the group is
  still there, SIGKILL. The exit itself is recorded
  by ``observe`` when the wrapper is gone (run_exited, stop_done, stage_finished).
- In auto mode, ready stages start in plan order; nothing starts past a pending
  decision or a revision.
- The deadline guard (D19) warns when the window is near its end without a verified
  export and, with ``on_deadline: stop-optional``, stops optional runs and starts the
  export when the forecast leaves no time for export and retrieval.
- Hooks run for the events first seen in this tick.

Ages (the ``restart`` window, the stop grace, a hook's age) are measured on the
monotonic clock (``EngineCore._age_s``). After a wall-clock jump the rules on ages,
auto-start and the deadline guard hold until the clock has settled (``clockwatch``);
rules on metric values (a NaN) never hold.
"""

from __future__ import annotations

import contextlib
import signal
from datetime import datetime

from cockpit.campaign.model import OPTIONAL_CATEGORIES, StopRule
from cockpit.close.acceptance import awaiting_verdict, has_slow_checks
from cockpit.close.conclusion import conclude_now, on_deadline
from cockpit.common.errors import ActionRefused
from cockpit.common.units import format_duration
from cockpit.engine.actions import Acting
from cockpit.engine.core import ExitVerdict, parse_t
from cockpit.engine.hooks import hook_event_name
from cockpit.journal.fold import (
    DONE,
    FAILED,
    NOT_STARTED,
    PENDING,
    RUNNING,
    STOPPED,
    CampaignState,
    RunState,
)
from cockpit.planning.deadline import (
    closing_times,
    deadline_check,
    expected_export_bytes,
    work_end,
)
from cockpit.planning.forecast import forecast
from cockpit.runs.blind import declared_sources, stream_blind, watches_metric
from cockpit.runs.metrics.progress import progress_of
from cockpit.runs.rules import Firing, check_points, check_restart, check_stalled, step_interval

HOOK_MAX_AGE_S = 600.0
BLIND_GRACE_S = 120.0  # a running run's first reports come within this; then blind is news


class Guarding(Acting):
    # ------------------------------------------------------------------ rules
    def _apply_rules(self, state: CampaignState, now: datetime) -> None:
        fresh = self._poll_streams(state, now)
        rules = self.campaign.stop_rules
        for run in state.runs.values():
            if run.state != RUNNING or not self._mine_run(run.id):
                continue
            fired = state.fired_for(run.id, run.attempt)
            for rule in rules:
                if not rule.applies_to(run.id) or rule.id in fired:
                    continue
                firing = check_points(rule, fresh.get(run.id, ()))
                if firing is None and rule.kind == "restart" and not self.holding() \
                        and not self._verifying(run):
                    firing = check_restart(rule, seconds_without_restart=self._since_restart(
                        run, now), step=self._streams[run.id].latest_step)
                if firing is None and rule.kind == "stalled" and run.stop is None:
                    firing = self._check_stalled(rule, run)
                if firing is not None:
                    self._fire(run.id, firing, now)

    def _journal_blind(self, state: CampaignState, now: datetime) -> None:
        """``rule_blind`` once per rule and run attempt, for this machine's runs: when a
        running run has run BLIND_GRACE_S (its first reports had time to come) or has
        ended, and a rule's metric was still never seen (issue 22). The tick calls it
        after recording exits, so a run that ended blind says so in the tick it ends."""
        for run in state.runs.values():
            stream = self._streams.get(run.id)
            if run.state == NOT_STARTED or stream is None or not self._mine_run(run.id) or (
                    run.state == RUNNING
                    and self._age_s(run.attempt, run.started_at, now) < BLIND_GRACE_S):
                continue
            fired = state.fired_for(run.id, run.attempt)
            for rule in self.campaign.stop_rules:
                key = f"blind:{run.id}:{run.attempt}:{rule.id}"
                if key in self._keys or rule.id in fired or not rule.applies_to(run.id) \
                        or not watches_metric(rule):
                    continue
                why = stream_blind(rule.metric, run.state, stream,
                                   declared_sources(self.campaign, run.id),
                                   strict=bool(rule.runs))
                if why is not None:
                    self._journal_once("rule_blind", key, now, run=run.id, stage=run.stage,
                                       rule=rule.id, metric=rule.metric, reason=why,
                                       attempt=run.attempt, ended=run.state != RUNNING,
                                       actor=self.actor)

    def _check_stalled(self, rule: StopRule, run: RunState) -> Firing | None:
        """The run's median step interval from its points' own times, and the seconds
        since its step last moved on the monotonic clock (a wall-clock step changes
        neither much; for a run found running, counted from when this cockpit saw it)."""
        stream = self._streams[run.id]
        mono = self._mono()
        seen = self._step_seen.get(run.id)
        if seen is None or seen[:2] != (run.attempt, stream.latest_step):
            self._step_seen[run.id] = seen = (run.attempt, stream.latest_step, mono)
        since = run.started_at.timestamp() - 1.0 if run.started_at else None
        return check_stalled(rule, interval_s=step_interval(stream.recent, since),
                             silent_s=mono - seen[2], step=stream.latest_step)

    def _since_restart(self, run: RunState, now: datetime) -> float | None:
        """Seconds since the run last had a usable restart (its start or a passing
        verification), on the monotonic clock."""
        if run.started_at is None:
            return None
        ages = [self._age_s(run.attempt, run.started_at, now)]
        ages += [self._age_s(v.get("seq"), parse_t(v), now) for v in run.verified
                 if v.get("ok") and v.get("attempt") in (None, run.attempt)]
        return min(ages)

    def _fire(self, run_id: str, firing: Firing, now: datetime) -> None:
        with self.journal.transaction() as txn:
            state = self._fold(txn.events, now)
            run = state.runs[run_id]
            if firing.rule in state.fired_for(run_id, run.attempt) or run.state != RUNNING:
                return  # fired once per run, whichever cockpit saw it first
            txn.append("rule_fired", now=now, run=run_id, stage=run.stage, rule=firing.rule,
                       reason=firing.reason, value=firing.value, threshold=firing.threshold,
                       step=firing.step, action=firing.action, attempt=run.attempt,
                       actor=self.actor)
            if firing.action == "stop":
                self._request_stop(txn, state, run_id, firing.rule, firing.reason, now,
                                   value=firing.value, step=firing.step)

    # ------------------------------------------------------------------ stops
    def _advance_stops(self, state: CampaignState, now: datetime) -> None:
        """SIGKILL what is left of a stopped run's group once the grace has passed. The
        exit itself (run_exited, stop_done, stage_finished) is recorded by _record_exits
        when the wrapper is gone, so the three always land together."""
        grace = self.campaign.settings.stop_grace_s
        for run in state.runs.values():
            stop = run.stop
            if stop is None or stop.done or run.state != RUNNING or stop.at is None \
                    or not self._mine_run(run.id):
                continue
            if self._age_s(stop.seq, stop.at, now) < grace or \
                    not self.supervisor.group_alive(run.pgid, run.marker):
                continue
            self.supervisor.signal_group(run.pid, run.pgid, run.create_time, signal.SIGKILL,
                                         run.marker)
            if run.pgid:
                self.supervisor.kill_leftovers(run.pgid, run.pid, run.create_time, run.marker)

    def wait_stopped(self, run_id: str, timeout: float, poll: float = 0.1) -> bool:
        """Drive a stop to its end (grace, SIGKILL, journal) from a one-shot command."""
        deadline = self.clock.monotonic() + timeout
        while self.clock.monotonic() < deadline:
            state = self.state()
            self._record_exits(state, self.clock.now())
            self._advance_stops(self.state(), self.clock.now())
            run = self.state().runs.get(run_id)
            if run is None or run.state != RUNNING:
                return True
            self.clock.sleep(poll)
        return False

    # ------------------------------------------------------------------ auto mode
    def _auto_start(self, state: CampaignState, now: datetime) -> None:
        if state.revised:
            return
        for stage in self.campaign.stages:
            if stage.command is None or stage.machine != self.machine:
                continue
            current = self.state(now)
            if self.stage_status(current, stage) != "ready":
                continue
            try:
                self.start(stage.id, now=now, auto=True)
            except ActionRefused:
                continue

    def until_done(self, state: CampaignState) -> ExitVerdict:
        """0: every essential stage done (and the question closed, when the plan has a
        conclusion rule); 1: an essential stage stopped/failed; 3: waiting for a person;
        4: every essential stage done, but the question is not closed."""
        statuses = {s.id: self.stage_status(state, s) for s in self.campaign.stages}
        if any(v == RUNNING for v in statuses.values()):
            return ExitVerdict(None, "running")
        if any(r.stop is not None and not r.stop.done and r.state == RUNNING
               for r in state.runs.values()):
            return ExitVerdict(None, "stopping")
        if self.auto and not state.revised and any(v == "ready" for v in statuses.values()):
            return ExitVerdict(None, "starting")
        if self._judging or any(
                has_slow_checks(self.campaign.runs[r])
                for r in awaiting_verdict(self.campaign, state)):
            return ExitVerdict(None, "judging")  # a reload check still runs in the background
        essential = [s for s in self.campaign.stages if s.category == "essential"]
        broken = [s.id for s in essential if statuses[s.id] in (FAILED, STOPPED)]
        if broken:
            return ExitVerdict(1, f"essential stage {', '.join(broken)} "
                                  f"{statuses[broken[0]]}")
        if all(statuses[s.id] == DONE for s in essential):
            if self.campaign.conclusion is not None:
                verdict = conclude_now(self.campaign, state)
                if not verdict.closed:
                    return ExitVerdict(4, "every essential stage is done, but the question is "
                                          f"not closed: {verdict.text}")
                return ExitVerdict(0, f"every essential stage is done; {verdict.text}")
            return ExitVerdict(0, "every essential stage is done")
        if state.pending_decisions:
            return ExitVerdict(3, f"waiting for a decision at {', '.join(state.pending_decisions)}")
        if state.revised:
            return ExitVerdict(3, "the question is under revision")
        waiting = [sid for sid, v in statuses.items() if v in ("needs-person", "ready")]
        return ExitVerdict(3, f"waiting for a person: {', '.join(waiting) or 'nothing startable'}")

    # ------------------------------------------------------------------ deadline
    def expected_export_bytes(self) -> int | None:
        return expected_export_bytes(self.campaign, {
            run_id: view.newest.size_bytes if view.newest else None
            for run_id, view in self._ckpt_views.items()})

    def _verified_export(self) -> bool:
        return any(ev.get("kind") == "export_done" and ev.get("verified")
                   for ev in self.journal.events()[-200:])

    def _deadline_guard(self, state: CampaignState, now: datetime) -> None:
        """D19: results must leave the box before the window ends. Warn once when the end
        is near without a verified export; when the forecast no longer leaves time for
        export and retrieval, warn loudly and, with ``on_deadline: stop-optional``, stop
        the optional runs and start the export."""
        left = (self.campaign.package.end - now).total_seconds()
        exported = self._verified_export()
        if 0 < left <= self.campaign.settings.deadline_warn_s and not exported:
            self._journal_once("warning", "deadline_near", now, source="window",
                               message=f"{format_duration(left)} left in the rental window "
                                       "and no verified export: export and fetch (D19)")
        if self.campaign.package.start > now:
            return
        fc = forecast(self.campaign, state, now, progress_of(self.campaign, self._streams)[0])
        times = closing_times(self.campaign, self.expected_export_bytes(), self._export_bytes)
        text = deadline_check(self.campaign, now, work_end(self.campaign, fc.stage_end),
                              exported, times)
        if text is None:
            return
        day = now.strftime("%Y%m%d%H")  # the loud warning repeats at most hourly
        self._journal_once("warning", f"deadline:{day}", now, source="deadline", message=text)
        if on_deadline(self.campaign) != "stop-optional":
            return
        for run in state.runs.values():
            stage = self.campaign.stage_of_run(run.id)
            if run.state == RUNNING and run.stop is None and stage is not None \
                    and stage.category in OPTIONAL_CATEGORIES and stage.machine == self.machine:
                with contextlib.suppress(ActionRefused):
                    self.stop(run.id, "window deadline: export and retrieval need the time "
                                      "left (D19)", now=now, rule="deadline")
        export = next((s for s in self.campaign.stages if (s.role or s.id) == "export"), None)
        if export is not None and export.command is not None \
                and state.stages[export.id].state == PENDING and export.machine == self.machine:
            with contextlib.suppress(ActionRefused):
                self.start(export.id, force=True, now=now)

    # ------------------------------------------------------------------ hooks
    def _run_hooks(self, now: datetime) -> None:
        hooks = self.campaign.hooks
        if not hooks:
            return
        for failure in self._hook_runner.poll():
            self.journal.append("warning", now=now, source="hook", message=failure)
        deciders = {s.id for s in self.campaign.stages if s.decision_point}
        for line in list(self._fresh):
            event = dict(line.fields)
            if "machine" in event:
                continue  # another machine's event: its own cockpit runs its hooks
            name = hook_event_name(event, deciders)
            if name is None or name not in hooks:
                continue
            if self._age_s(event.get("seq"), parse_t(event), now) > HOOK_MAX_AGE_S:
                continue  # history from before this cockpit watched: no burst of old alerts
            key = f"hook:{name}:{event.get('seq')}"
            with self.journal.transaction() as txn:
                if any(ev.get("key") == key for ev in txn.events):
                    continue
                try:
                    pid = self._hook_runner.launch(hooks[name], event, name)
                except OSError as exc:
                    txn.append("warning", now=now, key=key, source="hook",
                               message=f"hook {name} could not start: {exc}")
                    continue
                txn.append("hook_started", now=now, key=key, hook=name, pid=pid,
                           for_seq=event.get("seq"))
