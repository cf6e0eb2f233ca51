"""Acceptance checks: the announced checks a run's result must pass (D15, D20, D23).

This module evaluates a run's ``acceptance:`` list (read and validated with the plan,
by :mod:`cockpit.campaign.sections_runs`) against what the run left behind, and
``auto_accept`` which journals the verdict once per ended run, claimed under the
journal lock so two cockpits never both record it. Also the shared readers the export
needs: last metric values, prediction ids, the newest complete checkpoint.

Checks (one key each)::

    acceptance:
      - {metric: val/accuracy, min: 0.8}      # last reported value; min and/or max
      - {predictions: non_empty}              # the predictions file has records
      - {predictions: expected_ids}           # ...exactly the ids of expected_ids
      - {checkpoint: reloads}                 # newest complete checkpoint reloads
"""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from cockpit.campaign.model import Campaign, MetricCheck, PredictionsCheck, Run
from cockpit.common.event_kinds import RESULT_ACCEPTED, RESULT_REJECTED
from cockpit.common.metric_names import lookup
from cockpit.common.safe_json import loads_bounded
from cockpit.journal.fold import FAILED, NOT_STARTED, STOPPED, SUCCEEDED, CampaignState
from cockpit.journal.writer import Event, JournalWriter
from cockpit.runs.attempts import attempt_start
from cockpit.runs.blind import (
    BLIND,
    Evidence,
    blind_reason,
    conclusion_runs,
    declared_sources,
    evidence_problems,
    read_evidence,
    rules_blind,
)
from cockpit.runs.checkpoints.discovery import CheckpointInfo
from cockpit.runs.checkpoints.reload_check import (
    VerifyReport,
    run_verify_command,
    verify_checkpoint,
)
from cockpit.runs.checkpoints.verifier import reported_scanner, run_stream
from cockpit.runs.metrics.tail import last_values
from cockpit.runs.supervisor import report_path

ENDED_RUN_STATES = (SUCCEEDED, FAILED, STOPPED)

Verifier = Callable[..., VerifyReport]


# ------------------------------------------------------------------ readers


def metric_paths(campaign: Campaign, run_id: str) -> list[Path]:
    run = campaign.runs.get(run_id)
    paths = [campaign.resolve(p) for p in (run.metrics if run else ())]
    report = report_path(campaign, run_id)
    if report not in paths:
        paths.append(report)
    return paths


def last_metrics(campaign: Campaign, state: CampaignState | None, run_id: str,
                 names: Iterable[str] | None = None) -> dict[str, float]:
    """The last reported value of each metric of the run's latest attempt, however big
    its files. ``names``: the metrics the caller needs (read from the files' ends)."""
    run = state.runs.get(run_id) if state is not None else None
    started = run.started_at.timestamp() - 1.0 if run and run.started_at else None
    spec = campaign.runs.get(run_id)
    wanted = None if names is None else list(names)
    values = last_values(metric_paths(campaign, run_id), wanted, since=started,
                         metric_names=spec.metric_names if spec else None).values
    for name in wanted or ():  # a name asked as an alias: its canonical value (eval_loss)
        if name not in values and (value := lookup(values, name)) is not None:
            values[name] = value
    return values


def read_prediction_ids(path: Path) -> list[str]:
    """Ids in a predictions file: JSON list of objects with "id", JSON lines, or CSV with an
    id column. ValueError (in words) when the file cannot be read that way."""
    text = path.read_text(encoding="utf-8", errors="replace")
    stripped = text.strip()
    if not stripped:
        return []
    if path.suffix.lower() == ".csv" or (not stripped.startswith(("[", "{"))):
        rows = list(csv.DictReader(io.StringIO(text)))
        if not rows:
            return []
        if "id" not in rows[0]:
            raise ValueError(f"{path.name}: CSV without an id column")
        return [str(r["id"]).strip() for r in rows]
    if stripped.startswith("["):
        try:
            data = loads_bounded(stripped)
        except ValueError as exc:
            raise ValueError(f"{path.name}: not valid JSON ({exc})") from None
        return [_record_id(path, i, rec) for i, rec in enumerate(data)]
    ids = []
    for i, line in enumerate(stripped.splitlines()):
        if not line.strip():
            continue
        try:
            ids.append(_record_id(path, i, loads_bounded(line)))
        except ValueError as exc:
            raise ValueError(f"{path.name} line {i + 1}: {exc}") from None
    return ids


def _record_id(path: Path, index: int, record: Any) -> str:
    if not isinstance(record, dict) or "id" not in record:
        raise ValueError(f"{path.name}: record {index + 1} has no \"id\"")
    return str(record["id"])


