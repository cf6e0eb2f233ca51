"""REPORT.md's section "What the hours bought" (issue 27), from
:class:`~cockpit.close.hours.HoursBought`: a table per stage, the stretch between
stages, the overall line (the window's held GPU-hours, exactly busy + idle +
unrecorded, in GPU-seconds too) and the idle gaps with their share of the price."""

from __future__ import annotations

from cockpit.close.hours import GpuHours, HoursBought
from cockpit.common.durations import format_duration
from cockpit.common.printable import printable
from cockpit.common.units import format_rate

HEADER = ("| stage | GPUs | held GPU-h | busy | idle | unrecorded | mean util | kWh "
          "| throughput |")


def _h(seconds: int) -> str:
    return f"{seconds / 3600:.2f}"


def _row(name: str, gpus: str, h: GpuHours, throughput: str) -> str:
    util = "unrecorded" if h.mean_util is None else f"{h.mean_util:.0f} %"
    kwh = "not reported" if h.kwh is None else f"{h.kwh:.2f}"
    return (f"| {name} | {gpus} | {_h(h.held_s)} | {_h(h.busy_s)} | {_h(h.idle_s)} "
            f"| {_h(h.unrecorded_s)} | {util} | {kwh} | {throughput} |")


def hours_section(h: HoursBought) -> str:
    """The section as Markdown (stage ids come from the plan, checked at load)."""
    o = h.overall
    lines = ["", "## What the hours bought", "",
             f"Machine {h.machine}, {h.gpus} GPU(s), {format_duration(h.elapsed_s)} of the "
             f"window elapsed. A GPU-minute is busy when its mean utilization is at least "
             f"{h.threshold:g} %, idle below it, unrecorded when the flight recorder holds "
             "nothing for it (never counted busy or idle).", "",
             HEADER, "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in h.stages:
        thr = format_rate(s.throughput) if s.throughput is not None else "unknown"
        name = printable(s.stage, 200).replace("|", "\\|")
        lines.append(_row(name, ",".join(map(str, s.gpus)) or "-", s.hours, thr))
    lines.append(_row("(between stages)", "-", h.between, "-"))
    lines.append(_row("**window**", str(h.gpus), o, "-"))
    lines += ["", f"GPU-seconds held {o.held_s} = busy {o.busy_s} + idle {o.idle_s} + "
              f"unrecorded {o.unrecorded_s} ({h.gpus} GPU(s) × {h.elapsed_s} s elapsed).",
              "Energy: " + ("not reported" if o.kwh is None else f"{o.kwh:.2f} kWh") + "."]
    if h.gaps:
        lines += ["", "Idle gaps (no stage held any GPU):", "",
                  "| from | to | length | kind | share of the price |", "|---|---|---:|---|---:|"]
        for g in h.gaps:
            g_json = g.as_json()
            share = str(g.share) if g.share is not None else "price unknown"
            lines.append(f"| {g_json['start']} | {g_json['end']} | "
                         f"{format_duration(g.seconds)} | {g.kind} | {share} |")
        total = str(h.gaps_share) if h.gaps_share is not None else "price unknown"
        lines.append(f"| | | {format_duration(h.gaps_s)} | total | {total} |")
    for note in h.notes:
        lines += ["", "Note: " + printable(note, 2000)]  # it may name a path
    return "\n".join(lines) + "\n"
