"""verify-export's checks of what rebuilds a result: the environment the bag records,
and, only with ``--rebuild``, the bag's ``reload.py`` run in a fresh process (D22, D23).

``environment``: the bag's ``environment/environment.json`` against the environment
journaled at the first run start; a change is a warning, never a failure.

``model rebuilt`` (``--rebuild``, the explicit opt-in: it runs the bag's own code):
for each accepted run whose model the bag can rebuild, ``reload.py RUN --json`` runs in
a fresh interpreter, from a temporary folder, with a time limit and with the cockpit
made unimportable (the script must need only torch). It passes when the model was
rebuilt and the checkpoint loaded with no missing and no unexpected key. Nothing runs
when the bag's hashes do not match (a changed bag is never executed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cockpit.env_record import environment_warnings, recorded_environment
from cockpit.export.export_checks import Check, bag_member
from cockpit.provenance import compact_environment

REBUILD_TIMEOUT_S = 300.0

# Runs reload.py as __main__ with ``import cockpit`` failing: the bag's script and code
# must rebuild the model with only torch installed.
_NO_COCKPIT = ("import runpy, sys; sys.modules['cockpit'] = None; "
               "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")


def environment_check(bag: Path) -> Check:
    name = "environment"
    try:
        env = json.loads((bag / "data" / "environment" / "environment.json").read_text())
    except (OSError, ValueError):
        return Check(name, True, warnings=("the bag records no environment "
                                           "(data/environment/environment.json)",))
    events: list[dict[str, Any]] = []
    try:
        text = (bag / "data" / "journal" / "journal.jsonl").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        if '"environment_recorded"' in line:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict):
                events.append(ev)
    if not isinstance(env, dict):
        return Check(name, True, warnings=("environment.json is not an object",))
    recorded = recorded_environment(events)
    warnings = environment_warnings(recorded, compact_environment(env))
    torch = env.get("torch") if isinstance(env.get("torch"), dict) else {}
    detail = f"Python {env.get('python')}" + (f", torch {torch.get('version')}"
                                              if torch and torch.get("version") else "")
    detail += "; same as at the first run start" if recorded and not warnings else \
        ("" if recorded else "; no environment journaled at a run start")
    return Check(name, True, warnings=tuple(warnings), detail=detail)


def rebuild_check(bag: Path, manifest: dict[str, Any], entries: list[dict[str, Any]],
                  bag_ok: bool, timeout_s: float = REBUILD_TIMEOUT_S,
                  python: str = sys.executable) -> Check:
    name = "model rebuilt"
    runs = manifest.get("runs") if isinstance(manifest.get("runs"), dict) else {}
    assert isinstance(runs, dict)
    wanted = [r for r, e in runs.items() if isinstance(e, dict)
              and e.get("status") == "accepted" and e.get("model")]
    if not wanted:
        return Check(name, True, detail="no accepted run declares a model")
    if not bag_ok:
        return Check(name, False, ("the bag's hashes do not match: its reload.py was not run "
                                   "(a changed bag is never executed)",))
    script = bag_member(bag, "data/reload.py")
    if script is None or not script.is_file():
        return Check(name, False, (f"run(s) {', '.join(wanted)} declare a model but the bag "
                                   "has no data/reload.py",))
    rebuildable = {str(e.get("run")) for e in entries
                   if e.get("chosen_for_result") and e.get("model")}
    failures: list[str] = []
    lines: list[str] = []
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME",
                                                            "PYTHONSTARTUP")}
    for run in wanted:
        if run not in rebuildable:
            failures.append(f"run {run} declares a model but reload.py has no entry for it "
                            "(no single-file checkpoint in the bag)")
            continue
        with tempfile.TemporaryDirectory(prefix="cockpit-rebuild-") as cwd:
            try:
                done = subprocess.run([python, "-c", _NO_COCKPIT, str(script), run, "--json"],
                                      cwd=cwd, env=env, capture_output=True, text=True,
                                      timeout=timeout_s)
            except subprocess.TimeoutExpired:
                failures.append(f"run {run}: reload.py did not finish within {timeout_s:g} s")
                continue
            except OSError as exc:
                failures.append(f"run {run}: reload.py could not be run: {exc}")
                continue
        answer = _last_json(done.stdout)
        if answer is None:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            failures.append(f"run {run}: reload.py exited {done.returncode}: {tail}")
            continue
        missing, unexpected = answer.get("missing_keys"), answer.get("unexpected_keys")
        if done.returncode != 0 or not answer.get("ok") or missing or unexpected:
            words = str(answer.get("error") or f"exit {done.returncode}")
            if missing:
                words += f"; missing keys: {', '.join(map(str, missing[:10]))}"
            if unexpected:
                words += f"; unexpected keys: {', '.join(map(str, unexpected[:10]))}"
            failures.append(f"run {run}: the model was not rebuilt: {words}")
            continue
        count = answer.get("parameters")
        lines.append(f"{run} ({answer.get('model')}, "
                     f"{count if isinstance(count, int) else '?':,} parameters)")
    detail = ("rebuilt from the bag's code in a fresh process, checkpoint loaded with "
              "strict=True, no missing or unexpected key: " + "; ".join(lines)) if lines \
        else f"{len(wanted)} run(s) with a model"
    return Check(name, not failures, tuple(failures), detail=detail)


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None
