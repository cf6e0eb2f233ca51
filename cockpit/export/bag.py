"""The export writer: the campaign's results as a BagIt bag that reloads (D19, D22-D24).

This module owns ``export_campaign``. What it writes (the *export root*, by default
``<campaign folder>/.cockpit/export/<campaign-id>/``, or ``--out DIR``)::

    <root>/<campaign-id>/          the BagIt bag (RFC 8493): bagit.txt, bag-info.txt,
                                   manifest-sha256.txt, tagmanifest-sha256.txt, data/
    <root>/<campaign-id>.tar       the bag as one file to fetch, and its .sha256
    <root>/FETCH.txt               the exact rsync / scp commands
    <root>/export.json             what this export is (size, tar hash, verification)

Payload (``data/``): the plan file byte for byte and its hash, the journal, per run its
params, raw metric files, predictions, expected ids, outputs, stop reason and the
artifact chosen for the result; ``manifest.json``, ``REPORT.md`` + ``timeline.svg``,
``RELOAD.md`` + ``reload.json``.

Each file is read once: copied in a stream while hashed, or, for large artifacts on
the same filesystem, hard-linked and hashed (a cache keyed by inode, size and mtime
spares re-reading unchanged artifacts on the next export). The whole root is built
in a hidden temporary sibling and renamed into place; the previous export is moved
aside only at that moment and removed after, so a kill -9 or a full disk never leaves
a complete-looking bad export and never damages the previous one (a previous export
left aside by a kill between the two renames is put back by the next export).
"""

from __future__ import annotations

import errno
import fcntl
import getpass
import hashlib
import json
import os
import platform
import secrets
import shutil
import socket
import stat
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import cockpit
from cockpit.acceptance import last_metrics, newest_checkpoint
from cockpit.budget import budget
from cockpit.campaign.model import Campaign, Run
from cockpit.conclusion import conclude, conclusion_spec
from cockpit.export.report_md import render_report, timeline_svg
from cockpit.export.verifier import VerifyExportReport, verify_export
from cockpit.fsutil import fsync_dir
from cockpit.journal import Journal, format_time
from cockpit.runs.checkpoints import CheckpointInfo
from cockpit.runs.reload_check import verify_checkpoint
from cockpit.state import FAILED, NOT_STARTED, RUNNING, STOPPED, SUCCEEDED, CampaignState, fold

ARTIFACT_MODES = ("final", "all", "none")
CHUNK = 8 * 1024 * 1024
LINK_MIN_BYTES = 1024 * 1024  # smaller artifacts are copied: a link saves nothing there
ROOT_FORMAT = "cockpit-export-root/1"
MANIFEST_FORMAT = "cockpit-export/1"
LOADER_PACKAGES = ("torch", "safetensors", "transformers", "peft", "accelerate", "lightning",
                   "numpy")

Progress = Callable[[str], None]


class ExportError(Exception):
    """The export could not be written (the message says why); nothing was replaced."""


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the bag: data/...
    sha256: str
    size: int
    source: str | None = None  # where it came from (relative to the campaign when inside)
    linked: bool = False


@dataclass
class ExportResult:
    root: Path
    bag_dir: Path
    tar_path: Path | None
    tar_sha256: str | None
    size_bytes: int  # the bag: payload + tag files (hard-linked files at their full size)
    tar_bytes: int
    files: int
    linked: int
    verified: bool
    verify: VerifyExportReport | None
    fetch_commands: list[str]
    warnings: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    event: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        lines = [f"export written: {self.bag_dir}",
                 f"  {self.files} files, {_size(self.size_bytes)}"
                 + (f" ({self.linked} hard-linked)" if self.linked else "")]
        if self.tar_path is not None:
            lines.append(f"  tar: {self.tar_path} ({_size(self.tar_bytes)}) "
                         f"sha256 {self.tar_sha256}")
        for skip in self.skipped:
            lines.append(f"  not exported: {skip['source']}: {skip['reason']}")
        for warning in self.warnings:
            lines.append(f"  warning: {warning}")
        if self.verify is not None:
            lines.append(self.verify.render(indent="  "))
        if self.fetch_commands:
            lines.append("  fetch it (from your own machine):")
            lines.extend(f"    {c}" for c in self.fetch_commands)
        return "\n".join(lines)


