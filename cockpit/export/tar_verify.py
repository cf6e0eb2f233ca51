"""verify-export of the fetched ``.tar`` itself, on a laptop with no campaign file (D19).

This module owns :func:`verify_tar`: the tar is checked against the ``.sha256`` beside
it (a damaged transfer is reported and never unpacked), unpacked into a temporary
folder with tarfile's ``data`` filter (no absolute path, no ``..``, no link leaving
the folder, no device file), and the bag inside is verified like any other; the
temporary folder is removed after.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from cockpit.export.export_checks import Check
from cockpit.export.verifier import VerifyExportReport, find_bag, verify_export

CHUNK = 1 << 20


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def tar_check(tar_path: Path) -> Check:
    """The tar against its ``NAME.tar.sha256`` (the line ``sha256sum -c`` reads)."""
    name = "tar matches its sha256"
    sha_path = tar_path.with_name(tar_path.name + ".sha256")
    try:
        expected = sha_path.read_text(encoding="utf-8").split()[0].lower()
    except (OSError, IndexError, UnicodeDecodeError):
        return Check(name, False, (f"{sha_path.name} is missing or empty beside the tar: "
                                   "fetch it with the tar (FETCH.txt)",))
    actual = sha256_of(tar_path)
    if actual != expected:
        return Check(name, False, (f"{tar_path.name}: sha256 {actual} does not match "
                                   f"{sha_path.name} ({expected}): the tar is damaged or "
                                   "incomplete; fetch it again (not unpacked)",))
    return Check(name, True, detail=f"sha256 {actual}")


def verify_tar(tar_path: str | os.PathLike[str], **options: Any) -> VerifyExportReport:
    """Check the tar's sha256, unpack it safely into a temporary folder and verify the
    bag it holds (``options`` as :func:`cockpit.export.verify_export`)."""
    path = Path(tar_path).resolve()
    first = tar_check(path)
    if not first.ok:
        return VerifyExportReport(str(path), [first], reload_checked=False)
    with tempfile.TemporaryDirectory(prefix="cockpit-verify-tar-") as tmp:
        try:
            with tarfile.open(path, mode="r:") as tar:
                _extract_data_only(tar, Path(tmp))
        except (tarfile.TarError, OSError) as exc:
            return VerifyExportReport(str(path), [first, Check(
                "tar unpacks", False, (f"{path.name} cannot be unpacked safely: {exc}",))],
                reload_checked=False)
        bag = find_bag(Path(tmp))
        report = verify_export(bag, **options)
    report.checks.insert(0, first)
    report.bag = f"{path} (unpacked into a temporary folder, removed after)"
    return report


def _extract_data_only(tar: tarfile.TarFile, target: Path) -> None:
    """Unpack plain files and folders only, each inside ``target`` (tarfile's "data"
    filter where this Python has it; the same rule by hand on older 3.10/3.11)."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(target, filter="data")
        return
    root = target.resolve()
    for member in tar.getmembers():
        where = (root / member.name).resolve()
        if not (member.isfile() or member.isdir()) or member.name.startswith("/") \
                or not where.is_relative_to(root):
            raise tarfile.TarError(f"{member.name}: not a plain file or folder inside the tar")
    tar.extractall(target)  # noqa: S202 - every member was checked above

