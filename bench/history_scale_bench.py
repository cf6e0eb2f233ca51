"""How the cockpit's costs grow with the campaign's history (issue 24's instrument).
Not a test: prints numbers for the README and for the incremental fold's work.

For each size N it writes a realistic synthetic campaign journal of N events (40
history stages on 8 GPUs, each with a claim, a start, its run's start, checkpoint
verifications, GPU and host warnings, notes, costs, an exit and a finish, its metric
lines in its own report file; some with a failed first attempt, some stopped by a
rule, the others accepted), then starts 3
live runs through the engine (real processes that report a metric line every 0.25 s
through ``cockpit.report``: their values live in the runs' files, not in the journal).

The lines are written with the serialisation ``Journal.append`` uses (one
``json.dumps(..., default=str, ensure_ascii=False)`` per event, ``seq`` and ``t``
first), without its per-line lock and fsync (10^6 fsyncs would take the run's whole
time); ``tests/unit/test_history_scale_bench.py`` checks the bytes are the same as
``Journal.append``'s. After writing, ``Journal(path).problems()`` must be empty: a line
the reader skipped would make the numbers lie.

Measured per size and repetition, each engine in a fresh interpreter (so RSS is per
size), with the live runs reporting:

- **cold**: ``.cockpit/cache/`` removed (no state cache, no metric stream caches), then
  ``--measure-one``: open (``open_engine(..., telemetry=False, pull="cache")``), the
  first tick, the RSS after it;
- **warm**: ``--measure-one`` again on the cache the cold run's ``engine.close()``
  wrote: open, first tick, the steady tick (median of 10, 0.1 s apart), the tick after
  1 new event appended by another writer (median of 3), the RSS after the first tick;
- **the TUI** (cache present), ``--tui-one``: the engine ``cockpit tui`` opens
  (``pull="background"``, 8 simulated GPUs) under ``CockpitApp`` at a 1 s tick, measured
  by bench/tui_bench.py's own ``measure`` (headless 120x40): the time from before its
  interpreter starts to its first complete frame (its first snapshot), and its CPU %
  of one core over 20 s of steady running (``--tui-seconds``);
- the wall time of ``python -m cockpit status FILE --json`` and ``python -m cockpit
  budget FILE`` (cache present).

Baselines in the same run: ``python -c pass``, Python's ``json.loads`` of every line of
the journal, reading its last line (each a fresh interpreter, wall time), and once, a
bare Textual app (tui_bench's ``BareApp``) measured as the TUI is. Printed: a Markdown
table of min–max over the repetitions, the ratios of each size to the smallest (minima
against minima), and issue 24's targets against the largest size, each "met" or "NOT
met": warm open + first tick under 1 s; cold open + first tick within 2x of the
same-run ``json.loads`` of every line; steady tick and tick after 1 event within 1.5x of
the smallest size; engine RSS under 150 MB; the TUI's first frame under 2 s and its CPU
within 1.2x of the smallest size; ``status --json`` and ``budget`` under 1 s.

With ``--fleet``, at the smallest and the largest size: a campaign on machines 1, 2, 3
(``machines:``, each stage's ``machine:``) where machine 1 (this one) has its journal of
N events and machines 2 and 3 each a pulled copy (``.cockpit/peers/<N>/journal.jsonl``)
of N events about their own stages (so every event folds), read by
``open_engine(..., pull="cache")`` without SSH. Machine 1's engine is measured with the
copies and with them moved aside (its journal alone), cold both, same run; target: the
steady tick with two peers within 2x of one machine alone. Warnings and events not
folded with the peers are counted and printed.

    python bench/history_scale_bench.py --quick           # 10^3, 10^4; 1 repetition (~2 min)
    python bench/history_scale_bench.py --quick --fleet   # and the peers case (~3 min)
    python bench/history_scale_bench.py                   # 10^3, 10^4, 10^5; 3 repetitions
    python bench/history_scale_bench.py --sizes 1000,10000,100000,1000000 --fleet
                                      # the issue's table (the lead's final measurement)
    python bench/history_scale_bench.py --keep DIR        # keep the generated campaigns

Generation alone (campaign folders with their journals, no live runs), then a profile of
one measurement of one, or the TUI on one:

    python bench/history_scale_bench.py --generate-only DIR --sizes 100000 --fleet
    python bench/history_scale_bench.py --measure-one DIR/n100000/campaign.yaml --profile
    python bench/history_scale_bench.py --tui-one DIR/n100000/campaign.yaml

The generator is bench/history_scale_gen.py (re-exported here).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_HERE = str(Path(__file__).resolve().parent)  # the generator (and tui_bench) beside this file
if _HERE not in sys.path:  # run as a script it is sys.path[0]; loaded by a test, last
    sys.path.append(_HERE)

from history_scale_gen import (  # noqa: E402  (re-exported: the tests use them from here)
    BODY_CYCLE,
    GPUS,
    HEAD_EVENTS,
    HISTORY_STAGES,
    LIVE_RUNS,
    LineWriter,
    StagePlan,
    campaign_doc,
    fixed_events,
    generate,
    generate_fleet,
    journal_line,
    live_id,
    stage_history,
    stage_id,
    stage_plans,
    write_campaign,
    write_history,
    write_reports,
)

__all__ = ["BODY_CYCLE", "GPUS", "HEAD_EVENTS", "HISTORY_STAGES", "LIVE_RUNS", "LineWriter",
           "StagePlan", "campaign_doc", "fixed_events", "generate", "generate_fleet",
           "journal_line", "live_id", "stage_history", "stage_id", "stage_plans",
           "write_campaign", "write_history", "write_reports"]

FLEET_MACHINES = 3
TUI_SECONDS = 20.0  # the TUI's steady CPU window per size (--quick: 10)


# ----------------------------------------------------------------------------- measuring
def measure_one(campaign_path: Path) -> dict[str, float]:
    """In this (fresh) interpreter: open, first tick, steady tick, tick after 1 new event,
    RSS. Printed as one JSON object by ``--measure-one``."""
    import psutil

    from cockpit.fleet.open import open_engine
    from cockpit.journal.log import Journal
    from cockpit.journal.paths import CampaignFiles

    warned = _WarningCount()
    logging.getLogger("cockpit").addHandler(warned)
    rss_before = psutil.Process().memory_info().rss
    began = time.perf_counter()
    engine = open_engine(campaign_path, telemetry=False, actor="bench", pull="cache")
    opened = time.perf_counter() - began
    began = time.perf_counter()
    engine.tick()
    first = time.perf_counter() - began
    rss = psutil.Process().memory_info().rss
    steady = []
    for _ in range(10):
        time.sleep(0.1)
        began = time.perf_counter()
        engine.tick()
        steady.append(time.perf_counter() - began)
    other = Journal(CampaignFiles.of(engine.campaign).journal, bounded=True)  # a CLI note
    after = []
    for k in range(3):
        other.append("note", stage=live_id(0), text=f"bench note {k}", actor="bench")
        began = time.perf_counter()
        engine.tick()
        after.append(time.perf_counter() - began)
        time.sleep(0.1)
    not_folded = len(engine.state().not_folded)
    engine.close()
    return {"open": opened, "first_tick": first, "steady_tick": statistics.median(steady),
            "after_event": statistics.median(after), "rss": rss, "rss_before": rss_before,
            "not_folded": not_folded, "warnings": warned.count}


class _WarningCount(logging.Handler):
    """Counts the cockpit's warnings (a peer's line not held, an event not folded)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def measure_tui(campaign_path: Path | None, seconds: float) -> dict[str, float]:
    """In this (fresh) interpreter: the real TUI (``CockpitApp`` on the engine
    ``cockpit tui`` opens: pulls in the background, 8 simulated GPUs, a 1 s tick) or,
    without a campaign, tui_bench's bare Textual app, measured by tui_bench's own
    ``measure`` (headless, 120x40): the wall time (``time.time()``) of its first complete
    frame (for the cockpit: its first snapshot drawn) and its CPU % of one core over
    ``seconds`` of steady running after. Printed as JSON by ``--tui-one``."""
    import asyncio
    import importlib

    # bench/tui_bench.py: the project's TUI harness (imported by name: a script beside
    # this one, not a typed module).
    tui_bench: Any = importlib.import_module("tui_bench")

    frame_at: list[float] = []

    def mark() -> bool:
        frame_at.append(time.time())
        return True

    if campaign_path is None:
        cpu, _ = asyncio.run(tui_bench.measure(tui_bench.BareApp(), seconds, ready=mark))
        return {"frame_at": frame_at[0], "cpu": cpu}
    from cockpit.fleet.open import open_engine

    engine = open_engine(campaign_path, actor="tui", simulate_gpus=GPUS, pull="background")
    try:
        from cockpit.tui.app import CockpitApp

        app = CockpitApp(engine, interval=1.0)
        cpu, _ = asyncio.run(tui_bench.measure(
            app, seconds, ready=lambda: app.snapshot is not None and mark()))
    finally:
        engine.close()
    return {"frame_at": frame_at[0], "cpu": cpu}


