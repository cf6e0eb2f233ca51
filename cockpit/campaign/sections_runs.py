"""The campaign file's ``runs:`` section: what each run reads, writes and needs to resume
(D15, D16, D17), and its announced acceptance checks (D15, D20, D23), one key each::

    acceptance:
      - {metric: val/accuracy, min: 0.8}      # last reported value; min and/or max
      - {predictions: non_empty}              # the predictions file has records
      - {predictions: expected_ids}           # ...exactly the ids of expected_ids
      - {checkpoint: reloads}                 # newest complete checkpoint reloads
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from cockpit.campaign.checker import NAME_ID, Checker, kind_of
from cockpit.campaign.model import (
    NO_RESULT_ROLES,
    RUN_KINDS,
    AcceptanceCheck,
    CheckpointCheck,
    MetricCheck,
    PredictionsCheck,
    ResumeCheck,
    Run,
    Stage,
    export_roots,
    exportable,
)
from cockpit.campaign.yamlread import KeyPath
from cockpit.common.metric_names import canonical_name

RUN_KEYS = (
    "metrics", "checkpoints", "pattern", "predictions", "outputs", "params", "kind",
    "base_model", "base_revision", "result", "tolerable_loss", "verify_command",
    "resume_check", "allow_unsafe_pickle", "expected_ids", "acceptance", "model",
    "metric_names",
)
# runs.ID.model: "module:function" (a dotted module of the campaign's code).
MODEL_SPEC = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*\Z")
# runs.ID.base_revision of an adapter: a full commit id (40 hex digits), never a branch.
COMMIT_ID = re.compile(r"[0-9a-fA-F]{40}\Z")
RESUME_KEYS = ("command", "steps", "metric", "tolerance", "metrics")
SCRATCH = "{scratch}"  # the resumed process's own folder, in a resume check's words
CHECK_KEYS = ("metric", "predictions", "checkpoint")
PREDICTION_CHECKS = ("non_empty", "expected_ids")


def _path(check: Checker, value: Any, where: KeyPath, what: str) -> Path | None:
    text = check.string(value, where, what)
    return None if text is None else Path(text)


def _argv(check: Checker, value: Any, where: KeyPath, what: str) -> tuple[str, ...] | None:
    if isinstance(value, list) and value and all(isinstance(a, (str, int, float)) for a in value):
        return tuple(str(a) for a in value)
    check.err(where, f"{what} must be a non-empty list of words (argv)")
    return None


def read_runs(check: Checker, value: Any, path: KeyPath, stages: list[Stage]) -> dict[str, Run]:
    """Every run, by id; a stage naming an undescribed run gets a run with the defaults."""
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
        if entry is not None:
            runs[run_id] = _read_run(check, run_id, entry, where, stages)
    for stage in stages:
        if stage.run and stage.run not in runs:
            # A stage may name a run without describing it: it gets the defaults.
            runs[stage.run] = Run(id=stage.run,
                                  produces_result=stage.effective_role not in NO_RESULT_ROLES)
    return runs


def _read_run(check: Checker, run_id: str, entry: dict[str, Any], where: KeyPath,
              stages: list[Stage]) -> Run:
    """One run's entry (its problems reported to ``check``, in the file's order)."""
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
        _pinned_revision(check, entry, where)
    tolerable = None
    if "tolerable_loss" in entry:
        tolerable = check.duration(entry["tolerable_loss"], where + ("tolerable_loss",),
                                   "tolerable_loss")
    verify = None
    if "verify_command" in entry:
        verify = _argv(check, entry["verify_command"], where + ("verify_command",),
                       "verify_command")
    resume = _resume_check(check, entry["resume_check"], where + ("resume_check",)) \
        if "resume_check" in entry else None
    acceptance: list[Any] = entry.get("acceptance", [])
    if not isinstance(acceptance, list) or not all(isinstance(a, dict) for a in acceptance):
        check.err(where + ("acceptance",), "acceptance must be a list of checks")
        acceptance = []
    result, produces = _result(check, run_id, entry, where, stages)
    for key in ("base_model", "base_revision", "pattern"):
        if key in entry and not isinstance(entry[key], str):
            check.err(where + (key,), f"{key} must be a text")
    unsafe = check.boolean(entry.get("allow_unsafe_pickle", False),
                           where + ("allow_unsafe_pickle",), "allow_unsafe_pickle")
    model = entry.get("model")
    if model is not None and (not isinstance(model, str) or not MODEL_SPEC.match(model)):
        check.err(where + ("model",), "model must be \"module:function\": a function of "
                  "the campaign's code that returns the model, given the run's params "
                  "(e.g. \"common:make_model\")")
        model = None
    run = Run(
        id=run_id, kind=kind, metrics=tuple(metrics),
        checkpoints=_path(check, entry["checkpoints"], where + ("checkpoints",), "checkpoints")
        if "checkpoints" in entry else None,
        pattern=entry.get("pattern") if isinstance(entry.get("pattern"), str) else None,
        predictions=_path(check, entry["predictions"], where + ("predictions",),
                          "predictions") if "predictions" in entry else None,
        outputs=tuple(outputs), params=params, params_file=params_file,
        base_model=entry.get("base_model"), base_revision=entry.get("base_revision"),
        result=result, produces_result=produces, tolerable_loss_s=tolerable,
        verify_command=verify,
        resume_check=resume, allow_unsafe_pickle=unsafe,
        expected_ids=_path(check, entry["expected_ids"], where + ("expected_ids",),
                           "expected_ids") if "expected_ids" in entry else None,
        model=model, metric_names=_metric_names(check, entry.get("metric_names"),
                                                where + ("metric_names",)),
    )
    # The checks need the run's files (predictions, expected_ids, checkpoints).
    return replace(run, acceptance=read_acceptance(check, run, acceptance,
                                                   where + ("acceptance",)))


def _metric_names(check: Checker, value: Any, where: KeyPath) -> dict[str, str]:
    """``runs.ID.metric_names: {their_name: canonical}``: the run's own names of metrics
    the table of aliases does not know (``{valid/loss: eval_loss}``); located errors."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        check.err(where, "metric_names must map the run's metric names to canonical ones "
                         "(e.g. {valid/loss: eval_loss})")
        return {}
    names: dict[str, str] = {}
    for theirs, ours in value.items():
        at = where + (theirs,)
        if not isinstance(theirs, str) or not theirs.strip():
            check.err(at, f"metric name {theirs!r} must be a non-empty text", key=True)
        elif not isinstance(ours, str) or not ours.strip():
            check.err(at, f"{theirs} must map to a metric name, not {kind_of(ours)}")
        elif ours == theirs:
            check.err(at, f"{theirs} maps to itself: leave it out")
        elif canonical_name(ours) != ours:
            check.err(at, f"{ours} is an alias of {canonical_name(ours)}: map {theirs} to "
                          f"the canonical name {canonical_name(ours)}")
        elif canonical_name(theirs) != theirs:
            check.err(at, f"{theirs} is already an alias of {canonical_name(theirs)} "
                          "(the table of metric names): leave it out")
        else:
            names[theirs] = ours
    return names


