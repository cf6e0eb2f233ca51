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

Measured per size, each repetition in a fresh interpreter (so RSS is per size):
open (``open_engine(..., telemetry=False)``), the first tick, the steady tick (median
of 10, 0.1 s apart), the tick after 1 new event appended by another writer (median of
3), the process's RSS after the first tick; then the wall time of ``python -m cockpit
status FILE --json`` and ``python -m cockpit budget FILE``. Baselines in the same run:
``python -c pass``, Python's ``json.loads`` of every line of the journal, and reading
its last line (each a fresh interpreter, wall time). Printed: a Markdown table of
min–max over the repetitions, the ratios of each size to the smallest (minima against
minima), and issue 24's targets against the largest size.

    python bench/history_scale_bench.py --quick           # 10^3, 10^4; 1 repetition (~1 min)
    python bench/history_scale_bench.py                   # 10^3, 10^4, 10^5; 3 repetitions
    python bench/history_scale_bench.py --sizes 1000,10000,100000,1000000   # the issue's table
    python bench/history_scale_bench.py --keep DIR        # keep the generated campaigns

Generation alone (a campaign folder with its journal, no live runs), then a profile of
one measurement of it:

    python bench/history_scale_bench.py --generate-only DIR --sizes 100000
    python bench/history_scale_bench.py --measure-one DIR/n100000/campaign.yaml --profile
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO

HISTORY_STAGES = 40
GPUS = 8
LIVE_RUNS = 3
HEAD_EVENTS = 3  # plan_recorded, environment_recorded, rules_recorded
FAILED_EVERY, FAILED_AT = 4, 1  # stage i has a failed first attempt when i % 4 == 1
STOPPED_EVERY, STOPPED_AT = 5, 3  # stage i is stopped by a rule when i % 5 == 3
# One cycle of a running stage's body: checkpoint verifications (started + verified),
# GPU warnings, notes, other costs, a host warning.
BODY_CYCLE = ("verify_started", "checkpoint_verified") * 4 + ("warning",) * 6 + \
    ("note",) * 3 + ("cost",) * 2 + ("host_warning",)
REPORT_LINES = 100  # metric lines in each history run's report file (cockpit.report)

LIVE_SCRIPT = textwrap.dedent("""
    import time
    from cockpit import report
    step = 0
    while True:
        step += 1
        report.log(step, loss=1.0 / step, **{"val/accuracy": 0.5 + 0.5 * step / (step + 100)})
        report.progress(step, 172800)  # 12 hours at 4 steps/s
        time.sleep(0.25)
""")


# ----------------------------------------------------------------------------- campaign
def stage_id(i: int) -> str:
    return f"h{i:02d}"


def live_id(i: int) -> str:
    return f"live-{i}"


def campaign_doc(start: datetime, stages: int = HISTORY_STAGES, gpus: int = GPUS,
                 live: int = LIVE_RUNS) -> dict[str, Any]:
    doc_stages: list[dict[str, Any]] = [
        {"id": stage_id(i), "hours": 130, "resource": f"gpu:{i % gpus}", "run": stage_id(i),
         "command": [sys.executable, "-c", "pass"]} for i in range(stages)]
    doc_stages += [
        {"id": live_id(i), "hours": 12, "resource": f"gpu:{(gpus - 1 - i) % gpus}",
         "run": live_id(i), "command": [sys.executable, "live.py"]} for i in range(live)]
    return {
        "campaign": "history-scale", "question": "does the cockpit keep up with a long history?",
        "offers": [{"id": "bench-8x-30d", "gpu": "H100", "gpus": gpus, "days": 30,
                    "price": "24000"}],
        "package": {"offer": "bench-8x-30d", "start": start.strftime("%Y-%m-%dT%H:%M:%SZ")},
        "stages": doc_stages,
        "stop_rules": [{"id": "finite-loss", "kind": "non_finite", "metric": "loss"}],
        "settings": {"stop_grace": "2s"},
    }


