"""Plain-text rendering of a Snapshot for `cockpit status` (the window line, stages,
runs, rules, GPUs and host). The tmux status-bar line is :mod:`cockpit.headless.status_line`'s.

No Textual, no Rich: this is the headless face's vocabulary, and the words (states,
reasons) are the same ones the TUI shows. Every line is made printable
(:mod:`cockpit.common.printable`): it holds run names, reasons and metric names.
"""

from __future__ import annotations

from cockpit.common.printable import printable
from cockpit.common.units import (
    format_count,
    format_duration,
    format_number,
    format_percent,
    format_rate,
)
from cockpit.engine.snapshot import (
    BLIND,
    BLIND_MARK,
    WAITING,
    RunView,
    Snapshot,
    StageView,
    landing_words,
)
from cockpit.telemetry import format_bytes

STATUS_LINE_LIMIT = 2000  # characters of one line of `cockpit status`

STATE_MARK = {
    "running": "▶", "done": "✓", "failed": "✗", "stopped": "■", "skipped": "·",
    "dropped": "·", "ready": "○", "needs-person": "?", "waiting": "…", "blocked": "⏸",
}


def rules_summary(snap: Snapshot) -> str:
    """`5 ok, 0 fired` — a blind rule counted apart, never as ok (issue 22), and a rule
    on a run not started yet as waiting (it has watched nothing)."""
    blind = sum(1 for r in snap.rules if r.state == BLIND)
    waiting = sum(1 for r in snap.rules if r.state == WAITING)
    fired = sum(1 for r in snap.rules if r.state not in ("ok", BLIND, WAITING))
    ok = len(snap.rules) - blind - fired - waiting
    started = {r.id for r in snap.runs if r.state != "not_started"}
    why = "" if any(r.run in started for r in snap.rules if r.state == WAITING) \
        else " (run not started)"  # else each says why, listed below
    return (f"{ok} ok, {fired} fired" + (f", {blind} {BLIND_MARK} blind" if blind else "")
            + (f", {waiting} waiting{why}" if waiting else ""))


def _rule_lines(snap: Snapshot) -> list[str]:
    """The rules not ok: fired, warned, blind, and waiting with a reason (a running run's
    first report not come yet, a value from before the rule watched); a rule waiting for
    its run to start is only counted."""
    lines = []
    for rule in (r for r in snap.rules if r.state != "ok"):
        if rule.state == WAITING and not rule.reason:
            continue
        mark = f"{BLIND_MARK} blind: " if rule.state == BLIND else \
            "· waiting: " if rule.state == WAITING else ""
        lines.append(f"  {rule.rule} on {rule.run}: {mark}{rule.reason}")
    return lines


def window_line(snap: Snapshot) -> str:
    w = snap.window
    slack = format_duration(w.forecast_slack_s, signed=True)
    return (f"window {w.start:%Y-%m-%d %H:%M} → {w.end:%Y-%m-%d %H:%M} UTC · "
            f"{format_duration(max(w.remaining_s, 0))} left ({w.used_pct:.0f}% used) · "
            f"forecast {w.verdict} ({slack}) · retrieve by {w.retrieval_deadline:%m-%d %H:%M}"
            + (f" · {lands}" if (lands := landing_words(snap)) else ""))


def export_lines(snap: Snapshot) -> list[str]:
    """What the export says now (issue 41): `closed — fetch by 12-06 14:00 UTC` only
    when the question is answered and the export current; `export STALE: predates 2
    verdicts (…) — cockpit export FILE`; `exported, question open: …` (none: nothing
    exported yet)."""
    words = snap.export.words() if snap.export is not None else None
    if words == "closed":
        return [f"closed — fetch by {snap.window.retrieval_deadline:%m-%d %H:%M} UTC"]
    return [words] if words else []


def run_metric_names(run: RunView, most: int = 4) -> list[str]:
    """The run's key metric (the loss), then its acceptance/rule metrics, then others."""
    names = [n for n in (run.key_metric, *run.watched) if n and n in run.metrics]
    names = list(dict.fromkeys(names))
    for name in run.metrics:
        if len(names) >= most:
            break
        if name not in names and name != "max_steps":
            names.append(name)
    return names[:most]


def pilot_ratio_text(snap: Snapshot) -> str | None:
    """D13: the pilot's measured / planned time, and that it scales the forecast."""
    ratio = snap.window.pilot_ratio
    if ratio is None:
        return snap.window.pilot_note
    how = "longer" if ratio > 1 else "shorter"
    return (f"pilot took ×{ratio:.2f} its planned time ({abs(ratio - 1) * 100:.0f}% {how}): "
            "the forecast scales the GPU stages still to run by it (D13)")


