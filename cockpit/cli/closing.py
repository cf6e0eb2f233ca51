"""The closing phase's commands: ``budget``, ``export`` and ``verify-export``.

This module owns their argument parsing (``add_close_commands(sub)``, called last by
:func:`cockpit.cli.parser.build_parser`) and handlers.
Each handler takes the argparse namespace and returns an exit code; bad input raises
:class:`cockpit.common.errors.InputError` (the CLI prints it and exits 2). ``budget`` only
reads: it never creates or writes anything. ``export`` writes under the campaign's
``.cockpit/export/`` (or ``--out``) and journals ``export_done``; it exits 0 when the
export verified, 1 when it was written but a check failed (a failed export never
replaces a verified one: it is kept beside it, and the command says which is current).
``budget``, ``export`` (REPORT.md, the bag's journal and history) and ``next`` read the
campaign's history through :func:`cockpit.journal.read.read_history`, the read path of
``status``, as this cockpit's machine (``--machine``): this machine's journal and its
peers' copies (:func:`peer_events`: pulled once, as ``status`` does; the copies under
``.cockpit/peers/`` are the only files a read writes), merged, filtered by ownership,
folded; an event not folded is named on stderr.
``verify-export`` exits 0 only when every check passes. A bag is data: ``verify-export``
runs no command and allows no unsafe unpickling that the bag asks for unless
``--trust-commands`` is given; ``--rebuild`` (which runs the bag's code) says so on
stderr before anything runs; ``--fresh-venv`` (with ``--rebuild`` only) rebuilds in a new
virtual environment holding the bag's ``requirements.txt``. A tar is checked against the limits of
:class:`cockpit.export.tar_limits.TarLimits` (``--max-members``, ``--max-total-gib``,
``--max-file-gib``). SIGTERM/SIGINT end it with 128 + the signal, its temporary folders
removed.
"""

from __future__ import annotations

import argparse
import errno
import json
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cockpit.cli.common import machine_of, number_between
from cockpit.common.errors import InputError
from cockpit.common.event_kinds import CHECKPOINT_VERIFIED
from cockpit.common.printable import printable, printable_block
from cockpit.journal.merge import Events

if TYPE_CHECKING:
    from cockpit.campaign.model import Campaign
    from cockpit.journal.read import History


def add_close_commands(sub: Any) -> None:
    p = sub.add_parser("budget", help="package committed, other costs, accepted results "
                                      "(reads only)")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(handler=cmd_budget)

    p = sub.add_parser("export", help="write the results as a verified BagIt bag + tar (D19)")
    p.add_argument("file")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="export root (default: .cockpit/export/<campaign-id>/ beside the file)")
    p.add_argument("--artifacts", choices=["final", "all", "none"], default="final",
                   help="final: the newest complete checkpoint of each accepted run (default); "
                        "all: every complete checkpoint; none: no checkpoint")
    p.add_argument("--no-reload", action="store_true",
                   help="skip reloading the artifacts in a fresh process")
    p.add_argument("--no-tar", action="store_true", help="do not write the .tar")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser("verify-export", help="check an export (its folder, or the fetched .tar "
                                             "beside its .sha256): hashes, runs, ids, paths, "
                                             "reloads")
    p.add_argument("dir", help="the bag, the export root, or the .tar itself")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--no-reload", action="store_true",
                   help="skip reloading the artifacts in a fresh process")
    p.add_argument("--trust-commands", action="store_true",
                   help="run the custom reload commands and allow the unsafe unpickling that "
                        "the bag's reload.json asks for (a bag is data: never by default)")
    p.add_argument("--rebuild", action="store_true",
                   help="run the bag's reload.py in a fresh process for each accepted run with "
                        "a model: rebuilt from the bag's code, checkpoint loaded strictly. This "
                        "runs the bag's code on this machine as you (minimal environment, "
                        "HOME in a temporary folder, its process group killed at the end; "
                        "not a sandbox): never by default")
    p.add_argument("--rebuild-timeout", type=float, default=300.0, metavar="SECONDS",
                   help="time limit of each rebuild (default 300)")
    p.add_argument("--fresh-venv", action="store_true",
                   help="with --rebuild: rebuild in a new virtual environment (a temporary "
                        "folder) where pip installed the bag's requirements.txt, not with "
                        "this machine's packages")
    p.add_argument("--pip-extra-index", action="append", default=[], metavar="URL",
                   help="with --fresh-venv: an index pip may also use (the one that serves a "
                        "local build, e.g. https://download.pytorch.org/whl/cpu for "
                        "torch ...+cpu); repeatable")
    p.add_argument("--install-timeout", type=number_between(float, 1, 1e6, "a number"),
                   default=None, metavar="SECONDS",
                   help="with --fresh-venv: time limit of the venv and pip install "
                        "(default 1800)")
    from cockpit.export.tar_limits import DEFAULT_LIMITS, GIB

    p.add_argument("--max-members", type=number_between(int, 0, 1e9, "a whole number"),
                   default=DEFAULT_LIMITS.max_members,
                   metavar="N", help="a tar: at most N members "
                                     f"(default {DEFAULT_LIMITS.max_members:,})")
    p.add_argument("--max-total-gib", type=number_between(float, 0, 1e9, "a number"),
                   default=DEFAULT_LIMITS.max_total_bytes / GIB, metavar="GIB",
                   help="a tar: at most this many GiB declared in all (default "
                        f"{DEFAULT_LIMITS.max_total_bytes // GIB})")
    p.add_argument("--max-file-gib", type=number_between(float, 0, 1e9, "a number"),
                   default=DEFAULT_LIMITS.max_file_bytes / GIB, metavar="GIB",
                   help="a tar: at most this many GiB for one file (default "
                        f"{DEFAULT_LIMITS.max_file_bytes // GIB})")
    p.set_defaults(handler=cmd_verify_export)

    p = sub.add_parser("next", help="a calibrated copy of the plan for the next campaign")
    p.add_argument("file")
    p.add_argument("--out", default=None, metavar="NEW.yaml",
                   help="where to write it (default: FILE's name with .next.yaml, beside it)")
    p.set_defaults(handler=cmd_next)


