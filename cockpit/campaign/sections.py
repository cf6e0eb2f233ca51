"""Readers for the campaign file's sections beyond the package and stages:
``runs``, ``stop_rules`` and ``settings``. Each registers with the loader so the
unknown-key check knows every key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cockpit.campaign.checker import NAME_ID, Checker
from cockpit.campaign.loader import register_section, register_validator
from cockpit.campaign.model import (
    RULE_KINDS,
    RUN_KINDS,
    ResumeCheck,
    Run,
    Settings,
    Stage,
    StopRule,
)
from cockpit.campaign.yamlread import KeyPath
from cockpit.hooks import read_hooks

RUN_KEYS = (
    "metrics", "checkpoints", "pattern", "predictions", "outputs", "params", "kind",
    "base_model", "base_revision", "result", "tolerable_loss", "verify_command",
    "resume_check", "allow_unsafe_pickle", "expected_ids", "acceptance",
)
RULE_KEYS = ("id", "kind", "metric", "min", "max", "after_step", "max_age", "action", "runs")
SETTING_KEYS = (
    "stop_grace", "idle_util_pct", "idle_grace", "disk_warn_gb", "tolerable_loss",
    "mean_time_between_interruptions", "transfer_rate_mb_s", "verify_within", "verify_timeout",
    "verify_every", "deadline_warn",
)
RESUME_KEYS = ("command", "steps", "metric", "tolerance")

def _path(check: Checker, value: Any, where: KeyPath, what: str) -> Path | None:
    text = check.string(value, where, what)
    return None if text is None else Path(text)


def _argv(check: Checker, value: Any, where: KeyPath, what: str) -> tuple[str, ...] | None:
    if isinstance(value, list) and value and all(isinstance(a, (str, int, float)) for a in value):
        return tuple(str(a) for a in value)
    check.err(where, f"{what} must be a non-empty list of words (argv)")
    return None


def read_runs(check: Checker, value: Any, path: KeyPath, stages: list[Stage]) -> dict[str, Run]:
    runs: dict[str, Run] = {}
    if value is None:
        value = {}
    if not isinstance(value, dict):
        check.err(path, "runs must map run ids to their settings")
        return runs
    for run_id, raw in value.items():
        where = path + (run_id,)
        if not isinstance(run_id, str) or not NAME_ID.match(run_id):
            check.err(where, f"run id {run_id!r} is not valid", key=True)
            continue
        entry = check.mapping(raw if raw is not None else {}, where, RUN_KEYS, what="run")
        if entry is None:
            continue
        kind = entry.get("kind", "train")
        if kind not in RUN_KINDS:
            check.err(where + ("kind",), f"run kind must be one of {', '.join(RUN_KINDS)}")
            kind = "train"
        metrics = [Path(p) for p in check.str_list(entry.get("metrics", []), where + ("metrics",),
                                                   "metrics")]
        outputs = [Path(p) for p in check.str_list(entry.get("outputs", []), where + ("outputs",),
                                                   "outputs")]
        params: dict[str, object] = {}
        params_file = None
        if "params" in entry:
            if isinstance(entry["params"], dict):
                params = dict(entry["params"])
            elif isinstance(entry["params"], str):
                params_file = Path(entry["params"])
            else:
                check.err(where + ("params",), "params must be a mapping or a file path")
        if kind == "adapter":
            for key in ("base_model", "base_revision"):
                if not isinstance(entry.get(key), str) or not entry.get(key):
                    check.err(where, f"an adapter run needs {key} (D23: keep the exact revision)")
        tolerable = None
        if "tolerable_loss" in entry:
            tolerable = check.duration(entry["tolerable_loss"], where + ("tolerable_loss",),
                                       "tolerable_loss")
        verify = None
        if "verify_command" in entry:
            verify = _argv(check, entry["verify_command"], where + ("verify_command",),
                           "verify_command")
        resume = None
        if "resume_check" in entry:
            rc = check.mapping(entry["resume_check"], where + ("resume_check",), RESUME_KEYS,
                               ("command", "steps"), what="resume_check")
            if rc is not None:
                argv = _argv(check, rc.get("command"), where + ("resume_check", "command"),
                             "resume_check command")
                steps = check.integer(rc.get("steps"), where + ("resume_check", "steps"), "steps")
                tol = rc.get("tolerance", 0.0)
                if isinstance(tol, bool) or not isinstance(tol, (int, float)) or tol < 0:
                    check.err(where + ("resume_check", "tolerance"), "tolerance must be >= 0")
                    tol = 0.0
                metric = rc.get("metric", "loss")
                if argv and steps:
                    resume = ResumeCheck(argv, steps, str(metric), float(tol))
        acceptance = entry.get("acceptance", [])
        if not isinstance(acceptance, list) or not all(isinstance(a, dict) for a in acceptance):
            check.err(where + ("acceptance",), "acceptance must be a list of checks")
            acceptance = []
        result = entry.get("result", run_id)
        if not isinstance(result, str) or not NAME_ID.match(result):
            check.err(where + ("result",), "result must be an id")
            result = run_id
        for key in ("base_model", "base_revision", "pattern"):
            if key in entry and not isinstance(entry[key], str):
                check.err(where + (key,), f"{key} must be a text")
        unsafe = check.boolean(entry.get("allow_unsafe_pickle", False),
                               where + ("allow_unsafe_pickle",), "allow_unsafe_pickle")
        runs[run_id] = Run(
            id=run_id, kind=kind, metrics=tuple(metrics),
            checkpoints=_path(check, entry["checkpoints"], where + ("checkpoints",), "checkpoints")
            if "checkpoints" in entry else None,
            pattern=entry.get("pattern") if isinstance(entry.get("pattern"), str) else None,
            predictions=_path(check, entry["predictions"], where + ("predictions",),
                              "predictions") if "predictions" in entry else None,
            outputs=tuple(outputs), params=params, params_file=params_file,
            base_model=entry.get("base_model"), base_revision=entry.get("base_revision"),
            result=result, tolerable_loss_s=tolerable, verify_command=verify,
            resume_check=resume, allow_unsafe_pickle=unsafe,
            expected_ids=_path(check, entry["expected_ids"], where + ("expected_ids",),
                               "expected_ids") if "expected_ids" in entry else None,
            acceptance=tuple(acceptance),
        )
    for stage in stages:
        if stage.run and stage.run not in runs:
            # A stage may name a run without describing it: it gets the defaults.
            runs[stage.run] = Run(id=stage.run)
    return runs


def read_stop_rules(check: Checker, value: Any, path: KeyPath,
                    stages: list[Stage]) -> tuple[StopRule, ...]:
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
        action = entry.get("action", "stop")
        if action not in ("stop", "warn"):
            check.err(where + ("action",), "action must be stop or warn")
            action = "stop"
        runs = tuple(check.str_list(entry.get("runs", []), where + ("runs",), "runs"))
        rules.append(StopRule(rule_id, kind, metric if isinstance(metric, str) else None,
                              bounds["min"], bounds["max"], after_step, max_age, action, runs))
    return tuple(rules)


def read_settings(check: Checker, value: Any, path: KeyPath, stages: list[Stage]) -> Settings:
    if value is None:
        return Settings()
    entry = check.mapping(value, path, SETTING_KEYS, what="settings")
    if entry is None:
        return Settings()
    values: dict[str, Any] = {}
    durations = {
        "stop_grace": "stop_grace_s", "idle_grace": "idle_grace_s",
        "tolerable_loss": "tolerable_loss_s", "mean_time_between_interruptions": "mtbi_s",
        "verify_within": "verify_within_s", "verify_timeout": "verify_timeout_s",
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
    return Settings(**values)


def check_rule_runs(check: Checker, extras: dict[str, Any]) -> None:
    """A rule's ``runs:`` must name runs the campaign has."""
    runs = extras.get("runs", {})
    for i, rule in enumerate(extras.get("stop_rules", ())):
        for name in rule.runs:
            if name not in runs:
                check.err(("stop_rules", i, "runs"), f"rule {rule.id!r} names no run: {name!r}")


register_section("runs", read_runs)
register_section("hooks", read_hooks)
register_section("stop_rules", read_stop_rules)
register_section("settings", read_settings)
register_validator(check_rule_runs)
