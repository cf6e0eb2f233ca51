"""The export writer: the campaign's results as a BagIt bag that reloads (D19, D22-D24).

This module owns ``export_campaign``. What it writes (the *export root*, by default
``<campaign folder>/.cockpit/export/<campaign-id>/``, or ``--out DIR``)::

    <root>/<campaign-id>/          the BagIt bag (RFC 8493): bagit.txt, bag-info.txt,
                                   manifest-sha256.txt, tagmanifest-sha256.txt, data/
    <root>/<campaign-id>.tar       the bag as one file to fetch, and its .sha256
    <root>/FETCH.txt               the exact rsync / scp commands
    <root>/export.json             what this export is (size, tar hash, verification)

Payload (``data/``): the plan file byte for byte and its hash, the journal, per run its
params, raw metric files of every source (TensorBoard event files and their scalars as
JSON lines: ``metric_export``), predictions, expected ids, outputs, stop reason and the
artifact chosen for the result, and once a landing began its resume points
(``resume_points``); ``telemetry/minutes.csv`` (the flight recording's minute
aggregates: ``minutes_export``); ``manifest.json``, ``REPORT.md`` (with its "Landing"
section: ``landing_md``) + ``timeline.svg``, ``RELOAD.md`` + ``reload.json``.

Each file is read once: copied in a stream while hashed, or, for large artifacts on
the same filesystem, hard-linked and hashed (a cache keyed by inode, size and mtime
spares re-reading unchanged artifacts on the next export). The whole root is built
in a hidden temporary sibling and renamed into place; the previous export is moved
aside only at that moment and removed after, so a kill -9 or a full disk never leaves
a complete-looking bad export and never damages the previous one (a previous export
left aside by a kill between the two renames is put back by the next export).

A new export replaces the previous one only when it verifies: an export that is
written but fails verification while the root holds a verified one is renamed beside
it as ``<root>.failed-<time>/`` for inspection (its FETCH.txt says so), and the
verified export stays current. Without a verified export to keep, the failed one
becomes the root as before (there is nothing better to fetch).

The parts it puts together: ``payload`` (files under data/, each run's status),
``hashing`` (copy + sha256 in one read), ``reload_recipe`` (reload.json, RELOAD.md),
``bagit_files`` (tag files, tar, fetch commands) and ``root_swap`` (the atomic rename).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import platform
import secrets
import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import cockpit
from cockpit.campaign.model import Campaign
from cockpit.close.budget import budget
from cockpit.close.conclusion import Conclusion, conclude
from cockpit.close.export_state import export_facts
from cockpit.close.hours_read import read_hours
from cockpit.close.open_facts import open_facts
from cockpit.common.event_kinds import EXPORT_DONE, PLAN_CHANGED
from cockpit.common.fsutil import fsync_dir
from cockpit.common.printable import printable_block
from cockpit.export.bagit_files import fetch_target, fetch_text, write_bag_files, write_tar
from cockpit.export.export_checks import HISTORY_FILE
from cockpit.export.hashing import HashCache
from cockpit.export.hours_md import hours_section
from cockpit.export.landing_md import landing_section
from cockpit.export.minutes_export import MinutesExport, add_minutes
from cockpit.export.payload import FileEntry, Payload
from cockpit.export.provenance_files import (
    add_provenance,
    add_reload_script,
    environment_section,
    rebuild_md,
    reload_table,
)
from cockpit.export.reload_recipe import installed_packages, reload_md
from cockpit.export.report_md import render_report, timeline_svg
from cockpit.export.resume_points import landing_record
from cockpit.export.root_swap import (
    ROOT_FORMAT,
    holds_verified,
    is_export_root,
    keep_failed,
    recover,
    root_info,
    swap_in,
)
from cockpit.export.run_files import RunsExport, add_runs
from cockpit.export.verifier import VerifyExportReport, verify_export
from cockpit.journal.fold import CampaignState, fold
from cockpit.journal.log import Journal, format_time
from cockpit.journal.paths import CampaignFiles
from cockpit.journal.writer import Event, JournalWriter
from cockpit.runs import provenance
from cockpit.runs.checkpoints.reload_check import verify_checkpoint

ARTIFACT_MODES = ("final", "all", "none")
MANIFEST_FORMAT = "cockpit-export/1"

Progress = Callable[[str], None]


class ExportError(Exception):
    """The export could not be written (the message says why); nothing was replaced."""


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
    fetch_notes: list[str] = field(default_factory=list)  # where from, the expected time
    warnings: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    event: Event | None = None
    timings: dict[str, float] = field(default_factory=dict)
    # Set when this export failed verification and was kept beside the verified one,
    # which stays current (its bag folder and tar sha256).
    kept_failed: Path | None = None
    current_bag: Path | None = None
    current_sha256: str | None = None
    # What the export was made from (verdicts, accepted runs, their verified checkpoints,
    # the answer): journaled with it, so a later change shows it stale (issue 41).
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def current(self) -> bool:
        """Whether this export is now the one the export root holds."""
        return self.kept_failed is None

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
        if self.kept_failed is not None:
            lines.append(f"  this export failed verification: kept for inspection in "
                         f"{self.kept_failed}; it did not replace the verified export")
            lines.append(f"  current export (verified): {self.current_bag}"
                         + (f" (tar sha256 {self.current_sha256})" if self.current_sha256
                            else ""))
            return printable_block("\n".join(lines))
        if self.fetch_commands:
            lines.append("  fetch it (from your own machine):")
            lines.extend(f"    # {n}" for n in self.fetch_notes)
            lines.extend(f"    {c}" for c in self.fetch_commands)
        return printable_block("\n".join(lines))


def default_export_root(campaign: Campaign) -> Path:
    return CampaignFiles.of(campaign).export_root(campaign.id)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


# ------------------------------------------------------------------ the export


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
    journal: JournalWriter | bool = True,
    progress: Progress | None = None,
    verifier: Callable[..., Any] = verify_checkpoint,
    history: Sequence[Event] | None = None,
) -> ExportResult:
    """Write the export atomically, verify it (verify-export) and journal ``export_done``.

    ``history``: the events ``state`` was folded from (:mod:`cockpit.journal.read`: this
    machine's and its peers', filtered by ownership); None: this machine's journal.
    ``journal``: the writer ``export_done`` goes through (the engine hands its own);
    True: this campaign's journal; False: nothing is journaled."""
    if artifacts not in ARTIFACT_MODES:
        raise ValueError(f"artifacts must be one of {', '.join(ARTIFACT_MODES)}")
    now = now or datetime.now(timezone.utc)
    step = progress or (lambda _phase: None)
    log: JournalWriter = Journal(CampaignFiles.of(campaign).journal) \
        if isinstance(journal, bool) else journal
    events = list(history) if history is not None else log.events()
    if state is None:
        state = fold(campaign, events, now)
    root = Path(out_dir).resolve() if out_dir is not None else default_export_root(campaign)
    if root.exists() and not is_export_root(root):
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
        recover(root)
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
        if not result.verified and holds_verified(root):
            # Never replace a verified export with one that failed: keep it beside.
            result = _kept_beside(result, keep_failed(tmp_root, root, now), root, campaign)
            step("kept_failed")
        else:
            swap_in(tmp_root, root, step)
    finally:
        os.close(lock_fd)
    if journal is not False:
        extra: dict[str, Any] = {}
        if result.kept_failed is not None:
            extra = {"kept_failed": str(result.kept_failed), "current": str(result.current_bag)}
        result.event = log.append(
            EXPORT_DONE, now=now, path=str(result.bag_dir), root=str(root),
            size=result.size_bytes, tar=str(result.tar_path) if result.tar_path else None,
            tar_size=result.tar_bytes if result.tar_path else None,
            sha256=result.tar_sha256, verified=result.verified, artifacts=artifacts,
            reload_checked=verify_reload,
            failures=list(result.verify.failures) if result.verify else [],
            seconds=result.timings.get("total_s"), facts=result.facts,
            fetch=result.fetch_commands[0] if result.fetch_commands else None, **extra)
    step("done")
    return result


