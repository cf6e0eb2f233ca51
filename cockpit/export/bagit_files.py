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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cockpit.campaign.model import Settings
from cockpit.common.durations import format_duration
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


@dataclass(frozen=True)
class FetchTarget:
    """Where your own machine reaches this one: user, host, SSH port, and from where."""

    user: str
    host: str
    port: int | None
    source: str  # "settings.fetch", "SSH_CONNECTION" or "this machine's name"


def fetch_target(settings: Settings | None = None,
                 environ: Mapping[str, str] | None = None) -> FetchTarget:
    """``settings.fetch`` first, then ``$SSH_CONNECTION`` (the server address and port
    you came in on: right behind a rental's SSH port), else this machine's name."""
    env = os.environ if environ is None else environ
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "USER"
    host: str | None = None
    port: int | None = None
    source = "this machine's name"
    words = env.get("SSH_CONNECTION", "").split()
    if len(words) == 4 and words[3].isdigit():
        host, port, source = words[2], int(words[3]), "SSH_CONNECTION"
    if settings is not None and (settings.fetch_host or settings.fetch_port
                                 or settings.fetch_user):
        host = settings.fetch_host or host
        port = settings.fetch_port or port
        user = settings.fetch_user or user
        source = "settings.fetch"
    return FetchTarget(user, host or socket.gethostname(), port, source)


def fetch_commands(tar_path: Path, host: str | None = None,
                   user: str | None = None, port: int | None = None) -> list[str]:
    """Exact commands to run on your own machine to bring the tar home (D19)."""
    target = fetch_target(environ={})
    host = host or target.host
    user = user or target.user
    where = f"[{host}]" if ":" in host else host  # an IPv6 address
    remote = f"{user}@{where}:{tar_path.resolve()}"
    sha = tar_path.with_name(tar_path.name + ".sha256")
    ssh = f"-e 'ssh -p {port}' " if port else ""
    scp = f"-P {port} " if port else ""
    return [
        f"rsync -av --partial --progress {ssh}{remote} {remote[:-4]}.tar.sha256 .",
        f"scp {scp}{remote} {user}@{where}:{sha.resolve()} .",
        # Never with --rebuild: that runs the bag's code, and the bag comes from the box.
        f"sha256sum -c {sha.name} && cockpit verify-export {tar_path.name}",
    ]


def fetch_text(campaign_id: str, window_end: str, tar_path: Path, tar_bytes: int,
               target: FetchTarget, rate_bytes_s: float | None
               ) -> tuple[str, list[str], list[str]]:
    """FETCH.txt, and for the export's last lines the notes (where, the expected time)
    and the commands."""
    commands = fetch_commands(tar_path, target.host, target.user, target.port)
    where = f"{target.user}@{target.host}" + (f", SSH port {target.port}" if target.port
                                               else "")
    notes = [f"# {where} (from {target.source})"]
    if target.source == "this machine's name":
        notes.append("#   not known to be reachable: set settings.fetch {host, port, user} "
                     "to the address and SSH port you connect to")
    size_mb = tar_bytes / 2**20
    if rate_bytes_s:
        transfer_s = max(1.0, tar_bytes / rate_bytes_s)
        notes.append(f"# {size_mb:.1f} MiB at {rate_bytes_s / 2**20:g} MB/s "
                     f"(settings.transfer_rate_mb_s): about {format_duration(transfer_s)}")
    else:
        notes.append(f"# {size_mb:.1f} MiB; set settings.transfer_rate_mb_s for the expected "
                     "time")
    text = (f"# Bring the export of campaign {campaign_id} home before the window ends "
            f"({window_end}). Run on your own machine:\n" + "\n".join(notes + commands) + "\n"
            "# Without the cockpit there: tar -xf " + tar_path.name + ", then RELOAD.md in "
            "the bag's data/ folder\n")
    return text, [n.lstrip('# ') for n in notes], commands