def default_export_root(campaign: Campaign) -> Path:
    return campaign.state_dir / "export" / campaign.id


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _inside(path: str | Path, folder: str | Path) -> bool:
    p, f = os.path.abspath(path), os.path.abspath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


# ------------------------------------------------------------------ hashing copies


class _HashCache:
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
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.used))
            os.replace(tmp, self.path)
        except OSError:
            pass  # a cache only: the next export hashes again


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as src:
        while True:
            n = src.readinto(buf)
            if not n:
                break
            digest.update(view[:n])
    return digest.hexdigest()


def _copy_hashed(src: Path, dst: Path) -> tuple[str, int]:
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


class _HashingWriter:
    """A write-only file object that hashes what passes through (the tar, in one pass)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.handle.write(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self.handle.flush()


# ------------------------------------------------------------------ the payload


class _Payload:
    """Files written under ``<bag>/data``, each hashed exactly once on its way in."""

    def __init__(self, bag: Path, campaign: Campaign, excluded: list[Path], cache: _HashCache,
                 link: bool) -> None:
        self.bag = bag
        self.data = bag / "data"
        self.campaign = campaign
        self.root = campaign.folder.resolve()
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
        return os.path.relpath(src, self.campaign.folder) if _inside(src, self.campaign.folder) \
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

    def skip(self, src: Path | str, reason: str) -> None:
        self.skipped.append({"source": self.source_label(Path(src)), "reason": reason})

    def safe_source(self, src: Path) -> Path | None:
        """The real path to read, or None (skipped) for a symlink out of the campaign."""
        if not os.path.lexists(src):
            return None
        real = src.resolve()
        if _inside(src, self.campaign.folder) and not _inside(real, self.root):
            self.skip(src, f"a symlink pointing outside the campaign ({real}): not followed")
            return None
        return real

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
            digest = self.cache.get(st) or _hash_file(real)
            size = st.st_size
        else:
            digest, size = _copy_hashed(real, target)
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
                    if not (_inside(target, self.root) or _inside(target, real)):
                        self.skip(full, f"a symlink pointing outside the campaign ({target}): "
                                        "not followed")
                        continue
                inner = (Path(rel) / here.relative_to(real) / name).as_posix()
                entry = self.add_file(inner, full, artifact=artifact)
                if entry:
                    added.append(entry)
        return added

    def _is_excluded(self, path: Path) -> bool:
        p = os.path.abspath(path)
        return any(p == e or p.startswith(e + os.sep) for e in self.excluded)


# ------------------------------------------------------------------ run accounting


def run_status(campaign: Campaign, state: CampaignState, run_id: str) -> tuple[str, str]:
    """(status, reason): accepted, rejected, stopped, failed, dropped, skipped, not_run,
    running, unjudged. Every run in the plan ends up in exactly one."""
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
        return "unjudged", "finished, never accepted or rejected"
    return run.state, ""


# ------------------------------------------------------------------ reload recipes


def _packages() -> dict[str, str]:
    found = {"cockpit": cockpit.__version__}
    for name in LOADER_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _layout(path: Path, files: list[str]) -> tuple[str, str]:
    """(loader, python snippet) for an artifact at bag-relative ``path``."""
    name = path.name.lower()
    if name.endswith(".safetensors"):
        return ("safetensors.torch.load_file",
                f"from safetensors.torch import load_file; sd = load_file({str(path)!r})")
    if name.endswith((".pt", ".pth", ".ckpt", ".bin")):
        return ("torch.load",
                f"import torch; ckpt = torch.load({str(path)!r}, map_location='cpu', "
                "weights_only=True)")
    inner = {Path(f).name for f in files}
    if "adapter_config.json" in inner:
        return ("peft.PeftModel.from_pretrained", "")
    if "config.json" in inner:
        return ("transformers.AutoModel.from_pretrained",
                f"from transformers import AutoModel; m = AutoModel.from_pretrained("
                f"{str(path)!r})")
    return ("cockpit.runs.reload_worker", "")


def _adapter_pin(run: Run, artifact: Path) -> tuple[str | None, str | None, list[str]]:
    """Base model id and exact revision for an adapter (D23): the campaign's, checked
    against the adapter's own adapter_config.json."""
    warnings: list[str] = []
    base, rev = run.base_model, run.base_revision
    config = artifact / "adapter_config.json" if artifact.is_dir() else None
    if config is not None and config.is_file():
        try:
            data = json.loads(config.read_text())
        except (OSError, ValueError):
            data = {}
        named = data.get("base_model_name_or_path")
        if base is None and isinstance(named, str):
            base = named
        elif isinstance(named, str) and base is not None and named != base:
            warnings.append(f"run {run.id}: adapter_config.json names base {named!r}, the "
                            f"campaign {base!r}")
        if rev is None and isinstance(data.get("revision"), str):
            rev = data["revision"]
    return base, rev, warnings


