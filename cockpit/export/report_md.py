"""REPORT.md and the timeline SVG: planned against realized, never rewriting the plan (D24).

This module owns the human report of an export: the question and its conclusion,
per stage the planned and observed times with the deviation, notes and decisions,
the stops with their ids and reasons, the budget, and a dependency-free SVG with a
planned and a realized bar per stage over the rental window. Pure functions of the
plan, the folded state and ``now``. What came from runs and journals (notes, reasons,
cost labels, names) is made printable (:mod:`cockpit.common.printable`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from html import escape
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.close.budget import render_budget
from cockpit.close.conclusion import Conclusion
from cockpit.close.open_facts import question_words
from cockpit.common.printable import printable, printable_block
from cockpit.common.units import format_duration
from cockpit.journal.fold import CampaignState
from cockpit.journal.plan_record import PlanChange, decided_campaign, plan_changes
from cockpit.planning.calibrate import OpenFacts, estimates, uncertainties
from cockpit.planning.schedule import plan_campaign
from cockpit.runs.metrics.progress import reported_progress


def _t(when: datetime | None) -> str:
    return when.strftime("%Y-%m-%d %H:%M") if when else "—"


def _planned(campaign: Campaign) -> dict[str, tuple[datetime, datetime]]:
    """Each stage's planned interval, from the plan alone (no realized fact moves it)."""
    start = campaign.package.start
    return {slot.stage.id: (start + timedelta(hours=slot.start), start + timedelta(hours=slot.end))
            for slot in plan_campaign(campaign).slots}


REPORT_LIMIT = 5_000_000  # characters of REPORT.md (a journal of many notes stays whole)


def _md(text: str) -> str:
    """One table cell: printable, on one line, its pipes escaped."""
    return printable(str(text).replace("\n", " "), 4000).replace("|", "\\|")


def render_report(campaign: Campaign, state: CampaignState, now: datetime,
                  money: dict[str, Any], verdict: Conclusion, runs: dict[str, Any],
                  svg_name: str = "timeline.svg",
                  events: Sequence[Mapping[str, Any]] = (),
                  facts: OpenFacts | None = None) -> str:
    """``facts``: what the open uncertainties need of the run files
    (:func:`cockpit.close.open_facts.open_facts`); without them, only the question as
    ``verdict`` judges it and the journal's facts are listed."""
    pkg = campaign.package
    # Planned against realized is measured against the plan as decided (D24).
    decided = decided_campaign(campaign, events)
    lines = [f"# Campaign {campaign.id}", "",
             f"**Question.** {campaign.question or '(no question stated)'}", "",
             f"**Conclusion.** {verdict.text}", "",
             f"Package: {pkg.count} x {pkg.offer.id} ({pkg.offer.gpu}, {pkg.offer.days:g} days), "
             f"window {_t(pkg.start)} – {_t(pkg.end)} UTC"
             + (f", order {pkg.order_ref}" if pkg.order_ref else "") + ".",
             f"Report written {_t(now)} UTC. The plan is quoted as decided (sha256 "
             f"`{decided.sha256[:12]}`); realized facts come from the journal (D24).", ""]
    changes = plan_changes(events, campaign, now)  # the file now too, journaled or not
    if state.plan_changed and decided is campaign:
        lines += ["> The campaign file changed after the plan was recorded, and the journal "
                  "holds only the decided plan's hash: the deviations below are against the "
                  "file as it is now.", ""]
    elif changes:
        lines += [f"> The campaign file changed {len(changes)} time(s) after the plan was "
                  "decided (listed at the end); the deviations below are against the plan "
                  "as decided.", ""]
    lines += ["## Planned against realized", "",
              f"![timeline: planned and realized per stage]({svg_name})", "",
              "| stage | category | planned | planned h | realized | observed h | deviation "
              "| state | notes and decisions |",
              "|---|---|---|---|---|---|---|---|---|"]
    lines += _stage_rows(campaign, decided, state, now)
    lines += ["", "## Runs", "", "| run | result | status | reason |", "|---|---|---|---|"]
    for run_id, entry in runs.items():
        lines.append(f"| {run_id} | {entry['result']} | {entry['status']} | "
                     f"{_md(entry['reason']) or '—'} |")
    lines += ["", "## Stops", ""]
    stops = _stops(state)
    lines += stops or ["No run was stopped."]
    blind = [(rid, why) for rid, entry in runs.items() for why in entry.get("blind") or ()]
    if blind:  # unknown is not ok: a rule that never saw its metric kept nothing (issue 22)
        lines += ["", "## Rules blind to their metric", "",
                  "A rule or the conclusion watched a metric the run never reported: it "
                  "kept nothing there.", ""]
        lines += [f"- ◌ blind: run `{rid}`, {_md(why)}" for rid, why in blind]
    lines += ["", "## Budget", "", "```", render_budget(money), "```", ""]
    if verdict.comparisons:
        lines += ["## Comparison with the baseline", ""]
        for c in verdict.comparisons:
            mark = "beats" if c.beats else ("does not beat" if c.counted else "not counted")
            lines.append(f"- {c.run}: {mark} — {c.why}")
        lines.append("")
    facts = facts or OpenFacts(question=question_words(verdict))
    lines += _next_campaign(decided, state, now, facts) + _changes(changes)
    # Notes, reasons, labels and names are journal and run text: the report is made
    # printable as a whole (newlines and tabs kept), so `cat REPORT.md` is safe.
    return printable_block("\n".join(lines).rstrip() + "\n", REPORT_LIMIT)


