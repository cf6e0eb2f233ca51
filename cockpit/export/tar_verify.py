"""verify-export of the fetched ``.tar`` itself, on a laptop with no campaign file (D19).

This module owns :func:`verify_tar` and the rule for what a tar may hold: the tar is
checked against the ``.sha256`` beside it (a damaged transfer is reported and never
unpacked), then every member header is read *before anything is written*. A tar is a
bag and nothing else: every member lies under the one bag folder (no absolute path,
no ``..``, nothing beside the bag that ``tar -xf`` would write into the current folder,
such as ``.bashrc`` or ``.ssh/authorized_keys``), is a plain file, a folder or a hard
link to a file of the bag (no symlink, device, FIFO, and no sparse member, which
declares far more bytes than the tar holds), and the member count, the total declared
size and each file's size stay under :class:`TarLimits` (the one place the limits are
written; ``verify-export --max-members/--max-total-gib/--max-file-gib`` override them).
Only then is it unpacked into a temporary folder (tarfile's ``data`` filter as well)
and the bag inside verified like any other. The temporary folder is removed after,
also when the verify is ended by SIGTERM or SIGINT.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import signal
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cockpit.common.fsutil import sha256_file
from cockpit.common.printable import printable
from cockpit.export.export_checks import Check
from cockpit.export.tar_limits import DEFAULT_LIMITS, GIB, TarLimits
from cockpit.export.verifier import VerifyExportReport, find_bag, verify_export

CHUNK = 1 << 20


def tar_check(tar_path: Path) -> Check:
    """The tar against its ``NAME.tar.sha256`` (the line ``sha256sum -c`` reads)."""
    name = "tar matches its sha256"
    sha_path = tar_path.with_name(tar_path.name + ".sha256")
    try:
        with open(sha_path, encoding="utf-8") as handle:
            expected = handle.read(4096).split()[0].lower()
    except (OSError, IndexError, UnicodeDecodeError):
        return Check(name, False, (f"{sha_path.name} is missing or empty beside the tar: "
                                   "fetch it with the tar (FETCH.txt)",))
    actual = sha256_file(tar_path)
    if actual != expected:
        return Check(name, False, (f"{tar_path.name}: sha256 {actual} does not match "
                                   f"{sha_path.name} ({printable(expected, 80)}): the tar is "
                                   "damaged or incomplete; fetch it again (not unpacked)",))
    return Check(name, True, detail=f"sha256 {actual}")


def _size(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n:,} bytes"


def members_check(tar: tarfile.TarFile, limits: TarLimits = DEFAULT_LIMITS) -> Check:
    """A tar is a bag and nothing else: every member header checked, nothing written.

    Headers are read one at a time and the count is checked as they come, so a tar of a
    million members stops at the limit instead of being listed whole; the bag's folder
    is the one top-level folder holding ``bagit.txt``, wherever it comes in the tar."""
    name = "tar holds the bag only"
    failures: list[str] = []
    count = total = 0
    files: set[str] = set()

    def fail(member: tarfile.TarInfo, why: str) -> None:
        if len(failures) < 20:
            failures.append(f"{printable(member.name, 200)}: {why}")

    members: list[tarfile.TarInfo] = []
    for member in _members(tar):
        if len(members) >= limits.max_members:
            return Check(name, False, (f"more than {limits.max_members:,} members "
                                       "(--max-members): an export holds far fewer files; "
                                       "not unpacked",))
        members.append(member)
    # The bag's folder: the one top-level folder that holds bagit.txt.
    tops = {m.name.split("/")[0] for m in members
            if posixpath.normpath(m.name).count("/") == 1
            and posixpath.basename(m.name) == "bagit.txt"}
    if len(tops) != 1:
        return Check(name, False, ("the tar holds no single bag folder (a top-level folder "
                                   "with bagit.txt)" if not tops else
                                   "the tar holds several bag folders: "
                                   + ", ".join(sorted(map(printable, tops))),))
    root = tops.pop()
    for member in members:
        count += 1
        why = _refused(member, root, files)
        if why is not None:
            fail(member, why)
            continue
        if not member.isfile():
            continue  # a folder, or a hard link to a file of the bag
        norm = posixpath.normpath(member.name)
        files.add(norm)
        if member.size > limits.max_file_bytes:
            fail(member, f"declares {_size(member.size)}, over the "
                         f"{_size(limits.max_file_bytes)} per file (--max-file-gib)")
        total += member.size
    if total > limits.max_total_bytes:
        failures.append(f"the members declare {_size(total)} in all, over the "
                        f"{_size(limits.max_total_bytes)} limit (--max-total-gib)")
    if not failures:
        free = _free_bytes(Path(tempfile.gettempdir()))
        if free is not None and total > free:
            failures.append(f"unpacking needs {_size(total)} but the temporary folder "
                            f"{tempfile.gettempdir()} has {_size(free)} free (set TMPDIR)")
    return Check(name, not failures, tuple(failures),
                 detail=f"{count:,} member(s) under {printable(root, 100)}/, "
                        f"{_size(total)}")


def _refused(member: tarfile.TarInfo, root: str, files: set[str]) -> str | None:
    """Why ``member`` may not be unpacked (None: a folder, a plain file or a hard link to
    one of ``files``, the bag's files so far, under the bag's folder ``root``)."""
    parts = member.name.split("/")
    norm = posixpath.normpath(member.name)
    if member.name.startswith("/") or os.path.isabs(member.name) or "\0" in member.name:
        return "an absolute path: tar -xf would write it outside the bag"
    if ".." in parts or norm.startswith(".."):
        return "a path with '..': it would leave the bag's folder"
    if norm.split("/")[0] != root:
        return (f"lies outside the bag's folder {printable(root, 100)}/: tar -xf "
                "would write it beside the bag")
    if member.issparse():
        return (f"a sparse member declaring {_size(member.size)}: an export "
                "never writes one; not unpacked")
    if member.islnk():
        if posixpath.normpath(member.linkname) not in files:
            return "a hard link to something that is not a file of the bag"
        return None
    if member.isdir() or member.isfile():
        return None
    what = "a symbolic link" if member.issym() else "a device, FIFO or other special file"
    return f"{what}: an export holds plain files and folders only"


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    while True:
        member = tar.next()
        if member is None:
            return
        yield member


def _free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


class Interrupted(BaseException):
    """SIGTERM/SIGINT during a verify: unwinds so the temporary folder is removed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def removed_on_signal() -> Iterator[None]:
    """Turn SIGTERM/SIGINT into an exception while the block runs, so every ``with``
    that holds a temporary folder (and the rebuild's process group) is unwound."""

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    old: dict[signal.Signals, Any] = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            old[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: no handlers, as before
        pass
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


def verify_tar(tar_path: str | os.PathLike[str], limits: TarLimits = DEFAULT_LIMITS,
               **options: Any) -> VerifyExportReport:
    """Check the tar's sha256 and members, unpack it into a temporary folder and verify
    the bag it holds (``options`` as :func:`cockpit.export.verify_export`)."""
    path = Path(tar_path).resolve()
    first = tar_check(path)
    if not first.ok:
        return VerifyExportReport(str(path), [first], reload_checked=False)
    try:
        with tarfile.open(path, mode="r:") as tar:
            members = members_check(tar, limits)
    except (tarfile.TarError, OSError) as exc:
        members = Check("tar holds the bag only", False,
                        (f"{path.name} cannot be read as a tar: {printable(str(exc), 300)}",))
    if not members.ok:
        return VerifyExportReport(str(path), [first, members], reload_checked=False)
    with removed_on_signal(), tempfile.TemporaryDirectory(prefix="cockpit-verify-tar-") as tmp:
        try:
            with tarfile.open(path, mode="r:") as tar:
                _extract_data_only(tar, Path(tmp))
        except (tarfile.TarError, OSError) as exc:
            return VerifyExportReport(str(path), [first, members, Check(
                "tar unpacks", False, (f"{path.name} cannot be unpacked safely: "
                                       f"{printable(str(exc), 300)}",))],
                reload_checked=False)
        bag = find_bag(Path(tmp))
        report = verify_export(bag, **options)
    report.checks[0:0] = [first, members]
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
        if not (member.isfile() or member.isdir() or member.islnk()) \
                or member.name.startswith("/") or not where.is_relative_to(root):
            raise tarfile.TarError(f"{member.name}: not a plain file or folder inside the tar")
    tar.extractall(target)  # noqa: S202 - every member was checked above
