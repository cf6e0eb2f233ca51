"""Process supervision: start stage commands detached, notice their exits, stop them.

Stages run in their own session and process group under :mod:`cockpit.runs.wrapper`,
so they survive the cockpit (exit, crash, SSH drop) and any later cockpit can
re-attach from the journal: pid, pgid and the process's create time are recorded,
and liveness means "that pid still exists with that create time".

Every launched process carries a launch marker in its environment,
``COCKPIT_LAUNCH=<campaign id>:<stage>:<claim seq>``, inherited by everything it starts
(the training under the wrapper, a launcher's workers). The marker finds a launch
again without the journal (a launch whose record was never written) and proves a
process group is ours when its leader, the wrapper, is gone.

Signals go only to a process group whose identity is proven: its leader alive with the
recorded pid *and* create time, or a member carrying the recorded launch marker.
Anything else is refused, with the reason (:func:`unproven_group`).
"""

from __future__ import annotations

import hashlib
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
from cockpit.journal.paths import CampaignFiles

MARKER_ENV = "COCKPIT_LAUNCH"


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
    marker: str | None = None


@dataclass(frozen=True)
class Marked:
    """A live process that carries a launch marker."""

    pid: int
    pgid: int
    create_time: float
    marker: str
    cmdline: tuple[str, ...]

    @property
    def exit_file(self) -> str | None:
        """The wrapper's exit file, read from its command line (None: not the wrapper)."""
        words = self.cmdline
        if len(words) > 3 and words[1:3] == ("-m", "cockpit.runs.wrapper"):
            return words[3]
        return None


def campaign_mark(campaign: Campaign) -> str:
    """The campaign's part of a launch marker: a short hash of its file's real path."""
    return hashlib.sha256(str(Path(campaign.path).resolve()).encode()).hexdigest()[:16]


def launch_marker(campaign: Campaign, stage_id: str, claim: int) -> str:
    return f"{campaign_mark(campaign)}:{stage_id}:{claim}"


def stage_marker_prefix(campaign: Campaign, stage_id: str) -> str:
    return f"{campaign_mark(campaign)}:{stage_id}:"


def _environ_marker(proc: psutil.Process) -> str | None:
    try:
        return proc.environ().get(MARKER_ENV)
    except (psutil.Error, OSError):
        return None


def _marked(proc: psutil.Process, marker: str) -> Marked | None:
    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return Marked(proc.pid, os.getpgid(proc.pid), proc.create_time(), marker,
                      tuple(proc.cmdline()))
    except (psutil.Error, OSError):
        return None


def find_marked(prefix: str) -> list[Marked]:
    """Live processes whose launch marker starts with ``prefix`` (a whole marker, or the
    ``campaign:stage:`` prefix of every launch of a stage), group leaders first."""
    reap()
    found: list[Marked] = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        marker = _environ_marker(proc)
        if marker is None or not _matches(marker, prefix):
            continue
        item = _marked(proc, marker)
        if item is not None:
            found.append(item)
    found.sort(key=lambda m: (m.pid != m.pgid, m.create_time))
    return found


def _matches(marker: str, prefix: str) -> bool:
    if not prefix.endswith(":"):
        return marker == prefix
    # "camp:a:" must not match stage "a:b" ("camp:a:b:3"): the rest is the claim seq.
    return marker.startswith(prefix) and marker[len(prefix):].isdigit()


def group_members(pgid: int | None, marker: str | None = None) -> list[int]:
    """Live (non-zombie) pids in process group ``pgid``; with ``marker``, only those
    carrying that launch marker."""
    if not pgid:
        return []
    reap()
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) != pgid or proc.status() == psutil.STATUS_ZOMBIE:
                continue
        except (ProcessLookupError, psutil.Error, OSError):
            continue
        if marker is not None and _environ_marker(proc) != marker:
            continue
        members.append(proc.pid)
    return members


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
    return CampaignFiles.of(campaign).run_report(run_id)


def launch_base(campaign: Campaign, stage_id: str, now: datetime) -> Path:
    """Where a launch at ``now`` writes its ``.out``, ``.err`` and ``.exit`` (the claim
    names its ``.out``: no such file means the launch never began)."""
    return CampaignFiles.of(campaign).launch_base(stage_id, now)


