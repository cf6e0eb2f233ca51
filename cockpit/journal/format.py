"""The journal's vocabulary: its times, its file hash, its errors and skipped lines.

This module owns the small pure pieces that :mod:`cockpit.journal.log` (the file, its lock
and the event API) and its readers share: ``format_time`` / ``parse_time`` (ISO-8601
UTC with microseconds and a ``Z``; naive datetimes refused), ``sha256_file``,
``JournalError`` (the journal cannot be used at all, said in words) and
``JournalProblem`` (a skipped line). All are re-exported by :mod:`cockpit.journal.log`.
"""

from __future__ import annotations

import errno
import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from cockpit.common.fsutil import SYMLINK_REFUSED


class JournalError(Exception):
    """The journal cannot be used at all (not a file, no permission, disk full...);
    ``errno`` is the OS error's number when one caused it (ENOSPC: exit 1, not 2)."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno



@dataclass(frozen=True)
class JournalProblem:
    """A skipped line: ``line`` is 1-based in the file."""

    line: int
    message: str



def format_time(now: datetime) -> str:
    """``now`` as ISO-8601 UTC with microseconds and ``Z``; naive datetimes are refused."""
    if now.tzinfo is None or now.tzinfo.utcoffset(now) is None:
        raise ValueError(f"journal times must be timezone-aware, got naive {now!r}")
    return now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")



def parse_time(text: str) -> datetime:
    """Parse an event's ``t`` back into an aware UTC datetime."""
    value = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    if value.tzinfo is None:
        raise ValueError(f"journal time without a timezone: {text!r}")
    return value.astimezone(timezone.utc)



def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(chunk)
    return digest.hexdigest()



def journal_error(path: Path, action: str, exc: OSError) -> JournalError:
    if isinstance(exc, IsADirectoryError) or exc.errno == errno.EISDIR:
        why = "a folder is where the journal file should be"
    elif isinstance(exc, PermissionError):
        why = "permission denied"
    elif isinstance(exc, (NotADirectoryError, FileExistsError)):
        why = "a parent of the journal path is a file, not a folder"
    elif exc.errno == errno.ENOSPC:
        why = "no space left on the device"
    elif exc.errno == errno.ELOOP:
        why = SYMLINK_REFUSED
    else:
        why = exc.strerror or str(exc)
    return JournalError(f"cannot {action} journal {path}: {why}", exc.errno)
