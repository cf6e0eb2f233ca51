"""The export's payload: files written under ``<bag>/data``, and each run's status.

This module owns ``Payload`` (adding bytes, files and folders, each hashed exactly once,
large artifacts hard-linked when they can be; one rule for every source path: symlinks
resolved, it lies in the campaign folder or under ``settings.export_outside``, else it
is skipped and named),
the ``FileEntry`` it records per file, and ``run_status``: the one status every run of
the plan ends up in for the export (accepted, stopped, dropped, ...).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cockpit.campaign.model import Campaign, exportable
from cockpit.common.fsutil import sha256_file as hash_file
from cockpit.export.hashing import HashCache, copy_hashed
from cockpit.journal.fold import FAILED, NOT_STARTED, RUNNING, STOPPED, SUCCEEDED, CampaignState

LINK_MIN_BYTES = 1024 * 1024  # smaller artifacts are copied: a link saves nothing there


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the bag: data/...
    sha256: str
    size: int
    source: str | None = None  # where it came from (relative to the campaign when inside)
    linked: bool = False


def inside(path: str | Path, folder: str | Path) -> bool:
    p, f = os.path.abspath(path), os.path.abspath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


class Payload:
    """Files written under ``<bag>/data``, each hashed exactly once on its way in."""

    def __init__(self, bag: Path, campaign: Campaign, excluded: list[Path], cache: HashCache,
                 link: bool) -> None:
        self.bag = bag
        self.data = bag / "data"
        self.campaign = campaign
        self.root = campaign.folder.resolve()
        self.roots = campaign.export_roots()
        self.excluded = [os.path.abspath(p) for p in excluded]
        self.cache = cache
        self.link = link
        self.files: dict[str, FileEntry] = {}
        self.skipped: list[dict[str, str]] = []
        self.data.mkdir(parents=True)

    # -- naming
    def _target(self, rel: str) -> Path:
        target = self.data / rel
        if f"data/{rel}" in self.files:
            stem, dot, ext = target.name.partition(".")
            n = 2
            while f"data/{Path(rel).parent / f'{stem}-{n}{dot}{ext}'}" in self.files:
                n += 1
            target = target.with_name(f"{stem}-{n}{dot}{ext}")
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def _rel(self, target: Path) -> str:
        return target.relative_to(self.bag).as_posix()

    def source_label(self, src: Path) -> str:
        return os.path.relpath(src, self.campaign.folder) if inside(src, self.campaign.folder) \
            else str(src)

    # -- adding
    def add_bytes(self, rel: str, data: bytes) -> FileEntry:
        target = self._target(rel)
        with open(target, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        entry = FileEntry(self._rel(target), hashlib.sha256(data).hexdigest(), len(data))
        self.files[entry.path] = entry
        return entry

    def add_lines(self, rel: str, lines: Iterable[bytes]) -> FileEntry | None:
        """A file written from ``lines`` as they come (never whole in memory), hashed on
        its way; None, and nothing written, when there is no line."""
        digest = hashlib.sha256()
        size = 0
        target: Path | None = None
        out = None
        try:
            for line in lines:
                if out is None:
                    target = self._target(rel)
                    out = open(target, "wb")  # noqa: SIM115 - closed below, kept open across lines
                out.write(line)
                digest.update(line)
                size += len(line)
            if out is None or target is None:
                return None
            out.flush()
            os.fsync(out.fileno())
        finally:
            if out is not None:
                out.close()
        entry = FileEntry(self._rel(target), digest.hexdigest(), size)
        self.files[entry.path] = entry
        return entry

    def skip(self, src: Path | str, reason: str) -> None:
        self.skipped.append({"source": self.source_label(Path(src)), "reason": reason})

    def allowed(self, path: Path) -> bool:
        """The one rule for every payload path (``Campaign.export_roots``)."""
        return exportable(path, self.roots)

    def safe_source(self, src: Path) -> Path | None:
        """The real path to read, or None (skipped, with the reason) for one outside the
        campaign folder and the ``export_outside`` folders, symlinks resolved."""
        if not os.path.lexists(src):
            return None
        real = src.resolve()
        if not self.allowed(real):
            self.skip(src, self.outside_reason(src, real))
            return None
        return real

    def outside_reason(self, src: Path, real: Path) -> str:
        link = os.path.islink(src) or os.path.normpath(os.path.abspath(src)) != str(real)
        what = f"a symlink pointing outside the campaign ({real})" if link else \
            "outside the campaign folder"
        return f"{what}: not exported (list its folder under settings.export_outside)"

    def add_file(self, rel: str, src: Path, *, artifact: bool = False) -> FileEntry | None:
        real = self.safe_source(src)
        if real is None:
            return None
        st = os.stat(real)
        if not stat.S_ISREG(st.st_mode):
            self.skip(src, "not a regular file")
            return None
        target = self._target(rel)
        linked = False
        digest = None
        if artifact and self.link and st.st_size >= LINK_MIN_BYTES:
            try:
                os.link(real, target)
                linked = True
            except OSError:
                linked = False  # another filesystem, or links refused: copy instead
        if linked:
            digest = self.cache.get(st) or hash_file(real)
            size = st.st_size
        else:
            digest, size = copy_hashed(real, target)
        self.cache.put(os.stat(real), digest)
        entry = FileEntry(self._rel(target), digest, size, self.source_label(src), linked)
        self.files[entry.path] = entry
        return entry

    def add_path(self, rel: str, src: Path, *, artifact: bool = False) -> list[FileEntry]:
        """A file, or a folder walked without following symlinks out of the campaign."""
        if not os.path.lexists(src):
            self.skip(src, "does not exist")
            return []
        real = self.safe_source(src)
        if real is None:
            return []
        if real.is_file():
            entry = self.add_file(rel, src, artifact=artifact)
            return [entry] if entry else []
        if not real.is_dir():
            self.skip(src, "neither a file nor a folder")
            return []
        added: list[FileEntry] = []
        for dirpath, dirnames, filenames in os.walk(real, followlinks=False):
            here = Path(dirpath)
            kept = []
            for name in sorted(dirnames):
                full = here / name
                if self._is_excluded(full):
                    continue
                if full.is_symlink():
                    self.skip(full, "a symlinked folder: not followed")
                    continue
                kept.append(name)
            dirnames[:] = kept
            for name in sorted(filenames):
                full = here / name
                if self._is_excluded(full):
                    continue
                if full.is_symlink():
                    target = full.resolve()
                    if not self.allowed(target):
                        self.skip(full, self.outside_reason(full, target))
                        continue
                inner = (Path(rel) / here.relative_to(real) / name).as_posix()
                entry = self.add_file(inner, full, artifact=artifact)
                if entry:
                    added.append(entry)
        return added

    def _is_excluded(self, path: Path) -> bool:
        p = os.path.abspath(path)
        return any(p == e or p.startswith(e + os.sep) for e in self.excluded)


def run_status(campaign: Campaign, state: CampaignState, run_id: str) -> tuple[str, str]:
    """(status, reason): accepted, rejected, stopped, failed, dropped, skipped, not_run,
    running, no_result, unjudged. Every run in the plan ends up in exactly one."""
    run = state.runs.get(run_id)
    stage = campaign.stage_of_run(run_id)
    st = state.stages.get(stage.id) if stage else None
    if run is None or run.state == NOT_STARTED:
        if st is not None and st.state == "dropped":
            return "dropped", st.reason or "dropped by a decision"
        if st is not None and st.state == "skipped":
            return "skipped", st.reason or "skipped"
        return "not_run", "never started"
    if run.stop is not None or run.state == STOPPED:
        stop = run.stop
        reason = stop.reason if stop and stop.reason else ""
        rule = f" by rule {stop.rule}" if stop and stop.rule != "manual" else ""
        step = f" at step {stop.step}" if stop and stop.step is not None else ""
        return "stopped", (f"stopped{rule}{step}: {reason}" if reason else "")
    if run.state == RUNNING:
        return "running", "still running at the export"
    if run.verdict == "accepted":
        return "accepted", run.verdict_reason or "accepted"
    if run.verdict == "rejected":
        return "rejected", run.verdict_reason or "rejected"
    if run.state == FAILED:
        return "failed", f"exit code {run.exit_code}"
    if run.state == SUCCEEDED:
        spec = campaign.runs.get(run_id)
        if spec is not None and not spec.produces_result:
            return "no_result", "finished; it measures, checks or decides (result: none)"
        return "unjudged", "finished, never accepted or rejected"
    return run.state, ""