def _kept_beside(result: ExportResult, kept: Path, root: Path,
                 campaign: Campaign) -> ExportResult:
    """The result of an export kept beside the root after failing verification: its
    paths point into ``kept``; its FETCH.txt and export.json say it is not current."""
    info = root_info(root) or {}
    current_bag = root / str(info.get("bag") or campaign.id)
    sha = info.get("tar_sha256") if isinstance(info.get("tar_sha256"), str) else None
    (kept / "FETCH.txt").write_text(
        f"# This export of campaign {campaign.id} FAILED verification and is kept only for "
        f"inspection. The current, verified export is {current_bag}: fetch that one (see "
        f"{root / 'FETCH.txt'}).\n")
    meta = root_info(kept) or {}
    meta.update(current=False, current_export=str(root))
    (kept / "export.json").write_text(json.dumps(meta, indent=2) + "\n")
    fsync_dir(kept)
    result.kept_failed = kept
    result.bag_dir = kept / campaign.id
    result.tar_path = kept / result.tar_path.name if result.tar_path is not None else None
    result.fetch_commands = []
    result.current_bag = current_bag
    result.current_sha256 = sha
    return result


def _build(campaign: Campaign, state: CampaignState, events: list[Event], root: Path,
           tmp_root: Path, artifacts: str, now: datetime, verify_reload: bool, tar: bool,
           link: bool, step: Progress, verifier: Callable[..., Any]) -> ExportResult:
    """The export root in ``tmp_root``: the payload, the bag's tag files, its check, the
    tar and FETCH.txt (the caller renames it into place)."""
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    # The environment (torch / CUDA asked in a subprocess: seconds) while the payload is
    # written; it is needed only once the runs are in.
    probe = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cockpit-env")
    environment_future = probe.submit(provenance.environment)
    probe.shutdown(wait=False)
    bag = tmp_root / campaign.id
    cache = HashCache(CampaignFiles.of(campaign).export_hash_cache)
    excluded = [campaign.state_dir, root, *root.parent.glob(f".{root.name}.*"),
                *root.parent.glob(f"{root.name}.failed-*")]
    payload = Payload(bag, campaign, excluded, cache, link)
    warnings: list[str] = []

    plan = _add_plan_and_journal(payload, campaign, events)
    step("plan_written")
    runs = add_runs(payload, campaign, state, artifacts, warnings, events)
    step("runs_written")
    minutes = add_minutes(payload, campaign, warnings)  # never fails on a bad recording
    timings["payload_s"] = round(time.monotonic() - t0, 4)

    conclusion = _add_reports(payload, campaign, state, events, plan, now, artifacts, runs,
                              environment_future.result(), warnings, step, minutes)
    step("payload_written")

    write_bag_files(bag, payload.files, {**_bag_info(campaign, now, plan.sha256),
                                         "Telemetry-Minutes": minutes.info()})
    fsync_dir(bag)
    step("bag_written")
    size = sum(f.size for f in payload.files.values()) + sum(
        (bag / n).stat().st_size for n in ("bagit.txt", "bag-info.txt", "manifest-sha256.txt",
                                           "tagmanifest-sha256.txt"))

    t1 = time.monotonic()
    # The recipes just written from the campaign file are the trusted ones: the check of
    # the bag we wrote runs the campaign's own verify_command, never one read back.
    report = verify_export(bag, reload=verify_reload, verifier=verifier,
                           campaign_folder=campaign.folder, trusted=runs.reload_entries)
    timings["verify_s"] = round(time.monotonic() - t1, 4)
    step("verified")

    result = _tar_and_fetch(campaign, root, tmp_root, bag, tar, timings, step)
    (tmp_root / "export.json").write_text(json.dumps({
        "format": ROOT_FORMAT, "campaign": campaign.id, "created": format_time(now),
        "bag": campaign.id, "size": size, "files": len(payload.files),
        "tar": result.tar_path.name if result.tar_path else None,
        "tar_size": result.tar_bytes, "tar_sha256": result.tar_sha256,
        "verified": report.ok, "reload_checked": verify_reload, "failures": report.failures,
    }, indent=2) + "\n")
    fsync_dir(tmp_root)
    cache.save()
    step("ready_to_rename")
    timings["total_s"] = round(time.monotonic() - t0, 4)
    result.size_bytes = size
    result.files = len(payload.files)
    result.linked = sum(1 for f in payload.files.values() if f.linked)
    result.verified = report.ok
    result.verify = report
    result.warnings = warnings
    result.skipped = payload.skipped
    result.timings = timings
    result.facts = export_facts(campaign, state, conclusion)
    return result