def _stage_rows(campaign: Campaign, decided: Campaign, state: CampaignState,
                now: datetime) -> list[str]:
    """The planned-against-realized table's rows: one per stage, planned as decided."""
    rows = []
    planned = _planned(decided)
    decided_stages = {s.id: s for s in decided.stages}
    for stage in campaign.stages:
        st = state.stages[stage.id]
        p_start, p_end = planned.get(stage.id, (None, None))
        stage = decided_stages.get(stage.id, stage)
        observed = st.elapsed_s(now) if st.started_at else None
        deviation = format_duration(observed - stage.seconds, signed=True) \
            if observed is not None else "—"
        extra = list(st.notes)
        if st.notes_count > len(st.notes):
            extra.insert(0, f"{st.notes_count - len(st.notes)} earlier notes (in the journal)")
        if st.reason:
            extra.append(st.reason)
        decision = state.decisions.get(stage.id)
        if decision is not None:
            drops = f", dropped {', '.join(decision.drops)}" if decision.drops else ""
            extra.append(f"decision {decision.outcome}{drops}: {decision.note}")
        realized = f"{_t(st.started_at)} – {_t(st.ended_at) if st.ended_at else 'running'}" \
            if st.started_at else "—"
        rows.append(
            f"| {stage.id} | {stage.category} | {_t(p_start)} – {_t(p_end)} | "
            f"{stage.hours:.2f} | {realized} | "
            f"{'—' if observed is None else f'{observed / 3600:.2f}'} | {deviation} | {st.state} "
            f"| {_md('; '.join(extra)) or '—'} |")
    return rows


def _next_campaign(decided: Campaign, state: CampaignState, now: datetime,
                   facts: OpenFacts) -> list[str]:
    """The next campaign's estimates and the open uncertainties (the list ``next`` writes)."""
    lines: list[str] = []
    lines += ["## The next campaign", "",
              "A better estimate to start from (`cockpit next FILE` writes it as a campaign "
              "file):", "", "| stage | planned | next | from |", "|---|---|---|---|"]
    found = estimates(decided, state, now, reported_progress(decided, state))
    lines += [f"| {e.stage} | {format_duration(e.planned_s)} | {format_duration(e.next_s)} "
              f"| {e.source} |" for e in found]
    open_points = uncertainties(decided, state, facts, found)
    lines += ["", "Open uncertainties:" if open_points else "Open uncertainties: none recorded.",
              *[f"- {_md(point)}" for point in open_points], ""]
    return lines


