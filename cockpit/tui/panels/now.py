"""The now panel: what runs (stage, run, step, loss, throughput), the fired rules and a
one-line GPU summary; shown where the tables do not fit (short or narrow)."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from cockpit.common.units import format_duration
from cockpit.engine.snapshot import RunView, Snapshot, StageView
from cockpit.headless.render_text import run_metric_names
from cockpit.tui import text as tx
from cockpit.tui.panels.base import LivePanel, block, level, styled
from cockpit.tui.panels.runs import loss_cell, rate_text, step_text


def now_lines(snap: Snapshot) -> list[Text]:
    """What is running (stage, run, step, loss, throughput, ETA) and every fired rule:
    the lines that stay on screen at any size."""
    runs = {r.id: r for r in snap.runs}
    lines = [_running_line(s, runs.get(s.run) if s.run else None)
             for s in snap.stages if s.state == "running"]
    if not lines:
        ready = [s.id for s in snap.stages if s.state == "ready"]
        waiting = [s.id for s in snap.stages if s.state == "needs-person"]
        hint = (f"ready: {', '.join(ready)} (s starts)" if ready else
                f"needs a person: {', '.join(waiting)} (m marks)" if waiting else "")
        lines.append(styled([("nothing running", level("muted")),
                             (f"  {hint}" if hint else "", "")]))
    for rule in snap.rules:
        if rule.state in ("fired", "blind"):
            lines.append(styled([(tx.level_word(rule.state, rule.state + " "),
                                  level(rule.state)),
                                 (rule.rule, "bold"), (" on ", ""), (rule.run, "bold"),
                                 (f": {rule.reason or ''}", "")]))
    return lines


def _running_line(s: StageView, r: RunView | None) -> Text:
    parts: list[tuple[str, str | Style]] = [("▶ ", level("accent")), (s.id, "bold")]
    if r is not None:
        # Step and loss right after the stage: the line is cut from the right.
        parts.append((f" {step_text(r)}", ""))
        parts.append((f"  {loss_cell(r, 6, label=True)}" if r.key_metric
                      else "  no metrics yet", "bold"))
        if r.id != s.id:
            parts.append((f"  run {r.id}", ""))
        rate = rate_text(r)
        if rate:
            parts.append((f"  {rate}", ""))
        names = [m for m in run_metric_names(r) if m != r.key_metric][:2]
        if names:
            parts.append(("  " + " ".join(f"{m}={tx.metric(r.metrics[m])}" for m in names),
                          level("muted")))
    else:
        parts.append((f"  {format_duration(s.elapsed_s)} / {format_duration(s.planned_s)}"
                      + ("  (manual: m marks it done)" if not s.has_command else ""), ""))
    return styled(parts)


def gpu_summary_line(snap: Snapshot) -> Text:
    if snap.machines:  # several machines (D12): each one's GPUs, labelled by machine
        line = Text()
        if snap.machine is not None:
            line.append(f"machine {snap.machine}: ", "bold")
            line.append_text(_own_gpu_summary(snap))
        for m in snap.machines:
            if len(line):
                line.append(" · ")
            line.append(f"machine {m.machine}: ", "bold")
            if m.reachable is False:
                age = "never" if m.data_age_s is None else f"{m.data_age_s:.0f}s old"
                line.append(f"UNREACHABLE (data {age})", level("fired"))
                continue
            utils = [float(g["util"]) for g in m.gpus
                     if isinstance(g.get("util"), (int, float))]
            line.append(f"{len(m.gpus)} GPUs" if m.gpus else "no GPU data")
            if utils:
                line.append(f" util {sum(utils) / len(utils):.0f}% avg")
        return line
    return _own_gpu_summary(snap)


def _own_gpu_summary(snap: Snapshot) -> Text:
    reading = snap.gpus
    if reading.status == "unavailable":
        return styled([("GPU telemetry unavailable", level("warn"))])
    gpus = [g for g in reading.gpus if not g.lost]
    utils = [g.util for g in gpus if g.util is not None]
    temps = [g.temp for g in gpus if g.temp is not None]
    lost = len(reading.gpus) - len(gpus)
    throttled = sum(1 for g in gpus if g.throttle)
    parts: list[tuple[str, str | Style]] = []
    if reading.status == "simulated":
        parts.append(("SIMULATED ", level("warn", "reverse")))
    parts.append((f"{len(reading.gpus)} GPUs", "bold"))
    if utils:
        parts.append((f" util {sum(utils) / len(utils):.0f}% avg", ""))
    if temps:
        parts.append((f" · max {max(temps):.0f}°C", ""))
    if lost:
        parts.append((f" · ✗ {lost} LOST", level("fired")))
    if throttled:
        parts.append((f" · ! {throttled} throttled", level("warn")))
    return styled(parts)


class NowPanel(LivePanel):
    """Running stages and runs with step and loss, fired rules and a one-line GPU
    summary: shown where the tables do not fit (short or narrow)."""

    def render_snapshot(self, snap: Snapshot) -> None:
        self.show(block([*now_lines(snap), gpu_summary_line(snap)]))
