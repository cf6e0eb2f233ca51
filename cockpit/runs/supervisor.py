"""Process supervision: start stage commands detached, notice their exits, stop them.

Stages run in their own session and process group under :mod:`cockpit.runs.wrapper`,
so they survive the cockpit (exit, crash, SSH drop) and any later cockpit can
re-attach from the journal: pid, pgid and the process's create time are recorded,
and liveness means "that pid still exists with that create time". Signals go only
to process groups this cockpit started and recorded, and only while the recorded
process is the one alive under that pid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from cockpit.campaign.model import Campaign, Stage


@dataclass(frozen=True)
class Launched:
    pid: int
    pgid: int
    create_time: float
    command: list[str] | str
    stdout: str
    stderr: str
    exit_file: str
    report: str | None


def stage_gpus(stage: Stage, gpus_per_machine: int) -> tuple[int, ...]:
    """The GPU indices a stage holds on its machine (D6)."""
    indices: set[int] = set()
    for res in stage.resources:
        if res.kind == "gpu":
            indices |= set(range(gpus_per_machine)) if res.gpu is None else {res.gpu}
    return tuple(sorted(indices))


def report_path(campaign: Campaign, run_id: str) -> Path:
    """Where a run's cockpit.report lines go unless its metrics name a .jsonl file."""
    run = campaign.runs.get(run_id)
    if run is not None:
        for metric_path in run.metrics:
            if metric_path.suffix == ".jsonl":
                return campaign.resolve(metric_path)
    return campaign.state_dir / "runs" / run_id / "report.jsonl"


def launch(campaign: Campaign, stage: Stage, now: datetime,
           python: str = sys.executable) -> Launched:
    """Start ``stage``'s command detached under the wrapper; raises OSError when it can't."""
    if stage.command is None:
        raise ValueError(f"stage {stage.id!r} has no command")
    logs = campaign.state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stamp = now.strftime("%Y%m%dT%H%M%S%fZ")
    base = logs / f"{stage.id}.{stamp}"
    exit_file = Path(f"{base}.exit")
    env = dict(os.environ)
    env.update(stage.env)
    env["COCKPIT_CAMPAIGN"] = str(campaign.path)
    env["COCKPIT_STAGE"] = stage.id
    report = None
    if stage.run:
        env["COCKPIT_RUN"] = stage.run
        report = str(report_path(campaign, stage.run))
        Path(report).parent.mkdir(parents=True, exist_ok=True)
        env["COCKPIT_REPORT"] = report
    gpus = stage_gpus(stage, campaign.package.offer.gpus)
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpus)
    argv: list[str]
    command: list[str] | str
    if isinstance(stage.command, str):
        command = stage.command.replace("{python}", python)
        argv = [python, "-m", "cockpit.runs.wrapper", str(exit_file), "--shell", command]
    else:
        # "{python}": the interpreter running the cockpit, so a venv needs nothing on PATH.
        command = [python if word == "{python}" else word for word in stage.command]
        argv = [python, "-m", "cockpit.runs.wrapper", str(exit_file), "--", *command]
    cwd = stage.cwd or campaign.folder
    with open(f"{base}.out", "ab") as out, open(f"{base}.err", "ab") as err:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
            start_new_session=True,  # own session and process group: survives the cockpit
        )
    _children[proc.pid] = proc
    try:
        create_time = psutil.Process(proc.pid).create_time()
    except psutil.Error:
        create_time = 0.0
    return Launched(proc.pid, proc.pid, create_time, command, f"{base}.out", f"{base}.err",
                    str(exit_file), report)


# Popen objects of processes this interpreter started: polled so they never linger as zombies.
_children: dict[int, subprocess.Popen[bytes]] = {}


def reap() -> None:
    for pid, proc in list(_children.items()):
        if proc.poll() is not None:
            del _children[pid]


def alive(pid: int | None, create_time: float | None) -> bool:
    """True while the recorded process (same pid *and* create time) is running."""
    if not pid:
        return False
    reap()
    try:
        proc = psutil.Process(pid)
        if create_time and abs(proc.create_time() - create_time) > 0.5:
            return False  # the pid was reused by another process
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def read_exit(exit_file: str | None) -> dict[str, Any] | None:
    if not exit_file:
        return None
    try:
        with open(exit_file, encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def signal_group(pid: int | None, pgid: int | None, create_time: float | None,
                 sig: signal.Signals) -> bool:
    """Signal a process group we recorded, only if its leader is still ours."""
    if not pid or not pgid or not alive(pid, create_time):
        return False
    try:
        if os.getpgid(pid) != pgid:
            return False
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def group_alive(pgid: int | None) -> bool:
    """Whether any process is left in the group (the wrapper may be gone before its child)."""
    if not pgid:
        return False
    reap()
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.info["pid"]) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return False