def _changes(changes: Sequence[PlanChange]) -> list[str]:
    """Each change to the plan after it was decided, with its diff."""
    lines: list[str] = []
    if changes:
        lines += ["## Changes to the plan after it was decided", ""]
        for change in changes:
            lines += [f"### {_t(change.at)} UTC — sha256 `{change.sha256[:12]}`", ""]
            lines += (["```diff", change.diff.rstrip(), "```", ""] if change.diff
                      else ["(the journal holds only this version's hash)", ""])
    return lines


def _stops(state: CampaignState) -> list[str]:
    """Every attempt's stop, a restarted run's earlier ones included (D15)."""
    out: list[str] = []
    for rid, run in state.runs.items():
        attempts = run.attempts()
        for i, attempt in enumerate(attempts):
            stop = attempt.stop
            if stop is None:
                continue
            which = f" attempt {i + 1} of {len(attempts)}" if len(attempts) > 1 else ""
            step = f" at step {stop.step}" if stop.step is not None else ""
            out.append(f"- run `{rid}`{which} stopped by `{stop.rule}`{step} ({_t(stop.at)}): "
                       f"{stop.reason}")
        if len(attempts) > 1:
            last = attempts[-1]
            ended = "was stopped" if last.stop is not None else {
                "succeeded": "succeeded", "failed": "failed", "running": "is running"}.get(
                last.state, f"is {last.state.replace('_', ' ')}")
            out.append(f"- run `{rid}` ran {len(attempts)} attempts; the last one {ended}; "
                       "each attempt's GPU time counts in the budget (D15)")
    return out


def timeline_svg(campaign: Campaign, state: CampaignState, now: datetime) -> str:
    """Planned (light) and realized (solid) bars per stage over the window."""
    planned = _planned(campaign)
    start = campaign.package.start
    end = campaign.package.end
    for st in state.stages.values():
        if st.started_at is not None:
            start = min(start, st.started_at)
            end = max(end, st.ended_at or now)
    for _p_start, p_end in planned.values():
        end = max(end, p_end)
    span = max((end - start).total_seconds(), 1.0)
    label_w, width, row_h, top = 150, 900, 28, 40
    height = top + row_h * len(campaign.stages) + 40

    def x(when: datetime) -> float:
        return label_w + (when - start).total_seconds() / span * (width - label_w - 10)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">',
             f'<title>{escape(campaign.id)}: planned and realized</title>',
             f'<text x="10" y="20">{escape(campaign.id)} — planned (light) and realized '
             '(solid) per stage</text>']
    # Window edges and a tick per day.
    day = campaign.package.start
    while day <= end:
        parts.append(f'<line x1="{x(day):.1f}" y1="{top - 8}" x2="{x(day):.1f}" '
                     f'y2="{height - 30}" stroke="#ccc"/>')
        parts.append(f'<text x="{x(day):.1f}" y="{height - 15}" font-size="10">'
                     f'{day:%m-%d %H:%M}</text>')
        day += timedelta(days=1)
    w_end = campaign.package.end
    parts.append(f'<line x1="{x(w_end):.1f}" y1="{top - 8}" x2="{x(w_end):.1f}" '
                 f'y2="{height - 30}" stroke="#c00" stroke-dasharray="4 3"/>')
    colors = {"done": "#2a7", "failed": "#c33", "stopped": "#e80", "running": "#37c",
              "dropped": "#999", "skipped": "#999"}
    for i, stage in enumerate(campaign.stages):
        y = top + i * row_h
        st = state.stages[stage.id]
        parts.append(f'<text x="8" y="{y + 15}">{escape(stage.id)}</text>')
        p_start, p_end = planned[stage.id]
        parts.append(f'<rect x="{x(p_start):.1f}" y="{y + 2}" '
                     f'width="{max(x(p_end) - x(p_start), 1):.1f}" height="9" fill="#bcd" '
                     f'><title>planned {_t(p_start)} – {_t(p_end)}</title></rect>')
        if st.started_at is not None:
            r_end = st.ended_at or now
            parts.append(f'<rect x="{x(st.started_at):.1f}" y="{y + 13}" '
                         f'width="{max(x(r_end) - x(st.started_at), 1):.1f}" height="9" '
                         f'fill="{colors.get(st.state, "#555")}"><title>{escape(st.state)} '
                         f'{_t(st.started_at)} – {_t(r_end)}</title></rect>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
