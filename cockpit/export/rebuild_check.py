"""verify-export's checks of what rebuilds a result: the environment the bag records,
and, only with ``--rebuild``, the bag's ``reload.py`` run in a fresh process (D22, D23).

``environment``: the bag's ``environment/environment.json`` against the environment
journaled at the first run start; a change is a warning, never a failure.

``model rebuilt`` (``--rebuild``, the explicit opt-in): **it runs the bag's code, as
you**. What it contains, and what it cannot:

- the environment is minimal: ``PATH``, ``LANG``, ``HOME`` and ``TMPDIR`` in a fresh
  temporary folder, and the Hugging Face hub cache folder (models only, read offline:
  ``HF_HUB_OFFLINE=1``; an adapter's base comes from it) — nothing else (no token, no
  ``HF_HOME``, no ``SSH_AUTH_SOCK``, no cloud keys);
- the interpreter is the base Python (not the virtual environment's) run with ``-I -S``;
  the packages it may import are those of the verifier's site-packages folders, seen
  through a folder of links that leaves out the cockpit: ``import cockpit`` fails
  however the script edits ``sys.modules`` or re-runs ``site`` (the cockpit's files are
  on no path the child knows) — a script that goes looking on disk can still find them;
  with ``--fresh-venv`` (:mod:`cockpit.export.fresh_venv`) it is instead the interpreter
  of a new virtual environment holding only the bag's ``requirements.txt``, run with
  ``-I`` (the cockpit is not installed there);
- it runs in its own session and process group, killed (SIGKILL) when it ends and at
  the time limit; descendants that left the group (``setsid``) are found by the marker
  in their environment and killed too (one that also clears its environment escapes);
- "model rebuilt" is judged from a result file the verifier names, in a fresh folder,
  carrying a nonce given on the child's stdin: the script's stdout is never believed.
  The result is written by the verifier's own driver after the bag's ``load()``
  returns; code running inside that interpreter could still forge it (nothing
  in-process can be contained): the check proves an honest bag rebuilds, it is not a
  sandbox. Run ``--rebuild`` only on a bag whose code you would run yourself.

Nothing runs when the bag's hashes do not match (a changed bag is never executed).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cockpit.common.printable import printable
from cockpit.common.safe_json import loads_bounded
from cockpit.export.export_checks import Check, bag_member
from cockpit.export.fresh_venv import VenvOptions, fresh_venv
from cockpit.runs.env_record import environment_warnings, recorded_environment
from cockpit.runs.provenance import compact_environment

REBUILD_TIMEOUT_S = 300.0

NOTICE = ("--rebuild runs the bag's own code (reload.py and its code/ folder) on this "
          "machine, as you: minimal environment, HOME in a temporary folder, its own "
          "process group killed at the end; it is not a sandbox")

# The environment variable that marks every process of one rebuild (found and killed
# after, even when it left the process group).
MARKER_ENV = "COCKPIT_REBUILD"

# The driver run by the child interpreter: reads its orders from stdin (never argv or
# the environment), imports the bag's reload.py as a module (its __main__ block does not
# run), calls load(run, report) and writes the result file itself, with the nonce.
DRIVER = r"""
import json, os, sys
orders = json.loads(sys.stdin.readline())
sys.stdin.close()
nonce = orders.pop("nonce")
result = orders["result"]
sys.path[1:1] = orders["paths"]
sys.modules["cockpit"] = None
report = {"run": orders["run"], "ok": False}
try:
    import importlib.util
    spec = importlib.util.spec_from_file_location("reload", orders["script"])
    module = importlib.util.module_from_spec(spec)
    sys.modules["reload"] = module
    spec.loader.exec_module(module)
    module.load(orders["run"], report)
    report["ok"] = True
except BaseException as exc:
    report["ok"] = False
    report["error"] = f"{type(exc).__name__}: {exc}"[:2000]