def write_campaign(folder: Path, start: datetime, stages: int = HISTORY_STAGES,
                   gpus: int = GPUS, live: int = LIVE_RUNS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "live.py").write_text(LIVE_SCRIPT)
    path = folder / "campaign.yaml"
    # JSON is YAML: no dependency on a YAML writer's style.
    path.write_text(json.dumps(campaign_doc(start, stages, gpus, live), indent=2))
    return path


# ----------------------------------------------------------------------------- writer
def journal_line(seq: int, when: datetime, kind: str, fields: dict[str, Any]) -> bytes:
    """One journal line exactly as ``Journal._append_locked`` serialises it."""
    from cockpit.journal.format import format_time

    event = {"seq": seq, "t": format_time(when), "kind": kind, **fields}
    return (json.dumps(event, default=str, ensure_ascii=False) + "\n").encode("utf-8")


class LineWriter:
    """The journal view the project's record functions write through (``has_kind`` and
    ``append``), writing lines to a file: no lock, no fsync, no read-back."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.seq = 0
        self.kinds: set[str] = set()  # what record_environment looks at

    def has_kind(self, kind: str) -> bool:
        return kind in self.kinds

    def append(self, kind: str, now: datetime | None = None, **fields: Any) -> dict[str, Any]:
        assert now is not None
        self.seq += 1
        self.kinds.add(kind)
        self.handle.write(journal_line(self.seq, now, kind, fields))
        return {"seq": self.seq, "kind": kind, **fields}


# One stage's history: a coroutine that yields (when, kind, fields) and is sent the seq
# its event was written under (a start names its claim, a run's events its attempt).
StageGen = Generator[tuple[datetime, str, dict[str, Any]], int, None]


@dataclass(frozen=True)
class StagePlan:
    index: int
    gpu: int
    begin: datetime
    end: datetime
    body: int  # events between the starts and the end, over all attempts
    failed_first: bool
    stopped: bool
    report_dir: str = ".cockpit"

    @property
    def fixed(self) -> int:
        return fixed_events(self.failed_first, self.stopped)


def fixed_events(failed_first: bool, stopped: bool) -> int:
    """Events of a stage besides its body: per attempt claim, start, run start; a failed
    attempt's exit and finish; the last attempt's end (stopped: rule fired, stop request,
    exit, stop done, finish; else exit, finish, verdict)."""
    return 3 * (2 if failed_first else 1) + (2 if failed_first else 0) + (5 if stopped else 3)


def stage_history(plan: StagePlan) -> StageGen:
    sid = stage_id(plan.index)
    total = plan.fixed + plan.body
    step_t = (plan.end - plan.begin) / (total + 1)
    count = 0
    pid = 10_000 + plan.index * 10
    params = f"{plan.index:02d}" * 32

    def at() -> datetime:
        nonlocal count
        count += 1
        return plan.begin + step_t * count

    attempts = 2 if plan.failed_first else 1
    first_body = plan.body // 4 if plan.failed_first else 0
    bodies = [first_body, plan.body - first_body] if plan.failed_first else [plan.body]
    step = 0
    for attempt_no, body in zip(range(attempts), bodies, strict=True):
        last = attempt_no == attempts - 1
        pid += 1
        marker = f"history-scale:{sid}:{attempt_no}"
        claim = yield at(), "stage_claimed", {
            "stage": sid, "run": sid, "marker": marker, "params_hash": params,
            "forced": False, "auto": True, "actor": "cockpit", "owner_pid": 4242,
            "owner_start": 1733130000.5, "out": f".cockpit/launch/{sid}-{attempt_no}.out"}
        started_at = plan.begin + step_t * count
        attempt = yield at(), "stage_started", {
            "stage": sid, "run": sid, "pid": pid, "pgid": pid, "create_time": 1733130100.25,
            "command": ["python", "train.py", "--config", f"configs/{sid}.yaml"],
            "exit_file": f".cockpit/launch/{sid}-{attempt_no}.exit",
            "stdout": f".cockpit/launch/{sid}-{attempt_no}.out",
            "stderr": f".cockpit/launch/{sid}-{attempt_no}.err", "gpus": [plan.gpu],
            "forced": False, "auto": True, "actor": "cockpit", "claim": claim,
            "marker": marker}
        yield at(), "run_started", {
            "run": sid, "stage": sid, "pid": pid, "pgid": pid, "create_time": 1733130100.25,
            "command": ["python", "train.py", "--config", f"configs/{sid}.yaml"],
            "params_hash": params, "attempt": attempt, "gpus": [plan.gpu],
            "exit_file": f".cockpit/launch/{sid}-{attempt_no}.exit",
            "report": f"{plan.report_dir}/runs/{sid}/report.jsonl", "marker": marker}
        for k in range(body):
            kind = BODY_CYCLE[k % len(BODY_CYCLE)]
            when = at()
            step += 250 if kind == "verify_started" else 0
            ckpt = f"ckpt/{sid}/step-{step:08d}.pt"
            if kind == "verify_started":
                fields: dict[str, Any] = {
                    "key": f"verify:{sid}:{attempt}:{ckpt}", "run": sid, "path": ckpt,
                    "attempt": attempt, "owner_pid": 4242, "owner_start": 1733130000.5,
                    "limit_s": 600.0, "retry": 0}
            elif kind == "checkpoint_verified":
                fields = {"run": sid, "attempt": attempt, "auto": True, "actor": "cockpit",
                          "path": ckpt, "ok": True, "layout": "torch.save",
                          "missing": [], "warnings": [], "error": None,
                          "load_seconds": 1.25, "step": step,
                          "summary": "state_dict: 312 tensors, 1.3 GB; optimizer; step"}
            elif kind == "warning":
                gpu_event = ("thermal_slowdown", "xid", "ecc_corrected")[k % 3]
                fields = {"message": f"GPU {plan.gpu}: {gpu_event.replace('_', ' ')} "
                                     f"(event {k}) while {sid} trains",
                          "source": "gpu", "key": f"gpu:{gpu_event}:{plan.gpu}:{k}:{sid}",
                          "gpu": plan.gpu, "event": gpu_event}
            elif kind == "note":
                lr = 1e-4 * (1 + k % 7)
                fields = {"stage": sid, "actor": "operator",
                          "text": f"loss at step {step} looks on track; lr {lr:.1e}"}
            elif kind == "cost":
                fields = {"label": f"storage for {sid} checkpoints ({k})", "amount": "0.35",
                          "currency": "USD", "actor": "operator"}
            else:  # host_warning: the machine's own warnings
                fields = {"message": f"disk {80 + k % 15}% full (checkpoints of {sid})",
                          "source": "host", "key": f"host:disk:{sid}:{k}"}
                kind = "warning"
            yield when, kind, fields
        elapsed = (plan.begin + step_t * count - started_at).total_seconds()
        if not last:
            yield at(), "run_exited", {"run": sid, "stage": sid, "code": 1,
                                       "attempt": attempt, "signal": None,
                                       "elapsed_s": elapsed}
            yield at(), "stage_finished", {
                "stage": sid, "outcome": "failed", "code": 1, "elapsed_s": elapsed,
                "reason": "exit code 1: CUDA error: an illegal memory access was encountered"}
        elif plan.stopped:
            yield at(), "rule_fired", {
                "run": sid, "stage": sid, "rule": "finite-loss", "reason": "loss is NaN",
                "value": "NaN", "threshold": "finite", "step": step, "action": "stop",
                "attempt": attempt, "actor": "cockpit"}
            yield at(), "stop_requested", {
                "run": sid, "stage": sid, "rule": "finite-loss", "reason": "loss is NaN",
                "value": "NaN", "step": step, "attempt": attempt, "actor": "cockpit"}
            yield at(), "run_exited", {"run": sid, "stage": sid, "code": -15,
                                       "attempt": attempt, "signal": 15, "elapsed_s": elapsed}
            yield at(), "stop_done", {"run": sid, "stage": sid, "attempt": attempt,
                                      "rule": "finite-loss"}
            yield at(), "stage_finished", {"stage": sid, "outcome": "stopped", "code": -15,
                                           "reason": None, "elapsed_s": elapsed}
        else:
            yield at(), "run_exited", {"run": sid, "stage": sid, "code": 0,
                                       "attempt": attempt, "signal": None,
                                       "elapsed_s": elapsed}
            yield at(), "stage_finished", {"stage": sid, "outcome": "done", "code": 0,
                                           "reason": None, "elapsed_s": elapsed}
            yield at(), "result_accepted", {
                "run": sid, "stage": sid, "result": f"runs/{sid}/result.json",
                "reason": "acceptance checks pass", "checks": ["checkpoint reloads"],
                "attempt": attempt, "actor": "cockpit", "override": False}


def stage_plans(events: int, begin: datetime, end: datetime, stages: int = HISTORY_STAGES,
                gpus: int = GPUS) -> list[StagePlan]:
    """The stages' shapes for a journal of exactly ``events`` events: stage i runs on GPU
    i % gpus, the GPU's stages one after the other over [begin, end)."""
    failed = [i % FAILED_EVERY == FAILED_AT for i in range(stages)]
    stopped = [i % STOPPED_EVERY == STOPPED_AT for i in range(stages)]
    fixed = sum(fixed_events(failed[i], stopped[i]) for i in range(stages))
    body = events - HEAD_EVENTS - fixed
    if body < 0:
        raise ValueError(f"{events} events is too few for {stages} stages "
                         f"(at least {HEAD_EVENTS + fixed})")
    per_gpu = -(-stages // gpus)
    slot = (end - begin) / per_gpu
    return [StagePlan(i, i % gpus, begin + slot * (i // gpus),
                      begin + slot * (i // gpus + 1) - timedelta(minutes=5),
                      body // stages + (1 if i < body % stages else 0), failed[i], stopped[i])
            for i in range(stages)]


def write_reports(campaign_path: Path, stages: int) -> None:
    """Each history run's metric lines, written by ``cockpit.report`` itself (a run's
    values live in its file, not in the journal)."""
    from cockpit import report
    from cockpit.campaign import load_campaign
    from cockpit.journal.paths import CampaignFiles

    files = CampaignFiles.of(load_campaign(campaign_path))
    try:
        for i in range(stages):
            path = files.run_report(stage_id(i))
            path.parent.mkdir(parents=True, exist_ok=True)
            report.open_report(path)
            for step in range(1, REPORT_LINES + 1):
                report.log(step * 250, loss=2.0 / (1 + step), **{"val/accuracy": 0.9})
    finally:
        report.open_report(None)


def write_history(campaign_path: Path, events: int, begin: datetime, end: datetime,
                  stages: int = HISTORY_STAGES, gpus: int = GPUS) -> Path:
    """Write the campaign's journal: the head records (by the project's own record
    functions), then every stage's history merged in time order. Returns its path."""
    from cockpit.campaign import load_campaign
    from cockpit.engine.recorder import record_plan
    from cockpit.journal.paths import CampaignFiles
    from cockpit.runs.env_record import record_environment
    from cockpit.runs.rules import rules_hash

    campaign = load_campaign(campaign_path)
    path = CampaignFiles.of(campaign).journal
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb", buffering=1 << 20) as handle:
        out = LineWriter(handle)
        record_plan(out, campaign, SimpleNamespace(plan_hash=None), begin)  # type: ignore[arg-type]
        record_environment(out, begin)  # type: ignore[arg-type]
        out.append("rules_recorded", now=begin, sha256=rules_hash(campaign.stop_rules))
        if out.seq != HEAD_EVENTS:
            raise RuntimeError(f"the head wrote {out.seq} events, not {HEAD_EVENTS}")
        report_dir = str(path.parent)
        gens = [stage_history(replace(plan, report_dir=report_dir))
                for plan in stage_plans(events, begin, end, stages, gpus)]
        heap: list[tuple[datetime, int, str, dict[str, Any]]] = []
        for i, gen in enumerate(gens):
            when, kind, fields = next(gen)
            heap.append((when, i, kind, fields))
        heapq.heapify(heap)
        while heap:
            when, i, kind, fields = heap[0]
            out.append(kind, now=when, **fields)
            try:
                nxt = gens[i].send(out.seq)
            except StopIteration:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (nxt[0], i, nxt[1], nxt[2]))
        if out.seq != events:
            raise RuntimeError(f"wrote {out.seq} events, not {events}")
    return path


def generate(folder: Path, events: int, now: datetime | None = None,
             stages: int = HISTORY_STAGES, gpus: int = GPUS, live: int = LIVE_RUNS,
             check: bool = True) -> Path:
    """A campaign folder whose journal holds ``events`` events of history, ending two
    hours before ``now`` (its package began 29 days before). Returns the campaign file."""
    from cockpit.journal.log import Journal

    now = now or datetime.now(timezone.utc)
    start = (now - timedelta(days=29)).replace(microsecond=0)
    path = write_campaign(folder, start, stages, gpus, live)
    journal = write_history(path, events, start + timedelta(minutes=30),
                            now - timedelta(hours=2), stages, gpus)
    write_reports(path, stages)
    if check:
        problems = Journal(journal).problems()
        if problems:
            raise RuntimeError(f"the generated journal has {len(problems)} problems, the "
                               f"first: line {problems[0].line}: {problems[0].message}")
    return path


# ----------------------------------------------------------------------------- measuring
def measure_one(campaign_path: Path) -> dict[str, float]:
    """In this (fresh) interpreter: open, first tick, steady tick, tick after 1 new event,
    RSS. Printed as one JSON object by ``--measure-one``."""
    import psutil

    from cockpit.fleet.open import open_engine
    from cockpit.journal.log import Journal
    from cockpit.journal.paths import CampaignFiles

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
    engine.close()
    return {"open": opened, "first_tick": first, "steady_tick": statistics.median(steady),
            "after_event": statistics.median(after), "rss": rss, "rss_before": rss_before}


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


def measure_size(campaign_path: Path, journal: Path) -> dict[str, float]:
    py = sys.executable
    child = subprocess.run([py, __file__, "--measure-one", str(campaign_path)],
                           capture_output=True, text=True, timeout=3600, check=False)
    if child.returncode != 0:
        raise RuntimeError(f"--measure-one failed: {child.stderr[-2000:]}")
    result: dict[str, float] = json.loads(child.stdout.strip().splitlines()[-1])
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


# ----------------------------------------------------------------------------- report
def seconds(value: float) -> str:
    return f"{value:.2f} s" if value >= 0.1 else f"{value * 1000:.0f} ms"


def millis(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 0.1 else f"{value * 1000:.0f} ms"


def megabytes(value: float) -> str:
    return f"{value / 2**20:.0f} MB"


COLUMNS: list[tuple[str, str, Callable[[float], str]]] = [
    ("open", "open", seconds),
    ("first_tick", "first tick", seconds),
    ("steady_tick", "steady tick", millis),
    ("after_event", "tick after 1 new event", millis),
    ("rss", "RSS (engine)", megabytes),
    ("status", "`status --json`", seconds),
    ("budget", "`budget`", seconds),
    ("loads_all", "`json.loads` every line", seconds),
    ("last_line", "last line", seconds),
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


def report(results: dict[int, list[dict[str, float]]], reps: int) -> None:
    print()
    print(f"| journal events | {' | '.join(title for _, title, _ in COLUMNS)} |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for n, rows in results.items():
        cells = [span([r[key] for r in rows], show) for key, _, show in COLUMNS]
        print(f"| {size_name(n)} | {' | '.join(cells)} |")
    everything = [r for rows in results.values() for r in rows]
    print()
    print(f"Baselines (same run, {reps} repetition(s) per size): `python -c pass` "
          f"{span([r['pass'] for r in everything], seconds)}; RSS of the measuring "
          f"interpreter before open {span([r['rss_before'] for r in everything], megabytes)}.")
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
        cells = [f"{low[n][key] / low[base][key]:.1f}×" for key, _, _ in COLUMNS]
        print(f"| {size_name(n)} | {' | '.join(cells)} |")
    top = sizes[-1]
    t, b = low[top], low[base]
    print()
    print(f"Issue 24's targets (written for 10^6 against 10^3), here {size_name(top)} against "
          f"{size_name(base)}, minima:")
    checks = [
        ("steady tick within 1.5× of the smallest", t["steady_tick"] <= 1.5 * b["steady_tick"],
         f"{t['steady_tick'] / b['steady_tick']:.1f}×"),
        ("tick after 1 new event within 1.5×", t["after_event"] <= 1.5 * b["after_event"],
         f"{t['after_event'] / b['after_event']:.1f}×"),
        ("engine RSS under 150 MB", t["rss"] < 150 * 2**20, megabytes(t["rss"])),
        ("open + first tick under 1 s (with a cache)", t["open"] + t["first_tick"] < 1.0,
         seconds(t["open"] + t["first_tick"])),
        ("cold open + first tick within 2× of json.loads of every line",
         t["open"] + t["first_tick"] <= 2 * t["loads_all"],
         f"{(t['open'] + t['first_tick']) / t['loads_all']:.1f}×"),
        ("`status --json` under 1 s (with a cache)", t["status"] < 1.0, seconds(t["status"])),
        ("`budget` under 1 s (with a cache)", t["budget"] < 1.0, seconds(t["budget"])),
    ]
    for what, ok, value in checks:
        print(f"- {'met' if ok else 'NOT met'}: {what}: {value}")


# ----------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=None,
                        help="comma-separated journal sizes (default 1000,10000,100000)")
    parser.add_argument("--repeat", type=int, default=None, help="repetitions (default 3)")
    parser.add_argument("--quick", action="store_true", help="10^3 and 10^4, 1 repetition")
    parser.add_argument("--keep", default=None, metavar="DIR",
                        help="generate into DIR and keep it (default: a temporary folder)")
    parser.add_argument("--generate-only", default=None, metavar="DIR",
                        help="only write a campaign per size under DIR")
    parser.add_argument("--profile", action="store_true",
                        help="with --measure-one CAMPAIGN: print where open and the ticks "
                             "spend their time (cProfile, top 30 by own time)")
    parser.add_argument("--measure-one", default=None, metavar="CAMPAIGN",
                        help="measure one existing campaign in this interpreter (JSON out)")
    args = parser.parse_args()

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
    sizes = [int(s) for s in (args.sizes or ("1000,10000" if args.quick
                                             else "1000,10000,100000")).split(",")]
    reps = args.repeat or (1 if args.quick else 3)
    if args.generate_only:
        for n in sizes:
            began = time.perf_counter()
            path = generate(Path(args.generate_only) / f"n{n}", n)
            print(f"{n} events: {path} ({time.perf_counter() - began:.1f} s)")
        return 0

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="history-scale-"))
    print(f"$ python {' '.join(sys.argv)}")
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} at the start", flush=True)
    results: dict[int, list[dict[str, float]]] = {}
    try:
        for n in sizes:
            began = time.perf_counter()
            path = generate(root / f"n{n}", n)
            from cockpit.campaign import load_campaign
            from cockpit.journal.paths import CampaignFiles

            journal = CampaignFiles.of(load_campaign(path)).journal
            print(f"{size_name(n)}: generated and checked in {time.perf_counter() - began:.1f} s "
                  f"({journal.stat().st_size / 2**20:.1f} MB)", flush=True)
            live = LiveRuns(path, LIVE_RUNS)
            try:
                rows = []
                for rep in range(reps):
                    row = measure_size(path, journal)
                    rows.append(row)
                    print(f"  repetition {rep + 1}: " + ", ".join(
                        f"{title} {show(row[key])}" for key, title, show in COLUMNS),
                        flush=True)
                results[n] = rows
            finally:
                live.stop()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    report(results, reps)
    print(f"\nLoad average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