def child(argv: list[str]) -> dict[str, float]:
    """Run this file with ``argv`` in a fresh interpreter; its last stdout line (JSON)."""
    done = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True,
                          timeout=3600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def tui_child(campaign_path: Path | None, seconds: float) -> dict[str, float]:
    """The TUI's first frame counted from before its interpreter starts, and its CPU."""
    launched = time.time()
    argv = ["--tui-one", str(campaign_path) if campaign_path else "bare",
            "--tui-seconds", str(seconds)]
    result = child(argv)
    return {"first_frame": result["frame_at"] - launched, "cpu": result["cpu"]}


def drop_cache(campaign_path: Path) -> None:
    """Remove ``.cockpit/cache/`` (the state cache and the metric streams' caches)."""
    from cockpit.journal.paths import CampaignFiles

    shutil.rmtree(CampaignFiles.beside(campaign_path).state_cache.parent, ignore_errors=True)


def wall(argv: list[str], timeout: float = 900) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          timeout=timeout, check=False)
    spent = time.perf_counter() - began
    if done.returncode not in (0, 1):  # status exits 1 with attention items; budget too
        tail = done.stderr.decode(errors="replace")[-500:]
        raise RuntimeError(f"{' '.join(argv[:5])} exited {done.returncode}: {tail}")
    return spent


