"""Checkpoint reload verification in a fresh process (D16/D17, D23).

This module owns the cockpit's side of verification: starting the worker
(:mod:`cockpit.runs.checkpoints.reload_worker`) or the campaign's own ``verify_command`` in a new
process with a time limit, and turning what comes back into a :class:`VerifyReport`.
A checkpoint is never loaded in the cockpit's own process: unpickling can run code,
and a multi-GB load would stall the UI. ``report.exit_code`` is what a
``cockpit verify`` command returns: 0 when a restart is possible (absent optional
parts are warnings), 1 when it is not.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cockpit

KINDS = ("train", "inference", "adapter")


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    kind: str
    path: str
    layout: str | None = None
    present: dict[str, bool] = field(default_factory=dict)
    missing_required: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    error: str | None = None
    load_seconds: float | None = None  # restore cost inside the worker
    step: int | None = None
    unsafe_pickle: bool = False
    wall_seconds: float | None = None  # whole check, process start included

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def problems(self) -> tuple[str, ...]:
        """Why a restart is not possible, in words (empty when ok)."""
        if self.ok:
            return ()
        found = ([self.error] if self.error else []) + [
            f"missing {m}" if not m.startswith("base model revision") else m
            for m in self.missing_required
        ]
        return tuple(found)

    def summary(self) -> str:
        what = f"{Path(self.path).name} ({self.layout or 'unknown layout'}, {self.kind})"
        if self.ok:
            tail = f"; {len(self.warnings)} warning(s)" if self.warnings else ""
            step = f" at step {self.step}" if self.step is not None else ""
            return f"reloads{step}: {what}{tail}"
        return f"cannot restart: {what}: " + "; ".join(self.problems)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["missing_required"] = list(self.missing_required)
        data["warnings"] = list(self.warnings)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VerifyReport:
        return cls(
            ok=bool(data.get("ok")),
            kind=str(data.get("kind", "train")),
            path=str(data.get("path", "")),
            layout=data.get("layout"),
            present={str(k): bool(v) for k, v in (data.get("present") or {}).items()},
            missing_required=tuple(str(m) for m in data.get("missing_required") or ()),
            warnings=tuple(str(w) for w in data.get("warnings") or ()),
            error=data.get("error"),
            load_seconds=data.get("load_seconds"),
            step=data.get("step"),
            unsafe_pickle=bool(data.get("unsafe_pickle")),
            wall_seconds=data.get("wall_seconds"),
        )


def exit_code(report: VerifyReport) -> int:
    """0: reloads (optional parts absent are only warnings); 1: cannot restart."""
    return report.exit_code


def verify_checkpoint(
    path: str | os.PathLike[str],
    kind: str = "train",
    *,
    timeout: float = 300,
    allow_unsafe: bool = False,
    python: str = sys.executable,
    base_model: str | None = None,
    base_revision: str | None = None,
) -> VerifyReport:
    """Reload ``path`` in a new ``python`` process and report what a restart would get."""
    target = os.path.abspath(os.fspath(path))
    if kind not in KINDS:
        return VerifyReport(False, kind, target, error=f"unknown kind {kind!r}")
    argv = [python, "-m", "cockpit.runs.checkpoints.reload_worker", target, "--kind", kind]
    if allow_unsafe:
        argv.append("--allow-unsafe")
    # One word each (--opt=value): a value that starts with "-" is never read as a flag.
    if base_model:
        argv.append(f"--base-model={base_model}")
    if base_revision:
        argv.append(f"--base-revision={base_revision}")
    # The training environment's python may not have the cockpit installed: put this
    # package's folder first on its path (the worker needs only the standard library).
    package_root = str(Path(cockpit.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, env.get("PYTHONPATH")) if p
    )
    env.pop("COCKPIT_REPORT", None)  # a verification is not a run
    started = time.monotonic()
    # ``python -m`` puts its working folder first on the module path: run it from the
    # cockpit's own folder, never from wherever the caller stands (a bag, a checkpoint
    # folder), so that no torch.py lying there is imported in place of the real one.
    outcome = _run(argv, timeout, cwd=package_root, env=env)
    wall = round(time.monotonic() - started, 6)
    if outcome.timed_out:
        return VerifyReport(False, kind, target, error=f"timed out after {_secs(timeout)}",
                            wall_seconds=wall)
    if outcome.start_error:
        return VerifyReport(False, kind, target, error=outcome.start_error, wall_seconds=wall)
    data = _last_json(outcome.stdout)
    if data is None:
        tail = _tail(outcome.stderr)
        return VerifyReport(
            False, kind, target,
            error=f"verification process failed (exit {outcome.returncode})"
            + (f": {tail}" if tail else ""),
            wall_seconds=wall,
        )
    data["wall_seconds"] = wall
    return VerifyReport.from_dict(data)


def run_verify_command(
    argv_template: list[str],
    checkpoint: str | os.PathLike[str],
    timeout: float,
    cwd: str | os.PathLike[str] | None = None,
) -> VerifyReport:
    """Run the campaign's own ``verify_command`` with ``{checkpoint}`` filled in; exit 0 = ok."""
    target = os.fspath(checkpoint)
    if not argv_template:
        return VerifyReport(False, "custom", target, layout="verify-command",
                            error="verify_command is empty")
    argv = [arg.replace("{checkpoint}", target) for arg in argv_template]
    started = time.monotonic()
    outcome = _run(argv, timeout, cwd=cwd, env=None)
    wall = round(time.monotonic() - started, 6)
    if outcome.timed_out:
        error: str | None = f"timed out after {_secs(timeout)}"
    elif outcome.start_error:
        error = outcome.start_error
    elif outcome.returncode != 0:
        tail = _tail(outcome.stderr) or _tail(outcome.stdout)
        error = f"verify command exited {outcome.returncode}" + (f": {tail}" if tail else "")
    else:
        error = None
    return VerifyReport(
        ok=error is None, kind="custom", path=target, layout="verify-command",
        error=error, load_seconds=wall, wall_seconds=wall,
    )


# ------------------------------------------------------------------------ helpers


@dataclass
class _Outcome:
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    start_error: str | None = None


def _run(argv: list[str], timeout: float, cwd: Any, env: dict[str, str] | None) -> _Outcome:
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            errors="replace",
            start_new_session=True,  # its own group: a timeout kills helpers it started too
        )
    except OSError as exc:
        return _Outcome(start_error=f"could not start {argv[0]}: {exc.strerror or exc}")
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        return _Outcome(timed_out=True)
    return _Outcome(proc.returncode, stdout, stderr)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()


def _last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "ok" in data:
            return data
    return None


def _tail(text: str, lines: int = 3, limit: int = 400) -> str:
    kept = " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])
    return kept[-limit:]


def _secs(seconds: float) -> str:
    return f"{seconds:g}s"
