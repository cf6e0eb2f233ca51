"""Small filesystem helpers shared by the writers (standard library only: training
scripts import cockpit.resume, which uses these)."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in ``folder`` durable; a no-op where the platform
    cannot open a folder for fsync (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# Why a planted symbolic link is refused: the journal, the status log, the event log and
# the Prometheus file are written only into real files, never through a link into
# whatever it points at (another user's file, a system file).
SYMLINK_REFUSED = "it is a symbolic link, and the cockpit writes only into a real file"


def open_no_follow(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` with ``O_NOFOLLOW``: a symbolic link at ``path`` raises OSError(ELOOP)
    whose text says why, naming the path (the journal's rule, for every writer)."""
    import errno

    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, SYMLINK_REFUSED, str(path)) from None
        raise


def refuse_symlink(path: Path) -> None:
    """OSError(ELOOP) when ``path`` is a symbolic link (checked before a rename over it)."""
    import errno

    if os.path.islink(path):
        raise OSError(errno.ELOOP, SYMLINK_REFUSED, str(path))


def write_atomic(path: Path | str, data: str | bytes, *, durable: bool = False) -> None:
    """The house's one way to replace a file whole: a reader sees the old file or the
    new one, never half of either. The folder is made; a planted link at ``path`` is
    refused (OSError ELOOP), never written through; the temporary file beside it is
    per process (two writers never share one) and opened without following links;
    ``durable`` fsyncs the data before the rename (a cache that must survive a power
    cut). On any failure the temporary file is removed and the OSError raised: a full
    disk leaves no litter."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    refuse_symlink(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    blob = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd = open_no_follow(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            view = memoryview(blob)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def sha256_file(path: Path | str) -> str:
    """A file's sha256 in hex, read in 1 MiB chunks into one buffer (never whole in
    memory): the house's one file hash (the export, its verification, provenance)."""
    import hashlib

    digest = hashlib.sha256()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as src:
        while True:
            n = src.readinto(buf)
            if not n:
                break
            digest.update(view[:n])
    return digest.hexdigest()