def launch(campaign: Campaign, stage: Stage, now: datetime,
           python: str = sys.executable, marker: str | None = None) -> Launched:
    """Start ``stage``'s command detached under the wrapper; raises OSError when it can't.

    ``marker`` goes into the environment as ``COCKPIT_LAUNCH`` (see the module text)."""
    if stage.command is None:
        raise ValueError(f"stage {stage.id!r} has no command")
    base = launch_base(campaign, stage.id, now)
    base.parent.mkdir(parents=True, exist_ok=True)
    _space_for_launch(base.parent)
    exit_file = Path(f"{base}.exit")
    env = dict(os.environ)
    env.update(stage.env)
    env["COCKPIT_CAMPAIGN"] = str(campaign.path)
    env["COCKPIT_STAGE"] = stage.id
    env.pop(MARKER_ENV, None)  # never inherit the cockpit's own (a stage that runs a cockpit)
    if marker is not None:
        env[MARKER_ENV] = marker
    report = None
    if stage.run:
        env["COCKPIT_RUN"] = stage.run
        report = str(report_path(campaign, stage.run))
        Path(report).parent.mkdir(parents=True, exist_ok=True)
        env["COCKPIT_REPORT"] = report
        request = CampaignFiles.of(campaign).save_request(stage.run)
        request.unlink(missing_ok=True)  # an earlier attempt's request is not this one's
        env["COCKPIT_SAVE_REQUEST"] = str(request)
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
                    str(exit_file), report, marker)


# Below this much free space the run's output and its exit file cannot be written: a
# launch then would die unexplained ("killed?"); it is refused with the reason instead.
LAUNCH_MIN_FREE_BYTES = 1 << 20


def _space_for_launch(logs: Path) -> None:
    """OSError(ENOSPC) naming ``logs`` when there is no room for a run's logs there."""
    import errno

    try:
        st = os.statvfs(logs)
    except OSError:
        return  # cannot tell: the opens below say what is wrong
    free = st.f_bavail * st.f_frsize
    if free < LAUNCH_MIN_FREE_BYTES:
        raise OSError(errno.ENOSPC, f"no space left on the device for the run's output and "
                      f"exit file ({free:,} bytes free, {LAUNCH_MIN_FREE_BYTES:,} needed)",
                      str(logs))


def no_space_note(exit_file: str | None) -> str | None:
    """Why a run may have ended without its exit code: the folder of its exit file is
    (nearly) full, so the wrapper could not write it. None when there is room."""
    if not exit_file:
        return None
    folder = os.path.dirname(exit_file)
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    if free >= LAUNCH_MIN_FREE_BYTES:
        return None
    return (f"no space left on the device: {folder} has {free:,} bytes free, so its exit "
            "file could not be written (ENOSPC)")


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


def unproven_group(pid: int | None, pgid: int | None, create_time: float | None,
                   marker: str | None = None) -> str | None:
    """Why the group may not be signalled (None: its identity is proven).

    Proven: the leader ``pid`` is alive with the recorded ``create_time`` and still leads
    ``pgid``; or, the leader gone or unproven, a live member of ``pgid`` carries the
    recorded launch ``marker``. A record without a create time and without a marker
    proves nothing: the pid may long since belong to someone else."""
    if not pid or not pgid:
        return "the journal records no process id for it"
    if create_time and alive(pid, create_time):
        try:
            if os.getpgid(pid) == pgid:
                return None
        except (ProcessLookupError, PermissionError):
            pass
    if marker is not None:
        if group_members(pgid, marker):
            return None
        return (f"no live process of group {pgid} carries its launch marker {marker}: "
                "it is not ours (or it has ended)")
    if not create_time:
        return (f"its journal record has neither the process create time nor a launch "
                f"marker, so pid {pid} cannot be proven to be the process the cockpit "
                "started (it may be an unrelated process that got the same pid)")
    return f"pid {pid} is no longer the process the cockpit started (it has ended)"


def signal_group(pid: int | None, pgid: int | None, create_time: float | None,
                 sig: signal.Signals, marker: str | None = None) -> bool:
    """Signal a process group we recorded, only if its identity is proven."""
    if unproven_group(pid, pgid, create_time, marker) is not None:
        return False
    assert pgid  # proven above
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def group_alive(pgid: int | None, marker: str | None = None) -> bool:
    """Whether any process is left in the group (the wrapper may be gone before its child);
    with ``marker``, only members carrying that launch marker count."""
    return bool(group_members(pgid, marker))
