"""Hashing on the way: one read per file for the export (copy + sha256, tar + sha256).

This module owns the streaming copies and digests the export writer uses, and the
small cache that spares re-hashing a hard-linked artifact unchanged since the last
export (keyed by device, inode, size and mtime).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from cockpit.common.fsutil import write_atomic

CHUNK = 8 * 1024 * 1024


class HashCache:
    """sha256 by (device, inode, size, mtime): a hard-linked artifact unchanged since the
    last export is not read again. The verifier re-hashes everything anyway."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.used: dict[str, str] = {}
        try:
            self.known: dict[str, str] = json.loads(path.read_text())
        except (OSError, ValueError):
            self.known = {}

    @staticmethod
    def key(st: os.stat_result) -> str:
        return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"

    def get(self, st: os.stat_result) -> str | None:
        found = self.known.get(self.key(st))
        if found:
            self.used[self.key(st)] = found
        return found

    def put(self, st: os.stat_result, digest: str) -> None:
        self.used[self.key(st)] = digest

    def save(self) -> None:
        try:
            write_atomic(self.path, json.dumps(self.used))
        except OSError:
            pass  # a cache only: the next export hashes again


def copy_hashed(src: Path, dst: Path) -> tuple[str, int]:
    """Copy ``src`` to ``dst`` in one read, hashing the bytes on their way; fsync'ed."""
    digest = hashlib.sha256()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    size = 0
    with open(src, "rb", buffering=0) as fin, open(dst, "wb", buffering=0) as fout:
        while True:
            n = fin.readinto(buf)
            if not n:
                break
            chunk = view[:n]
            digest.update(chunk)
            written = 0
            while written < n:
                written += fout.write(chunk[written:])
            size += n
        os.fsync(fout.fileno())
    shutil.copystat(src, dst, follow_symlinks=True)
    return digest.hexdigest(), size


class HashingWriter:
    """A write-only file object that hashes what passes through (the tar, in one pass)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        written: int = self.handle.write(data)
        return written

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self.handle.flush()
