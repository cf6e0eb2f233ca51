"""The system OpenSSH client, reused through a ControlMaster socket.

Why the system ``ssh`` and not a library (asyncssh): no new dependency, and the
user's ``~/.ssh/config`` (or the campaign's ``ssh_config``), agent, ProxyJump and
``known_hosts`` are honoured exactly as in their own terminal. Host keys are always
verified (``BatchMode=yes``: a key that is unknown or changed fails, it is never
accepted, and no password prompt can hang a tick). One master connection per
machine is reused by every command (``ControlMaster=auto``, ``ControlPersist``);
every command has a time limit.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import socket as sock
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cockpit.campaign.model import Machine

CONNECT_TIMEOUT_S = 5
COMMAND_TIMEOUT_S = 15.0
CONTROL_PERSIST_S = 60


class SshError(Exception):
    """A command over SSH that did not complete: unreachable, refused, timed out."""


@dataclass(frozen=True)
class SshResult:
    code: int
    stdout: bytes
    stderr: bytes


def control_dir() -> Path:
    """Control sockets: short paths (a unix socket path is limited to ~100 bytes)."""
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    folder = base / f"cockpit-ssh-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def control_path(machine: Machine, base: Path | None = None) -> Path:
    key = f"{machine.ssh}|{machine.port}|{machine.ssh_config}"
    tag = hashlib.sha256(key.encode()).hexdigest()[:16]
    return (base or control_dir()) / f"{tag}.sock"


def ssh_argv(machine: Machine, remote: str | None, *, connect_timeout: int = CONNECT_TIMEOUT_S,
             base: Path | None = None, master: str = "no") -> list[str]:
    """``ssh`` with the reuse and safety options, then the remote command (one word).

    Commands use the master connection's socket (``ControlMaster=no``: when there is
    none, ssh connects directly); :func:`ensure_master` starts the master, detached
    from every pipe (a master started by a command would hold its output open)."""
    socket = control_path(machine, base)
    argv = ["ssh"]
    if machine.ssh_config:
        argv += ["-F", os.path.expanduser(machine.ssh_config)]
    if machine.port:
        argv += ["-p", str(machine.port)]
    argv += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout}",
             "-o", f"ControlMaster={master}", "-o", f"ControlPath={socket}",
             "-o", f"ControlPersist={CONTROL_PERSIST_S}",
             "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2",
             "-e", "none", "-T"]
    if remote is None:
        return [*argv, "-N", "-f", "--", machine.ssh]
    return [*argv, "--", machine.ssh, remote]


def master_alive(machine: Machine) -> bool:
    path = control_path(machine)
    with sock.socket(sock.AF_UNIX, sock.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def ensure_master(machine: Machine, timeout: float) -> None:
    """Start the shared connection when none lives (``ssh -N -f``: it goes to the
    background once authenticated; its stdio is /dev/null and a file, never our pipes)."""
    if master_alive(machine):
        return
    with contextlib.suppress(FileNotFoundError):
        control_path(machine).unlink()  # a dead master's socket
    argv = ssh_argv(machine, None, connect_timeout=max(1, min(CONNECT_TIMEOUT_S, int(timeout))),
                    master="yes")
    with tempfile.TemporaryFile() as err:
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=err, timeout=timeout, check=False,
                                  start_new_session=True)
        except subprocess.TimeoutExpired:
            raise SshError(f"machine {machine.number} ({machine.ssh}): no connection within "
                           f"{timeout:g} s") from None
        except OSError as exc:
            raise SshError(f"cannot run ssh: {exc.strerror}") from None
        if done.returncode != 0:
            err.seek(0)
            why = err.read().decode("utf-8", "replace").strip().splitlines()
            raise SshError(f"machine {machine.number} ({machine.ssh}): "
                           f"{why[-1] if why else 'ssh failed'}")


def run_ssh(machine: Machine, remote: str, *, timeout: float = COMMAND_TIMEOUT_S,
            stdin: bytes | None = None) -> SshResult:
    """Run ``remote`` (a shell command line) on ``machine``; SshError when ssh itself
    fails (exit 255) or the time limit passes."""
    started = time.monotonic()
    ensure_master(machine, timeout)
    timeout = max(1.0, timeout - (time.monotonic() - started))
    argv = ssh_argv(machine, remote, connect_timeout=max(1, min(CONNECT_TIMEOUT_S,
                                                                int(timeout))))
    try:
        done = subprocess.run(argv, input=stdin or b"", capture_output=True, timeout=timeout,
                              check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise SshError(f"machine {machine.number} ({machine.ssh}): no answer within "
                       f"{timeout:g} s") from None
    except OSError as exc:
        raise SshError(f"cannot run ssh: {exc.strerror}") from None
    if done.returncode == 255:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SshError(f"machine {machine.number} ({machine.ssh}): "
                       f"{why[-1] if why else 'ssh failed'}")
    return SshResult(done.returncode, done.stdout, done.stderr)


def close_master(machine: Machine) -> None:
    """End the shared connection (``ssh -O exit``), e.g. when a cockpit quits."""
    argv = ssh_argv(machine, "true")
    argv = ["ssh", "-O", "exit", *argv[1:argv.index("-e")], machine.ssh]
    try:
        subprocess.run(argv, capture_output=True, timeout=5, check=False)
    except (subprocess.TimeoutExpired, OSError):
        pass


def remote_cockpit(machine: Machine, args: Sequence[str]) -> str:
    """The command line that runs ``cockpit ARGS`` on ``machine`` with its own campaign
    file (the one place anything is changed on a peer: through its own cockpit)."""
    words = [*shlex.split(machine.cockpit), *args]
    return f"cd {shlex.quote(machine.path)} && COCKPIT_MACHINE={machine.number} " + \
        " ".join(shlex.quote(w) for w in words)