def _add_reports(payload: Payload, campaign: Campaign, state: CampaignState,
                 events: list[Event], plan: FileEntry, now: datetime, artifacts: str,
                 runs: RunsExport, environment: dict[str, Any], warnings: list[str],
                 step: Progress, minutes: MinutesExport | None = None) -> Conclusion:
    """Provenance, REPORT.md and timeline.svg, the reload recipe (reload.json, RELOAD.md)
    and manifest.json: what is written once the runs are in; the conclusion they state."""
    # The code, the environment and the plan as decided and at the end (D22, D24).
    table = reload_table(campaign, runs.reload_entries, warnings)
    prov = add_provenance(payload, campaign, events, environment, table)
    warnings.extend(prov.environment_warnings)
    reload_script = add_reload_script(payload, campaign, table)
    step("provenance_written")

    money = budget(campaign, state, now)
    verdict = conclude(campaign, state, runs.metric_values)
    svg = timeline_svg(campaign, state, now)
    payload.add_bytes("timeline.svg", svg.encode())
    hours = read_hours(campaign, state, now)  # this machine's (the export's own)
    facts = open_facts(campaign, state, events, now, conclusion=verdict)  # D24's list
    report_text = render_report(campaign, state, now, money, verdict, runs.runs_json,
                                "timeline.svg", events=events, facts=facts) \
        + hours_section(hours) \
        + landing_section(landing_record(events), runs.runs_json) \
        + environment_section(prov, reload_script, table)
    payload.add_bytes("REPORT.md", report_text.encode())
    info = {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(), "packages": installed_packages()}
    payload.add_bytes("reload.json", (json.dumps(
        {"campaign": campaign.id, **info, "artifacts": runs.reload_entries}, indent=2)
        + "\n").encode())
    payload.add_bytes("RELOAD.md", reload_md(campaign, runs.reload_entries, info, rebuild_md(
        campaign, table, prov.environment, prov.local_indexes)).encode())
    manifest = _manifest(campaign, state, events, payload, plan, now, artifacts, runs.runs_json,
                         {"conclusion": verdict.as_json(), "budget": money,
                          "hours": hours.as_json(),
                          "provenance": prov.as_json(), "reload_script": reload_script,
                          "telemetry_minutes": minutes.as_json() if minutes else None},
                         warnings)
    payload.add_bytes("manifest.json", (json.dumps(manifest, indent=2, default=str)
                                        + "\n").encode())
    return verdict


