"""Load and validate a campaign file into the frozen model, with FILE:LINE:COL errors.

Every problem found is reported (not only the first), each at the place it was
written. Unknown keys are errors with a did-you-mean hint, so a typo never silently
turns a setting off. Relative paths are relative to the campaign file's folder.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from cockpit.campaign.catalog import BUILTIN_OFFERS
from cockpit.campaign.checker import NAME_ID, Checker, kind_of
from cockpit.campaign.model import (
    CATEGORIES,
    Campaign,
    Offer,
    Package,
    Resource,
    Stage,
    with_pilot_roles,
)
from cockpit.campaign.sections_alerts import read_alerts
from cockpit.campaign.sections_close import (
    check_conclusion,
    read_conclusion,
    read_deadline,
    read_on_deadline,
)
from cockpit.campaign.sections_guards import (
    check_rule_runs,
    read_hooks,
    read_settings,
    read_stop_rules,
    with_default_stall_rule,
)
from cockpit.campaign.sections_machines import check_machines, read_machines
from cockpit.campaign.sections_runs import check_payload_paths, read_runs
from cockpit.campaign.yamlread import KeyPath, parse_yaml, read_text
from cockpit.common.units import Money

CAMPAIGN_ID = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")
ROLES = ("control", "data_check", "resume_check", "pilot", "export", "retrieval")

# The sections beyond the package and stages, each read by its own module.
SECTION_KEYS = ("runs", "hooks", "stop_rules", "settings", "conclusion", "deadline", "on_deadline",
                "machines", "alerts")
TOP_KEYS = ("campaign", "question", "package", "offers", "stages") + SECTION_KEYS
PACKAGE_KEYS = ("offer", "count", "start", "order_ref")
OFFER_KEYS = ("id", "gpu", "gpus", "days", "price", "currency")
STAGE_KEYS = (
    "id", "hours", "duration", "resource", "category", "after", "decision_point", "run",
    "machine", "role", "command", "shell", "cwd", "env", "note",
)


def load_campaign(path: str | Path) -> Campaign:
    """Read, parse and validate a campaign file; InputError lists every problem."""
    path = Path(path)
    return load_campaign_text(read_text(path), path)


def load_campaign_text(text: str, path: str | Path) -> Campaign:
    """A campaign from its text, as if read from ``path`` (relative paths, messages)."""
    path = Path(path)
    loc = parse_yaml(text, str(path))
    check = Checker(loc)
    data = check.mapping(loc.data, (), TOP_KEYS, ("campaign", "package", "stages"),
                         what="campaign file (top level)")
    check.raise_if_any()
    assert data is not None

    campaign_id = check.string(data.get("campaign"), ("campaign",), "campaign id", CAMPAIGN_ID,
                               " (use lowercase letters, digits, '.', '_', '-')")
    question = data.get("question", "")
    if "question" in data and not isinstance(question, str):
        check.err(("question",), "question must be a text")
        question = ""
    offers = _offers(check, data.get("offers", []))
    package = _package(check, data.get("package"), offers)
    stages = _stages(check, data.get("stages"), package, path.parent.resolve())

    # Each reader is called for an absent section too (value None): it supplies the defaults.
    runs = read_runs(check, data.get("runs"), ("runs",), stages)
    hooks = read_hooks(check, data.get("hooks"), ("hooks",))
    stop_rules = read_stop_rules(check, data.get("stop_rules"), ("stop_rules",))
    settings = read_settings(check, data.get("settings"), ("settings",))
    conclusion = read_conclusion(check, data.get("conclusion"), ("conclusion",))
    deadline = read_deadline(check, data.get("deadline"), ("deadline",))
    on_deadline = read_on_deadline(check, data.get("on_deadline"), ("on_deadline",))
    machines = read_machines(check, data.get("machines"), ("machines",))
    alerts = read_alerts(check, data.get("alerts"), ("alerts",))
    # Checks across sections, once every section is read.
    check_rule_runs(check, stop_rules, runs)
    check_conclusion(check, conclusion, runs)
    check_machines(check, machines, stages, package, data.get("stages"))
    check_payload_paths(check, data.get("runs"), runs, settings.export_outside,
                        path.parent.resolve())
    check.raise_if_any()
    assert campaign_id is not None and package is not None
    return Campaign(
        id=campaign_id,
        question=question.strip(),
        package=package,
        offers=offers,
        stages=tuple(stages),
        path=path.resolve(),
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        text=text,
        runs=runs,
        stop_rules=with_default_stall_rule(stop_rules, runs),
        settings=settings,
        hooks=hooks,
        conclusion=conclusion,
        deadline=deadline,
        on_deadline=on_deadline,
        machines=machines,
        alerts=alerts,
    )


def _offers(check: Checker, value: Any) -> dict[str, Offer]:
    offers = dict(BUILTIN_OFFERS)
    if value is None:
        return offers
    if not isinstance(value, list):
        check.err(("offers",), "offers must be a list of offers")
        return offers
    for i, item in enumerate(value):
        path: KeyPath = ("offers", i)
        entry = check.mapping(item, path, OFFER_KEYS, ("id",), what="offer")
        if entry is None:
            continue
        offer_id = check.string(entry.get("id"), path + ("id",), "offer id", NAME_ID)
        if offer_id is None:
            continue
        base = offers.get(offer_id)
        gpu = entry.get("gpu", base.gpu if base else None)
        if not isinstance(gpu, str):
            check.err(path + ("gpu",), "offer needs gpu (the card's name)")
            continue
        gpus = check.integer(entry.get("gpus", base.gpus if base else 1), path + ("gpus",), "gpus")
        days = check.positive(entry.get("days", base.days if base else None), path + ("days",),
                              "days")
        currency = entry.get("currency", base.price.currency if base and base.price else "USD")
        if not isinstance(currency, str) or not re.fullmatch(r"[A-Za-z]{3}", currency):
            check.err(path + ("currency",), "currency must be a 3-letter code like USD")
            currency = "USD"
        price: Money | None = base.price if base else None
        if "price" in entry:
            raw = entry["price"]
            if raw is None or raw == "unknown":
                price = None
            else:
                try:
                    price = Money.parse(raw, currency)
                except ValueError as exc:
                    check.err(path + ("price",), str(exc))
        elif price is not None and "currency" in entry:
            price = Money(price.amount, currency.upper())
        if gpus is not None and days is not None:
            offers[offer_id] = Offer(offer_id, gpu, gpus, days, price)
    return offers


def _package(check: Checker, value: Any, offers: dict[str, Offer]) -> Package | None:
    entry = check.mapping(value, ("package",), PACKAGE_KEYS, ("offer", "start"), what="package")
    if entry is None:
        return None
    offer_id = entry.get("offer")
    offer = None
    if isinstance(offer_id, str) and offer_id in offers:
        offer = offers[offer_id]
    elif "offer" in entry:
        hint = difflib.get_close_matches(str(offer_id), offers, n=1)
        extra = f" (did you mean {hint[0]!r}?)" if hint else ""
        known = ", ".join(sorted(offers))
        check.err(("package", "offer"), f"unknown offer {offer_id!r}{extra}; known: {known}")
    count = check.integer(entry.get("count", 1), ("package", "count"), "package count")
    start = _timestamp(check, entry.get("start"), ("package", "start"), "package start") \
        if "start" in entry else None
    order_ref = entry.get("order_ref")
    if order_ref is not None and not isinstance(order_ref, (str, int)):
        check.err(("package", "order_ref"), "order_ref must be a text")
        order_ref = None
    if offer is None or count is None or start is None:
        return None
    return Package(offer, count, start, None if order_ref is None else str(order_ref))


def _timestamp(check: Checker, value: Any, path: KeyPath, what: str) -> datetime | None:
    if not isinstance(value, str):
        check.err(path, f"{what} must be a time like 2026-12-02T08:00:00Z, not {kind_of(value)}")
        return None
    text = value.strip()
    try:
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        check.err(path, f"{what} {value!r} is not a time like 2026-12-02T08:00:00Z")
        return None
    if when.tzinfo is None:
        check.err(path, f"{what} {value!r} has no timezone (add Z for UTC, or +02:00)")
        return None
    return when


def _resources(check: Checker, value: Any, path: KeyPath, gpus: int | None) -> tuple[Resource, ...]:
    names = check.str_list(value, path, "resource")
    out: list[Resource] = []
    for i, name in enumerate(names):
        where = path + (i,) if isinstance(value, list) else path
        text = name.strip().lower()
        if text in ("human", "gpu", "cpu", "none"):
            out.append(Resource(text))
            continue
        match = re.fullmatch(r"gpu:(\d+)", text)
        if not match:
            check.err(where, f"unknown resource {name!r} (human, gpu, gpu:N, cpu or none)")
            continue
        index = int(match.group(1))
        if gpus is not None and index >= gpus:
            check.err(where, f"resource {name!r}: the offer has {gpus} GPU"
                             f"{'s' if gpus != 1 else ''} (gpu:0..gpu:{gpus - 1})")
            continue
        out.append(Resource("gpu", index))
    return tuple(out)


def _stages(check: Checker, value: Any, package: Package | None, folder: Path) -> list[Stage]:
    if not isinstance(value, list):
        check.err(("stages",), "stages must be a list of stages")
        return []
    if not value:
        check.err(("stages",), "stages must not be empty")
        return []
    gpus = package.offer.gpus if package else None
    count = package.count if package else None
    stages: list[Stage] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(value):
        path: KeyPath = ("stages", i)
        entry = check.mapping(item, path, STAGE_KEYS, ("id",), what="stage")
        if entry is None:
            continue
        stage_id = check.string(entry.get("id"), path + ("id",), "stage id", NAME_ID)
        if stage_id is None:
            continue
        if stage_id in seen:
            check.err(path + ("id",), f"duplicate stage id {stage_id!r} (first at stage "
                                      f"{seen[stage_id] + 1})")
            continue
        seen[stage_id] = i
        seconds = _seconds(check, entry, path, stage_id)
        resources = _resources(check, entry.get("resource", "none"), path + ("resource",), gpus)
        category = entry.get("category", "essential")
        if category not in CATEGORIES:
            check.err(path + ("category",), f"category must be one of {', '.join(CATEGORIES)}")
        machine = check.integer(entry.get("machine", 1), path + ("machine",), "machine")
        if machine is not None and count is not None and machine > count:
            check.err(path + ("machine",), f"machine {machine} but the package count is {count}")
        role = entry.get("role")
        if role is not None and role not in ROLES:
            check.err(path + ("role",), f"role must be one of {', '.join(ROLES)}")
        run = entry.get("run")
        if run is not None:
            run = check.string(run, path + ("run",), "run id", NAME_ID)
        command, shell = _command(check, entry, path)
        cwd = None
        if "cwd" in entry:
            raw = check.string(entry["cwd"], path + ("cwd",), "cwd")
            cwd = (folder / raw) if raw else None
        env = _env(check, entry["env"], path + ("env",)) if "env" in entry else ()
        decision = check.boolean(entry.get("decision_point", False), path + ("decision_point",),
                                 "decision_point")
        if "note" in entry and not isinstance(entry["note"], str):
            check.err(path + ("note",), "note must be a text")
        stages.append(Stage(
            id=stage_id, seconds=seconds or 0.0, resources=resources or (Resource("none"),),
            category=category if category in CATEGORIES else "essential",
            after=tuple(check.str_list(entry.get("after", []), path + ("after",), "after")),
            decision_point=decision, run=run, machine=machine or 1, role=role,
            command=command, shell=shell, cwd=cwd, env=env,
            line=check.loc.where(path)[0],
        ))
    _check_after(check, stages, value)
    return with_pilot_roles(stages)  # D21: the pilot by position, before the runs read it


def _seconds(check: Checker, entry: dict[str, Any], path: KeyPath,
             stage_id: str) -> float | None:
    """A stage's ``hours:`` or ``duration:`` in seconds (exactly one of them)."""
    if "hours" in entry and "duration" in entry:
        check.err(path + ("duration",), "give hours or duration, not both")
    elif "hours" in entry:
        return check.hours(entry["hours"], path + ("hours",), "hours")
    elif "duration" in entry:
        return check.duration(entry["duration"], path + ("duration",), "duration")
    else:
        check.err(path, f"stage {stage_id!r} needs hours or duration")
    return None


