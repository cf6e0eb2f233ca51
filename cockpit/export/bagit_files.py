"""The bag's own files and the way home: BagIt tag files, the tar and the fetch commands.

This module owns the BagIt tag files (bagit.txt, bag-info.txt, the payload and tag
manifests, written last so an unfinished bag looks unfinished), the tar written and
hashed in one pass, and the exact rsync / scp commands that bring it home (D19).
"""

from __future__ import annotations

import getpass
import hashlib
import os
import socket
import tarfile
from pathlib import Path

from cockpit.export.hashing import CHUNK, HashingWriter
from cockpit.export.payload import FileEntry


def _encode(path: str) -> str:
    return path.replace("\r", "%0D").replace("\n", "%0A")


def _write_tag(bag: Path, name: str, text: str) -> str:
    data = text.encode("utf-8")
    with open(bag / name, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    return hashlib.sha256(data).hexdigest()


def write_bag_files(bag: Path, files: dict[str, FileEntry], info: dict[str, str]) -> None:
    tags: dict[str, str] = {}
    tags["bagit.txt"] = _write_tag(bag, "bagit.txt",
                                   "BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n")
    payload_bytes = sum(f.size for f in files.values())
    info = {**info, "Payload-Oxum": f"{payload_bytes}.{len(files)}"}
    text = "".join(f"{k}: {' '.join(str(v).split())}\n" for k, v in info.items())
    tags["bag-info.txt"] = _write_tag(bag, "bag-info.txt", text)
    manifest = "".join(f"{f.sha256}  {_encode(f.path)}\n" for f in sorted(
        files.values(), key=lambda e: e.path))
    tags["manifest-sha256.txt"] = _write_tag(bag, "manifest-sha256.txt", manifest)
    # Written last: a bag without its tag manifest is plainly unfinished.
    _write_tag(bag, "tagmanifest-sha256.txt",
               "".join(f"{digest}  {name}\n" for name, digest in tags.items()))


def write_tar(bag: Path, tar_path: Path, arcname: str) -> tuple[str, int]:
    with open(tar_path, "wb") as raw:
        writer = HashingWriter(raw)
        # The hashing writer is a duck-typed binary stream; typeshed wants an IO[bytes].
        with tarfile.open(fileobj=writer, mode="w",  # type: ignore[call-overload]
                          format=tarfile.PAX_FORMAT, copybufsize=CHUNK) as tar:
            tar.add(bag, arcname=arcname, recursive=True)
        raw.flush()
        os.fsync(raw.fileno())
    return writer.digest.hexdigest(), writer.size


def fetch_commands(tar_path: Path, host: str | None = None,
                   user: str | None = None) -> list[str]:
    """Exact commands to run on your own machine to bring the tar home (D19)."""
    host = host or socket.gethostname()
    try:
        user = user or getpass.getuser()
    except (KeyError, OSError):
        user = user or "USER"
    remote = f"{user}@{host}:{tar_path.resolve()}"
    sha = tar_path.with_name(tar_path.name + ".sha256")
    return [
        f"rsync -av --partial --progress {remote} {remote[:-4]}.tar.sha256 .",
        f"scp {remote} {user}@{host}:{sha.resolve()} .",
        f"sha256sum -c {sha.name} && tar -xf {tar_path.name}",
    ]
