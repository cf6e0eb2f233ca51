"""The next campaign starts with a better estimate (the guide's last word, D13, D24).

``calibrate(...)`` turns the plan as decided and what the journal measured into a
calibrated copy of the campaign file: each stage's measured duration where it ran, the
pilot's measured/planned ratio applied to GPU stages that did not, the measured
save and restore costs, and the open uncertainties (:func:`uncertainties`: the open
question and the runs it waits for, runs stopped and why, failures with their last stderr
line, rules fired, results rejected, stages skipped or dropped, durations kept as planned,
saves and reloads never measured, checkpoints left on the box) as comments. The text is the decided
file's own, with only the durations replaced, so its comments and layout survive and
``cockpit check`` reads it like any campaign file. Pure: the caller gives the state and
the measured costs.
"""

from __future__ import annotations

import math
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from cockpit.campaign.model import Campaign, Stage
from cockpit.campaign.yamlread import parse_yaml
from cockpit.common.printable import printable
from cockpit.common.units import MAX_DURATION_S, format_duration
from cockpit.journal.fold import DONE, FAILED, NOT_STARTED, RUNNING, STOPPED, CampaignState
from cockpit.planning.forecast import MIN_PILOT_PROGRESS, pilot_measure, pilot_ratio

# A stage cut short (failed, stopped) under this share of its steps measured nothing
# about its whole duration: its start-up dominates (the pilot's own rule, D13).
MIN_MEASURED_PROGRESS = MIN_PILOT_PROGRESS

# The end of a plain scalar inside a block or a flow mapping: a comma, a closing brace
# or bracket, or a comment.
_PLAIN_END = re.compile(r"\s*(?:,|\}|\]|\s#|$)")


@dataclass(frozen=True)
class StageEstimate:
    stage: str
    planned_s: float
    next_s: float
    # "measured", "stopped at 20% of its steps after 4s: 4s / 0.20", "pilot ratio x1.35",
    # "as planned", "still running: as planned", "failed after 1s, progress unknown: as planned"
    source: str

    @property
    def measured(self) -> bool:
        """Whether the next duration comes from a measurement (not the plan's figure,
        scaled or not)."""
        return not (self.source.endswith("as planned") or self.source.startswith("pilot ratio"))


@dataclass(frozen=True)
class StageMeasure:
    """What the last campaign measured of a stage beyond its wall time: its run's steps
    per second over the stage's span, its run's ``max_steps``, and its GPUs' mean
    utilization (None: unknown)."""

    throughput: float | None = None
    max_steps: int | None = None
    mean_util: float | None = None


@dataclass(frozen=True)
class OpenFacts:
    """What the open uncertainties need beyond the journal, gathered by the caller (it
    reads the run files and judges the question: :mod:`cockpit.close.open_facts`), so
    :func:`uncertainties` stays pure."""

    # The question still open and the runs it waits for, in words; None: closed (or the
    # caller did not judge it).
    question: str | None = None
    # Runs whose checkpoint saves were measured (a save cost seen).
    save_measured: frozenset[str] = frozenset()
    # Run -> complete checkpoints in its folder now (only the runs whose folder was read:
    # a save cost is said never measured only of those).
    checkpoints: Mapping[str, int] = field(default_factory=dict)
    # Run -> the last meaningful line of its current attempt's stderr (printable, capped).
    stderr: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MeasuredCosts:
    """Per run: median seconds to save a checkpoint, and to restore one in a new process."""

    save_s: Mapping[str, float]
    restore_s: Mapping[str, float]


def estimates(decided: Campaign, state: CampaignState, now: datetime,
              progress: Mapping[str, float] | None = None,
              measured: Mapping[str, StageMeasure] | None = None) -> list[StageEstimate]:
    """Each stage's next duration (D13, D24); ``progress``: the fraction of its steps each
    stage's run reported (step / max_steps); ``measured``: its throughput, which times a
    stage cut short too early for its share of steps to say anything."""
    progress = progress or {}
    measured = measured or {}
    ratio = pilot_ratio(decided, state, progress)
    out: list[StageEstimate] = []
    for stage in decided.stages:
        st = state.stages.get(stage.id)
        if st is not None and st.started_at and st.ended_at and st.state == DONE:
            seconds = max(st.elapsed_s(now), 1.0)
            out.append(StageEstimate(stage.id, stage.seconds, seconds, "measured"))
        elif st is not None and st.started_at and st.ended_at and st.state in (FAILED,
                                                                               STOPPED):
            out.append(_cut_short(stage, st.state, st.elapsed_s(now), progress.get(stage.id),
                                  measured.get(stage.id)))
        elif st is not None and st.started_at and not st.ended_at:
            out.append(StageEstimate(stage.id, stage.seconds, stage.seconds,
                                     "still running: as planned"))
        elif ratio and stage.uses_gpu:
            out.append(StageEstimate(stage.id, stage.seconds, stage.seconds * ratio,
                                     f"pilot ratio x{ratio:.2f}"))
        else:
            out.append(StageEstimate(stage.id, stage.seconds, stage.seconds, "as planned"))
    return [replace(e, next_s=min(max(e.next_s, 1.0), MAX_DURATION_S)) for e in out]