def _pinned_revision(check: Checker, entry: dict[str, Any], where: KeyPath) -> None:
    """An adapter's base model revision is an exact commit id (D23): a branch or a tag
    ("main", "v1.0") moves, and the adapter would reload onto other weights next month."""
    rev = entry.get("base_revision")
    if not isinstance(rev, str) or not rev or COMMIT_ID.match(rev):
        return
    base = entry.get("base_model") if isinstance(entry.get("base_model"), str) else "MODEL"
    check.err(where + ("base_revision",),
              f"base_revision {rev!r} is not an exact revision: a branch or tag moves "
              "(D23); pin the base model to its full 40-character commit id, e.g. from "
              f"`git ls-remote https://huggingface.co/{base} {rev}` or the model's commit "
              "page on the hub")


def _resume_check(check: Checker, value: Any, where: KeyPath) -> ResumeCheck | None:
    """A run's ``resume_check:`` (None when it is not usable; the problem reported)."""
    rc = check.mapping(value, where, RESUME_KEYS, ("command", "steps"), what="resume_check")
    if rc is None:
        return None
    argv = _argv(check, rc.get("command"), where + ("command",), "resume_check command")
    steps = check.integer(rc.get("steps"), where + ("steps",), "steps")
    tol = rc.get("tolerance", 0.0)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or tol < 0:
        check.err(where + ("tolerance",), "tolerance must be >= 0")
        tol = 0.0
    metric = rc.get("metric", "loss")
    if not isinstance(metric, str) or not metric.strip():
        check.err(where + ("metric",), "metric must be a metric name (e.g. loss)")
        metric = "loss"
    metrics = _resumed_metrics(check, rc.get("metrics"), where + ("metrics",))
    return ResumeCheck(argv, steps, metric, float(tol), metrics) if argv and steps else None