def _reload_entry(run: Run, art: CheckpointInfo, rel: str, files: list[FileEntry],
                  result: bool, warnings: list[str]) -> dict[str, Any]:
    rel_path = Path(rel)
    loader, snippet = _layout(rel_path, [f.path for f in files])
    check = (f"python -m cockpit.runs.reload_worker {rel} --kind {run.kind}"
             + (" --allow-unsafe" if run.allow_unsafe_pickle else ""))
    entry: dict[str, Any] = {
        "run": run.id, "result": run.result_id, "kind": run.kind, "path": rel,
        "chosen_for_result": result, "step": art.step, "layout": art.kind, "loader": loader,
        "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in files],
        "allow_unsafe_pickle": run.allow_unsafe_pickle,
        "verify_command": list(run.verify_command) if run.verify_command else None,
    }
    if run.kind == "adapter":
        base, rev, notes = _adapter_pin(run, art.path)
        warnings.extend(notes)
        entry["base_model"], entry["base_revision"] = base, rev
        check += f" --base-model {base} --base-revision {rev}"
        snippet = (f"from transformers import AutoModel; from peft import PeftModel; "
                   f"base = AutoModel.from_pretrained({base!r}, revision={rev!r}); "
                   f"m = PeftModel.from_pretrained(base, {rel!r})")
    entry["command"] = f"cd BAG && python -c \"{snippet}\"" if snippet else None
    entry["check_command"] = f"cd BAG && {check}"
    return entry