def _cut_short(stage: Stage, how: str, elapsed_s: float, done: float | None,
               measure: StageMeasure | None = None) -> StageEstimate:
    """A failed or stopped stage's time says how long the whole takes only scaled by the
    share of its steps it reached; too little progress, or none reported: its steps at
    the throughput it measured, when both are known; else the plan."""
    ran = format_duration(max(elapsed_s, 1.0))
    if done is not None and done >= MIN_MEASURED_PROGRESS:
        return StageEstimate(stage.id, stage.seconds, elapsed_s / done,
                             f"{how} at {done:.0%} of its steps after {ran}: "
                             f"{ran} / {done:.2f}")
    why = ("progress unknown" if done is None else
           f"only {done:.0%} of its steps (under {MIN_MEASURED_PROGRESS:.0%})")
    rate = measure.throughput if measure is not None else None
    steps = measure.max_steps if measure is not None else None
    if rate and steps and math.isfinite(rate) and rate > 0:
        return StageEstimate(stage.id, stage.seconds, steps / rate,
                             f"{how} after {ran}, {why}: {steps} steps at the measured "
                             f"{_rate(rate)} steps/s")
    return StageEstimate(stage.id, stage.seconds, stage.seconds,
                         f"{how} after {ran}, {why}: as planned")


def uncertainties(decided: Campaign, state: CampaignState, facts: OpenFacts | None = None,
                  found: Sequence[StageEstimate] = ()) -> list[str]:
    """What the campaign left open, in words, for ``next`` and REPORT.md alike (D24: the
    next campaign starts with a shorter list): the open question and the runs it waits
    for, every stop, rejection and failure (with its last stderr line), the rules that
    warned, the stages skipped or dropped, the durations kept as planned (``found``: the
    estimates), the saves and reloads never measured and the checkpoints left on the box.
    Each is one line: run-written text is made printable and capped, so a newline in a
    reason cannot end a comment or a list item."""
    facts = facts or OpenFacts()
    out: list[str] = []
    if facts.question:
        out.append(f"the question is open: {facts.question}")
    out += _run_points(state, facts)
    out += _stage_points(decided, state, found)
    out += _checkpoint_points(decided, state, facts)
    return [printable(point, POINT_CHARS) for point in out]


# Characters of one open uncertainty (a conclusion naming many runs stays one line).
POINT_CHARS = 2000


def _run_points(state: CampaignState, facts: OpenFacts) -> list[str]:
    """Each run's stops (every attempt's), rejection or failure; the rules that fired."""
    out: list[str] = []
    for run_id, run in state.runs.items():
        attempts = run.attempts()
        for i, attempt in enumerate(attempts[:-1]):  # a restart keeps the earlier stops
            if attempt.stop is not None:
                step = f" at step {attempt.stop.step}" if attempt.stop.step is not None else ""
                out.append(f"run {run_id} attempt {i + 1} of {len(attempts)} was stopped by "
                           f"{attempt.stop.rule}{step}: {attempt.stop.reason} (restarted)")
        if run.stop is not None:
            step = f" at step {run.stop.step}" if run.stop.step is not None else ""
            out.append(f"run {run_id} was stopped by {run.stop.rule}{step}: "
                       f"{printable(run.stop.reason)}")
        elif run.state == FAILED:  # its cause, not the automatic "the run failed"
            reason = run.verdict_reason or ""
            rejected = f" (rejected: {reason})" if run.verdict == "rejected" and reason \
                and not reason.startswith("the run failed") else ""
            out.append(f"run {run_id} failed: {_failure(state, run_id, facts)}{rejected}")
        elif run.verdict == "rejected":
            out.append(f"run {run_id} was rejected: "
                       f"{printable(run.verdict_reason or 'no reason')}")
    for fired in state.fired:
        latest = state.runs.get(fired.run)
        if fired.action != "stop":
            out.append(f"rule {fired.rule} warned on run {fired.run}: {printable(fired.reason)}")
        elif latest is not None and fired.attempt is not None \
                and fired.attempt != latest.attempt:
            # D15: a stop of an earlier attempt stays information after a restart.
            step = f" at step {fired.step}" if fired.step is not None else ""
            out.append(f"run {fired.run} (an earlier attempt) was stopped by {fired.rule}"
                       f"{step}: {printable(fired.reason)}")
    return out


