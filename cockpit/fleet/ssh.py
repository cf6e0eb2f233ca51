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
import selectors
import shlex
import signal
import socket as sock
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cockpit.campaign.model import Machine
from cockpit.common.printable import printable

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
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=err, start_new_session=True)
        except OSError as exc:
            raise SshError(f"cannot run ssh: {exc.strerror}") from None
        code = _wait_unreaped(proc, timeout)
        # Cut short, or failed on its own (its ConnectTimeout): the client and its
        # ProxyCommand (one session; the unreaped client still holds the group id) go
        # together. A proxy outlives ssh's SIGHUP where SIGHUP is ignored (under nohup).
        # Success leaves the backgrounded master alone (it is in the same group).
        _end_group(proc, cut_short=code != 0)
        if code is None:
            raise SshError(f"machine {machine.number} ({machine.ssh}): no connection within "
                           f"{timeout:g} s")
        if proc.returncode != 0:
            err.seek(0)
            why = err.read().decode("utf-8", "replace").strip().splitlines()
            raise SshError(f"machine {machine.number} ({machine.ssh}): "
                           f"{printable(why[-1]) if why else 'ssh failed'}")


def run_ssh(machine: Machine, remote: str, *, timeout: float = COMMAND_TIMEOUT_S,
            stdin: bytes | None = None, max_stdout: int | None = None) -> SshResult:
    """Run ``remote`` (a shell command line) on ``machine``; SshError when ssh itself
    fails (exit 255), the time limit passes or the answer exceeds ``max_stdout`` bytes.

    On a time limit or an oversized answer the ssh client's whole process group (its
    own session: the client and any ProxyCommand it started) is killed, so timed-out
    commands never pile up here; the remote side bounds itself (see ``remote_limited``).
    """
    started = time.monotonic()
    ensure_master(machine, timeout)
    timeout = max(1.0, timeout - (time.monotonic() - started))
    argv = ssh_argv(machine, remote, connect_timeout=max(1, min(CONNECT_TIMEOUT_S,
                                                                int(timeout))))
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as exc:
        raise SshError(f"cannot run ssh: {exc.strerror}") from None
    why: str | None = "error"
    try:
        out, err, why = _collect(proc, stdin, time.monotonic() + timeout, max_stdout)
    finally:
        # Cut short, or ssh itself failed (255: a ProxyCommand may outlive it): the group.
        _end_group(proc, cut_short=why is not None or _exit_code(proc) == 255)
    if why == "timeout":
        raise SshError(f"machine {machine.number} ({machine.ssh}): no answer within "
                       f"{timeout:g} s")
    if why == "too big":
        raise SshError(f"machine {machine.number} ({machine.ssh}): an answer over "
                       f"{max_stdout} bytes (refused)")
    code = proc.returncode
    if code == 255:
        lines = err.decode("utf-8", "replace").strip().splitlines()
        raise SshError(f"machine {machine.number} ({machine.ssh}): "
                       f"{printable(lines[-1]) if lines else 'ssh failed'}")
    return SshResult(code, out, err)


_STDERR_KEEP = 64 * 1024  # the end of ssh's stderr is enough to say why it failed


def _collect(proc: subprocess.Popen[bytes], stdin: bytes | None, deadline: float,
             max_stdout: int | None) -> tuple[bytes, bytes, str | None]:
    """The process's stdout and stderr until it exits; ``why`` is "timeout" or "too big"
    when it was cut short (the caller then kills its group)."""
    out, err = bytearray(), bytearray()
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    pending = memoryview(stdin) if stdin else memoryview(b"")
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE, None)
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(out), bytes(err), "timeout"
            for key, _ in sel.select(min(left, 1.0)):
                if key.data is None:  # stdin: feed it, close it when all is written
                    try:
                        pending = pending[os.write(key.fd, pending[:65536]):]
                    except BrokenPipeError:
                        pending = memoryview(b"")
                    if not pending:
                        sel.unregister(key.fileobj)
                        with contextlib.suppress(OSError):
                            key.fileobj.close()  # type: ignore[union-attr]
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf: bytearray = key.data
                buf += chunk
                if buf is err and len(err) > 2 * _STDERR_KEEP:
                    del err[:-_STDERR_KEEP]
                if buf is out and max_stdout is not None and len(out) > max_stdout:
                    return bytes(out[:max_stdout]), bytes(err), "too big"
    finally:
        sel.close()
    if _wait_unreaped(proc, max(0.1, deadline - time.monotonic())) is None:
        return bytes(out), bytes(err), "timeout"
    return bytes(out), bytes(err), None


def _wait_unreaped(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """Wait for ``proc`` to exit without reaping it (its zombie keeps its pid, so its
    group id cannot be taken by another process before :func:`_end_group` kills the
    group); its exit code, or None at ``timeout``."""
    deadline, pause = time.monotonic() + timeout, 0.002
    while True:
        code = _exit_code(proc)
        if code is not None:
            return code
        if time.monotonic() >= deadline:
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _exit_code(proc: subprocess.Popen[bytes]) -> int | None:
    """The exit code of a process that exited (reaped or not); None while it runs."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
    except ChildProcessError:
        return proc.poll()
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else 128 + info.si_status


def _end_group(proc: subprocess.Popen[bytes], cut_short: bool) -> None:
    """Reap the ssh client; when it was cut short, first kill its whole session (the
    client and a ProxyCommand it started: not yet reaped, so the group id is still its)."""
    if cut_short:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def remote_limited(command: str, seconds: float) -> str:
    """``command`` (a shell command line) bounded on the remote side by coreutils
    ``timeout``: at the limit its whole process group gets SIGTERM, then SIGKILL 2 s
    later, so a command the client gave up on does not live on there (without a
    terminal, sshd signals nothing when the client goes away)."""
    return f"timeout -k 2 {max(1, int(seconds))} sh -c {shlex.quote(command)}"


def remote_cockpit(machine: Machine, args: Sequence[str]) -> str:
    """The command line that runs ``cockpit ARGS`` on ``machine`` with its own campaign
    file (the one place anything is changed on a peer: through its own cockpit)."""
    words = [*shlex.split(machine.cockpit), *args]
    return f"cd {shlex.quote(machine.path)} && COCKPIT_MACHINE={machine.number} " + \
        " ".join(shlex.quote(w) for w in words)
