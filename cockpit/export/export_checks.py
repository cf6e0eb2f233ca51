"""The checks of verify-export, each on its own (D22, D23).

This module owns ``Check`` and the checks that ``verifier.verify_export`` runs on a
bag: bag valid (bagit), runs accounted for, metrics exported, expected ids, no empty
file, adapters pinned, artifacts reload (accepted artifacts and a landing's resume
points). The "no temporary paths" check lives in ``temp_paths``.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cockpit.close.acceptance import compare_ids, read_expected_ids, read_prediction_ids
from cockpit.common.event_kinds import RESULT_ACCEPTED, RESULT_REJECTED, RUN_STARTED
from cockpit.common.safe_json import loads_bounded
from cockpit.runs.checkpoints.reload_check import run_verify_command

# In a bag of a campaign on several machines: the history the export was folded from
# (every machine's events kept by the ownership rules), beside this machine's journal.
HISTORY_FILE = "journal/history.jsonl"

ACCOUNTED = ("accepted", "stopped", "dropped", "not_run", "rejected", "failed", "skipped",
             "no_result")


MOVING_REFS = ("", "main", "master", "head", "latest", "none", "null")


TRUST_HINT = "rerun with --trust-commands to run it"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    detail: str = ""
    # What the bag asked for and verify-export did not do (a bag is data): custom
    # commands not run, unsafe unpickling not honoured.
    refused: tuple[str, ...] = ()


def bag_member(bag: Path, rel: Any) -> Path | None:
    """``bag/rel`` when ``rel`` (read from the bag) names a file or folder inside the bag
    with no symbolic link on the way; None for anything that would leave it."""
    if not isinstance(rel, str) or not rel or os.path.isabs(rel) or "\0" in rel:
        return None
    root = os.path.realpath(bag)
    target = os.path.realpath(os.path.join(root, rel))
    if not target.startswith(root + os.sep):
        return None
    if os.path.normpath(os.path.join(root, rel)) != target:
        return None  # a symbolic link on the way, even one that stays inside
    path = Path(target)
    if path.is_dir() and _links_in(path):
        return None
    return path


def _links_in(folder: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        found += [here / n for n in (*dirnames, *filenames) if (here / n).is_symlink()]
    return found


def bag_valid(bag: Path) -> Check:
    import bagit

    logging.getLogger("bagit").setLevel(logging.WARNING)
    try:
        bagit.Bag(str(bag)).validate(processes=1)
    except bagit.BagValidationError as exc:
        problems = [str(d) for d in exc.details] or [exc.message]
        if not exc.details:
            # bagit stops at the size summary (Payload-Oxum): name the files ourselves.
            problems += _manifest_problems(bag)
        return Check("bag valid", False, tuple(problems[:50]))
    except bagit.BagError as exc:
        return Check("bag valid", False, (f"not a valid bag: {exc}",))
    # An export holds files only (hard links at most): a symbolic link is planted, and
    # the hashes above were taken through it, from wherever it points.
    links = [f"{p.relative_to(bag).as_posix()} is a symbolic link (to {os.readlink(p)}): "
             "an export holds files, not links; not followed" for p in _links_in(bag)]
    if links:
        return Check("bag valid", False, tuple(links[:50]))
    return Check("bag valid", True, detail="every hash matches (BagIt, sha256)")


def _manifest_problems(bag: Path) -> list[str]:
    from cockpit.journal.log import sha256_file

    problems: list[str] = []
    listed: set[str] = set()
    try:
        lines = (bag / "manifest-sha256.txt").read_text(encoding="utf-8").splitlines()
    except OSError:
        return ["manifest-sha256.txt is missing"]
    for line in lines:
        digest, _, rel = line.partition("  ")
        rel = rel.replace("%0D", "\r").replace("%0A", "\n")
        listed.add(rel)
        target = bag_member(bag, rel)
        if target is None:
            problems.append(f"{rel!r} is listed in the manifest but is not a file of the bag")
        elif not target.is_file():
            problems.append(f"{rel} is listed in the manifest but missing")
        elif sha256_file(target) != digest:
            problems.append(f"{rel}: sha256 does not match the manifest (changed after export)")
    for path in payload_files(bag):
        rel = path.relative_to(bag).as_posix()
        if rel not in listed:
            problems.append(f"{rel} is not in the manifest (added after export)")
    return problems


def _journal_verdicts(bag: Path) -> dict[str, str]:
    """The verdicts the bag's journal holds: the merged history of every machine when the
    campaign ran on several (``HISTORY_FILE``), else the one journal."""
    verdicts: dict[str, str] = {}
    path = bag / "data" / HISTORY_FILE
    if not path.is_file():
        path = bag / "data" / "journal" / "journal.jsonl"
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return verdicts
    for line in lines:
        try:
            ev = loads_bounded(line)
        except ValueError:
            continue
        if not isinstance(ev, dict):
            continue
        if ev.get("kind") in (RESULT_ACCEPTED, RESULT_REJECTED) and ev.get("run"):
            verdicts[str(ev["run"])] = "accepted" if ev["kind"] == RESULT_ACCEPTED \
                else "rejected"
        elif ev.get("kind") == RUN_STARTED and ev.get("run"):
            verdicts.pop(str(ev["run"]), None)
    return verdicts


def _plan_doc(bag: Path, manifest: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The bag's copy of the campaign file, parsed ({} and why not, in words)."""
    plan_info = manifest.get("plan")
    plan = bag_member(bag, plan_info.get("path")) if isinstance(plan_info, dict) else None
    if plan is None or not plan.is_file():
        candidates = sorted((bag / "data" / "plan").glob("*.y*ml")) \
            if (bag / "data" / "plan").is_dir() else []
        plan = candidates[0] if candidates else None
    if plan is None:
        return {}, "the plan copy is missing from data/plan/"
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser when present
        doc = yaml.load(plan.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506
    except (OSError, yaml.YAMLError) as exc:
        return {}, f"the plan copy cannot be read: {exc}"
    if not isinstance(doc, dict):
        return {}, "the plan copy is not a campaign file"
    return doc, None


def _plan_runs(bag: Path, manifest: dict[str, Any]) -> tuple[list[str], str | None]:
    doc, problem = _plan_doc(bag, manifest)
    if problem:
        return [], problem
    runs = list(doc.get("runs") or {}) if isinstance(doc.get("runs"), dict) else []
    for stage in doc.get("stages") or []:
        if isinstance(stage, dict) and isinstance(stage.get("run"), str) \
                and stage["run"] not in runs:
            runs.append(stage["run"])
    return runs, None


def runs_accounted(bag: Path, manifest: dict[str, Any]) -> Check:
    name = "runs accounted for"
    plan_runs, problem = _plan_runs(bag, manifest)
    if problem:
        return Check(name, False, (problem,))
    listed: dict[str, Any] = manifest.get("runs") or {}
    verdicts = _journal_verdicts(bag)
    failures: list[str] = []
    warnings: list[str] = []
    counts: dict[str, int] = {}
    for run_id in plan_runs:
        entry = listed.get(run_id)
        if not isinstance(entry, dict):
            failures.append(f"run {run_id} of the plan is not accounted for in the export")
            continue
        status, reason = entry.get("status"), str(entry.get("reason") or "").strip()
        counts[str(status)] = counts.get(str(status), 0) + 1
        if status == "unjudged":
            warnings.append(f"run {run_id} finished but was never accepted or rejected")
        elif status == "running":
            failures.append(f"run {run_id} was still running at the export: its result is "
                            "not in it")
        elif status not in ACCOUNTED:
            failures.append(f"run {run_id} has an unknown status {status!r}")
        elif status in ("stopped", "rejected", "failed", "dropped") and not reason:
            failures.append(f"run {run_id} is {status} without a reason (D15)")
        if status == "accepted" and verdicts.get(run_id) != "accepted":
            failures.append(f"run {run_id} is listed as accepted but the journal has no "
                            "accepted verdict for it")
    for run_id in listed:
        if run_id not in plan_runs:
            warnings.append(f"run {run_id} is in the export but not in the plan")
    detail = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    return Check(name, not failures, tuple(failures), tuple(warnings), detail)


def _declared_metrics(doc: dict[str, Any], run_id: str) -> list[str]:
    """The ``metrics:`` paths the plan copy declares for a run (a string or a list)."""
    runs = doc.get("runs")
    run = runs.get(run_id) if isinstance(runs, dict) else None
    value = run.get("metrics") if isinstance(run, dict) else None
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def metrics_exported(bag: Path, manifest: dict[str, Any]) -> Check:
    """Each accepted run's metrics are in the bag (D22): every file the manifest lists
    under ``files.metrics`` is a file of the bag, and every source the plan copy declares
    (``runs.<id>.metrics``) has at least one file there. A run whose metrics were read
    live all campaign long and left out of the bag is not a verified export."""
    name = "metrics exported"
    doc, _problem = _plan_doc(bag, manifest)  # no plan copy: runs accounted for says so
    failures: list[str] = []
    warnings: list[str] = []
    checked = 0
    runs = manifest.get("runs")
    for run_id, entry in (runs.items() if isinstance(runs, dict) else ()):
        if not isinstance(entry, dict) or entry.get("status") != "accepted":
            continue
        files = _json_dict(entry.get("files"))
        listed = _json_list(files.get("metrics"))
        present = 0
        for rel in listed:
            target = bag_member(bag, rel)
            if target is None or not target.is_file():
                failures.append(f"run {run_id}: the metrics file {rel!r} listed in "
                                "data/manifest.json is not in the bag")
            else:
                present += 1
        declared = _declared_metrics(doc, str(run_id))
        sources = _json_list(files.get("metric_sources"))
        if declared and not present:
            failures.append(f"run {run_id} is accepted but none of its metrics is in the "
                            f"bag (runs.{run_id}.metrics in the plan: {', '.join(declared)}): "
                            "its curves are not exported")
        elif declared:
            for path in declared:
                # As the plan spells it ("./logs/tb"), or as the export wrote it ("logs/tb").
                mine = [s for s in sources if isinstance(s, dict)
                        and isinstance(s.get("declared"), str)
                        and posixpath.normpath(s["declared"]) == posixpath.normpath(path)]
                if not any(isinstance(s.get("files"), list) and s["files"] for s in mine):
                    failures.append(f"run {run_id}: its metrics source {path!r} (runs.{run_id}"
                                    ".metrics in the plan) has no file in the bag")
        for source in sources:
            if isinstance(source, dict) and source.get("format") == "tensorboard" \
                    and source.get("files") and not source.get("scalars"):
                warnings.append(f"run {run_id}: the TensorBoard events of "
                                f"{source.get('source')!r} are in the bag without their "
                                "scalars as JSON lines")
        checked += bool(declared or listed)
    detail = f"{checked} accepted run(s) with metrics" if checked else \
        "no accepted run reports metrics"
    return Check(name, not failures, tuple(failures), tuple(warnings), detail)


def _json_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _json_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def expected_ids(bag: Path, manifest: dict[str, Any]) -> Check:
    name = "expected ids"
    failures: list[str] = []
    checked = 0
    for run_id, entry in (manifest.get("runs") or {}).items():
        if not isinstance(entry, dict) or entry.get("status") != "accepted":
            continue
        files = entry.get("files") or {}
        expected_rel = files.get("expected_ids")
        if not expected_rel:
            continue
        checked += 1
        expected_path = bag_member(bag, expected_rel)
        if expected_path is None:
            failures.append(f"run {run_id}: the expected ids file {expected_rel!r} is not a "
                            "file of the bag: not read")
            continue
        try:
            expected = read_expected_ids(expected_path)
        except OSError:
            failures.append(f"run {run_id}: the expected ids file {expected_rel} is missing")
            continue
        preds = _as_list(files.get("predictions"))
        if len(preds) != 1:
            failures.append(f"run {run_id}: accepted with expected ids but "
                            f"{'no' if not preds else 'several'} predictions file(s) in the "
                            "export")
            continue
        pred_path = bag_member(bag, preds[0])
        if pred_path is None:
            failures.append(f"run {run_id}: the predictions file {preds[0]!r} is not a file "
                            "of the bag: not read")
            continue
        try:
            found = read_prediction_ids(pred_path)
        except (OSError, ValueError) as exc:
            failures.append(f"run {run_id}: predictions unreadable: {exc}")
            continue
        failures += [f"run {run_id}: {p}" for p in compare_ids(expected, found)]
    detail = f"{checked} accepted run(s) with expected ids" if checked else \
        "no accepted run names expected ids"
    return Check(name, not failures, tuple(failures), detail=detail)


def payload_files(bag: Path) -> list[Path]:
    data = bag / "data"
    if not data.is_dir():
        return []
    out = []
    for dirpath, _dirs, files in os.walk(data):
        # A symbolic link is never read through (bag valid names it).
        out += [Path(dirpath) / f for f in files if not (Path(dirpath) / f).is_symlink()]
    return sorted(out)


def no_empty(bag: Path) -> Check:
    empty = [p.relative_to(bag).as_posix() for p in payload_files(bag)
             if p.is_file() and p.stat().st_size == 0]
    return Check("no empty file", not empty,
                 tuple(f"{e} is empty (D23)" for e in empty))


def adapters_pinned(manifest: dict[str, Any], entries: list[dict[str, Any]]) -> Check:
    name = "adapters pinned"
    failures: list[str] = []
    adapters = [e for e in entries if e.get("kind") == "adapter"]
    for e in adapters:
        base, rev = e.get("base_model"), e.get("base_revision")
        where = f"adapter of run {e.get('run')} ({e.get('path')})"
        if not isinstance(base, str) or not base.strip():
            failures.append(f"{where} carries no base model id (D23)")
        if not isinstance(rev, str) or rev.strip().lower() in MOVING_REFS:
            what = "no base model revision" if not rev else f"base revision {rev!r}, a moving " \
                "branch name, not an exact revision"
            failures.append(f"{where} carries {what} (D23)")
    for run_id, entry in (manifest.get("runs") or {}).items():
        if isinstance(entry, dict) and entry.get("kind") == "adapter" \
                and entry.get("status") == "accepted" and not entry.get("base_revision") \
                and not any(e.get("run") == run_id for e in adapters):
            failures.append(f"accepted adapter run {run_id} has no base model revision (D23)")
    detail = f"{len(adapters)} adapter artifact(s)" if adapters else "no adapter artifact"
    return Check(name, not failures, tuple(failures), detail=detail)


def artifacts_reload(bag: Path, manifest: dict[str, Any], entries: list[dict[str, Any]],
                      reload: bool, verifier: Callable[..., Any], *,
                      trust_commands: bool = False,
                      trusted: list[dict[str, Any]] | None = None) -> Check:
    """Each accepted artifact, and each resume point a landing brought home (issue 41:
    one the manifest expects must be in the bag), reloads in a fresh process, from
    inside the bag.

    A bag is data: what its ``reload.json`` asks for (a custom ``verify_command``,
    ``allow_unsafe_pickle``) is reported and not done; the artifact is reloaded by the
    built-in worker with ``weights_only``. ``trust_commands`` (the ``--trust-commands``
    flag) honours the bag's requests; ``trusted`` are the recipes the export itself just
    wrote from the campaign file, used in place of the bag's (the export's own check).
    """
    name = "artifacts reload"
    accepted = [e for e in entries if isinstance(e, dict) and e.get("chosen_for_result")]
    resumes = [e for e in entries if isinstance(e, dict) and e.get("resume_point") is True
               and not e.get("chosen_for_result")]
    chosen = accepted + resumes  # a landing's resume points reload like results do
    warnings: list[str] = []
    failures: list[str] = []
    runs = manifest.get("runs")
    for run_id, entry in (runs.items() if isinstance(runs, dict) else ()):
        if isinstance(entry, dict):
            failures += _resume_missing(bag, run_id, entry, resumes)
        if not isinstance(entry, dict) or entry.get("status") != "accepted":
            continue
        mine = [e for e in accepted if e.get("run") == run_id]
        if not mine:
            words = f"accepted run {run_id} has no artifact in this export"
            if entry.get("artifact_expected"):  # verified means every accepted result
                failures.append(f"{words}: its result is not in the bag (see the export's "
                                "'not exported' and warnings)")
            else:
                warnings.append(words)
        elif not any((p := bag_member(bag, e.get("path"))) is not None and p.exists()
                     for e in mine):
            failures.append(f"accepted run {run_id}: its artifact "
                            f"{mine[0].get('path')!r} is not in the bag")
    if not reload:
        return Check(name, not failures, tuple(failures), tuple(warnings),
                     f"skipped (--no-reload): {len(chosen)} artifact(s) not reloaded")
    refused: list[str] = []
    failures += _reload_each(bag, chosen, verifier, trust_commands, trusted, refused)
    detail = f"{len(accepted)} accepted artifact(s) reloaded in a fresh process" + (
        f"; {len(resumes)} resume point(s), not accepted results, reloaded too"
        if resumes else "")
    return Check(name, not failures, tuple(failures), tuple(warnings), detail, tuple(refused))


def _resume_missing(bag: Path, run_id: str, entry: dict[str, Any],
                    resumes: list[dict[str, Any]]) -> list[str]:
    """A resume point the manifest expects (the landing saved and verified it) that
    has no reload entry or no file in the bag: the landing's promise is not kept."""
    point = entry.get("resume_point")
    if not isinstance(point, dict) or point.get("expected") is not True:
        return []
    mine = [e for e in resumes if e.get("run") == run_id]
    if any((p := bag_member(bag, e.get("path"))) is not None and p.exists() for e in mine):
        return []
    why = point.get("problem") or "it is not in the bag"
    return [f"run {run_id}: its resume point (a checkpoint the landing brought home) is "
            f"not in this export: {why}"]


def _reload_each(bag: Path, chosen: list[dict[str, Any]], verifier: Callable[..., Any],
                 trust_commands: bool, trusted: list[dict[str, Any]] | None,
                 refused: list[str]) -> list[str]:
    """Each chosen artifact reloaded in a fresh process (what was refused appended to
    ``refused``); the failures."""
    failures: list[str] = []
    for e in chosen:
        rel, run = e.get("path"), e.get("run")
        target = bag_member(bag, rel)
        if target is None:
            failures.append(f"{rel!r} (run {run}) is not a file or folder of the bag: "
                            "not loaded")
            continue
        if not target.exists():
            failures.append(f"{rel} (run {run}) is not in the bag")
            continue
        command, unsafe, notes = _recipe(e, trust_commands, trusted)
        refused += notes
        if command:
            result = run_verify_command(command, target, 600)
        else:
            base_model, base_revision = e.get("base_model"), e.get("base_revision")
            result = verifier(target, str(e.get("kind", "train")), allow_unsafe=unsafe,
                              base_model=base_model if isinstance(base_model, str) else None,
                              base_revision=base_revision
                              if isinstance(base_revision, str) else None)
        if not result.ok:
            hint = " (the bag asks for more than the built-in reload: rerun with " \
                "--trust-commands to allow it)" if notes else ""
            failures.append(f"{rel} (run {run}) does not reload in a fresh process: "
                            + "; ".join(result.problems or ("unknown error",)) + hint)
    return failures


def _recipe(entry: dict[str, Any], trust_commands: bool,
            trusted: list[dict[str, Any]] | None) -> tuple[list[str] | None, bool, list[str]]:
    """(custom command to run, unsafe unpickling allowed, what was refused) for one
    artifact of the bag."""
    run, rel = entry.get("run"), entry.get("path")
    if trusted is not None:  # the export's own check: the campaign file's recipes
        mine = next((t for t in trusted if t.get("path") == rel and t.get("run") == run), {})
        command = mine.get("verify_command")
        return (list(command) if command else None,
                bool(mine.get("allow_unsafe_pickle")), [])
    command = entry.get("verify_command")
    unsafe = entry.get("allow_unsafe_pickle") is True
    notes: list[str] = []
    argv: list[str] | None = None
    if command:
        words = [str(w) for w in command] if isinstance(command, list) else [str(command)]
        if trust_commands:
            argv = words
        else:
            notes.append(f"run {run}: this bag asks for a custom reload command "
                         f"({' '.join(words)[:200]}): not run; {TRUST_HINT} "
                         "(the built-in reload with weights_only was run instead)")
    if unsafe and not trust_commands:
        notes.append(f"run {run}: this bag asks to load {rel} with unsafe unpickling "
                     "(allow_unsafe_pickle): not honoured, loaded with weights_only; "
                     "rerun with --trust-commands to allow it")
    return argv, unsafe and trust_commands, notes
