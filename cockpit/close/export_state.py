"""Whether the export still says what is true, and the one wording of the close (issue 41).

An export carries facts: the verdicts, the accepted runs, each accepted run's newest
verified checkpoint and the question's answer (answered or open, and by which runs).
:func:`export_facts` writes them down (``export_done`` keeps them as ``facts``); the
export is *stale* the moment they differ from the facts now (:func:`stale_why`, in
words: "predates 2 verdicts (variant-a, variant-b)"). An export whose event records
no facts (written by an older cockpit) is stale too: unknown is never shown as fresh.

"Closed" means the question is answered (D1, D2): a negative answer closes it, a crash,
a stop or zero accepted results do not (:func:`question_open` says why not, from the
conclusion). :class:`ExportState` is what every face says of the export, in one place:
``closed``; ``exported, question open: <why>``; ``export STALE: <why> — cockpit export
FILE``. Pure: the conclusion arrives computed (the caller reads the metric files).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cockpit.campaign.model import Campaign
from cockpit.close.acceptance import awaiting_verdict
from cockpit.close.conclusion import Conclusion
from cockpit.journal.format import parse_time
from cockpit.journal.state import STOPPED, CampaignState, RunState

FACTS_FORMAT = 1  # the shape of ``facts`` in export_done (+1 when it changes meaning)
NO_FACTS = "it records no facts to compare (an export by an older cockpit)"


def _accepted(run: RunState) -> bool:
    """A verdict that stands as accepted: a stopped run never is one (D15)."""
    return run.verdict == "accepted" and run.stop is None and run.state != STOPPED


def question_open(campaign: Campaign, state: CampaignState,
                  conclusion: Conclusion | None) -> str | None:
    """Why the question is not answered, from the conclusion (None: it is answered).
    A plan without a conclusion rule has its answer in the accepted results: none
    accepted, or a result still awaiting its verdict, leaves it open."""
    if campaign.conclusion is not None:
        if conclusion is None:
            return "the conclusion is not known yet"
        if conclusion.closed:
            return None
        return "; ".join(conclusion.reasons) or conclusion.text
    waiting = awaiting_verdict(campaign, state)
    if waiting:
        return f"{', '.join(waiting)} await{'s' if len(waiting) == 1 else ''} a verdict"
    if not any(_accepted(r) for r in state.runs.values()
               if (spec := campaign.runs.get(r.id)) is None or spec.produces_result):
        return "no accepted result"
    return None


def _newest_verified(run: RunState) -> dict[str, Any] | None:
    """The run's newest checkpoint that reloaded, of its current attempt (None: none)."""
    for ev in reversed(run.verified):
        if ev.get("ok") is True and ev.get("attempt") in (None, run.attempt):
            return {"path": ev.get("path"), "step": ev.get("step")}
    return None


def export_facts(campaign: Campaign, state: CampaignState,
                 conclusion: Conclusion | None) -> dict[str, Any]:
    """What an export is made from, as JSON (compared by :func:`stale_why`)."""
    runs = sorted(state.runs.items())
    accepted = [run_id for run_id, run in runs if _accepted(run)]
    return {
        "format": FACTS_FORMAT,
        "verdicts": {run_id: {"verdict": run.verdict, "attempt": run.attempt,
                              "override": run.verdict_override}
                     for run_id, run in runs if run.verdict is not None},
        "accepted": accepted,
        "checkpoints": {run_id: _newest_verified(state.runs[run_id]) for run_id in accepted},
        "answered": question_open(campaign, state, conclusion) is None,
        "winners": sorted(conclusion.winners) if conclusion is not None else [],
    }


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def stale_why(then: Any, now: Mapping[str, Any]) -> str | None:
    """How the facts an export was made from (``then``) differ from ``now``, in words
    (None: they do not: the export is fresh)."""
    if not isinstance(then, Mapping) or then.get("format") != FACTS_FORMAT:
        return NO_FACTS
    parts: list[str] = []
    before = _mapping(then.get("verdicts"))
    after: Mapping[str, Any] = now["verdicts"]
    changed = sorted(r for r, v in after.items() if before.get(r) != v)
    if changed:
        parts.append(f"predates {_plural(len(changed), 'verdict')} ({', '.join(changed)})")
    # Named from the journal's copy: only a plain run id is named (the line is untrusted).
    restarted = sorted(r for r in before if r not in after and isinstance(r, str)
                       and r.isprintable() and len(r) <= 100)
    if restarted:
        parts.append(f"predates a new attempt of {', '.join(restarted)} (its verdict was "
                     "withdrawn)")
    if not changed and not restarted and then.get("accepted") != now["accepted"]:
        parts.append(f"the accepted runs changed (now: {', '.join(now['accepted']) or 'none'})")
    held = _mapping(then.get("checkpoints"))
    newer = sorted(r for r, ckpt in now["checkpoints"].items()
                   if r in held and held[r] != ckpt)
    if newer:
        parts.append(f"predates a new verified checkpoint of {', '.join(newer)}")
    if then.get("answered") != now["answered"]:
        parts.append("the question is answered now" if now["answered"]
                     else "the question is open now")
    elif then.get("winners") != now["winners"]:
        parts.append("the answer changed")
    return "; ".join(parts) or None


@dataclass(frozen=True)
class ExportState:
    """What every face says of the export and the close (see the module text)."""

    file: str  # the campaign file's name (the command to export again)
    exported_at: datetime | None = None  # the newest verified export (None: none)
    seq: int | None = None  # its export_done event
    stale: str | None = None  # why it no longer says what is true (None: fresh)
    open: str | None = None  # why the question is open (None: answered)

    @property
    def exported(self) -> bool:
        return self.exported_at is not None

    @property
    def closed(self) -> bool:
        """The question answered and its export current: what is left is the fetch."""
        return self.exported and self.stale is None and self.open is None

    @property
    def command(self) -> str:
        return f"cockpit export {self.file}"

    def words(self) -> str | None:
        """``closed``, ``exported, question open: …`` or ``export STALE: … — cockpit
        export FILE`` (None: nothing exported yet)."""
        if not self.exported:
            return None
        if self.stale is not None:
            return f"export STALE: {self.stale} — {self.command}"
        if self.open is not None:
            return f"exported, question open: {self.open}"
        return "closed"

    def as_json(self) -> dict[str, Any]:
        return {"exported": self.exported,
                "exported_at": None if self.exported_at is None
                else self.exported_at.isoformat().replace("+00:00", "Z"),
                "stale": self.stale is not None, "why": self.stale,
                "question_open": self.open, "closed": self.closed, "words": self.words(),
                "command": self.command}


def export_state(campaign: Campaign, state: CampaignState,
                 conclusion: Conclusion | None) -> ExportState:
    """The newest verified export against the facts now (``conclusion``: the question's
    conclusion now, as :func:`cockpit.close.conclusion.conclude_now` gives it; None
    when the plan has no conclusion rule)."""
    file = campaign.path.name
    export = state.export
    if not export or not export.get("verified"):
        return ExportState(file)
    try:
        at = parse_time(str(export.get("t")))
    except ValueError:  # the reader checks every line's time: a hand-made state only
        return ExportState(file)
    now = export_facts(campaign, state, conclusion)
    seq = export.get("seq")
    return ExportState(file, at, seq if isinstance(seq, int) else None,
                       stale_why(export.get("facts"), now),
                       question_open(campaign, state, conclusion))