LOADS_ALL = ("import json, sys\n"
             "with open(sys.argv[1], 'rb') as f:\n"
             "    n = sum(1 for line in f if json.loads(line))\n")
LAST_LINE = ("import os, sys\n"
             "with open(sys.argv[1], 'rb') as f:\n"
             "    f.seek(max(0, os.fstat(f.fileno()).st_size - 65536))\n"
             "    last = f.read().rstrip(b'\\n').rsplit(b'\\n', 1)[-1]\n")


def measure_size(campaign_path: Path, journal: Path, tui_seconds: float
                 ) -> dict[str, float]:
    """One repetition at one size: a cold open (no ``.cockpit/cache/``), a warm one (the
    cache the cold one's close wrote), the TUI on the warm cache, then the one-shot
    commands and the baselines. Keys without a prefix are the warm run's."""
    py = sys.executable
    drop_cache(campaign_path)
    cold = child(["--measure-one", str(campaign_path)])
    result = child(["--measure-one", str(campaign_path)])
    result.update({"cold_open": cold["open"], "cold_first_tick": cold["first_tick"],
                   "cold_rss": cold["rss"]})
    tui = tui_child(campaign_path, tui_seconds)
    result.update({"tui_first": tui["first_frame"], "tui_cpu": tui["cpu"]})
    result["status"] = wall([py, "-m", "cockpit", "status", str(campaign_path), "--json"])
    result["budget"] = wall([py, "-m", "cockpit", "budget", str(campaign_path)])
    result["pass"] = wall([py, "-c", "pass"])
    result["loads_all"] = wall([py, "-c", LOADS_ALL, str(journal)])
    result["last_line"] = wall([py, "-c", LAST_LINE, str(journal)])
    return result


