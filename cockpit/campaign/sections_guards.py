"""The campaign file's sections for what the cockpit does on its own: ``stop_rules:``
(D14), ``settings:`` and ``hooks:`` (a person's command run when something happens)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cockpit.campaign.checker import NAME_ID, Checker
from cockpit.campaign.model import (
    HOOK_EVENTS,
    RULE_KINDS,
    STALL_FACTOR,
    STALL_FLOOR_S,
    Hook,
    Run,
    Settings,
    StopRule,
)
from cockpit.campaign.yamlread import KeyPath

RULE_KEYS = ("id", "kind", "metric", "min", "max", "after_step", "max_age", "action", "runs",
             "factor", "floor", "util_below", "for")
# Kinds that are a question for a person first: warn unless the file says stop (a
# stalled run, GPUs underfed: input-bound or stuck, not broken).
WARN_KINDS = ("stalled", "underfed")
SETTING_KEYS = (
    "stop_grace", "idle_util_pct", "idle_grace", "disk_warn_gb", "tolerable_loss",
    "mean_time_between_interruptions", "transfer_rate_mb_s", "verify_within", "verify_timeout",
    "verify_every", "deadline_warn", "export_outside", "fetch",
)
FETCH_KEYS = ("host", "port", "user")
HOOK_KEYS = ("command", "shell", "timeout")


def read_stop_rules(check: Checker, value: Any, path: KeyPath) -> tuple[StopRule, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        check.err(path, "stop_rules must be a list of rules")
        return ()
    rules: list[StopRule] = []
    seen: set[str] = set()
    for i, raw in enumerate(value):
        where = path + (i,)
        entry = check.mapping(raw, where, RULE_KEYS, ("id", "kind"), what="stop rule")
        if entry is None:
            continue
        rule_id = check.string(entry.get("id"), where + ("id",), "rule id", NAME_ID)
        kind = entry.get("kind")
        if kind not in RULE_KINDS:
            check.err(where + ("kind",), f"rule kind must be one of {', '.join(RULE_KINDS)}")
            continue
        if rule_id is None:
            continue
        if rule_id in seen:
            check.err(where + ("id",), f"duplicate rule id {rule_id!r}")
            continue
        seen.add(rule_id)
        metric = entry.get("metric")
        if kind in ("non_finite", "threshold", "truncation") and not isinstance(metric, str):
            check.err(where, f"a {kind} rule needs metric")
        bounds = _bounds(check, kind, entry, where)
        max_age = None
        if kind == "restart":
            if "max_age" not in entry:
                check.err(where, "a restart rule needs max_age (e.g. 45m)")
            else:
                max_age = check.duration(entry["max_age"], where + ("max_age",), "max_age")
        after_step = entry.get("after_step", 0)
        if isinstance(after_step, bool) or not isinstance(after_step, int) or after_step < 0:
            check.err(where + ("after_step",), "after_step must be a whole number >= 0")
            after_step = 0
        stall = _stall_limits(check, kind, entry, where)
        underfed = _underfed_limits(check, kind, entry, where)
        action = entry.get("action", "warn" if kind in WARN_KINDS else "stop")
        if action not in ("stop", "warn"):
            check.err(where + ("action",), "action must be stop or warn")
            action = "stop"
        runs = tuple(check.str_list(entry.get("runs", []), where + ("runs",), "runs"))
        rules.append(StopRule(rule_id, kind, metric if isinstance(metric, str) else None,
                              bounds["min"], bounds["max"], after_step, max_age, action, runs,
                              factor=stall.get("factor", STALL_FACTOR),
                              floor_s=stall.get("floor_s", STALL_FLOOR_S),
                              util_below=underfed.get("util_below"),
                              for_s=underfed.get("for_s")))
    return tuple(rules)


def _bounds(check: Checker, kind: str, entry: dict[str, Any],
            where: KeyPath) -> dict[str, float | None]:
    """A rule's ``min`` and ``max`` (a threshold needs one; a truncation's max is 0)."""
    bounds: dict[str, float | None] = {}
    for key in ("min", "max"):
        raw_bound = entry.get(key)
        if raw_bound is not None and (isinstance(raw_bound, bool)
                                      or not isinstance(raw_bound, (int, float))):
            check.err(where + (key,), f"{key} must be a number")
            raw_bound = None
        bounds[key] = None if raw_bound is None else float(raw_bound)
    if kind == "threshold" and bounds["min"] is None and bounds["max"] is None:
        check.err(where, "a threshold rule needs min and/or max")
    if kind == "truncation" and bounds["max"] is None:
        bounds["max"] = 0.0
    return bounds


def _stall_limits(check: Checker, kind: str, entry: dict[str, Any],
                  where: KeyPath) -> dict[str, float]:
    """A stalled rule's ``factor`` (a number > 1) and ``floor`` (a duration); only there."""
    out: dict[str, float] = {}
    for key in ("factor", "floor"):
        if key in entry and kind != "stalled":
            check.err(where + (key,), f"{key} belongs to a stalled rule, not a {kind} rule")
    if kind != "stalled":
        return out
    if "factor" in entry:
        factor = check.positive(entry["factor"], where + ("factor",), "factor")
        if factor is not None and factor <= 1:
            check.err(where + ("factor",), f"factor must be above 1 (times the run's median "
                                           f"step interval, default {STALL_FACTOR:g}), not "
                                           f"{entry['factor']}")
        elif factor is not None:
            out["factor"] = factor
    if "floor" in entry:
        floor = check.duration(entry["floor"], where + ("floor",), "floor")
        if floor is not None:
            out["floor_s"] = floor
    return out