def _add_plan_and_journal(payload: Payload, campaign: Campaign,
                          events: list[Event]) -> FileEntry:
    """The plan byte for byte and its hash (D24: never rewritten), the journal and, with
    several machines, the history the export was made from; the plan's entry."""
    plan = payload.add_file(f"plan/{campaign.path.name}", campaign.path)
    assert plan is not None
    payload.add_bytes(f"plan/{campaign.path.name}.sha256",
                      f"{plan.sha256}  {campaign.path.name}\n".encode())
    # The journal up to its last complete line (it may grow while we copy).
    journal_path = CampaignFiles.of(campaign).journal
    if journal_path.is_file():
        raw = journal_path.read_bytes()
        raw = raw[: raw.rfind(b"\n") + 1]
        if raw:
            payload.add_bytes("journal/journal.jsonl", raw)
    if any("machine" in ev for ev in events):
        # Several machines: the history this export was made from (every machine's
        # events that were folded, a peer's tagged with its machine), beside this one's.
        payload.add_bytes(HISTORY_FILE, b"".join(
            (json.dumps(ev, default=str, ensure_ascii=False) + "\n").encode("utf-8")
            for ev in events))
    return plan


def _manifest(campaign: Campaign, state: CampaignState, events: list[Event],
              payload: Payload, plan: FileEntry, now: datetime, artifacts: str,
              runs_json: dict[str, Any], closing: dict[str, Any],
              warnings: list[str]) -> dict[str, Any]:
    """manifest.json: what the bag holds (``closing``: conclusion, budget, provenance,
    reload script, in that order)."""
    pkg = campaign.package
    return {
        "format": MANIFEST_FORMAT, "cockpit_version": cockpit.__version__,
        "campaign": campaign.id, "question": campaign.question, "created": format_time(now),
        "campaign_folder": str(campaign.folder),
        "plan": {"path": plan.path, "sha256": plan.sha256,
                 "journal_plan_sha256": state.plan_hash, PLAN_CHANGED: state.plan_changed},
        "package": {"offer": pkg.offer.id, "count": pkg.count, "order_ref": pkg.order_ref,
                    "start": pkg.start.isoformat(), "end": pkg.end.isoformat()},
        "journal_events": len(events), "artifacts_mode": artifacts,
        "runs": runs_json,
        **closing,
        "files": [{"path": f.path, "sha256": f.sha256, "size": f.size, "source": f.source,
                   "linked": f.linked} for f in sorted(payload.files.values(),
                                                       key=lambda e: e.path)],
        "skipped": payload.skipped,
        "warnings": warnings,
    }