def _failure(state: CampaignState, run_id: str, facts: OpenFacts) -> str:
    """A failure in words: its exit and the last meaningful line of its stderr (read now,
    else the one its stage's end journaled), never a bare "exit code 1" when either says
    more."""
    run = state.runs[run_id]
    words = "exit code unknown" if run.exit_code is None else (
        f"killed by {_signal_name(-run.exit_code)}" if run.exit_code < 0
        else f"exit code {run.exit_code}")
    line = facts.stderr.get(run_id)
    if line:
        return f"{words}: {line}"
    st = state.stages.get(run.stage) if run.stage else None
    return st.reason if st is not None and st.reason else words


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _stage_points(decided: Campaign, state: CampaignState,
                  found: Sequence[StageEstimate]) -> list[str]:
    """The stages skipped or dropped, and those whose duration nothing measured: the next
    campaign keeps the plan's figure for them."""
    out = [f"stage {stage_id} was {st.state}: {printable(st.reason or 'no reason recorded')}"
           for stage_id, st in state.stages.items() if st.state in ("skipped", "dropped")]
    for e in found:
        st = state.stages.get(e.stage)
        if e.measured or (st is not None and st.state in ("skipped", "dropped")):
            continue
        why = ("no finished run of it" if st is None or not st.started_at
               else e.source.removesuffix(": as planned"))
        kept = (f"{format_duration(e.planned_s)} as planned, scaled by the {e.source}"
                if e.source.startswith("pilot ratio") else
                f"{format_duration(e.planned_s)} kept as planned")
        out.append(f"stage {e.stage}: duration never measured ({why}): {kept}")
    return out


def _checkpoint_points(decided: Campaign, state: CampaignState,
                       facts: OpenFacts) -> list[str]:
    """Per run that saves checkpoints: a save cost or a fresh-process reload never
    measured (D17, D18), and checkpoints left on the box that no export carries (a run
    that ended without being accepted: only an accepted run's checkpoint is exported)."""
    out: list[str] = []
    for run_id, spec in decided.runs.items():
        if spec.checkpoints is None:
            continue
        run = state.runs.get(run_id)
        reloaded = run is not None and any(v.get("ok") for v in run.verified)
        missing = [what for what, known in (  # a save cost: only where its folder was read
            ("the cost of a save", run_id in facts.save_measured
             or run_id not in facts.checkpoints),
            ("a reload in a fresh process", reloaded)) if not known]
        if missing:
            out.append(f"run {run_id}: {' and '.join(missing)} never measured (D17, D18): "
                       "the next plan guesses them")
        left = facts.checkpoints.get(run_id, 0)
        if left and run is not None and run.state not in (NOT_STARTED, RUNNING) \
                and run.verdict != "accepted":
            why = f"the run is {run.verdict}" if run.verdict else "the run has no verdict"
            out.append(f"run {run_id}: {left} checkpoint(s) left on the box in "
                       f"{spec.checkpoints}, not exported ({why}): fetch them before the "
                       "window ends or let them go (D19)")
    return out