def _resumed_metrics(check: Checker, value: Any, where: KeyPath) -> tuple[str, ...]:
    """``resume_check.metrics``: where the resumed process writes its metrics, each path
    under its scratch folder (``{scratch}/out``): a path outside it would be read as the
    resumed process's although the original run (or anybody) wrote it."""
    if value is None:
        return ()
    paths = check.str_list(value, where, "resume_check metrics")
    kept: list[str] = []
    for index, text in enumerate(paths):
        at = where + (index,) if isinstance(value, list) else where
        if not text.startswith(SCRATCH):
            check.err(at, f"{text!r} is not under the resumed process's scratch folder: "
                          f"start it with {SCRATCH} (e.g. {SCRATCH}/out/trainer_state.json; "
                          f"the command writes there when given {SCRATCH})")
        elif ".." in Path(text[len(SCRATCH):]).parts:
            check.err(at, f"{text!r} leaves the scratch folder ('..'): name a path inside it")
        else:
            kept.append(text)
    return tuple(kept)


def _result(check: Checker, run_id: str, entry: dict[str, Any], where: KeyPath,
            stages: list[Stage]) -> tuple[str, bool]:
    """The run's result id and whether it produces one (a data check or a pilot does not,
    unless its entry names a result outright; ``result: none``: never)."""
    result = entry.get("result", run_id)
    producer = next((s for s in stages if s.run == run_id), None)
    produces = producer is None or producer.effective_role not in NO_RESULT_ROLES
    if result is None or result == "none":
        result, produces = run_id, False
    elif not isinstance(result, str) or not NAME_ID.match(result):
        check.err(where + ("result",), "result must be an id, or none (no result: "
                  "a run that measures, checks or decides)")
        result = run_id
    elif "result" in entry:
        produces = True  # a result id named outright is a result, whatever the role
    return result, produces


def read_acceptance(check: Checker, run: Run, entries: list[Any],
                    path: KeyPath) -> tuple[AcceptanceCheck, ...]:
    """A run's ``acceptance:`` list: each entry is one known check, with located errors."""
    checks: list[AcceptanceCheck] = []
    for i, entry in enumerate(entries):
        spec = _acceptance_check(check, run, entry, path + (i,))
        if spec is not None:
            checks.append(spec)
    return tuple(checks)