def _underfed_limits(check: Checker, kind: str, entry: dict[str, Any],
                     where: KeyPath) -> dict[str, float]:
    """An underfed rule's ``util_below`` (percent, 0 < x <= 100) and ``for`` (a duration),
    both needed; only there. It watches the run's GPUs, never a metric."""
    out: dict[str, float] = {}
    for key in ("util_below", "for"):
        if key in entry and kind != "underfed":
            check.err(where + (key,), f"{key} belongs to an underfed rule, not a {kind} rule")
    if kind != "underfed":
        return out
    if "metric" in entry:
        check.err(where + ("metric",), "an underfed rule watches its run's GPU utilization, "
                                       "not a metric: remove metric")
    for key in ("util_below", "for"):
        if key not in entry:
            check.err(where, f"an underfed rule needs {key} (e.g. util_below: 10, for: 20m)")
    if "util_below" in entry:
        below = check.positive(entry["util_below"], where + ("util_below",), "util_below")
        if below is not None and below > 100:
            check.err(where + ("util_below",), f"util_below is a GPU utilization in percent "
                                               f"(above 0, at most 100), not {below:g}")
        elif below is not None:
            out["util_below"] = below
    if "for" in entry:
        seconds = check.duration(entry["for"], where + ("for",), "for")
        if seconds is not None:
            out["for_s"] = seconds
    return out


def with_default_stall_rule(rules: tuple[StopRule, ...],
                            runs: Mapping[str, Run]) -> tuple[StopRule, ...]:
    """The rules, plus the implicit ``stalled`` rule (warn, default factor and floor) on
    the train runs when the file declares no stalled rule: a hung training run is never
    silent. Its id is ``stalled`` (``stalled-default`` when a rule already has that id)."""
    train = tuple(run_id for run_id, run in runs.items() if run.kind == "train")
    if not train or any(r.kind == "stalled" for r in rules):
        return rules
    rule_id = "stalled-default" if any(r.id == "stalled" for r in rules) else "stalled"
    return (*rules, StopRule(rule_id, "stalled", action="warn", runs=train, implicit=True))


