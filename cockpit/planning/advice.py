"""The domain's advice on a plan (D3, D4, D13, and D19's landing reserve): warnings, never
errors.

A stage's role is its ``role:`` key, or else its id or run id when that id *is* the
role's name (``control``, ``data-check``, ``resume-check``, ``pilot``, ...), so plain
campaign files get the advice without extra keys. Only exact ids count: ``load-data``
is no data check, ``resume-writing`` no resume check, ``uncontrolled-sweep`` no control.
"""

from __future__ import annotations

from cockpit.campaign.model import Campaign, Stage, model_module_file, question_variants
from cockpit.planning.deadline import window_shorter_than_reserve


def role_of(stage: Stage) -> str | None:
    """The ``role:`` key, or the role whose name the stage's id (or run id) is."""
    return stage.effective_role


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
    if deciders:
        for stage in variant_stages(campaign):
            if stage.category != "exploratory" and stage.uses_gpu \
                    and stage.id not in after_decision:
                warnings.append(f"variant {stage.id!r} ({stage.category}) is scheduled before "
                                "the pilot's decision point (D4: the pilot exists to decide it)")
    warnings.extend(_question_warnings(campaign))
    warnings.extend(_params_warnings(campaign))
    warnings.extend(_model_warnings(campaign))
    short = window_shorter_than_reserve(campaign)  # the landing reserve (D19)
    if short is not None:
        warnings.append(short)
    return warnings


def _model_warnings(campaign: Campaign) -> list[str]:
    """A run's ``model:`` whose module is not a file of the campaign folder: the bag's
    reload.py then needs it installed beside torch (it is not in the bag's code/)."""
    return [f"run {run.id}: model {run.model!r}: module {run.model.partition(':')[0]!r} is "
            f"not one of the campaign's files (in {campaign.folder}); the export's reload.py "
            "will import it from the installed packages, not from the bag's code"
            for run in campaign.runs.values()
            if run.model and model_module_file(campaign.folder, run.model) is None]


def variant_stages(campaign: Campaign) -> list[Stage]:
    """The stages whose runs are the variants: the conclusion's, or else every GPU stage
    with a run that is not the control, the pilot, a data check or a resume check."""
    if campaign.conclusion is not None:
        # The conclusion's own list: a pilot or data check (no result, D21) is no variant.
        variants = set(question_variants(campaign))
        return [s for s in campaign.stages if s.run in variants]
    plain = ("control", "pilot", "data_check", "resume_check", "export", "retrieval")
    return [s for s in campaign.stages
            if s.run and s.uses_gpu and role_of(s) not in plain]


def _question_warnings(campaign: Campaign) -> list[str]:
    out = []
    if not campaign.question.strip():
        out.append("the campaign names no question (D1: name the question and what closes "
                   "it; 'train a model' is not a goal)")
    elif campaign.conclusion is None:
        out.append(f"the question {campaign.question[:80]!r} has no conclusion: section, so "
                   "nothing can answer it (D1: name what closes it: conclusion: {metric, "
                   "baseline, margin} or {metric, rule: reach_threshold, threshold})")
    for machine in range(2, campaign.package.count + 1):
        if not any(s.machine == machine for s in campaign.stages):
            out.append(f"package.count is {campaign.package.count} but no stage is placed on "
                       f"machine {machine} (stages[].machine: {machine}): that package would "
                       "be paid for and stand idle (D12: a second package runs independent "
                       "variants side by side)")
    if all(rule.implicit for rule in campaign.stop_rules):
        out.append("no stop rules (D14: fix them before the runs: a non-finite loss, a quality "
                   "floor, a truncated input, no usable restart)")
    if campaign.package.offer.price is None:
        out.append(f"the price of {campaign.package.offer.id} is unknown (D10): the budget "
                   "and the share per accepted result will be undefined until you state it")
    return out


def _params_warnings(campaign: Campaign) -> list[str]:
    """A variant tests one cause against the control: same params test nothing, several
    changed keys change several causes at once."""
    control = _control_run(campaign)
    if control is None or control not in campaign.runs or campaign.runs[control].params_file:
        return []
    base = campaign.runs[control].params
    out = []
    for stage in variant_stages(campaign):
        run = campaign.runs.get(stage.run or "")
        if run is None or run.id == control or run.params_file or not run.params:
            continue
        changed = sorted(k for k in set(base) | set(run.params)
                         if base.get(k) != run.params.get(k))
        if not changed:
            out.append(f"variant {run.id!r} has the same params as the control {control!r}: "
                       "it tests nothing")
        elif len(changed) > 1:
            out.append(f"variant {run.id!r} differs from the control {control!r} in "
                       f"{len(changed)} params ({', '.join(changed)}): it changes several "
                       "causes at once; a variant that isolates one cause says more")
    return out


def _control_run(campaign: Campaign) -> str | None:
    if campaign.conclusion is not None:
        return campaign.conclusion.baseline
    return next((s.run for s in campaign.stages if role_of(s) == "control" and s.run), None)