class LiveRuns:
    """The live runs, started through the engine (the journal records their starts; the
    engine is closed at once, so this process holds no history while others measure)
    and ended at the end by signalling their process groups."""

    def __init__(self, campaign_path: Path, live: int) -> None:
        from cockpit.campaign import load_campaign
        from cockpit.engine import Engine

        engine = Engine(load_campaign(campaign_path), actor="bench")
        self.pgids: list[int] = []
        try:
            for i in range(live):
                for ev in engine.start(live_id(i)):
                    pgid = ev.get("pgid")
                    if ev.get("kind") == "run_started" and isinstance(pgid, int):
                        self.pgids.append(pgid)
        finally:
            engine.close()
        del engine
        time.sleep(1.0)  # their first metric lines

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pgid in self.pgids:
                try:
                    os.killpg(pgid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(_alive(p) for p in self.pgids):
                time.sleep(0.1)


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def measure_fleet(campaign_path: Path) -> dict[str, float]:
    """One repetition of the fleet case: machine 1's engine with the copies of machines
    2 and 3 (read from ``.cockpit/peers/``, ``pull="cache"``: no SSH), then the same
    campaign with the copies moved aside (machine 1's journal alone); each cold (the
    cache removed first). Keys: the measure-one keys, prefixed ``peers_`` and ``alone_``."""
    from cockpit.journal.paths import CampaignFiles

    files = CampaignFiles.beside(campaign_path)
    peers, aside = files.root / "peers", files.root / "peers.aside"
    drop_cache(campaign_path)
    with_peers = child(["--measure-one", str(campaign_path)])
    peers.rename(aside)
    try:
        drop_cache(campaign_path)
        alone = child(["--measure-one", str(campaign_path)])
    finally:
        aside.rename(peers)
    drop_cache(campaign_path)
    return {**{f"peers_{k}": v for k, v in with_peers.items()},
            **{f"alone_{k}": v for k, v in alone.items()}}


# ----------------------------------------------------------------------------- report
def seconds(value: float) -> str:
    return f"{value:.2f} s" if value >= 0.1 else f"{value * 1000:.0f} ms"


def millis(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 0.1 else f"{value * 1000:.0f} ms"


def megabytes(value: float) -> str:
    return f"{value / 2**20:.0f} MB"


def percent(value: float) -> str:
    return f"{value:.1f} %"


COLUMNS: list[tuple[str, str, Callable[[float], str]]] = [
    ("cold_open", "open (cold)", seconds),
    ("cold_first_tick", "first tick (cold)", seconds),
    ("open", "open (warm)", seconds),
    ("first_tick", "first tick (warm)", seconds),
    ("steady_tick", "steady tick", millis),
    ("after_event", "tick after 1 new event", millis),
    ("rss", "RSS (engine)", megabytes),
    ("cold_rss", "RSS (cold)", megabytes),
    ("tui_first", "TUI first frame", seconds),
    ("tui_cpu", "TUI CPU", percent),
    ("status", "`status --json`", seconds),
    ("budget", "`budget`", seconds),
    ("loads_all", "`json.loads` every line", seconds),
    ("last_line", "last line", seconds),
]
FLEET_COLUMNS: list[tuple[str, str, Callable[[float], str]]] = [
    ("alone_steady_tick", "steady tick, machine 1 alone", millis),
    ("peers_steady_tick", "steady tick, with 2 peers", millis),
    ("alone_after_event", "after 1 event, alone", millis),
    ("peers_after_event", "after 1 event, with peers", millis),
    ("alone_open", "open (cold), alone", seconds),
    ("peers_open", "open (cold), with peers", seconds),
    ("alone_rss", "RSS, alone", megabytes),
    ("peers_rss", "RSS, with peers", megabytes),
]


def span(values: list[float], show: Callable[[float], str]) -> str:
    low, high = show(min(values)), show(max(values))
    if low == high:
        return low
    unit_low, unit_high = low.rsplit(" ", 1)[1], high.rsplit(" ", 1)[1]
    return f"{low.rsplit(' ', 1)[0]}–{high}" if unit_low == unit_high else f"{low}–{high}"


def size_name(n: int) -> str:
    return f"{n // 10**6}M" if n >= 10**6 and n % 10**6 == 0 else \
        f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def table(results: dict[int, list[dict[str, float]]],
          columns: list[tuple[str, str, Callable[[float], str]]], first: str) -> None:
    print(f"| {first} | {' | '.join(title for _, title, _ in columns)} |")
    print("|---" * (len(columns) + 1) + "|")
    for n, rows in results.items():
        cells = [span([r[key] for r in rows], show) for key, _, show in columns]
        print(f"| {size_name(n)} | {' | '.join(cells)} |")


def checked(what: str, ok: bool, value: str) -> None:
    print(f"- {'met' if ok else 'NOT met'}: {what}: {value}")


def report(results: dict[int, list[dict[str, float]]], reps: int,
           bare: dict[str, float] | None) -> None:
    print()
    table(results, COLUMNS, "journal events")
    everything = [r for rows in results.values() for r in rows]
    print()
    print(f"Baselines (same run, {reps} repetition(s) per size): `python -c pass` "
          f"{span([r['pass'] for r in everything], seconds)}; RSS of the measuring "
          f"interpreter before open {span([r['rss_before'] for r in everything], megabytes)}"
          + (f"; a bare Textual app (tui_bench's 8 sparklines): first frame "
             f"{seconds(bare['first_frame'])}, CPU {percent(bare['cpu'])}" if bare else "")
          + ". Cold: no `.cockpit/cache/`; warm: the cache the cold run's close wrote; "
          "the TUI, `status` and `budget` run with the cache.")
    sizes = sorted(results)
    if len(sizes) < 2:
        return
    base = sizes[0]
    print()
    print(f"Ratios to {size_name(base)} (minimum against minimum):")
    print()
    print(f"| journal events | {' | '.join(title for _, title, _ in COLUMNS)} |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    low = {n: {key: min(r[key] for r in results[n]) for key, _, _ in COLUMNS} for n in sizes}
    for n in sizes[1:]:
        cells = [f"{low[n][key] / low[base][key]:.1f}×" if low[base][key] else "–"
                 for key, _, _ in COLUMNS]
        print(f"| {size_name(n)} | {' | '.join(cells)} |")
    top = sizes[-1]
    t, b = low[top], low[base]
    print()
    print(f"Issue 24's targets (written for 10^6 against 10^3), here {size_name(top)} against "
          f"{size_name(base)}, minima:")
    warm, cold = t["open"] + t["first_tick"], t["cold_open"] + t["cold_first_tick"]
    checked("steady tick within 1.5× of the smallest", t["steady_tick"] <= 1.5 * b["steady_tick"],
            f"{t['steady_tick'] / b['steady_tick']:.1f}×")
    checked("tick after 1 new event within 1.5×", t["after_event"] <= 1.5 * b["after_event"],
            f"{t['after_event'] / b['after_event']:.1f}×")
    checked("engine RSS under 150 MB (warm)", t["rss"] < 150 * 2**20, megabytes(t["rss"]))
    checked("open + first tick under 1 s (with a cache)", warm < 1.0, seconds(warm))
    checked("cold open + first tick within 2× of json.loads of every line",
            cold <= 2 * t["loads_all"], f"{cold / t['loads_all']:.1f}× "
            f"({seconds(cold)} against {seconds(t['loads_all'])})")
    checked("TUI first frame under 2 s", t["tui_first"] < 2.0, seconds(t["tui_first"]))
    checked("TUI CPU within 1.2× of the smallest", t["tui_cpu"] <= 1.2 * b["tui_cpu"],
            f"{t['tui_cpu'] / b['tui_cpu']:.2f}×" if b["tui_cpu"] else "–")
    checked("`status --json` under 1 s (with a cache)", t["status"] < 1.0, seconds(t["status"]))
    checked("`budget` under 1 s (with a cache)", t["budget"] < 1.0, seconds(t["budget"]))


def report_fleet(results: dict[int, list[dict[str, float]]],
                 single: dict[int, list[dict[str, float]]]) -> None:
    """The peers case; ``single``: the main table's rows (the one-machine campaign), for
    its steady tick at the same size."""
    if not results:
        return
    print()
    print("Peers: machine 1's engine with the copies of machines 2 and 3 (each as many "
          "events as machine 1's journal), against the same campaign without the copies, "
          "same run:")
    print()
    table(results, FLEET_COLUMNS, "events per machine")
    print()
    for n, rows in results.items():
        peers = min(r["peers_steady_tick"] for r in rows)
        alone = min(r["alone_steady_tick"] for r in rows)
        checked(f"{size_name(n)} per machine: fleet steady tick within 2× of one machine "
                "alone", peers <= 2 * alone, f"{peers / alone:.1f}×")
        if n in single:
            # Without the copies, the other machines' stages are all pending, and planning
            # them costs the tick more than their finished history does: so also against
            # the one-machine campaign of the main table (same size, its warm tick).
            one = min(r["steady_tick"] for r in single[n])
            checked(f"{size_name(n)} per machine: fleet steady tick within 2× of the "
                    "one-machine campaign's (the table above)", peers <= 2 * one,
                    f"{peers / one:.1f}× ({millis(peers)} against {millis(one)})")
        warned = max(r["peers_warnings"] + r["peers_not_folded"] for r in rows)
        if warned:
            print(f"  ({size_name(n)}: {warned:.0f} warnings or events not folded with the "
                  "peers: see --keep and --measure-one)")


# ----------------------------------------------------------------------------- main
def main() -> int:
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        # As a user runs it: compiled modules cached (else every command compiles ~0.3 s).
        print("PYTHONDONTWRITEBYTECODE unset for the measured commands")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=None,
                        help="comma-separated journal sizes (default 1000,10000,100000)")
    parser.add_argument("--repeat", type=int, default=None, help="repetitions (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help="10^3 and 10^4, 1 repetition, 10 s of TUI CPU")
    parser.add_argument("--fleet", action="store_true",
                        help="also the peers case: machines 2 and 3's copies of N events "
                             "each, at the smallest and the largest size")
    parser.add_argument("--tui-seconds", type=float, default=None,
                        help=f"seconds of TUI CPU per measurement (default {TUI_SECONDS:.0f})")
    parser.add_argument("--keep", default=None, metavar="DIR",
                        help="generate into DIR and keep it (default: a temporary folder)")
    parser.add_argument("--generate-only", default=None, metavar="DIR",
                        help="only write a campaign per size under DIR (with --fleet, "
                             "the fleet campaigns too)")
    parser.add_argument("--profile", action="store_true",
                        help="with --measure-one CAMPAIGN: print where open and the ticks "
                             "spend their time (cProfile, top 30 by own time)")
    parser.add_argument("--measure-one", default=None, metavar="CAMPAIGN",
                        help="measure one existing campaign in this interpreter (JSON out)")
    parser.add_argument("--tui-one", default=None, metavar="CAMPAIGN",
                        help="measure the TUI on CAMPAIGN (or 'bare': a bare Textual app) "
                             "in this interpreter (JSON out)")
    args = parser.parse_args()
    tui_seconds = args.tui_seconds or (10.0 if args.quick else TUI_SECONDS)

    if args.measure_one:
        if args.profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.enable()
            result = measure_one(Path(args.measure_one))
            profiler.disable()
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(30)
        else:
            result = measure_one(Path(args.measure_one))
        print(json.dumps(result))
        return 0
    if args.tui_one:
        print(json.dumps(measure_tui(None if args.tui_one == "bare" else Path(args.tui_one),
                                     tui_seconds)))
        return 0
    sizes = [int(s) for s in (args.sizes or ("1000,10000" if args.quick
                                             else "1000,10000,100000")).split(",")]
    fleet_sizes = sorted({sizes[0], sizes[-1]}) if args.fleet else []
    reps = args.repeat or (1 if args.quick else 3)
    if args.generate_only:
        for n in sizes:
            began = time.perf_counter()
            path = generate(Path(args.generate_only) / f"n{n}", n)
            print(f"{n} events: {path} ({time.perf_counter() - began:.1f} s)")
        for n in fleet_sizes:
            began = time.perf_counter()
            path = generate_fleet(Path(args.generate_only) / f"fleet-n{n}", n)
            print(f"fleet, {n} events per machine: {path} "
                  f"({time.perf_counter() - began:.1f} s)")
        return 0

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="history-scale-"))
    print(f"$ python {' '.join(sys.argv)}")
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} at the start", flush=True)
    results: dict[int, list[dict[str, float]]] = {}
    fleet: dict[int, list[dict[str, float]]] = {}
    try:
        bare = tui_child(None, tui_seconds)
        print(f"bare Textual app: first frame {seconds(bare['first_frame'])}, "
              f"CPU {percent(bare['cpu'])}", flush=True)
        for n in sizes:
            results[n] = measure_sizes(root / f"n{n}", n, reps, tui_seconds)
        for n in fleet_sizes:
            fleet[n] = measure_fleet_sizes(root / f"fleet-n{n}", n, reps)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    report(results, reps, bare)
    report_fleet(fleet, results)
    print(f"\nLoad average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def measure_sizes(folder: Path, n: int, reps: int, tui_seconds: float
                  ) -> list[dict[str, float]]:
    from cockpit.journal.paths import CampaignFiles

    began = time.perf_counter()
    path = generate(folder, n)
    journal = CampaignFiles.beside(path).journal
    print(f"{size_name(n)}: generated and checked in {time.perf_counter() - began:.1f} s "
          f"({journal.stat().st_size / 2**20:.1f} MB)", flush=True)
    live = LiveRuns(path, LIVE_RUNS)
    try:
        rows = []
        for rep in range(reps):
            row = measure_size(path, journal, tui_seconds)
            rows.append(row)
            print(f"  repetition {rep + 1}: " + ", ".join(
                f"{title} {show(row[key])}" for key, title, show in COLUMNS), flush=True)
    finally:
        live.stop()
    return rows


def measure_fleet_sizes(folder: Path, n: int, reps: int) -> list[dict[str, float]]:
    from cockpit.journal.paths import CampaignFiles

    began = time.perf_counter()
    path = generate_fleet(folder, n, machines=FLEET_MACHINES)
    files = CampaignFiles.beside(path)
    size = sum(p.stat().st_size for p in [files.journal, *files.root.glob("peers/*/journal.jsonl")])
    print(f"fleet, {size_name(n)} per machine: generated and checked in "
          f"{time.perf_counter() - began:.1f} s ({size / 2**20:.1f} MB)", flush=True)
    live = LiveRuns(path, LIVE_RUNS)
    try:
        rows = []
        for rep in range(reps):
            row = measure_fleet(path)
            rows.append(row)
            print(f"  repetition {rep + 1}: " + ", ".join(
                f"{title} {show(row[key])}" for key, title, show in FLEET_COLUMNS)
                + f"; with peers: {row['peers_warnings']:.0f} warnings, "
                  f"{row['peers_not_folded']:.0f} events not folded", flush=True)
    finally:
        live.stop()
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