def read_settings(check: Checker, value: Any, path: KeyPath) -> Settings:
    if value is None:
        return Settings()
    entry = check.mapping(value, path, SETTING_KEYS, what="settings")
    if entry is None:
        return Settings()
    if "verify_within" in entry:
        check.err(path + ("verify_within",), "verify_within is no longer a setting: reload "
                  "checks run every verify_every (and the first as soon as a checkpoint is "
                  "complete), a failed one is shown at once; remove it", key=True)
    values: dict[str, Any] = {}
    durations = {
        "stop_grace": "stop_grace_s", "idle_grace": "idle_grace_s",
        "tolerable_loss": "tolerable_loss_s", "mean_time_between_interruptions": "mtbi_s",
        "verify_timeout": "verify_timeout_s",
        "verify_every": "verify_every_s",
        "deadline_warn": "deadline_warn_s",
    }
    for key, attr in durations.items():
        if key in entry:
            seconds = check.duration(entry[key], path + (key,), key)
            if seconds is not None:
                values[attr] = seconds
    for key, attr, scale in (("idle_util_pct", "idle_util_pct", 1.0),
                             ("disk_warn_gb", "disk_warn_bytes", 2**30),
                             ("transfer_rate_mb_s", "transfer_rate_bytes_s", 2**20)):
        if key in entry:
            number = check.positive(entry[key], path + (key,), key)
            if number is not None:
                values[attr] = int(number * scale) if attr == "disk_warn_bytes" \
                    else number * scale
    if "export_outside" in entry:
        values["export_outside"] = tuple(
            Path(p) for p in check.str_list(entry["export_outside"], path + ("export_outside",),
                                            "export_outside (folders the export may copy from)"))
    if "fetch" in entry:
        values.update(_fetch(check, entry["fetch"], path + ("fetch",)))
    return Settings(**values)


def _fetch(check: Checker, value: Any, path: KeyPath) -> dict[str, Any]:
    """``settings.fetch``: where the export is fetched from (host, user, port)."""
    values: dict[str, Any] = {}
    fetch = check.mapping(value, path, FETCH_KEYS, what="fetch")
    if fetch is None:
        return values
    for key in ("host", "user"):
        if key in fetch:
            values[f"fetch_{key}"] = check.string(fetch[key], path + (key,), f"fetch {key}")
    if "port" in fetch:
        port = check.integer(fetch["port"], path + ("port",), "fetch port")
        if port is not None and port > 65535:
            check.err(path + ("port",), "fetch port must be 1..65535")
        values["fetch_port"] = port if port is not None and port <= 65535 else None
    return values


def read_hooks(check: Checker, value: Any, path: KeyPath) -> dict[str, Hook]:
    """The campaign file's ``hooks:`` section: event -> argv list or {command, shell, timeout}."""
    if value is None:
        return {}
    entry = check.mapping(value, path, HOOK_EVENTS, what="hooks")
    if entry is None:
        return {}
    hooks: dict[str, Hook] = {}
    for name, raw in entry.items():
        where = path + (name,)
        spec = {"command": raw} if isinstance(raw, (list, str)) else raw
        spec = check.mapping(spec, where, HOOK_KEYS, ("command",), what="hook")
        if spec is None:
            continue
        shell = check.boolean(spec.get("shell", False), where + ("shell",), "shell")
        command = spec.get("command")
        timeout = 30.0
        if "timeout" in spec:
            timeout = check.duration(spec["timeout"], where + ("timeout",), "timeout") or 30.0
        if isinstance(command, str) and shell:
            hooks[name] = Hook(name, command, True, timeout)
        elif isinstance(command, list) and command and all(isinstance(a, str) for a in command):
            hooks[name] = Hook(name, tuple(command), False, timeout)
        else:
            check.err(where, "hook command must be a list of words (a text only with shell: true)")
    return hooks


def check_rule_runs(check: Checker, rules: tuple[StopRule, ...],
                    runs: Mapping[str, Run]) -> None:
    """A rule's ``runs:`` must name runs the campaign has."""
    for i, rule in enumerate(rules):
        for name in rule.runs:
            if name not in runs:
                check.err(("stop_rules", i, "runs"), f"rule {rule.id!r} names no run: {name!r}")