def _load(args: argparse.Namespace, *, as_decided: bool = False) -> History:
    """The campaign's history as this machine reads it: its journal and its peers'
    copies, merged and filtered by ownership — the same read path as ``status``."""
    from cockpit.campaign import load_campaign
    from cockpit.journal.read import read_history

    campaign = load_campaign(args.file)
    machine = machine_of(args)
    history = read_history(campaign, machine, peer_events(campaign, machine),
                           as_decided=as_decided)
    for warning in history.warnings:
        print(f"cockpit: warning: {printable(warning)}", file=sys.stderr)
    return history


def peer_events(campaign: Campaign, machine: int) -> Sequence[Events]:
    """The other machines' events from their copies under ``.cockpit/peers/`` (the only
    files a read writes), each pulled once first within a time limit (an unreachable
    one is read from its copy)."""
    if not campaign.machines or not set(campaign.machines) - {machine}:
        return []
    from cockpit.fleet.peers import PeerSet

    peers = PeerSet(campaign, machine)
    try:
        peers.pull_now()
        return peers.events()
    finally:
        peers.close()


def cmd_budget(args: argparse.Namespace) -> int:
    from cockpit.close.budget import budget, render_budget
    from cockpit.close.conclusion import conclude_now

    history = _load(args)
    campaign, state = history.campaign, history.state
    now = datetime.now(timezone.utc)
    data = budget(campaign, state, now)
    if campaign.conclusion is not None:
        # D21: for a research decision, the conclusion reached rather than a unit price.
        data["conclusion"] = conclude_now(campaign, state).text
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(render_budget(data))
        if data.get("conclusion"):
            print(printable(f"  conclusion: {data['conclusion']}", 2000))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from cockpit.export import ExportError, export_campaign

    history = _load(args)
    if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError(f"export --out {args.out}: not a folder")
    try:
        result = export_campaign(history.campaign, history.state, out_dir=args.out,
                                 artifacts=args.artifacts, verify_reload=not args.no_reload,
                                 tar=not args.no_tar, history=history.events)
    except ExportError as exc:
        print(printable_block(f"cockpit export: {exc}"), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({
            "bag": str(result.bag_dir), "root": str(result.root), "size": result.size_bytes,
            "files": result.files, "linked": result.linked,
            "tar": str(result.tar_path) if result.tar_path else None,
            "tar_size": result.tar_bytes, "sha256": result.tar_sha256,
            "verified": result.verified, "fetch": result.fetch_commands,
            "verify": result.verify.to_dict() if result.verify else None,
            "skipped": result.skipped, "warnings": result.warnings,
            "timings": result.timings, "current": result.current,
            "kept_failed": str(result.kept_failed) if result.kept_failed else None,
            "current_bag": str(result.current_bag or result.bag_dir)}, indent=2))
    else:
        print(result.summary())
    return 0 if result.verified else 1


def cmd_verify_export(args: argparse.Namespace) -> int:
    from cockpit.export.rebuild_check import NOTICE
    from cockpit.export.tar_limits import GIB, TarLimits
    from cockpit.export.tar_verify import Interrupted, removed_on_signal

    check_fresh_venv(args)
    if args.rebuild:
        # Said before anything runs, on stderr so --json stays one object.
        print(f"cockpit verify-export: {NOTICE}", file=sys.stderr)
    try:
        with removed_on_signal():
            return _verify_export(args, TarLimits(
                max_members=args.max_members,
                max_total_bytes=int(args.max_total_gib * GIB),
                max_file_bytes=int(args.max_file_gib * GIB)))
    except Interrupted as stop:
        print(f"cockpit verify-export: interrupted by signal {stop.signum}; its temporary "
              "folders were removed", file=sys.stderr)
        return 128 + stop.signum


