"""REPORT.md's section "Landing" (issue 41): when the cockpit landed the campaign by itself
(``on_deadline: land``), the point of no return and the reserve's terms it was made of,
each landing step with its time (UTC, and seconds after the landing began), and what the
landing brought home: each run's resume point with its size, said to be a *resume point,
not an accepted result* (:mod:`cockpit.export.resume_points`). Empty without a landing.

Journal text is made printable, and a table cell keeps to one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cockpit.common.durations import format_duration
from cockpit.common.printable import printable
from cockpit.common.units import format_bytes
from cockpit.export.resume_points import RESUME_NOTE, LandingRecord

TERMS = (("save", "save_s", "save_from"), ("reload", "reload_s", "reload_from"),
         ("export", "export_s", "export_from"), ("retrieval", "retrieval_s", "retrieval_from"),
         ("margin", "margin_s", None))


def _cell(value: Any) -> str:
    return printable(str(value).replace("\n", " "), 1000).replace("|", "\\|")


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _seconds(value: Any) -> str:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return format_duration(float(value)) if ok else "unknown"


def landing_section(record: LandingRecord, runs: Mapping[str, Mapping[str, Any]]) -> str:
    """The section's text ("" when no landing began); ``runs``: the manifest's runs."""
    if not record.began:
        return ""
    began = next(ev for ev in record.steps if ev.get("phase") == "began")
    lines = ["", "## Landing", "",
             "The cockpit landed the campaign by itself (`on_deadline: land`): at the point "
             "of no return it asked the runs with a checkpoint to save, reloaded what they "
             "saved in a fresh process, stopped every run of this machine and exported.", ""]
    lines += _reserve(began)
    start = _time(began.get("t"))
    lines += ["| time (UTC) | after | step | run | what |", "|---|---|---|---|---|"]
    for ev in record.steps:
        at = _time(ev.get("t"))
        after = f"{(at - start).total_seconds():.1f} s" if at and start else "—"
        when = f"{at:%Y-%m-%d %H:%M:%S}" if at else "—"
        lines.append(f"| {when} | {after} | {_cell(ev.get('phase'))} | "
                     f"{_cell(ev.get('run') or '—')} | {_cell(ev.get('text') or '')} |")
    if not any(ev.get("phase") == "exported" for ev in record.steps):
        lines += ["", "This export is the landing's `exporting` step: `exported` and "
                      "`landed` follow in the journal."]
    lines += ["", f"Brought home, each *{RESUME_NOTE}*:", ""]
    brought = [(rid, entry["resume_point"]) for rid, entry in runs.items()
               if isinstance(entry.get("resume_point"), Mapping)]
    for rid, point in brought:
        if point.get("path"):
            size = point.get("size")
            lines.append(f"- run `{_cell(rid)}`: `{_cell(point['path'])}` "
                         f"({format_bytes(size) if isinstance(size, int) else 'size unknown'}"
                         f", step {point.get('step')}, sha256 `{point.get('sha256')}`), "
                         f"{_cell(point.get('why'))}; from `{_cell(point.get('source'))}`")
        else:
            lines.append(f"- run `{_cell(rid)}`: **not in this export**: "
                         f"{_cell(point.get('problem'))}")
    if not brought:
        lines.append("- no checkpoint: no run saved one that reloaded (see the steps above)")
    return "\n".join(lines) + "\n"


def _reserve(began: Mapping[str, Any]) -> list[str]:
    """The point of no return and the reserve's terms, as journaled when it came."""
    terms = began.get("reserve")
    point = _time(began.get("point"))
    head = (f"Point of no return: {point:%Y-%m-%d %H:%M:%S} UTC" if point else
            "Point of no return: not journaled")
    if not isinstance(terms, Mapping):
        return [head + f" ({_cell(began.get('text') or '')}).", ""]
    lines = [f"{head}, the window end less a reserve of {_seconds(terms.get('total_s'))} "
             "(only what the landing does: a save and a reload for each run asked to "
             "save, nothing for a run stopped at once):", "",
             "| term | time | from |", "|---|---|---|"]
    for name, seconds, source in TERMS:
        origin = _cell(terms.get(source) or "—") if source else "deadline.landing_margin"
        lines.append(f"| {name} | {_seconds(terms.get(seconds))} | {origin} |")
    return lines + [""]
