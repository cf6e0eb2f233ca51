"""The domain's advice on a plan (D3, D4, D13): warnings, never errors.

A stage's role is its ``role:`` key, or else its id or run id when that id *is* the
role's name (``control``, ``data-check``, ``resume-check``, ``pilot``, ...), so plain
campaign files get the advice without extra keys. Only exact ids count: ``load-data``
is no data check, ``resume-writing`` no resume check, ``uncontrolled-sweep`` no control.
"""

from __future__ import annotations

from cockpit.campaign.model import Campaign, Stage

_ROLE_IDS = {
    "control": ("control", "baseline"),
    "data_check": ("data-check", "data_check", "datacheck"),
    "resume_check": ("resume-check", "resume_check"),
    "pilot": ("pilot",),
    "export": ("export",),
    "retrieval": ("retrieval", "fetch"),
}


def role_of(stage: Stage) -> str | None:
    """The ``role:`` key, or the role whose name the stage's id (or run id) is."""
    if stage.role:
        return stage.role
    names = (stage.id.lower(), (stage.run or "").lower())
    for role, ids in _ROLE_IDS.items():
        if any(name in ids for name in names):
            return role
    return None


def downstream(campaign: Campaign, stage_id: str) -> set[str]:
    """Every stage that (transitively) comes after ``stage_id``."""
    after: dict[str, list[str]] = {}
    for stage in campaign.stages:
        for dep in stage.after:
            after.setdefault(dep, []).append(stage.id)
    seen: set[str] = set()
    todo = [stage_id]
    while todo:
        for nxt in after.get(todo.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def plan_warnings(campaign: Campaign) -> list[str]:
    warnings: list[str] = []
    roles: dict[str, list[Stage]] = {}
    for stage in campaign.stages:
        role = role_of(stage)
        if role:
            roles.setdefault(role, []).append(stage)
    for role, words in (("control", "a control"), ("data_check", "a data check"),
                        ("resume_check", "a resume check")):
        found = roles.get(role, [])
        if not found:
            warnings.append(f"no stage is {words} (D3: usually essential)")
        elif not any(s.category == "essential" for s in found):
            ids = ", ".join(s.id for s in found)
            warnings.append(f"{words} ({ids}) is not essential (D3: usually essential)")
    deciders = [s for s in campaign.stages if s.decision_point]
    for pilot in roles.get("pilot", []):
        if not pilot.decision_point and not any(
            s.id in downstream(campaign, pilot.id) for s in deciders
        ):
            warnings.append(f"no decision point after the pilot {pilot.id!r} "
                            "(D4: continue, limit or revise)")
    if not roles.get("pilot") and not deciders:
        warnings.append("no pilot with a decision point (D4)")
    after_decision: set[str] = set()
    for decider in deciders:
        after_decision |= downstream(campaign, decider.id)
    early = [s.id for s in campaign.stages
             if s.category == "exploratory" and s.id not in after_decision]
    if len(early) > 1:
        warnings.append(
            f"{len(early)} exploratory stages ({', '.join(early)}) are not after a decision "
            "point (D13: decide after the pilot, don't launch every combination at once)")
    return warnings