def _reload_md(campaign: Campaign, entries: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [f"# Reloading the results of campaign {campaign.id}", "",
             "Run these from the bag's folder (`cd BAG`, the folder holding `bagit.txt`).",
             f"Exported with Python {info['python']} and: "
             + ", ".join(f"{k} {v}" for k, v in info["packages"].items()), ""]
    chosen = [e for e in entries if e["chosen_for_result"]]
    if not chosen:
        lines.append("No accepted artifact is in this export.")
    for e in chosen:
        lines += [f"## Run {e['run']} (result {e['result']}, {e['kind']})", "",
                  f"- artifact: `{e['path']}` (layout {e['layout']}, step {e['step']})",
                  f"- loader: `{e['loader']}`"]
        if e["kind"] == "adapter":
            lines.append(f"- base model: `{e.get('base_model')}` at revision "
                         f"`{e.get('base_revision')}` (pinned, D23)")
        lines.append("")
        if e["command"]:
            lines += ["```sh", e["command"], "```", ""]
        lines += ["Check that it reloads in a fresh process (what verify-export does):", "",
                  "```sh", e["check_command"], "```", ""]
    others = [e for e in entries if not e["chosen_for_result"]]
    if others:
        lines += ["## Other checkpoints in this export", ""]
        lines += [f"- `{e['path']}` (run {e['run']}, step {e['step']})" for e in others]
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------ bag files


def _encode(path: str) -> str:
    return path.replace("\r", "%0D").replace("\n", "%0A")


def _write_tag(bag: Path, name: str, text: str) -> str:
    data = text.encode("utf-8")
    with open(bag / name, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    return hashlib.sha256(data).hexdigest()


def _write_bag_files(bag: Path, files: dict[str, FileEntry], info: dict[str, str]) -> None:
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


def _write_tar(bag: Path, tar_path: Path, arcname: str) -> tuple[str, int]:
    with open(tar_path, "wb") as raw:
        writer = _HashingWriter(raw)
        with tarfile.open(fileobj=writer, mode="w", format=tarfile.PAX_FORMAT,  # type: ignore[call-overload]
                          copybufsize=CHUNK) as tar:
            tar.add(bag, arcname=arcname, recursive=True)
        raw.flush()
        os.fsync(raw.fileno())
    return writer.digest.hexdigest(), writer.size


# ------------------------------------------------------------------ the root swap


def _is_export_root(path: Path) -> bool:
    if not path.is_dir():
        return False
    if not any(path.iterdir()):
        return True
    try:
        return json.loads((path / "export.json").read_text()).get("format") == ROOT_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def _recover(root: Path) -> None:
    """Under the export lock: put back a previous export that a kill left aside, and
    remove the leftovers of interrupted exports (never the current root)."""
    parent, name = root.parent, root.name
    olds = sorted(parent.glob(f".{name}.old-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    if not root.exists() and olds and _is_export_root(olds[0]):
        os.rename(olds[0], root)
        olds = olds[1:]
    for leftover in [*olds, *parent.glob(f".{name}.tmp-*")]:
        shutil.rmtree(leftover, ignore_errors=True)


def _swap_in(tmp_root: Path, root: Path, progress: Progress) -> None:
    old = None
    if root.exists():
        old = root.with_name(f".{root.name}.old-{os.getpid()}-{secrets.token_hex(4)}")
        os.rename(root, old)
        progress("old_moved_aside")
    os.rename(tmp_root, root)
    fsync_dir(root.parent)
    progress("renamed")
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# ------------------------------------------------------------------ the export


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


def export_campaign(
    campaign: Campaign,
    state: CampaignState | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    artifacts: str = "final",
    now: datetime | None = None,
    verify_reload: bool = True,
    *,
    tar: bool = True,
    link: bool = True,
    journal: bool = True,
    progress: Progress | None = None,
    verifier: Callable[..., Any] = verify_checkpoint,
) -> ExportResult:
    """Write the export atomically, verify it (verify-export) and journal ``export_done``."""
    if artifacts not in ARTIFACT_MODES:
        raise ValueError(f"artifacts must be one of {', '.join(ARTIFACT_MODES)}")
    now = now or datetime.now(timezone.utc)
    step = progress or (lambda _phase: None)
    log = Journal(campaign.state_dir / "journal.jsonl")
    events = log.events()
    if state is None:
        state = fold(campaign, events, now)
    root = Path(out_dir).resolve() if out_dir is not None else default_export_root(campaign)
    if root.exists() and not _is_export_root(root):
        raise ExportError(f"{root} exists and is not a cockpit export: refusing to replace it "
                          "(choose another --out)")
    root.parent.mkdir(parents=True, exist_ok=True)
    lock_path = root.parent / f".{root.name}.lock"
    lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ExportError(f"another export into {root} is running") from None
        _recover(root)
        tmp_root = root.with_name(f".{root.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
        tmp_root.mkdir()
        try:
            result = _build(campaign, state, events, root, tmp_root, artifacts, now,
                            verify_reload, tar, link, step, verifier)
        except BaseException as exc:
            shutil.rmtree(tmp_root, ignore_errors=True)
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                raise ExportError(f"no space left while writing the export into {root.parent}: "
                                  "nothing was replaced; free some space and export again") \
                    from None
            raise
        _swap_in(tmp_root, root, step)
    finally:
        os.close(lock_fd)
    if journal:
        result.event = log.append(
            "export_done", now=now, path=str(result.bag_dir), root=str(root),
            size=result.size_bytes, tar=str(result.tar_path) if result.tar_path else None,
            sha256=result.tar_sha256, verified=result.verified, artifacts=artifacts,
            reload_checked=verify_reload,
            failures=list(result.verify.failures) if result.verify else [])
    step("done")
    return result


def _build(campaign: Campaign, state: CampaignState, events: list[dict[str, Any]], root: Path,
           tmp_root: Path, artifacts: str, now: datetime, verify_reload: bool, tar: bool,
           link: bool, step: Progress, verifier: Callable[..., Any]) -> ExportResult:
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    bag = tmp_root / campaign.id
    cache = _HashCache(campaign.state_dir / "export-hash-cache.json")
    excluded = [campaign.state_dir, root, *root.parent.glob(f".{root.name}.*")]
    payload = _Payload(bag, campaign, excluded, cache, link)
    warnings: list[str] = []

    # The plan, byte for byte, and its hash (D24: never rewritten).
    plan = payload.add_file(f"plan/{campaign.path.name}", campaign.path)
    assert plan is not None
    payload.add_bytes(f"plan/{campaign.path.name}.sha256",
                      f"{plan.sha256}  {campaign.path.name}\n".encode())
    # The journal up to its last complete line (it may grow while we copy).
    journal_path = campaign.state_dir / "journal.jsonl"
    if journal_path.is_file():
        raw = journal_path.read_bytes()
        raw = raw[: raw.rfind(b"\n") + 1]
        if raw:
            payload.add_bytes("journal/journal.jsonl", raw)
    step("plan_written")

    runs_json: dict[str, Any] = {}
    reload_entries: list[dict[str, Any]] = []
    metric_values: dict[str, float] = {}
    spec_c = conclusion_spec(campaign)
    for run_id, run in campaign.runs.items():
        status, reason = run_status(campaign, state, run_id)
        rs = state.runs.get(run_id)
        base = f"runs/{run_id}"
        files: dict[str, Any] = {"metrics": [], "outputs": [], "artifacts": []}
        if run.params_file is not None:
            entry = payload.add_file(f"{base}/params/{run.params_file.name}",
                                     campaign.resolve(run.params_file))
            files["params"] = entry.path if entry else None
            if entry is None:
                payload.skip(campaign.resolve(run.params_file), "params file missing")
        elif run.params:
            text = json.dumps(run.params, indent=2, sort_keys=True, default=str) + "\n"
            files["params"] = payload.add_bytes(f"{base}/params.json", text.encode()).path
        for metric_path in _existing_metric_files(campaign, run_id):
            entry = payload.add_file(f"{base}/metrics/{metric_path.name}", metric_path)
            if entry:
                files["metrics"].append(entry.path)
        if run.predictions is not None:
            found = payload.add_path(f"{base}/predictions/{run.predictions.name}",
                                     campaign.resolve(run.predictions))
            files["predictions"] = found[0].path if len(found) == 1 else [f.path for f in found]
        if run.expected_ids is not None:
            found = payload.add_path(f"{base}/expected_ids/{run.expected_ids.name}",
                                     campaign.resolve(run.expected_ids))
            files["expected_ids"] = found[0].path if found else None
        for out in run.outputs:
            name = out.name or "outputs"
            files["outputs"] += [f.path for f in payload.add_path(f"{base}/outputs/{name}",
                                                                  campaign.resolve(out))]
        if status == "stopped" and rs is not None and rs.stop is not None:
            stop = rs.stop
            stop_data = {"run": run_id, "rule": stop.rule, "reason": stop.reason,
                         "step": stop.step, "value": stop.value,
                         "at": stop.at.isoformat() if stop.at else None}
            payload.add_bytes(f"{base}/stop.json",
                              (json.dumps(stop_data, indent=2, default=str) + "\n").encode())
            payload.add_bytes(f"{base}/STOP_REASON.txt", f"{reason}\n".encode())
            files["stop"] = f"data/{base}/stop.json"
        # The artifact chosen for the result (newest complete), or every one with "all".
        chosen: list[CheckpointInfo] = []
        if artifacts != "none" and run.checkpoints is not None and rs is not None \
                and rs.state != NOT_STARTED:
            ended = rs.state != RUNNING
            if artifacts == "all":
                chosen = newest_checkpoint(campaign, run_id, ended=ended, all_complete=True)
            elif status == "accepted":
                chosen = newest_checkpoint(campaign, run_id, ended=ended)
        for i, art in enumerate(chosen):
            added = payload.add_path(f"{base}/artifacts/{art.path.name}", art.path, artifact=True)
            if not added:
                continue
            rel = added[0].path if art.path.is_file() else \
                f"data/{base}/artifacts/{art.path.name}"
            files["artifacts"].append(rel)
            reload_entries.append(_reload_entry(run, art, rel, added,
                                                status == "accepted" and i == 0, warnings))
        if status == "accepted" and run.checkpoints is not None and artifacts != "none" \
                and not chosen:
            warnings.append(f"run {run_id} is accepted but has no complete checkpoint to export")
        values = last_metrics(campaign, state, run_id, [spec_c.metric]) \
            if spec_c is not None else {}
        if spec_c is not None and spec_c.metric in values:
            metric_values[run_id] = values[spec_c.metric]
        runs_json[run_id] = {
            "status": status, "reason": reason, "kind": run.kind, "result": run.result_id,
            "state": rs.state if rs else NOT_STARTED,
            "stage": rs.stage if rs and rs.stage else
            (campaign.stage_of_run(run_id).id if campaign.stage_of_run(run_id) else None),
            "verdict": rs.verdict if rs else None,
            "verdict_reason": rs.verdict_reason if rs else None,
            "base_model": run.base_model, "base_revision": run.base_revision,
            "files": files,
        }
    step("runs_written")
    timings["payload_s"] = round(time.monotonic() - t0, 4)

    money = budget(campaign, state, now)
    verdict = conclude(campaign, state, metric_values)
    svg = timeline_svg(campaign, state, now)
    payload.add_bytes("timeline.svg", svg.encode())
    payload.add_bytes("REPORT.md", render_report(campaign, state, now, money, verdict,
                                                 runs_json, "timeline.svg").encode())
    info = {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(), "packages": _packages()}
    payload.add_bytes("reload.json", (json.dumps(
        {"campaign": campaign.id, **info, "artifacts": reload_entries}, indent=2) + "\n").encode())
    payload.add_bytes("RELOAD.md", _reload_md(campaign, reload_entries, info).encode())
    pkg = campaign.package
    manifest = {
        "format": MANIFEST_FORMAT, "cockpit_version": cockpit.__version__,
        "campaign": campaign.id, "question": campaign.question, "created": format_time(now),
        "campaign_folder": str(campaign.folder),
        "plan": {"path": plan.path, "sha256": plan.sha256,
                 "journal_plan_sha256": state.plan_hash, "plan_changed": state.plan_changed},
        "package": {"offer": pkg.offer.id, "count": pkg.count, "order_ref": pkg.order_ref,
                    "start": pkg.start.isoformat(), "end": pkg.end.isoformat()},
        "journal_events": len(events), "artifacts_mode": artifacts,
        "runs": runs_json,
        "conclusion": verdict.as_json(),
        "budget": money,
        "files": [{"path": f.path, "sha256": f.sha256, "size": f.size, "source": f.source,
                   "linked": f.linked} for f in sorted(payload.files.values(),
                                                       key=lambda e: e.path)],
        "skipped": payload.skipped,
        "warnings": warnings,
    }
    payload.add_bytes("manifest.json", (json.dumps(manifest, indent=2, default=str)
                                        + "\n").encode())
    step("payload_written")

    bag_info = {
        "Source-Organization": "cockpit",
        "Bag-Software-Agent": f"cockpit {cockpit.__version__}",
        "Bagging-Date": now.astimezone(timezone.utc).date().isoformat(),
        "Created": format_time(now),
        "External-Identifier": campaign.id,
        "Campaign-Id": campaign.id,
        "Order-Reference": pkg.order_ref or "none",
        "Offer": f"{pkg.count} x {pkg.offer.id} ({pkg.offer.gpu}, {pkg.offer.days:g} days)",
        "Window": f"{pkg.start.isoformat()} / {pkg.end.isoformat()}",
        "Plan-SHA256": plan.sha256,
        "External-Description": campaign.question or campaign.id,
    }
    _write_bag_files(bag, payload.files, bag_info)
    fsync_dir(bag)
    step("bag_written")
    size = sum(f.size for f in payload.files.values()) + sum(
        (bag / n).stat().st_size for n in ("bagit.txt", "bag-info.txt", "manifest-sha256.txt",
                                           "tagmanifest-sha256.txt"))

    t1 = time.monotonic()
    report = verify_export(bag, reload=verify_reload, verifier=verifier,
                           campaign_folder=campaign.folder)
    timings["verify_s"] = round(time.monotonic() - t1, 4)
    step("verified")

    tar_path = tar_sha = None
    tar_bytes = 0
    final_tar = root / f"{campaign.id}.tar"
    if tar:
        t2 = time.monotonic()
        tar_sha, tar_bytes = _write_tar(bag, tmp_root / final_tar.name, campaign.id)
        (tmp_root / f"{final_tar.name}.sha256").write_text(f"{tar_sha}  {final_tar.name}\n")
        tar_path = final_tar
        timings["tar_s"] = round(time.monotonic() - t2, 4)
        step("tar_written")
    commands = fetch_commands(final_tar) if tar else [
        f"rsync -av --partial {getpass.getuser()}@{socket.gethostname()}:{root / campaign.id} ."]
    (tmp_root / "FETCH.txt").write_text(
        f"# Bring the export of campaign {campaign.id} home before the window ends "
        f"({pkg.end.isoformat()}). Run on your own machine:\n" + "\n".join(commands) + "\n")
    (tmp_root / "export.json").write_text(json.dumps({
        "format": ROOT_FORMAT, "campaign": campaign.id, "created": format_time(now),
        "bag": campaign.id, "size": size, "files": len(payload.files),
        "tar": final_tar.name if tar else None, "tar_size": tar_bytes, "tar_sha256": tar_sha,
        "verified": report.ok, "reload_checked": verify_reload, "failures": report.failures,
    }, indent=2) + "\n")
    fsync_dir(tmp_root)
    cache.save()
    step("ready_to_rename")
    timings["total_s"] = round(time.monotonic() - t0, 4)
    return ExportResult(
        root=root, bag_dir=root / campaign.id, tar_path=tar_path, tar_sha256=tar_sha,
        size_bytes=size, tar_bytes=tar_bytes, files=len(payload.files),
        linked=sum(1 for f in payload.files.values() if f.linked), verified=report.ok,
        verify=report, fetch_commands=commands, warnings=warnings, skipped=payload.skipped,
        timings=timings)


def _existing_metric_files(campaign: Campaign, run_id: str) -> list[Path]:
    from cockpit.acceptance import metric_paths

    found: list[Path] = []
    for path in metric_paths(campaign, run_id):
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += sorted(p for p in path.rglob("trainer_state.json") if p.is_file())
    return found

