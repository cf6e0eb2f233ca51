"""The runs table (step, loss curve, throughput, verdict, checkpoint) and the run texts
the other panels share."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from cockpit.common.units import format_count, format_duration, format_rate
from cockpit.engine.snapshot import RunView, Snapshot
from cockpit.headless.render_text import run_metric_names
from cockpit.tui import text as tx
from cockpit.tui.offers import run_needs_person, runs_in_order
from cockpit.tui.panels.base import level
from cockpit.tui.panels.table import LiveTable

# What a person looks for first: step, loss, the verdict and the checkpoint (its age and
# whether it really reloads: issue 25 wants them visible at 120 columns); throughput,
# the other metrics and the checkpoint's step and save cost follow (the table scrolls
# sideways when they do not fit).
RUN_COLUMNS = (("run", "run"), ("state", "state"), ("step", "step"), ("loss", "loss · curve"),
               ("verdict", "verdict · stop"), ("ckpt", "ckpt · reload"),
               ("rate", "throughput · ETA"), ("metrics", "checks & rules metrics"),
               ("saved", "ckpt step · save"))


def key_values(r: RunView, name: str | None, most: int = 200) -> list[float]:
    """The last ``most`` reported values of ``name`` from the run's recent points."""
    if name is None:
        return []
    out: list[float] = []
    for p in reversed(r.points):
        v = p.values.get(name)
        if v is not None:
            out.append(v)
            if len(out) >= most:
                break
    out.reverse()
    return out


def loss_cell(r: RunView, spark_w: int = 8, label: bool = False) -> str:
    """``loss 0.4123 ▇▆▄▃▂▁``: the key metric's last value and its recent curve."""
    name = r.key_metric
    if name is None or name not in r.metrics:
        return "-"
    values = key_values(r, name, spark_w * 4)
    # One cell per 4 reports: the curve moves slowly, not on every tick.
    cells = [values[i] for i in range(len(values) - 1, -1, -4)][::-1] if values else []
    spark = tx.scaled_sparkline(cells, spark_w).rstrip() if len(cells) > 1 else ""
    prefix = f"{name} " if label or name != "loss" else ""
    return f"{prefix}{tx.metric(r.metrics[name])} {spark}".rstrip()


def step_text(r: RunView) -> str:
    if r.step is None:
        return "-"
    return format_count(r.step) + (f"/{format_count(r.max_steps)}" if r.max_steps else "")


def rate_text(r: RunView) -> str:
    if r.state != "running" or not r.rate:
        return ""
    eta = f" ETA {r.eta:%H:%M}" if r.eta is not None else ""
    return f"{format_rate(r.rate)}{eta}"


def run_rows(snap: Snapshot) -> list[tuple[str, tuple[Any, ...]]]:
    return [(r.id, _run_cells(r)) for r in runs_in_order(snap)]


def _run_cells(r: RunView) -> tuple[Any, ...]:
    names = [m for m in run_metric_names(r) if m != r.key_metric]
    metrics = " ".join(f"{m}={tx.metric(r.metrics[m])}" for m in names)
    if r.stalled:
        metrics = tx.level_word("warn", "stalled") + (f" {metrics}" if metrics else "")
    elif r.stale_s is not None and r.stale_s > 120 and r.state == "running":
        metrics += f" (stale {format_duration(r.stale_s)})"
    verdict_level = {"accepted": "ok", "rejected": "fired"}.get(r.verdict or "", "info")
    verdict = r.verdict or ""
    if r.stop_rule:  # the rule that stopped it (its reason: the rules panel)
        verdict, verdict_level = r.stop_rule, "fired"
    elif run_needs_person(r):
        verdict, verdict_level = "awaits a/r", "warn"
    elif r.judging and r.verdict is None:
        verdict = "judging"  # its acceptance checks run (a reload in the background)
    checkpoint, saved = _checkpoint_cells(r)
    return (Text(r.id, style="bold"),
            Text(tx.stage_state(r.state), style=level(tx.STAGE_LEVEL.get(r.state, "info"))),
            step_text(r), Text(loss_cell(r), style="bold" if r.state == "running" else ""),
            Text(tx.level_word(verdict_level, verdict) if verdict else "",
                 style=level(verdict_level)),
            checkpoint, rate_text(r), metrics, saved)


def _checkpoint_cells(r: RunView) -> tuple[Text, str]:
    """``12m ✓`` (its age, and ✓ only when the newest checkpoint was reloaded: never a ✓
    it cannot prove; else ``? unverified`` or ``✗ failed …``) and ``2,400 · 1.2 s`` (its
    step and what saving it cost)."""
    ck = r.checkpoint
    if ck is None:
        return Text("none yet", style=level("muted")), ""
    age = "-" if ck.age_s is None else format_duration(ck.age_s)
    v = ck.verified or "unverified"
    vlevel = "ok" if v == "ok" else ("fired" if v.startswith("failed") else "warn")
    checkpoint = Text(f"{age} ")
    checkpoint.append(tx.LEVEL_MARK["ok"] if v == "ok" else tx.level_word(vlevel, v[:24]),
                      level(vlevel))
    if ck.advice:
        checkpoint.append(" ! interval", level("warn"))
    cost = "-" if ck.save_cost_s is None else f"{ck.save_cost_s:.1f} s"
    return checkpoint, f"{format_count(ck.step)} · {cost}"


class RunsTable(LiveTable):
    """The runs, running first, then those waiting for a verdict (a / r)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(RUN_COLUMNS, **kwargs)

    def render_snapshot(self, snap: Snapshot) -> None:
        self.sync(run_rows(snap))