def _bag_info(campaign: Campaign, now: datetime, plan_sha256: str) -> dict[str, str]:
    """bag-info.txt's fields."""
    pkg = campaign.package
    return {
        "Source-Organization": "cockpit",
        "Bag-Software-Agent": f"cockpit {cockpit.__version__}",
        "Bagging-Date": now.astimezone(timezone.utc).date().isoformat(),
        "Created": format_time(now),
        "External-Identifier": campaign.id,
        "Campaign-Id": campaign.id,
        "Order-Reference": pkg.order_ref or "none",
        "Offer": f"{pkg.count} x {pkg.offer.id} ({pkg.offer.gpu}, {pkg.offer.days:g} days)",
        "Window": f"{pkg.start.isoformat()} / {pkg.end.isoformat()}",
        "Plan-SHA256": plan_sha256,
        "External-Description": campaign.question or campaign.id,
    }


def _tar_and_fetch(campaign: Campaign, root: Path, tmp_root: Path, bag: Path, tar: bool,
                   timings: dict[str, float], step: Progress) -> ExportResult:
    """The tar and its .sha256 (with ``tar``) and FETCH.txt: a result with the paths
    and the fetch commands, the bag's own figures still to fill in."""
    pkg = campaign.package
    tar_path = tar_sha = None
    tar_bytes = 0
    final_tar = root / f"{campaign.id}.tar"
    if tar:
        t2 = time.monotonic()
        tar_sha, tar_bytes = write_tar(bag, tmp_root / final_tar.name, campaign.id)
        (tmp_root / f"{final_tar.name}.sha256").write_text(f"{tar_sha}  {final_tar.name}\n")
        tar_path = final_tar
        timings["tar_s"] = round(time.monotonic() - t2, 4)
        step("tar_written")
    target = fetch_target(campaign.settings)
    notes: list[str] = []
    if tar:
        fetch, notes, commands = fetch_text(campaign.id, pkg.end.isoformat(), final_tar, tar_bytes,
                                     target, campaign.settings.transfer_rate_bytes_s)
    else:
        ssh = f"-e 'ssh -p {target.port}' " if target.port else ""
        commands = [f"rsync -av --partial {ssh}{target.user}@{target.host}:{root / campaign.id} ."]
        fetch = (f"# Bring the export of campaign {campaign.id} home before the window ends "
                 f"({pkg.end.isoformat()}). Run on your own machine:\n" + commands[0] + "\n")
    (tmp_root / "FETCH.txt").write_text(fetch)
    return ExportResult(
        root=root, bag_dir=root / campaign.id, tar_path=tar_path, tar_sha256=tar_sha,
        size_bytes=0, tar_bytes=tar_bytes, files=0, linked=0, verified=False, verify=None,
        fetch_commands=commands, fetch_notes=notes)