def read_expected_ids(path: Path) -> list[str]:
    """A file of ids, one per line (blank lines and # comments ignored)."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [s.strip() for s in lines if s.strip() and not s.strip().startswith("#")]


def compare_ids(expected: list[str], found: list[str]) -> list[str]:
    """Problems in words: missing, extra and duplicated ids (empty when they match)."""
    exp, got = set(expected), set(found)
    problems = []
    missing = sorted(exp - got)
    extra = sorted(got - exp)
    if missing:
        problems.append(f"{len(missing)} expected id(s) missing: {_few(missing)}")
    if extra:
        problems.append(f"{len(extra)} unexpected id(s): {_few(extra)}")
    if len(found) != len(got):
        dup = sorted({i for i in found if found.count(i) > 1})
        problems.append(f"duplicated id(s): {_few(dup)}")
    return problems


def _few(items: list[str], n: int = 5) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def newest_checkpoint(campaign: Campaign, run_id: str, *, ended: bool = True,
                      all_complete: bool = False, now: float | None = None,
                      since: float | None = None) -> list[CheckpointInfo]:
    """The newest complete checkpoint (or all complete ones, newest first).

    ``now`` (epoch seconds) is the caller's clock for the settle time (the engine passes
    its tick's); only a caller without a clock of its own gets the wall clock. ``since``:
    the run's current attempt's start (an earlier attempt's checkpoints are left out)."""
    run = campaign.runs.get(run_id)
    if run is None or run.checkpoints is None:
        return []
    # An ended run writes nothing more: no need to wait for files to settle. A running
    # one's reported checkpoints are complete at once; only unreported ones settle.
    scanner = reported_scanner(campaign, run, settle_seconds=0.0 if ended else 2.0,
                               since=since)
    assert scanner is not None  # run.checkpoints is set
    view = scanner.scan(time.time() if now is None else now)
    if all_complete:
        return list(view.complete)
    return [view.complete[0]] if view.complete else []


def reload_artifact(campaign: Campaign, run: Run, path: Path,
                    verifier: Verifier = verify_checkpoint) -> VerifyReport:
    """Reload ``path`` in a fresh process the way the run declares (verify_command or worker)."""
    settings = campaign.settings
    if run.verify_command:
        return run_verify_command(list(run.verify_command), path, settings.verify_timeout_s,
                                  cwd=campaign.folder)
    return verifier(path, run.kind, timeout=settings.verify_timeout_s,
                    allow_unsafe=run.allow_unsafe_pickle, base_model=run.base_model,
                    base_revision=run.base_revision)


# ------------------------------------------------------------------ evaluation


@dataclass(frozen=True)
class Judgement:
    """The acceptance checks' outcome: the verdict, a reason per check, and which checks
    failed, by key (``metric:NAME``, ``predictions:WHAT``, ``checkpoint:reloads``, or
    ``run`` when the run did not succeed and no check could run). The conclusion reads
    the keys (D2): a run rejected only by its check on the question's metric is judged
    on that metric; one rejected for another reason is not."""

    ok: bool
    reasons: list[str]
    failed: tuple[str, ...] = ()


def check_key(entry: Any) -> str:
    """The key a failed acceptance entry is journaled under (``failed`` of a verdict)."""
    if isinstance(entry, MetricCheck):
        return f"metric:{entry.metric}"
    if isinstance(entry, PredictionsCheck):
        return f"predictions:{entry.what}"
    return "checkpoint:reloads"


def evaluate_acceptance(campaign: Campaign, state: CampaignState, run_id: str, *,
                        verifier: Verifier = verify_checkpoint,
                        now: datetime | None = None) -> tuple[bool, list[str]]:
    """(accepted, reasons in words). A stopped run is never accepted (D15).

    ``now``: the caller's clock (the engine's tick) for the checkpoint settle time."""
    judged = judge_run(campaign, state, run_id, verifier=verifier, now=now)
    return judged.ok, judged.reasons


def judge_run(campaign: Campaign, state: CampaignState, run_id: str, *,
              verifier: Verifier = verify_checkpoint,
              now: datetime | None = None) -> Judgement:
    """The acceptance checks of an ended run, each with its reason and key."""
    spec = campaign.runs.get(run_id)
    run = state.runs.get(run_id)
    if spec is None or run is None:
        return Judgement(False, [f"run {run_id!r} is not in the campaign"], ("run",))
    if run.stop is not None or run.state == STOPPED:
        why = run.stop.reason if run.stop else "stopped"
        return Judgement(False, [f"stopped ({why}): a stopped run is never an accepted "
                                 "result (D15)"], ("run",))
    if run.state == FAILED:
        return Judgement(False, [f"the run failed (exit code {run.exit_code})"], ("run",))
    if run.state != SUCCEEDED:
        return Judgement(False, [f"the run has not finished ({run.state})"], ("run",))
    if not spec.acceptance:
        return Judgement(False, ["the run declares no acceptance checks"], ("none",))
    reasons: list[str] = []
    failed: list[str] = []
    metrics: dict[str, float] | None = None
    evidence = run_evidence(campaign, state, run_id)
    for entry in spec.acceptance:
        if isinstance(entry, MetricCheck):
            if metrics is None:
                metrics = last_metrics(campaign, state, run_id, names=[
                    e.metric for e in spec.acceptance if isinstance(e, MetricCheck)])
            passed, why = _metric_check(entry, metrics)
            blind = None if entry.metric in metrics else blind_reason(
                entry.metric, run.state, evidence.last.keys(), evidence.source)
            why = f"{BLIND}: {blind}" if blind else why
        elif isinstance(entry, PredictionsCheck):
            passed, why = _predictions_check(campaign, spec, entry.what)
        else:
            passed, why = _checkpoint_check(campaign, spec, verifier, now,
                                            attempt_start(run))
        if not passed:
            failed.append(check_key(entry))
        reasons.append(why)
    # What no check names still counts: a stop rule never saw its metric, a NaN loss.
    problems = evidence_problems(campaign.stop_rules, run_id, run.state, evidence)
    if problems:
        failed.append("evidence")  # a reason beside the question's metric (D2)
    return Judgement(not failed, reasons + problems, tuple(failed))


def run_evidence(campaign: Campaign, state: CampaignState, run_id: str) -> Evidence:
    """The run's latest attempt as its metric files hold it (read to the end)."""
    run = state.runs.get(run_id)
    since = run.started_at.timestamp() - 1.0 if run and run.started_at else None
    # what an earlier attempt left in the run's files is not this attempt's evidence
    stream = run_stream(campaign, run_id, attempt_start(run) if run else None)
    return read_evidence(stream, declared_sources(campaign, run_id), since)


def blind_rules_of(campaign: Campaign, state: CampaignState, run_id: str) -> list[str]:
    """Each stop rule (and the conclusion's metric) the run, started, is blind to, in
    words: REPORT.md lists them."""
    run = state.runs.get(run_id)
    if run is None or run.state == NOT_STARTED:
        return []
    evidence = run_evidence(campaign, state, run_id)
    out = [f"rule `{rule}`: {why}"
           for rule, why in rules_blind(campaign.stop_rules, run_id, run.state, evidence)]
    spec = campaign.conclusion
    if spec is not None and run_id in conclusion_runs(campaign):
        why = blind_reason(spec.metric, run.state, evidence.last.keys(), evidence.source)
        if why is not None:
            out.append(f"the conclusion's metric: {why}")
    return out


def accept_problems(campaign: Campaign, state: CampaignState, run_id: str) -> list[str]:
    """Why a run without failing checks still needs ``--override --note`` to be accepted:
    it ended blind to a stop rule, or its last loss is not finite (issue 22)."""
    run = state.runs.get(run_id)
    if run is None:
        return []
    return evidence_problems(campaign.stop_rules, run_id, run.state,
                             run_evidence(campaign, state, run_id))


def _metric_check(entry: MetricCheck, metrics: Mapping[str, float]) -> tuple[bool, str]:
    name = entry.metric
    value = metrics.get(name)
    if value is None:
        return False, f"{name} was never reported"
    if not math.isfinite(value):
        return False, f"{name} is {value} (not finite)"
    low, high = entry.min, entry.max
    if low is not None and value < low:
        return False, f"{name} {value:g} is below the minimum {low:g}"
    if high is not None and value > high:
        return False, f"{name} {value:g} is above the maximum {high:g}"
    bounds = " and ".join(b for b in (f">= {low:g}" if low is not None else "",
                                      f"<= {high:g}" if high is not None else "") if b)
    return True, f"{name} {value:g} {bounds}"


def _predictions_check(campaign: Campaign, run: Run, what: str) -> tuple[bool, str]:
    if run.predictions is None:
        return False, "no predictions file is named"
    path = campaign.resolve(run.predictions)
    if not path.is_file():
        return False, f"predictions file {run.predictions} does not exist"
    try:
        ids = read_prediction_ids(path)
    except (OSError, ValueError) as exc:
        return False, f"predictions unreadable: {exc}"
    if not ids:
        return False, f"predictions file {run.predictions} is empty"
    if what == "expected_ids":
        if run.expected_ids is None:
            return False, "no expected_ids file is named"
        try:
            expected = read_expected_ids(campaign.resolve(run.expected_ids))
        except OSError as exc:
            return False, f"expected ids unreadable: {exc.strerror or exc}"
        problems = compare_ids(expected, ids)
        if problems:
            return False, "predictions: " + "; ".join(problems)
        return True, f"predictions hold exactly the {len(expected)} expected ids"
    return True, f"predictions hold {len(ids)} records"


def _checkpoint_check(campaign: Campaign, run: Run, verifier: Verifier,
                      now: datetime | None, since: float | None = None) -> tuple[bool, str]:
    found = newest_checkpoint(campaign, run.id, now=None if now is None else now.timestamp(),
                              since=since)
    if not found:
        return False, "no complete checkpoint found"
    report = reload_artifact(campaign, run, found[0].path, verifier)
    if report.ok:
        return True, f"checkpoint {found[0].path.name} reloads in a fresh process"
    return False, f"checkpoint {found[0].path.name} does not reload: " + "; ".join(
        report.problems or ("unknown error",))


# ------------------------------------------------------------------ auto accept


def has_slow_checks(run: Run) -> bool:
    """Whether judging the run starts a process (a reload): the engine runs those checks
    in the background so its tick never waits (the other checks read files, bounded)."""
    return any(not isinstance(e, (MetricCheck, PredictionsCheck)) for e in run.acceptance)


def awaiting_verdict(campaign: Campaign, state: CampaignState) -> list[str]:
    """Ended runs that declare acceptance checks and have no verdict yet."""
    out = []
    for run_id, run in state.runs.items():
        spec = campaign.runs.get(run_id)
        if spec is None or not spec.acceptance or not spec.produces_result \
                or run.verdict is not None:
            continue  # a run without checks, or one that produces no result, or judged
        if run.state in ENDED_RUN_STATES:
            out.append(run_id)
    return out


# The state of the events read under the lock (with the peers' copies: the engine's fold).
FoldOwn = Callable[[datetime], CampaignState]  # the state under the journal lock


class Judge(Protocol):
    """What judging needs of an engine: the plan, its journal, the state and the fold
    of the events read under the lock (:class:`cockpit.engine.Engine` is one)."""

    @property
    def campaign(self) -> Campaign: ...

    @property
    def journal(self) -> JournalWriter: ...

    @property
    def read_only(self) -> bool: ...

    def state(self, now: datetime | None = None) -> CampaignState: ...

    def fold_locked(self, now: datetime) -> CampaignState: ...


def record_verdict(journal: JournalWriter, fold_own: FoldOwn, campaign: Campaign,
                   run_id: str, attempt: int | None, accepted: bool,
                   reasons: list[str], now: datetime,
                   failed: Sequence[str] | None = None) -> Event | None:
    """Journal the verdict under the lock, unless another cockpit judged the run first
    or a new attempt began meanwhile. ``failed``: the keys of the checks that failed
    (:class:`Judgement`), journaled with a rejection so the conclusion knows whether
    the run was judged on the question's metric (D2)."""
    spec = campaign.runs[run_id]
    with journal.transaction() as txn:
        current = fold_own(now).runs.get(run_id)
        if current is None or current.verdict is not None or current.attempt != attempt:
            return None
        kind = RESULT_ACCEPTED if accepted else RESULT_REJECTED
        extra: dict[str, Any] = {} if accepted or failed is None else {"failed": list(failed)}
        return txn.append(
            kind, now=now, run=run_id, stage=current.stage, result=spec.result_id,
            reason="; ".join(reasons), checks=reasons, attempt=attempt, actor="auto", **extra)


def auto_accept(engine: Judge, now: datetime, *,
                verifier: Verifier = verify_checkpoint) -> list[Event]:
    """Journal ``result_accepted`` / ``result_rejected`` for each ended run that declares
    acceptance and has no verdict yet, here and now (a one-shot caller; the engine's tick
    hands the runs with a reload check to its background verifier instead). The checks
    run outside the lock (a reload can take minutes); the verdict is appended under it,
    after checking nobody recorded one first."""
    if engine.read_only:
        return []
    campaign = engine.campaign
    state = engine.state(now)
    written: list[Event] = []
    for run_id in awaiting_verdict(campaign, state):
        run = state.runs[run_id]
        judged = judge_run(campaign, state, run_id, verifier=verifier, now=now)
        event = record_verdict(engine.journal, engine.fold_locked, campaign, run_id, run.attempt,
                               judged.ok, judged.reasons, now, judged.failed)
        if event is not None:
            written.append(event)
    return written
