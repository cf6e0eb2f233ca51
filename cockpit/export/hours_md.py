"""REPORT.md's section "What the hours bought" (issue 27), from
:class:`~cockpit.close.hours.HoursBought`: a table per stage, the stretch between
stages, the overall line (the window's held GPU-hours, exactly busy + idle +
unrecorded, in GPU-seconds too) and the stretches no stage held a GPU in (idle gaps,
human and CPU stages, unused after the close), in hours and as a share of the window:
never in money (D8)."""

from __future__ import annotations

from cockpit.close.hours import KIND_LABELS, GpuHours, HoursBought
from cockpit.common.durations import format_duration
from cockpit.common.printable import printable
from cockpit.common.units import format_rate, format_share

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
        lines += ["", "When no stage held any GPU, in hours and as a share of the window "
                  f"({format_duration(h.window_s)}), never in money (D8): an idle gap when "
                  "nothing ran, a human or CPU stage's own time, and the rest of the window "
                  "unused after the close (not a gap).", "",
                  "| from | to | length | what | share of the window |",
                  "|---|---|---:|---|---:|"]
        for g in h.gaps:
            g_json = g.as_json()
            what = printable(g.what(), 400).replace("|", "\\|")
            lines.append(f"| {g_json['start']} | {g_json['end']} | "
                         f"{format_duration(g.seconds)} | {what} | "
                         f"{format_share(g.window_share)} |")
        for name, seconds in h.kind_totals().items():
            if seconds:
                lines.append(f"| | | {format_duration(seconds)} | {KIND_LABELS[name]} in all | "
                             f"{format_share(h.window_share(seconds))} |")
        if h.gaps_s:
            lines += ["", f"Idle gaps: {format_duration(h.gaps_s)}, "
                      f"{format_share(h.window_share(h.gaps_s))} of the window and "
                      f"{format_share(h.gaps_held_share)} of the GPU-hours held."]
    for note in h.notes:
        lines += ["", "Note: " + printable(note, 2000)]  # it may name a path
    return "\n".join(lines) + "\n"