def check_fresh_venv(args: argparse.Namespace) -> None:
    """--fresh-venv goes with --rebuild, its options with --fresh-venv; an extra index is
    an http(s) or file URL."""
    if (args.pip_extra_index or args.install_timeout is not None) and not args.fresh_venv:
        raise InputError("verify-export: --pip-extra-index and --install-timeout go with "
                         "--fresh-venv")
    if args.fresh_venv and not args.rebuild:
        raise InputError("verify-export --fresh-venv: add --rebuild (the fresh virtual "
                         "environment is where the rebuild runs)")
    for url in args.pip_extra_index:
        if not url.startswith(("https://", "http://", "file://")) or any(
                c.isspace() for c in url):
            raise InputError(f"verify-export --pip-extra-index {printable(url, 200)}: not an "
                             "http(s):// or file:// URL")


def _verify_export(args: argparse.Namespace, limits: Any) -> int:
    from cockpit.export import verify_export
    from cockpit.export.fresh_venv import INSTALL_TIMEOUT_S, VenvOptions

    folder = Path(args.dir)
    venv = VenvOptions(tuple(args.pip_extra_index), args.install_timeout or INSTALL_TIMEOUT_S)
    options: dict[str, Any] = {"reload": not args.no_reload,
                               "trust_commands": args.trust_commands,
                               "rebuild": args.rebuild,
                               "rebuild_timeout_s": args.rebuild_timeout,
                               "fresh_venv": venv if args.fresh_venv else None}
    if folder.is_file() and folder.name.endswith(".tar"):
        from cockpit.export.tar_verify import verify_tar

        report = verify_tar(folder, limits, **options)
        print(json.dumps(report.to_dict(), indent=2) if args.json else report.render())
        return report.exit_code
    if not folder.is_dir():
        raise InputError(f"verify-export: {args.dir}: no such folder")
    # The bag itself, or the export root holding it (the bag is the one subfolder).
    bags = [folder] if (folder / "bagit.txt").exists() else \
        [p for p in folder.iterdir() if p.is_dir() and (p / "bagit.txt").exists()]
    if not bags:
        raise InputError(f"verify-export: {args.dir}: not an export (no bagit.txt in it or "
                         "in a folder inside it)")
    report = verify_export(folder, **options)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.render())
    return report.exit_code


def cmd_next(args: argparse.Namespace) -> int:
    from statistics import median

    from cockpit.close.open_facts import checkpoint_scans, open_facts
    from cockpit.planning.calibrate import MeasuredCosts, calibrate

    if args.out is not None and Path(args.out).exists():
        raise InputError(f"next: {args.out} exists; give --out a new file (nothing was "
                         "written)")
    now = datetime.now(timezone.utc)
    history = _load(args, as_decided=True)  # every machine's measured durations
    decided, state, events = history.campaign, history.state, history.events
    out = Path(args.out) if args.out else decided.path.with_name(decided.path.stem
                                                                 + ".next.yaml")
    if out.exists():
        raise InputError(f"next: {out} exists; give --out a new file (nothing was written)")
    scans = checkpoint_scans(decided, now)
    save = {run_id: float(median(c.seconds for c in scan.save_costs))
            for run_id, scan in scans.items() if scan.save_costs}
    restore: dict[str, list[float]] = {}
    for ev in events:
        load = ev.get("load_seconds")
        if ev.get("kind") == CHECKPOINT_VERIFIED and ev.get("ok") and \
                isinstance(load, (int, float)) and isinstance(ev.get("run"), str):
            restore.setdefault(str(ev["run"]), []).append(float(load))
    costs = MeasuredCosts(save, {run: float(median(v)) for run, v in restore.items()})
    from cockpit.close.hours import lost_hours
    from cockpit.close.hours_read import read_hours
    from cockpit.planning.calibrate import StageMeasure
    from cockpit.runs.metrics.progress import reported_steps

    # A stopped stage's time counts only scaled by the share of its steps it reached (D24);
    # too little of them: its steps at the throughput it measured.
    progress, max_steps = reported_steps(decided, state)
    hours = read_hours(decided, state, now, machine_of(args))
    run_of = {s.id: s.run for s in decided.stages}
    measured = {s.stage: StageMeasure(s.throughput, max_steps.get(run_of.get(s.stage) or ""),
                                      s.hours.mean_util) for s in hours.stages}
    # The open uncertainties: the question as judged now, failures' stderr, checkpoints.
    facts = open_facts(decided, state, events, now, scans=scans)
    text = calibrate(decided, state, now, costs, progress, measured, lost_hours(hours), facts)
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise  # not bad input: main says "no space left" with the path, exit 1
        raise InputError(f"next: cannot write {out}: {exc.strerror or exc}") from None
    print(f"wrote {out}: the plan as decided with measured durations; check it with "
          f"`cockpit check {out}` and `cockpit plan {out}`")
    return 0

