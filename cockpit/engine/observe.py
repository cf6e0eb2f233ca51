"""What the tick observes: exits, metric streams, checkpoints (and their background
verification), telemetry.

Observations either become journal events (a run that exited, a checkpoint verified,
a lost GPU) or are kept for the snapshot (the latest metrics, checkpoint scans, the
GPU and host readings). Nothing here decides to act on a run: that is ``guards``.

A background verification is claimed in the journal (``verify_started``) with its
owner (pid and start time of the cockpit) and a time limit; a claim whose owner is
gone (a cockpit killed -9) or whose limit passed is claimed again, so a checkpoint is
never left unverified for good. A run watched from its start to its exit by this
cockpit has its duration journaled from the monotonic clock (``elapsed_s``).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from cockpit.close.acceptance import (
    Judgement,
    awaiting_verdict,
    has_slow_checks,
    judge_run,
    record_verdict,
)
from cockpit.engine.core import EngineCore, parse_t
from cockpit.engine.ports import ancestor_run
from cockpit.journal.fields import Event
from cockpit.journal.fold import (
    DONE,
    FAILED,
    NOT_STARTED,
    RUNNING,
    STOPPED,
    CampaignState,
    RunState,
)
from cockpit.journal.log import parse_time
from cockpit.runs.checkpoints.discovery import CheckpointScanner
from cockpit.runs.checkpoints.verifier import (
    feed_checkpoint_reports,
    report_fields,
    run_stream,
    scanner_for,
)
from cockpit.runs.exit_reason import failure_reason
from cockpit.runs.metrics.stream import MetricStream
from cockpit.runs.metrics.tail import seed_from_tail
from cockpit.runs.supervisor import no_space_note, stage_gpus
from cockpit.telemetry import IdleDetector

# How long past the reload's own time limit a verification claim still holds.
VERIFY_CLAIM_MARGIN_S = 60.0
# How far back the cheap checks look for a claim (the lock-held check reads everything).
VERIFY_CLAIM_LOOKBACK = 2000


class Observing(EngineCore):
    _verifying_run: tuple[str, int | None] | None = None

    # ------------------------------------------------------------------ exits
    def _record_exits(self, state: CampaignState, now: datetime) -> None:
        """A supervised stage whose wrapper is gone: run_exited (+ stop_done), stage_finished."""
        for st in state.stages.values():
            if st.state != RUNNING or st.manual or not st.pid or not self._mine(st.id):
                continue
            if self.supervisor.alive(st.pid, st.create_time):
                continue
            if st.marker and self.supervisor.group_alive(st.pgid, st.marker):
                # The wrapper is gone (kill -9) but the training lives on in its group: the
                # run is alive while its group is. Rules keep firing, stop ends the group,
                # a restart is refused; the exit is recorded when the group is gone.
                self._journal_once(
                    "warning", f"orphan:{st.id}:{st.attempt}", now, source="supervisor",
                    stage=st.id, run=st.run,
                    message=f"stage {st.id}: its wrapper (pid {st.pid}) is gone but its "
                            f"process group {st.pgid} lives on; it counts as running until "
                            "the group ends (`cockpit stop` ends it)")
                continue
            info = self.supervisor.read_exit(st.exit_file) or {}
            code = info.get("code")
            # Watched from its start: its duration on the monotonic clock, not the wall's.
            measured = (round(self._mono() - self._mono_at[st.attempt], 3)
                        if st.attempt is not None and self._live(st.attempt) else None)
            with self.journal.transaction() as txn:
                current = self._fold(txn.events, now).stages[st.id]
                if current.state != RUNNING or current.attempt != st.attempt:
                    continue  # another cockpit recorded it first
                run = current.run and self._fold(txn.events, now).runs.get(current.run)
                stopped = bool(run and run.stop is not None and run.attempt == st.attempt)
                outcome = STOPPED if stopped else (DONE if code == 0 else FAILED)
                reason = None
                if outcome == FAILED:
                    # Read once, here: the exit in words and the last line of its stderr,
                    # journaled so every face and REPORT.md say the same (not per tick).
                    reason = (failure_reason(code, info.get("signal"), st.exit_file)
                              or "process vanished without an exit code (killed?)")
                    if code is None and st.marker and not info:
                        reason = ("its wrapper and every process of its group are gone, "
                                  "without an exit code (killed?)")
                    full = no_space_note(st.exit_file) if code is None else None
                    if full:  # not a mystery: the disk is full
                        reason = f"ended without an exit code: {full}"
                if current.run:
                    txn.append("run_exited", now=now, run=current.run, stage=st.id, code=code,
                               attempt=st.attempt, signal=info.get("signal"),
                               **({} if measured is None else {"elapsed_s": measured}))
                    if stopped and run and run.stop is not None and not run.stop.done:
                        txn.append("stop_done", now=now, run=current.run, stage=st.id,
                                   attempt=st.attempt, rule=run.stop.rule)
                txn.append("stage_finished", now=now, stage=st.id, outcome=outcome, code=code,
                           reason=reason, **({} if measured is None else {"elapsed_s": measured}))

    # ------------------------------------------------------------------ metrics
    def _stream(self, run_id: str, attempt: Any, started: float | None = None) -> MetricStream:
        if run_id not in self._streams or self._stream_attempt.get(run_id) != attempt:
            stream = run_stream(self.campaign, run_id)
            # A huge file takes several polls to read from the start (what the rules
            # need); its tail gives the snapshot the real last values at once.
            seed_from_tail(stream, since=started)
            self._streams[run_id] = stream
            self._stream_attempt[run_id] = attempt
        return self._streams[run_id]

    def _poll_streams(self, state: CampaignState, now: datetime) -> dict[str, list[Any]]:
        """New metric points per run of the current attempt (points of older attempts skipped)."""
        fresh: dict[str, list[Any]] = {}
        for run in state.runs.values():
            if run.state == NOT_STARTED or not self._mine_run(run.id):
                continue  # another machine's run: its files are there, its cockpit reads them
            started = run.started_at.timestamp() - 1.0 if run.started_at else None
            stream = self._stream(run.id, run.attempt, started)
            points = stream.poll()
            fresh[run.id] = [p for p in points
                             if started is None or p.t is None or p.t >= started]
            scanner = self._scanner(run.id)
            events = stream.poll_events()
            if scanner is not None:
                feed_checkpoint_reports(self.campaign, scanner, events)
        self._scan_checkpoints(state, now)
        return fresh

    # ------------------------------------------------------------------ checkpoints
    def _scanner(self, run_id: str) -> CheckpointScanner | None:
        if run_id not in self._scanners:
            run = self.campaign.runs.get(run_id)
            self._scanners[run_id] = scanner_for(self.campaign, run) if run else None
        return self._scanners[run_id]

    def _scan_checkpoints(self, state: CampaignState, now: datetime) -> None:
        now_ts = now.timestamp()  # file ages and the settle time, on the engine's clock
        for run in state.runs.values():
            scanner = self._scanner(run.id)
            if scanner is not None and run.state != NOT_STARTED:
                self._ckpt_views[run.id] = scanner.scan(now_ts)

    def _auto_verify(self, state: CampaignState, now: datetime) -> None:
        """Verify new checkpoints by reloading them in a fresh process (D17), in the
        background, one at a time; the first checkpoint of a run at once, then at most
        every ``verify_every``. Claimed in the journal so two cockpits verify once."""
        results = self._verifier.results()
        for run_id, attempt, report in results:
            self.journal.append("checkpoint_verified", now=now, run=run_id, attempt=attempt,
                                auto=True, actor=self.actor, **report_fields(report))
        if results:
            state = self.state(now)  # what was just verified is not claimed again
        if self._verifier.busy:
            return
        every = self.campaign.settings.verify_every_s
        for run in state.runs.values():
            view = self._ckpt_views.get(run.id)
            spec = self.campaign.runs.get(run.id)
            if run.state != RUNNING or view is None or view.newest is None or spec is None \
                    or not self._mine_run(run.id):
                continue
            path = str(view.newest.path)
            mine = [v for v in run.verified if v.get("attempt") == run.attempt]
            if any(v.get("path") == path for v in mine):
                continue
            if mine and self._age_s(mine[-1].get("seq"), parse_t(mine[-1]), now) < every:
                continue
            if self._verify_claimed(run.id, run.attempt, path, now):
                continue  # another cockpit, alive and within its limit, verifies it
            with self.journal.transaction() as txn:
                claims = self._verify_claims(txn.events, run.id, run.attempt, path)
                if claims and self._claim_holds(claims[-1], now):
                    continue
                key = f"verify:{run.id}:{run.attempt}:{path}"
                if claims:  # the earlier claim's owner is gone or its limit passed: again
                    key += f":retry{claims[-1].get('seq')}"
                txn.append("verify_started", now=now, key=key, run=run.id, path=path,
                           attempt=run.attempt, owner_pid=self.owner[0],
                           owner_start=self.owner[1], limit_s=self._verify_limit_s(),
                           **({"retry": claims[-1].get("seq")} if claims else {}))
            self._verifying_run = (run.id, run.attempt)
            self._verifier.submit(self.campaign, spec, Path(path), run.attempt)
            return

    def _verify_limit_s(self) -> float:
        """How long a verification claim holds: the reload's own time limit and a margin."""
        return float(self.campaign.settings.verify_timeout_s) + VERIFY_CLAIM_MARGIN_S

    @staticmethod
    def _verify_claims(events: list[Event], run_id: str, attempt: Any,
                       path: str) -> list[Event]:
        return [ev for ev in events if ev.get("kind") == "verify_started"
                and ev.get("run") == run_id and ev.get("attempt") == attempt
                and ev.get("path") == path]

    def _claim_holds(self, claim: Event, now: datetime) -> bool:
        """A verification claim still stands: its owner lives and its limit has not passed
        (measured on the monotonic clock from when this cockpit first read it)."""
        limit = claim.get("limit_s")
        if not isinstance(limit, (int, float)) or isinstance(limit, bool):
            limit = self._verify_limit_s()
        age = self._age_s(claim.get("seq"), parse_time(str(claim.get("t"))), now)
        return age < float(limit) and self._owner_alive(claim)

    def _verify_claimed(self, run_id: str, attempt: Any, path: str, now: datetime) -> bool:
        """The cheap check before the lock: a claim of that checkpoint that still stands."""
        claims = self._verify_claims(self.journal.events()[-VERIFY_CLAIM_LOOKBACK:], run_id,
                                     attempt, path)
        return bool(claims) and self._claim_holds(claims[-1], now)

    def _verifying(self, run: RunState) -> bool:
        """The run's newest checkpoint is claimed for verification and has no verdict yet
        (verified here, by a live cockpit, or about to be claimed again because its owner
        died): the ``restart`` rule waits for that verdict rather than stopping a run
        whose restart is being proven. A verdict (pass or fail) always comes: the claim's
        owner or its time limit ends it."""
        if self._verifier.busy and self._verifying_run == (run.id, run.attempt):
            return True
        view = self._ckpt_views.get(run.id)
        if view is None or view.newest is None:
            return False
        path = str(view.newest.path)
        if any(v.get("path") == path for v in run.verified if v.get("attempt") == run.attempt):
            return False
        return bool(self._verify_claims(self.journal.events()[-VERIFY_CLAIM_LOOKBACK:],
                                        run.id, run.attempt, path))

    # ------------------------------------------------------------------ acceptance
    def _judge_runs(self, now: datetime) -> None:
        """Acceptance verdicts for ended runs (D15). Checks that only read files run here;
        a run with a reload check is judged by the background verifier and its verdict
        journaled on the tick after it finished: a tick never waits for a process."""
        for key, value in self._verifier.check_results():
            self._judging.discard(key)
            judged: Judgement = value
            record_verdict(self.journal, self._fold, self.campaign, str(key[0]), key[1],
                           judged.ok, judged.reasons, now, judged.failed)
        state = self.state(now)
        for run_id in awaiting_verdict(self.campaign, state):
            if not self._mine_run(run_id):
                continue  # judged on its own machine
            run = state.runs[run_id]
            key = (run_id, run.attempt)
            if key in self._judging:
                continue
            spec = self.campaign.runs[run_id]
            if not has_slow_checks(spec):
                judged = judge_run(self.campaign, state, run_id, now=now)
                record_verdict(self.journal, self._fold, self.campaign, run_id, run.attempt,
                               judged.ok, judged.reasons, now, judged.failed)
                continue

            def check(run_id: str = run_id) -> Judgement:
                return judge_run(self.campaign, state, run_id, now=now)

            def failed(exc: Exception) -> Judgement:
                return Judgement(False, [f"the acceptance checks could not run: {exc}"],
                                 ("checks",))

            if self._verifier.submit_check(key, check, failed):
                self._judging.add(key)

    # ------------------------------------------------------------------ telemetry
    def _sample_telemetry(self, now: datetime) -> None:
        warnings: list[str] = []
        if self.gpu_sampler is not None:
            self._gpu = self.gpu_sampler.sample()
            warnings.extend(self._idle_warnings(now))
            if not self.read_only:
                for event in self._gpu.events:
                    # A lost GPU is one event; each Xid / ECC increase is its own.
                    key = f"gpu:{event.kind}:{event.gpu}" + (
                        "" if event.kind == "gpu_lost" else f":{event.code}:{event.at}")
                    self._journal_once("warning", key, now,
                                       message=event.message, source="gpu", gpu=event.gpu,
                                       event=event.kind)
        if self.host_sampler is not None:
            self._host = self.host_sampler.sample()
            warnings.extend(self._host.warnings)
        self._telemetry_warnings = tuple(warnings)

    def _idle_warnings(self, now: datetime) -> list[str]:
        """"GPU idle while a GPU stage runs": the most common waste on a rented box."""
        state = self.state(now)
        held: set[int] = set()
        for stage in self.campaign.stages:
            if stage.machine == self.machine and state.stages[stage.id].state == RUNNING:
                held |= set(stage_gpus(stage, self.campaign.package.offer.gpus))
        out = []
        for gpu in self._gpu.gpus:
            detector = self._idle.setdefault(gpu.index, IdleDetector(*self._idle_args))
            # Idle for how long: on the monotonic clock (a wall step is not idle time).
            warning = detector.update(self._mono(), None if gpu.lost else gpu.util,
                                      gpu.index in held)
            if warning:
                out.append(f"GPU {gpu.index}: {warning}")
        return out

    def _gpu_memory_by_run(self, state: CampaignState) -> dict[str, int]:
        """Where NVML shows a run's pid (or its children) on a GPU, its memory."""
        out: dict[str, int] = {}
        pids = {run.pid: run.id for run in state.runs.values()
                if run.state == RUNNING and run.pid and self._mine_run(run.id)}
        if not pids:
            return out
        for gpu in self._gpu.gpus:
            for proc in gpu.processes:
                run_id = pids.get(proc.pid)
                if run_id is None and proc.visible:
                    run_id = ancestor_run(self.supervisor, proc.pid, pids)
                if run_id and proc.used_memory:
                    out[run_id] = out.get(run_id, 0) + proc.used_memory
        return out