report["nonce"] = nonce
fd = os.open(result, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, json.dumps(report, default=str).encode())
os.close(fd)
"""


def environment_check(bag: Path) -> Check:
    name = "environment"
    try:
        env = loads_bounded((bag / "data" / "environment" / "environment.json").read_text())
    except (OSError, ValueError, UnicodeDecodeError):
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
                ev = loads_bounded(line)
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
                  venv: VenvOptions | None = None) -> Check:
    """Each accepted run reload.py can rebuild (a Hugging Face folder, an adapter, a file
    into its ``model:``), rebuilt in a fresh process; with ``venv``, by the interpreter of
    a fresh virtual environment holding the bag's requirements."""
    name = "model rebuilt"
    runs = manifest.get("runs") if isinstance(manifest.get("runs"), dict) else {}
    assert isinstance(runs, dict)
    accepted = [r for r, e in runs.items() if isinstance(e, dict)
                and e.get("status") == "accepted"]
    rebuildable = {str(e.get("run")) for e in entries
                   if e.get("chosen_for_result") and (e.get("model") or e.get("rebuild"))}
    wanted = [r for r in accepted if r in rebuildable or runs[r].get("model")]
    if not wanted:
        return Check(name, True, detail="no accepted run has a model reload.py rebuilds")
    if not bag_ok:
        return Check(name, False, ("the bag's hashes do not match: its reload.py was not run "
                                   "(a changed bag is never executed)",))
    script = bag_member(bag, "data/reload.py")
    if script is None or not script.is_file():
        return Check(name, False, (f"run(s) {', '.join(map(printable, wanted))} have a "
                                   "model to rebuild but the bag has no data/reload.py",))
    if venv is None:
        return _rebuild_runs(script, wanted, rebuildable, timeout_s, None)
    with fresh_venv(bag, base_python(), venv) as built:
        if built.python is None:
            return Check(name, False, (f"--fresh-venv: {built.problem}",))
        check = _rebuild_runs(script, wanted, rebuildable, timeout_s, built.python)
        return replace(check, warnings=check.warnings + tuple(built.warnings),
                       detail=f"{check.detail}; in {built.summary()}")


def _rebuild_runs(script: Path, wanted: list[str], rebuildable: set[str], timeout_s: float,
                  python: str | None) -> Check:
    failures: list[str] = []
    lines: list[str] = []
    for run in wanted:
        shown = printable(run, 100)
        if run not in rebuildable:
            failures.append(f"run {shown} declares a model but reload.py has no entry for it "
                            "(no checkpoint in the bag it can rebuild)")
            continue
        outcome = run_rebuild(script, run, timeout_s, python)
        if outcome.problem:
            failures.append(f"run {shown}: {outcome.problem}")
            continue
        answer = outcome.answer
        missing, unexpected = answer.get("missing_keys"), answer.get("unexpected_keys")
        if not answer.get("ok") or missing or unexpected:
            words = printable(answer.get("error") or f"exit {outcome.code}", 400)
            if isinstance(missing, list) and missing:
                words += f"; missing keys: {printable(', '.join(map(str, missing[:10])))}"
            if isinstance(unexpected, list) and unexpected:
                words += f"; unexpected keys: {printable(', '.join(map(str, unexpected[:10])))}"
            failures.append(f"run {shown}: the model was not rebuilt: {words}")
            continue
        count = answer.get("parameters")
        stripped = answer.get("prefix_stripped")
        lines.append(f"{shown} ({printable(answer.get('model'), 200)}, "
                     f"{count if isinstance(count, int) else '?':,} parameters"
                     + (f", {printable(stripped, 60)!r} stripped from every key"
                        if isinstance(stripped, str) else "") + ")")
    detail = ("rebuilt from the bag's code in a fresh process, checkpoint loaded with "
              "strict=True, no missing or unexpected key: " + "; ".join(lines)) if lines \
        else f"{len(wanted)} run(s) with a model"
    return Check("model rebuilt", not failures, tuple(failures), detail=detail, refused=())


@dataclass(frozen=True)
class RebuildOutcome:
    """What one rebuild proved: ``answer`` from the result file (its nonce checked), or
    ``problem`` in words; ``stdout``/``stderr`` are kept for the person, never judged."""

    code: int | None
    answer: dict[str, Any]
    problem: str | None
    stdout: str
    stderr: str


def base_python() -> str:
    """The interpreter under the virtual environment (whose site does not add the
    venv's packages when asked to), this one when there is none."""
    base = getattr(sys, "_base_executable", None)
    if isinstance(base, str) and base and os.access(base, os.X_OK):
        return base
    return sys.executable


def package_view(folder: Path) -> list[str]:
    """Folders of links to every entry of this interpreter's site-packages folders but
    the cockpit's own (its package, dist-info, editable-install hooks, .pth files)."""
    paths: list[str] = []
    for i, entry in enumerate(p for p in sys.path if p and os.path.isdir(p)
                              and os.path.basename(p) in ("site-packages", "dist-packages")):
        view = folder / f"packages-{i}"
        view.mkdir()
        for name in sorted(os.listdir(entry)):
            low = name.lower()
            if low == "cockpit" or low.startswith(("cockpit-", "cockpit.", "__editable__")) \
                    or low.endswith(".pth") or "cockpit" in low and low.endswith(".py"):
                continue
            try:
                os.symlink(os.path.join(entry, name), view / name)
            except OSError:
                continue
        paths.append(str(view))
    return paths


