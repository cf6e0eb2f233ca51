"""The conductor's lease (issue 39): which one face of a campaign acts on this machine.

An ``flock`` on ``.cockpit/conductor-<machine>.lock``, taken without waiting: the first
face to take it conducts, every later face is a viewer that tries again each tick. The
operating system releases the lock when the holder's file is closed, which includes its
death by any signal (kill -9 too): no pid file to go stale, no heartbeat to miss. The
descriptor is opened close-on-exec, so the training runs a conductor starts never
inherit it (a run outliving the cockpit must not keep the campaign conducted).

Beside the lock, ``conductor-<machine>.json`` says who holds it (face, pid, host, since)
for the viewers and ``status``; it is written after the lock is taken and only ever
read as a description: :func:`probe` asks the lock itself whether anybody conducts.

Standard library only: ``cockpit status --line`` (a tmux status bar, every few seconds)
probes the lease without importing the engine.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from dataclasses import dataclass

from cockpit.common.fsutil import write_atomic
from cockpit.common.layout import AUTO_LOCK, CONDUCTOR_INFO, CONDUCTOR_LOCK, STATE_DIR

INFO_MAX_BYTES = 4096  # who conducts, in a few fields: never read past this


@dataclass(frozen=True)
class ConductorInfo:
    """Who conducts (or last conducted): as the info file says."""

    face: str  # headless, tui, serve, demo, fleet
    pid: int
    host: str
    since: float  # epoch seconds the lease was taken
    ended: float | None = None  # epoch seconds it was given back (a clean exit)
    auto: bool = False  # it started stages by itself (a taker carries that on)


def machine_name(machine: int | None) -> str:
    """The lease's name for a machine (``fleet``: the view of every machine)."""
    return "fleet" if machine is None else str(machine)


def lease_paths(state_dir: str, machine: int | None) -> tuple[str, str]:
    name = machine_name(machine)
    return (os.path.join(state_dir, CONDUCTOR_LOCK.format(name)),
            os.path.join(state_dir, CONDUCTOR_INFO.format(name)))


def state_dir_of(campaign_file: str) -> str:
    return os.path.join(os.path.dirname(os.path.realpath(campaign_file)), STATE_DIR)


def _open_lock(path: str) -> int:
    """The lock file's descriptor: never through a symbolic link, never inherited."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)


class ConductorLease:
    """This face's claim to conduct. :meth:`take` never waits; :attr:`held` says."""

    def __init__(self, state_dir: str, machine: int | None, face: str) -> None:
        self.state_dir = state_dir
        self.lock_path, self.info_path = lease_paths(state_dir, machine)
        self.face = face
        self._fd: int | None = None
        self.since: float | None = None
        self.problem: str | None = None  # why the lease cannot be taken at all (words)
        self.auto = False  # said in the info file: a face that takes over carries it on
        self.previous: ConductorInfo | None = None  # who held it before, as it said

    @property
    def held(self) -> bool:
        return self._fd is not None

    def take(self) -> bool:
        """Take the lease if nobody holds it; True when this face holds it now."""
        if self._fd is not None:
            return True
        try:
            fd = _open_lock(self.lock_path)
        except OSError as exc:  # a planted link (ELOOP), a read-only folder
            self.problem = f"cannot open {self.lock_path}: {exc.strerror or exc}"
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                self.problem = f"cannot lock {self.lock_path}: {exc.strerror or exc}"
            return False
        self._fd = fd
        self.problem = None
        self.previous = read_info(self.info_path)
        self.since = time.time()
        self.describe(None)
        return True

    def release(self) -> None:
        """Give the lease back (a clean exit): the info file says when."""
        if self._fd is None:
            return
        self.describe(time.time())
        fd, self._fd = self._fd, None
        os.close(fd)  # closing the descriptor releases the flock

    def describe(self, ended: float | None = None) -> None:
        """Write who holds the lease (``ended``: given back then)."""
        info = {"face": self.face, "pid": os.getpid(), "host": os.uname().nodename,
                "since": self.since, "ended": ended, "auto": self.auto}
        try:
            write_atomic(self.info_path, json.dumps(info))
        except OSError:  # a description only: the lock is what counts
            pass


def read_info(info_path: str) -> ConductorInfo | None:
    """The info file, checked field by field (a hand-edited or torn file: None)."""
    try:
        fd = os.open(info_path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(INFO_MAX_BYTES + 1)
        data = json.loads(raw) if len(raw) <= INFO_MAX_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    face, pid, host, since, ended, auto = (data.get(k) for k in
                                           ("face", "pid", "host", "since", "ended", "auto"))
    if not (isinstance(face, str) and isinstance(pid, int) and isinstance(host, str)
            and isinstance(since, (int, float)) and not isinstance(since, bool)):
        return None
    if not (ended is None or isinstance(ended, (int, float)) and not isinstance(ended, bool)):
        return None
    return ConductorInfo("".join(c for c in face[:40] if c.isprintable()), pid,
                         "".join(c for c in host[:80] if c.isprintable()), float(since),
                         None if ended is None else float(ended), auto is True)


def probe(state_dir: str, machine: int | None) -> tuple[bool, ConductorInfo | None]:
    """(conducted now, who conducts or last conducted). Asks the lock itself: a shared
    lock that cannot be had means a conductor holds it; one that can is given back at
    once (a viewer's take in that instant fails and tries again at its next tick)."""
    lock_path, info_path = lease_paths(state_dir, machine)
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False, read_info(info_path)  # never conducted here (or not readable)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True, read_info(info_path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False, read_info(info_path)
    finally:
        os.close(fd)


class AutoRequest:
    """A face's ``--auto``, said to whoever conducts: a shared flock on
    ``auto-<machine>.lock`` held while the face lives (the OS drops it when it dies). The
    README's layout opens the screen first (it conducts) and ``headless --auto`` second
    (a viewer): the conductor then starts stages by itself all the same."""

    def __init__(self, state_dir: str, machine: int | None) -> None:
        self.path = os.path.join(state_dir, AUTO_LOCK.format(machine_name(machine)))
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def take(self) -> bool:
        """Hold the request (never waits: a conductor probing this instant makes it
        fail, and the face tries again at its next tick)."""
        if self._fd is not None:
            return True
        try:
            fd = _open_lock(self.path)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def auto_requested(state_dir: str, machine: int | None) -> bool:
    """Whether a live face holds an ``--auto`` request (this process's own included)."""
    path = os.path.join(state_dir, AUTO_LOCK.format(machine_name(machine)))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