def _stage_line(s: StageView, width: int) -> str:
    mark = STATE_MARK.get(s.state, " ")
    planned = format_duration(s.planned_s)
    elapsed = format_duration(s.elapsed_s) if s.started_at else "-"
    extra = ""
    if s.decision_point:
        extra += f" ◆ decision: {s.decision or 'after it ends'}"
    if s.progress is not None:
        extra += f" {s.progress * 100:.0f}%"
    if s.reason:
        extra += f" ({s.reason})"
    return (f"{mark} {s.id:<{width}} {s.state:<12} {s.category:<11} "
            f"{elapsed:>7} / {planned:<7}{extra}")


def _run_lines(r: RunView) -> list[str]:
    metrics = " ".join(f"{k}={format_number(r.metrics[k])}" for k in run_metric_names(r))
    step = ""
    if r.step is not None:
        step = f"step {format_count(r.step)}" + (
            f"/{format_count(r.max_steps)}" if r.max_steps else "")
    if r.state == "running" and r.rate:
        step += f" · {format_rate(r.rate)}"
        if r.eta is not None:
            step += f" · ETA {r.eta:%m-%d %H:%M}"
    stop = f" stopped by {r.stop_rule}: {r.stop_reason}" if r.stop_rule else ""
    if r.stalled:
        stop += f" STALLED ({r.stalled})"
    verdict = f" [{r.verdict}]" if r.verdict else ""
    ckpt = ""
    if r.checkpoint is not None and r.checkpoint.age_s is not None:
        ckpt = f" ckpt {format_duration(r.checkpoint.age_s)} old"
        if r.checkpoint.verified:
            ckpt += f" ({r.checkpoint.verified})"
    lines = [f"run {r.id}: {r.state} {step} {metrics}{ckpt}{stop}{verdict}".rstrip()]
    if r.checkpoint is not None and r.checkpoint.advice:
        lines.append(f"  save interval ({r.id}): {r.checkpoint.advice}")
    return lines


def status_text(snap: Snapshot) -> str:
    lines = [f"campaign {snap.campaign} · {snap.offer} × {snap.count}", window_line(snap)]
    if snap.conductor.conducted:  # nobody: said first among the warnings
        lines.append(snap.conductor.words())
    if snap.question:
        lines.append(f"question: {snap.question}")
    for option in snap.window.options:
        lines.append(f"  option: {option}")
    ratio = pilot_ratio_text(snap)
    if ratio:
        lines.append(ratio)
    if snap.conclusion:
        lines.append(f"conclusion: {snap.conclusion}")
    lines.extend(export_lines(snap))
    lines.append("")
    width = max(len(s.id) for s in snap.stages)
    lines += [_stage_line(s, width) for s in snap.stages]
    if snap.runs:
        lines.append("")
        for r in snap.runs:
            lines += _run_lines(r)
    lines.append("")
    lines.append(f"rules: {rules_summary(snap)}")
    lines += _rule_lines(snap)
    if snap.pending_decisions:
        lines.append(f"decision pending at {', '.join(snap.pending_decisions)}: "
                     "cockpit decide FILE continue|limit|revise --note ...")
    if snap.revised:
        lines.append("the question is under revision: nothing more starts (D4)")
    lines.append("")
    lines.append(gpu_summary(snap))
    if snap.hours is not None:  # time only, never money (D8)
        lines.append(f"GPU-hours: {snap.hours.short_line()}")
        rest = snap.hours.time_parts(("human", "cpu", "after_close"))
        if rest:
            lines.append("  no GPU stage: " + " · ".join(rest))
    if snap.host is not None:
        h = snap.host
        lines.append(f"host: CPU {format_percent(h.cpu_percent)} of {h.cpu_count} · RAM "
                     f"{format_bytes(h.mem_used)}/{format_bytes(h.mem_total)} · cockpit "
                     f"{format_percent(h.own_cpu_percent, 1)} CPU {format_bytes(h.own_rss)}")
    for warning in snap.warnings:
        lines.append(f"warning: {warning}")
    # Names, reasons and notes came from runs and journals: each line is made printable
    # here, at the edge, whatever field it holds (the cockpit's own words are already).
    return "\n".join(printable(line, STATUS_LINE_LIMIT) for line in lines)


def gpu_summary(snap: Snapshot) -> str:
    reading = snap.gpus
    if reading.status == "unavailable":
        return f"GPU telemetry unavailable: {reading.error}"
    label = "SIMULATED " if reading.status == "simulated" else ""
    parts = []
    for g in reading.gpus:
        if g.lost:
            parts.append(f"{g.index}: LOST")
            continue
        util = "n/a" if g.util is None else f"{g.util:.0f}%"
        mem = "n/a" if g.mem_used is None else format_bytes(g.mem_used)
        temp = "" if g.temp is None else f" {g.temp:.0f}°C"
        parts.append(f"{g.index}: {util} {mem}{temp}")
    return f"{label}GPUs: " + (" · ".join(parts) if parts else "none")
