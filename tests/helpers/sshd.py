"""A real OpenSSH server on 127.0.0.1 for the fleet tests, with keys made in a tmp folder.

The client never reads the user's ~/.ssh: every machine entry names the test's own
``ssh_config`` (IdentityFile, UserKnownHostsFile holding the host key,
StrictHostKeyChecking yes). OpenSSH takes the home directory from the password
database, not $HOME, hence the explicit config file.
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
from pathlib import Path

import psutil

from tests.helpers.process import wait_for

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Keys:
    """A host key, a client key, the client config and known_hosts, all in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "cockpit-test",
                            "-f", str(folder / name)], check=True, capture_output=True)
        (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
        self.known_hosts = folder / "known_hosts"
        self.known_hosts.write_text("")
        self.config = folder / "ssh_config"
        self.config.write_text(
            "Host *\n"
            f"  User {getpass.getuser()}\n"
            f"  IdentityFile {folder / 'client_key'}\n"
            "  IdentitiesOnly yes\n"
            "  IdentityAgent none\n"
            f"  UserKnownHostsFile {self.known_hosts}\n"
            "  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n"
            "  UpdateHostKeys no\n")

    def trust(self, port: int) -> None:
        key = (self.folder / "host_key.pub").read_text().split()
        with open(self.known_hosts, "a") as f:
            f.write(f"[127.0.0.1]:{port} {key[0]} {key[1]}\n")


class Sshd:
    """``sshd -D`` on 127.0.0.1:port; ``kill`` ends it and every connection it serves."""

    def __init__(self, keys: Keys, name: str) -> None:
        self.keys = keys
        self.port = free_port()
        self.config = keys.folder / f"sshd_{name}.conf"
        self.log = keys.folder / f"sshd_{name}.log"
        self.config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\n"
            f"HostKey {keys.folder / 'host_key'}\n"
            f"AuthorizedKeysFile {keys.folder / 'authorized_keys'}\n"
            f"PidFile {keys.folder / f'sshd_{name}.pid'}\n"
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            "PermitRootLogin prohibit-password\nMaxStartups 100\nMaxSessions 100\n"
            "LogLevel ERROR\n")
        keys.trust(self.port)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.config)],
                                         stdout=log, stderr=log, start_new_session=True)
        def listening() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {self.log.read_text()[-500:]}")
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_for(listening, timeout=60, what="sshd listening")

    def kill(self) -> None:
        if self.proc is None:
            return
        # Only the sshd processes (the listener and one per connection): a shell they
        # started ends by itself with its connection and runs its exit traps (a SIGKILL
        # to a login shell mid-`pyenv rehash` would leave that tool's lock behind).
        procs: list[psutil.Process] = []
        try:
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                try:
                    if child.name().startswith("sshd"):
                        procs.append(child)
                except psutil.NoSuchProcess:
                    pass  # a connection that ended while we looked
        except psutil.NoSuchProcess:
            pass
        # The listener always: a child gone mid-listing must not leave it running.
        self.proc.kill()
        for p in procs:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        self.proc.wait(timeout=60)
        self.proc = None


def skip_reason() -> str | None:
    """Why a real sshd cannot run here (None: it can)."""
    if not os.path.exists(SSHD):
        return f"no {SSHD} (Debian: apt-get install openssh-server; .ci/run installs it)"
    if os.geteuid() != 0:
        return "sshd needs root here (its privilege separation directory /run/sshd)"
    for tool in ("ssh", "ssh-keygen"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            return f"no {tool}"
    return None


def started_or_skip(keys: Keys, *names: str) -> list[Sshd]:
    """One started sshd per name, or the test skipped saying why (none left running)."""
    import pytest

    why = skip_reason()
    if why:
        pytest.skip(why)
    servers = [Sshd(keys, name) for name in names]
    try:
        for server in servers:
            server.start()
    except (RuntimeError, OSError) as exc:
        for server in servers:
            server.kill()
        pytest.skip(f"sshd cannot be started here: {exc}")
    return servers