def _env(check: Checker, value: Any, path: KeyPath) -> tuple[tuple[str, str], ...]:
    """A stage's ``env:``: names to texts or numbers."""
    if isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, (str, int, float)) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        return tuple((k, str(v)) for k, v in value.items())
    check.err(path, "env must map names to texts or numbers")
    return ()


def _command(check: Checker, entry: dict[str, Any], path: KeyPath) -> tuple[Any, bool]:
    shell = check.boolean(entry.get("shell", False), path + ("shell",), "shell")
    if "command" not in entry:
        return None, shell
    raw = entry["command"]
    if isinstance(raw, str):
        if not shell:
            check.err(path + ("command",), "command must be a list of words (argv); "
                                           "a single text needs shell: true")
            return None, shell
        return raw, shell
    if isinstance(raw, list) and raw and all(isinstance(a, (str, int, float)) for a in raw):
        return tuple(str(a) for a in raw), shell
    check.err(path + ("command",), "command must be a non-empty list of words (argv)")
    return None, shell


def _check_after(check: Checker, stages: list[Stage], raw: list[Any]) -> None:
    ids = {s.id for s in stages}
    index_of = {s["id"]: i for i, s in enumerate(raw) if isinstance(s, dict) and "id" in s}
    for stage in stages:
        path: KeyPath = ("stages", index_of.get(stage.id, 0), "after")
        for dep in stage.after:
            if dep == stage.id:
                check.err(path, f"stage {stage.id!r} cannot come after itself")
            elif dep not in ids:
                hint = difflib.get_close_matches(dep, sorted(ids), n=1)
                extra = f" (did you mean {hint[0]!r}?)" if hint else ""
                check.err(path, f"after names no stage: {dep!r}{extra}")
    # Cycle detection (iterative DFS, so a long chain cannot exhaust the stack).
    graph = {s.id: [d for d in s.after if d in ids and d != s.id] for s in stages}
    color: dict[str, int] = {}
    for root in graph:
        if color.get(root):
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        trail: list[str] = []
        while stack:
            node, i = stack.pop()
            if i == 0:
                color[node] = 1
                trail.append(node)
            deps = graph[node]
            if i < len(deps):
                stack.append((node, i + 1))
                dep = deps[i]
                if color.get(dep) == 1:
                    cycle = trail[trail.index(dep):] + [dep]
                    where = ("stages", index_of.get(node, 0), "after")
                    check.err(where, "cycle in after: " + " -> ".join(reversed(cycle)))
                    return
                if not color.get(dep):
                    stack.append((dep, 0))
            else:
                color[node] = 2
                trail.pop()