def _acceptance_check(check: Checker, run: Run, entry: Mapping[str, Any],
                      where: KeyPath) -> AcceptanceCheck | None:
    """The typed check, or None when the entry has a problem (recorded in ``check``)."""
    before = len(check.problems)
    kinds = [k for k in CHECK_KEYS if k in entry]
    if len(kinds) != 1:
        check.err(where, "an acceptance check names exactly one of "
                         f"{', '.join(CHECK_KEYS)} (e.g. {{metric: val/accuracy, min: 0.8}})")
        return None
    kind = kinds[0]
    allowed = {"metric": ("metric", "min", "max"), "predictions": ("predictions",),
               "checkpoint": ("checkpoint",)}[kind]
    for key in entry:
        if key not in allowed:
            check.err(where + (key,), f"unknown key {key!r} in a {kind} acceptance check "
                                      f"(allowed: {', '.join(allowed)})", key=True)
    if kind == "metric":
        return _metric_check(check, entry, where, before)
    if kind == "predictions":
        what = entry["predictions"]
        if what not in PREDICTION_CHECKS:
            check.err(where + ("predictions",),
                      f"predictions check must be one of {', '.join(PREDICTION_CHECKS)}")
            return None
        if run.predictions is None:
            check.err(where, f"run {run.id!r} checks its predictions but names no "
                             "predictions file (predictions: PATH)")
        elif what == "expected_ids" and run.expected_ids is None:
            check.err(where, f"run {run.id!r} checks expected ids but names no "
                             "expected_ids file")
        if len(check.problems) > before:
            return None
        return PredictionsCheck("expected_ids" if what == "expected_ids" else "non_empty")
    if entry["checkpoint"] != "reloads":
        check.err(where + ("checkpoint",), "checkpoint check must be: reloads")
    elif run.checkpoints is None:
        check.err(where, f"run {run.id!r} checks that its checkpoint reloads but names "
                         "no checkpoints folder")
    return None if len(check.problems) > before else CheckpointCheck()


def _metric_check(check: Checker, entry: Mapping[str, Any], where: KeyPath,
                  before: int) -> MetricCheck | None:
    """``{metric: NAME, min: X, max: Y}`` (None when it has a problem; ``before``: the
    problems counted before this check)."""
    if not isinstance(entry["metric"], str) or not entry["metric"].strip():
        check.err(where + ("metric",), "metric must be a metric name like val/accuracy")
    bounds = [k for k in ("min", "max") if k in entry]
    if not bounds:
        check.err(where, "a metric check needs min and/or max")
    for key in bounds:
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            check.err(where + (key,), f"{key} must be a finite number")
    if all(isinstance(entry.get(k), (int, float)) for k in ("min", "max")) \
            and entry["min"] > entry["max"]:
        check.err(where, "min is above max: no value could pass")
    if len(check.problems) > before:
        return None
    low, high = entry.get("min"), entry.get("max")
    return MetricCheck(str(entry["metric"]), None if low is None else float(low),
                       None if high is None else float(high))


# Every path a run names whose files go into the export, by its key in ``runs.ID``.
PAYLOAD_KEYS = ("params", "metrics", "predictions", "expected_ids", "outputs", "checkpoints")


def check_payload_paths(check: Checker, raw_runs: Any, runs: Mapping[str, Run],
                        outside: tuple[Path, ...], folder: Path) -> None:
    """One rule for every payload path: inside the campaign folder (symlinks resolved)
    or under ``settings.export_outside``. A path that the export could never copy is an
    error here, located at the path itself, rather than a surprise at the export."""
    roots = export_roots(folder, outside)
    for run_id, run in runs.items():
        raw = raw_runs.get(run_id) if isinstance(raw_runs, dict) else None
        if not isinstance(raw, dict):
            continue  # a run only named by a stage: it has no paths
        for key, index, path in _payload_paths(run, raw):
            full = path if path.is_absolute() else folder / path
            if exportable(full, roots):
                continue
            where: KeyPath = ("runs", run_id, key) + (() if index is None else (index,))
            real = Path(os.path.realpath(full))
            via = f" (a symlink to {real})" if str(real) != os.path.normpath(full) else ""
            check.err(where, f"{key} path {str(path)!r}{via} is outside the campaign folder "
                             f"{folder}: the export never copies it; keep it inside the folder "
                             "or list its folder under settings.export_outside")


def _payload_paths(run: Run, raw: dict[str, Any]) -> list[tuple[str, int | None, Path]]:
    found: list[tuple[str, int | None, Path]] = []
    singles = {"params": run.params_file, "predictions": run.predictions,
               "expected_ids": run.expected_ids, "checkpoints": run.checkpoints}
    for key in PAYLOAD_KEYS:
        if key in ("metrics", "outputs"):
            paths = run.metrics if key == "metrics" else run.outputs
            listed = isinstance(raw.get(key), list)
            found += [(key, i if listed else None, p) for i, p in enumerate(paths)]
        else:
            single = singles[key]
            if single is not None:
                found.append((key, None, single))
    return found