def calibrate(decided: Campaign, state: CampaignState, now: datetime,
              costs: MeasuredCosts, progress: Mapping[str, float] | None = None,
              measured: Mapping[str, StageMeasure] | None = None,
              lost: Sequence[str] = (), facts: OpenFacts | None = None) -> str:
    """The calibrated campaign file's text; ``lost``: where the campaign lost GPU-hours
    (:func:`cockpit.close.hours.lost_hours`), in words; ``facts``: what the open
    uncertainties need of the run files and the question (:class:`OpenFacts`)."""
    measured = measured or {}
    found = estimates(decided, state, now, progress, measured)
    text = _replace_durations(decided.text, decided.stages, {e.stage: e for e in found})
    head = [f"# Calibrated by `cockpit next` on {now:%Y-%m-%d %H:%M} UTC from campaign "
            f"{decided.id} (plan as decided: sha256 {decided.sha256[:12]}).",
            "# Durations: measured where the stage ran to its end; a failed or stopped stage's",
            "# time divided by the share of its steps it reached (under 10 %, or unknown: its",
            "# max_steps at the throughput it measured, else as planned); the pilot's",
            "# measured/planned ratio on GPU stages that did not run",
            "# (none when the pilot measured nothing); otherwise as planned. Set",
            "# package.start (and the campaign id) for the new rental, and copy this file",
            "# to a new folder before running it: a campaign's journal lives beside its file.",
            "#", "# stage durations (planned -> next):"]
    pilot_note = pilot_measure(decided, state, progress).note
    if pilot_note:
        head.insert(-2, f"# {pilot_note}")
    head += [f"#   {e.stage}: {format_duration(e.planned_s)} -> {format_duration(e.next_s)} "
             f"({e.source})" for e in found]
    if costs.save_s or costs.restore_s:
        head.append("# checkpoint costs measured (D17, D18):")
        for run_id in sorted(set(costs.save_s) | set(costs.restore_s)):
            parts = []
            if run_id in costs.save_s:
                parts.append(f"save {costs.save_s[run_id]:.2f} s")
            if run_id in costs.restore_s:
                parts.append(f"restore in a new process {costs.restore_s[run_id]:.2f} s")
            head.append(f"#   {run_id}: {', '.join(parts)}")
    head += _measured_lines(decided, measured)
    if lost:
        head.append("# where the GPU-hours went (the flight recorder):")
        head += [f"#   - {printable(line)}" for line in lost]
    open_points = uncertainties(decided, state, facts, found)
    head.append("# open uncertainties:" if open_points else "# open uncertainties: none recorded")
    head += [f"#   - {point}" for point in open_points]
    return "\n".join(head) + "\n\n" + text


def _measured_lines(decided: Campaign, measured: Mapping[str, StageMeasure]) -> list[str]:
    """Each stage's measured throughput and GPU utilization, in the plan's order."""
    rows = []
    for stage in decided.stages:
        m = measured.get(stage.id)
        if m is None or (m.throughput is None and m.mean_util is None):
            continue
        parts = []
        if m.throughput is not None:
            parts.append(f"{_rate(m.throughput)} steps/s")
        if m.mean_util is not None:
            parts.append(f"mean GPU utilization {m.mean_util:.0f} %")
        rows.append(f"#   {stage.id}: {', '.join(parts)}")
    return ["# measured per stage (throughput, GPU utilization):", *rows] if rows else []


def _rate(steps_per_s: float) -> str:
    return f"{steps_per_s:,.0f}" if steps_per_s >= 100 else f"{steps_per_s:.3g}"


def _replace_durations(text: str, stages: tuple[Stage, ...],
                       found: Mapping[str, StageEstimate]) -> str:
    """Replace each stage's duration value in place, by the parser's own positions."""
    located = parse_yaml(text, "campaign")
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # (line index, column index, new value)
    for i, stage in enumerate(stages):
        estimate = found.get(stage.id)
        if estimate is None or estimate.next_s == estimate.planned_s:
            continue
        for key in ("duration", "hours"):
            if ("stages", i, key) in located.marks:
                line, col = located.marks[("stages", i, key)]
                value = (f'"{_duration_words(estimate.next_s)}"' if key == "duration"
                         else _hours_words(estimate.next_s))
                edits.append((line - 1, col - 1, value))
    for line_i, col_i, value in sorted(edits, reverse=True):
        row = lines[line_i]
        end = _scalar_end(row, col_i)
        lines[line_i] = row[:col_i] + value + row[end:]
    return "".join(lines)


def _scalar_end(row: str, start: int) -> int:
    if row[start:start + 1] in ("'", '"'):
        close = row.find(row[start], start + 1)
        return close + 1 if close > 0 else len(row.rstrip("\n"))
    match = _PLAIN_END.search(row, start)
    return match.start() if match else len(row.rstrip("\n"))


def _hours_words(seconds: float) -> str:
    """Hours rounded *up* to 0.001 h (3.6 s) with a 1 s floor: never ``0.00``, which
    ``check`` refuses (a stage of seconds was written ``hours: 0.00``)."""
    return f"{math.ceil(max(seconds, 1.0) / 3.6) / 1000:.3f}".rstrip("0").rstrip(".")


def _duration_words(seconds: float) -> str:
    if seconds < 59.5:
        return f"{max(1, round(seconds))}s"
    minutes = max(1, round(seconds / 60))
    hours, minutes = divmod(minutes, 60)
    return (f"{hours}h{minutes:02d}m" if hours and minutes else
            f"{hours}h" if hours else f"{minutes}m")