def hf_cache_env() -> dict[str, str]:
    """The Hugging Face hub cache (models only: never ``HF_HOME``, where a token lives)
    and offline mode, for an adapter's pinned base read from the local cache."""
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cache = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if not cache:
        home = os.environ.get("HF_HOME") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
        cache = os.path.join(home, "hub")
    if os.path.isdir(cache):
        env["HF_HUB_CACHE"] = cache
    return env


def run_rebuild(script: Path, run: str, timeout_s: float = REBUILD_TIMEOUT_S,
                python: str | None = None) -> RebuildOutcome:
    """Run the bag's ``reload.py`` for ``run`` contained as the module text says;
    ``python``: a fresh virtual environment's interpreter (its own packages, run with
    ``-I``), else the base interpreter seeing the verifier's packages without the
    cockpit."""
    nonce = secrets.token_hex(16)
    marker = secrets.token_hex(8)
    with tempfile.TemporaryDirectory(prefix="cockpit-rebuild-") as tmp:
        root = Path(tmp)
        for sub in ("home", "tmp", "work", "result"):
            (root / sub).mkdir(mode=0o700)
        result = root / "result" / "result.json"
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(root / "home"),
               "TMPDIR": str(root / "tmp"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               MARKER_ENV: marker, **hf_cache_env()}
        orders = {"nonce": nonce, "result": str(result), "run": run,
                  "script": str(script), "paths": [] if python else package_view(root)}
        # -B: no __pycache__ written into the bag (it would no longer match its manifest).
        argv = [python, "-I", "-B", "-c", DRIVER] if python else \
            [base_python(), "-I", "-S", "-B", "-c", DRIVER]
        started = time.time()
        # Output into files, not pipes: a child that keeps them open (a detached
        # grandchild) would make reading them wait for ever.
        with open(root / "stdout", "w+b") as out, open(root / "stderr", "w+b") as err:
            try:
                proc = subprocess.Popen(
                    argv, cwd=root / "work",
                    env=env, stdin=subprocess.PIPE, stdout=out, stderr=err,
                    start_new_session=True, close_fds=True)
            except OSError as exc:
                return RebuildOutcome(None, {}, f"reload.py could not be run: {exc}", "", "")
            timed_out = False
            try:
                assert proc.stdin is not None
                try:
                    proc.stdin.write(json.dumps(orders).encode() + b"\n")
                    proc.stdin.close()
                except OSError:
                    pass  # it ended before reading its orders: no result file says so
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                # The group and every marked process: nothing the bag started outlives
                # the verify (also when an exception or a signal unwinds through here).
                _kill_all(proc.pid, marker, started)
                if proc.poll() is None:
                    proc.wait()
            stdout = _tail(out)
            stderr = _tail(err)
        if timed_out:
            return RebuildOutcome(None, {}, f"reload.py did not finish within {timeout_s:g} s "
                                  "(its process group was killed)", stdout, stderr)
        answer, why = _read_result(result, nonce)
    if answer is None:
        tail = printable((stderr.strip().splitlines() or ["no output"])[-1], 300)
        return RebuildOutcome(proc.returncode, {}, f"reload.py exited {proc.returncode} "
                              f"and {why} (its own output is not believed): {tail}",
                              stdout, stderr)
    if proc.returncode != 0:
        answer = {**answer, "ok": False,
                  "error": answer.get("error") or f"the process exited {proc.returncode}"}
    return RebuildOutcome(proc.returncode, answer, None, stdout, stderr)


def _tail(handle: Any) -> str:
    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    handle.seek(max(0, size - 4000))
    return str(handle.read().decode("utf-8", "replace"))


def _read_result(path: Path, nonce: str) -> tuple[dict[str, Any] | None, str]:
    try:
        if path.is_symlink() or not path.is_file():
            return None, "wrote no result file"
        with open(path, "rb") as handle:
            raw = handle.read(1 << 20)
        data = loads_bounded(raw.decode("utf-8"))
    except (OSError, ValueError):
        return None, "its result file is unreadable"
    if not isinstance(data, dict) or data.get("nonce") != nonce:
        return None, "its result file does not carry this verify's nonce"
    return data, ""


def _kill_all(pgid: int, marker: str, since: float) -> None:
    """SIGKILL the rebuild's process group and any process carrying its marker."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    import psutil

    for proc in psutil.process_iter():
        try:
            if proc.create_time() < since - 1 or proc.pid == os.getpid():
                continue
            if proc.environ().get(MARKER_ENV) == marker:
                proc.kill()
        except (psutil.Error, OSError):
            continue
