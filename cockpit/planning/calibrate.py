"""The next campaign starts with a better estimate (the guide's last word, D13, D24).

``calibrate(...)`` turns the plan as decided and what the journal measured into a
calibrated copy of the campaign file: each stage's measured duration where it ran, the
pilot's measured/planned ratio applied to GPU stages that did not, the measured
save and restore costs, and the open uncertainties (runs stopped and why, rules fired,
results rejected, stages skipped or dropped) as comments. The text is the decided
file's own, with only the durations replaced, so its comments and layout survive and
``cockpit check`` reads it like any campaign file. Pure: the caller gives the state and
the measured costs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from cockpit.campaign.model import Campaign, Stage
from cockpit.campaign.yamlread import parse_yaml
from cockpit.common.printable import printable
from cockpit.common.units import MAX_DURATION_S, format_duration
from cockpit.journal.fold import DONE, FAILED, STOPPED, CampaignState
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


@dataclass(frozen=True)
class StageMeasure:
    """What the last campaign measured of a stage beyond its wall time: its run's steps
    per second over the stage's span, its run's ``max_steps``, and its GPUs' mean
    utilization (None: unknown)."""

    throughput: float | None = None
    max_steps: int | None = None
    mean_util: float | None = None


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


def uncertainties(decided: Campaign, state: CampaignState) -> list[str]:
    """What the campaign left open, in words (each a comment line: run-written text is
    made printable, so a newline in a reason cannot end the comment)."""
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
        elif run.verdict == "rejected":
            out.append(f"run {run_id} was rejected: "
                       f"{printable(run.verdict_reason or 'no reason')}")
        elif run.state == FAILED:
            out.append(f"run {run_id} failed (exit code {run.exit_code})")
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
    for stage_id, st in state.stages.items():
        if st.state in ("skipped", "dropped"):
            out.append(f"stage {stage_id} was {st.state}: "
                       f"{printable(st.reason or 'no reason recorded')}")
    return out


def calibrate(decided: Campaign, state: CampaignState, now: datetime,
              costs: MeasuredCosts, progress: Mapping[str, float] | None = None,
              measured: Mapping[str, StageMeasure] | None = None,
              lost: Sequence[str] = ()) -> str:
    """The calibrated campaign file's text; ``lost``: where the campaign lost GPU-hours
    (:func:`cockpit.close.hours.lost_hours`), in words."""
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
    open_points = uncertainties(decided, state)
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
