"""Metric streams of live runs with huge files (issue 24's metric part). Not a test:
prints numbers for the README and for the stream cache's work.

For each size N (metric lines in the live run's file) it writes a campaign with one
stage, starts its run through the engine (a real process: it writes N lines first,
byte for byte what ``cockpit.report.log`` writes, then one more line every 0.25 s
through ``cockpit.report`` itself), and measures, each in a fresh interpreter:

- ``python -m cockpit status FILE --json``: wall time and peak RSS (median of the
  repetitions);
- a cold engine (``open_engine`` + ticks until the run's stream is caught up and the
  snapshot shows the file's last step), with no stream cache: wall and CPU seconds;
  its close writes the stream cache;
- a restarted engine with that (valid) cache: the same, the whole process's wall time
  (interpreter, imports, open, ticks, close), and the bytes its first tick read (the
  file's size less the stream's start offset);
- baselines in the same run: ``python -c pass`` and Python reading the file's last line.

Printed: a Markdown table per size, then the ratios of the largest size to the smallest
(``status`` also beyond ``python -c pass``), and issue 24's metric targets.

    python bench/metric_stream_bench.py --quick      # 10^3 and 10^6 lines, 1 repetition
    python bench/metric_stream_bench.py              # 10^3 and 10^7 lines, 3 repetitions
    python bench/metric_stream_bench.py --sizes 1000,100000 --reps 2 --keep DIR
"""

from __future__ import annotations

import argparse
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
from pathlib import Path

RUN = "live"

LIVE_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from cockpit import report
    N = int(sys.argv[1])
    path = os.environ["COCKPIT_REPORT"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # What report.log(step, loss=..., **{"val/accuracy": ...}) and report.progress write
    # (json.dumps of floats and ints is their repr), 10^4 lines per write.
    with open(path, "ab") as out:
        for first in range(1, N + 1, 10000):
            t = time.time()
            lines = []
            for step in range(first, min(first + 10000, N + 1)):
                if step % 2:
                    acc = 0.5 + 0.5 * step / (step + 100)
                    lines.append(f'{{"t": {t!r}, "step": {step}, "loss": {1.0 / step!r}, '
                                 f'"val/accuracy": {acc!r}}}\\n')
                else:
                    lines.append(f'{{"t": {t!r}, "step": {step}, "max_steps": 172800000}}\\n')
            out.write("".join(lines).encode())
    open("prefilled", "w").close()
    step = N
    while True:
        step += 1
        report.log(step, loss=1.0 / step, **{"val/accuracy": 0.5 + 0.5 * step / (step + 100)})
        time.sleep(0.25)
""")

LAST_LINE = ("import os, sys\n"
             "with open(sys.argv[1], 'rb') as f:\n"
             "    f.seek(max(0, os.fstat(f.fileno()).st_size - 65536))\n"
             "    last = f.read().rstrip(b'\\n').rsplit(b'\\n', 1)[-1]\n")

PEAK = ("import resource, subprocess, sys, time\n"
        "began = time.perf_counter()\n"
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "spent = time.perf_counter() - began\n"
        "print(spent, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, "
        "done.returncode)\n")


def write_campaign(folder: Path, lines: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "live.py").write_text(LIVE_SCRIPT)
    doc = {
        "campaign": "metric-streams", "question": "does status keep up with a huge metric file?",
        "offers": [{"id": "bench-1x", "gpu": "H100", "gpus": 1, "days": 3, "price": "100"}],
        "package": {"offer": "bench-1x",
                    "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))},
        "stages": [{"id": RUN, "hours": 48, "resource": "gpu:0", "run": RUN,
                    "command": [sys.executable, "live.py", str(lines)]}],
        "stop_rules": [{"id": "finite-loss", "kind": "non_finite", "metric": "loss"}],
    }
    path = folder / "campaign.yaml"
    path.write_text(json.dumps(doc, indent=2))  # JSON is YAML
    return path


def start_live(campaign_path: Path) -> int:
    """Start the run through the engine; return its process group once its file holds
    the prefilled lines."""
    from cockpit.campaign import load_campaign
    from cockpit.engine import Engine

    engine = Engine(load_campaign(campaign_path), actor="bench")
    pgid = None
    try:
        for ev in engine.start(RUN):
            if ev.get("kind") == "run_started" and isinstance(ev.get("pgid"), int):
                pgid = ev["pgid"]
    finally:
        engine.close()
    if pgid is None:
        raise RuntimeError("the live run did not start")
    marker = campaign_path.parent / "prefilled"
    deadline = time.monotonic() + 1800
    while not marker.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the live run did not write its lines in time")
        time.sleep(0.2)
    time.sleep(0.6)  # a few live lines after the prefill
    return int(pgid)


def stop_live(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        time.sleep(0.5)


def report_path(campaign_path: Path) -> Path:
    from cockpit.campaign import load_campaign
    from cockpit.journal.paths import CampaignFiles

    return CampaignFiles.of(load_campaign(campaign_path)).run_report(RUN)


def last_step(path: Path) -> int:
    with open(path, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - 65536))
        last = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return int(json.loads(last)["step"])


# ----------------------------------------------------------------------------- engine
def measure_engine(campaign_path: Path) -> dict[str, float]:
    """In this (fresh) interpreter: open the engine and tick until the run's stream is
    caught up and the snapshot shows at least the file's last step; then close (which
    writes the stream cache). Printed as one JSON object by ``--measure-engine``."""
    from cockpit.fleet.open import open_engine

    path = report_path(campaign_path)
    size, want = os.stat(path).st_size, last_step(path)
    began, cpu = time.perf_counter(), time.process_time()
    engine = open_engine(campaign_path, telemetry=False, actor="bench", pull="cache")
    ticks, start_offset = 0, -1.0
    while True:
        snap = engine.tick()
        ticks += 1
        stream = engine.observer.streams[RUN]
        if start_offset < 0:
            start_offset = float(getattr(stream, "start_offsets", [0])[0])
        view = next(r for r in snap.runs if r.id == RUN)
        if all(r.caught_up for r in stream.readers) and (view.step or 0) >= want:
            break
        if time.perf_counter() - began > 600:
            raise RuntimeError("the engine did not catch up in 600 s")
    caught = time.perf_counter() - began
    spent_cpu = time.process_time() - cpu
    engine.close()
    return {"caught_up": caught, "cpu": spent_cpu, "ticks": ticks, "size": size,
            "start_offset": start_offset}


def engine_run(campaign_path: Path) -> dict[str, float]:
    began = time.perf_counter()
    child = subprocess.run([sys.executable, __file__, "--measure-engine", str(campaign_path)],
                           capture_output=True, text=True, timeout=900, check=False)
    spent = time.perf_counter() - began
    if child.returncode != 0:
        raise RuntimeError(f"--measure-engine failed: {child.stderr[-2000:]}")
    out: dict[str, float] = json.loads(child.stdout.strip().splitlines()[-1])
    out["process"] = spent  # the whole process: interpreter, imports, open, ticks, close
    return out


def peak(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS bytes) of ``argv`` in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", PEAK, *argv], capture_output=True, text=True,
                          timeout=900, check=True)
    wall, rss, rc = done.stdout.split()
    if int(rc) not in (0, 1):  # status exits 1 with attention items
        raise RuntimeError(f"{' '.join(argv[:5])} exited {rc}")
    return float(wall), float(rss)


def measure_size(folder: Path, lines: int, reps: int) -> dict[str, float]:
    campaign_path = write_campaign(folder, lines)
    began = time.perf_counter()
    pgid = start_live(campaign_path)
    print(f"  {lines} lines written in {time.perf_counter() - began:.1f} s "
          f"({os.stat(report_path(campaign_path)).st_size / 2**20:.0f} MiB)", flush=True)
    py = sys.executable
    try:
        cache_dir = campaign_path.parent / ".cockpit" / "cache"
        shutil.rmtree(cache_dir, ignore_errors=True)
        cold = engine_run(campaign_path)
        warm = [engine_run(campaign_path) for _ in range(reps)]
        status = [peak([py, "-m", "cockpit", "status", str(campaign_path), "--json"])
                  for _ in range(reps)]
        shutil.rmtree(cache_dir, ignore_errors=True)  # status without any cache
        status_nocache = [peak([py, "-m", "cockpit", "status", str(campaign_path), "--json"])
                          for _ in range(reps)]
        passes = [peak([py, "-c", "pass"])[0] for _ in range(reps)]
        lasts = [peak([py, "-c", LAST_LINE, str(report_path(campaign_path))])[0]
                 for _ in range(reps)]
    finally:
        stop_live(pgid)
    med = statistics.median
    return {
        "status": med(s[0] for s in status), "status_rss": med(s[1] for s in status),
        "status_nocache": med(s[0] for s in status_nocache),
        "cold_caught_up": cold["caught_up"], "cold_cpu": cold["cpu"],
        "warm_caught_up": med(w["caught_up"] for w in warm),
        "warm_cpu": med(w["cpu"] for w in warm),
        "warm_process": med(w["process"] for w in warm),
        "warm_read": med(w["size"] - w["start_offset"] for w in warm),
        "pass": med(passes), "last_line": med(lasts),
    }


COLUMNS = [("status", "`status --json`", "s"), ("status_nocache", "`status` (no cache)", "s"),
           ("status_rss", "`status` peak RSS", "MB"),
           ("cold_caught_up", "cold engine caught up", "s"), ("cold_cpu", "its CPU", "s"),
           ("warm_caught_up", "restart with cache caught up", "s"),
           ("warm_cpu", "its CPU", "s"), ("warm_process", "whole process", "s"),
           ("warm_read", "bytes it read at start", "B"),
           ("pass", "`python -c pass`", "s"), ("last_line", "last line (Python)", "s")]


def show(value: float, unit: str) -> str:
    if unit == "MB":
        return f"{value / 2**20:.0f} MB"
    if unit == "B":
        return f"{value / 1024:.0f} KiB"
    return f"{value:.2f} s"


def report(results: dict[int, dict[str, float]]) -> None:
    print()
    print(f"| metric lines | {' | '.join(title for _, title, _ in COLUMNS)} |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for n, row in results.items():
        print(f"| {n:.0e} | {' | '.join(show(row[k], u) for k, _, u in COLUMNS)} |")
    sizes = sorted(results)
    small, big = results[sizes[0]], results[sizes[-1]]
    print()
    if len(sizes) > 1:
        beyond = (big["status"] - big["pass"]) / max(small["status"] - small["pass"], 1e-3)
        ratio = big["status"] / small["status"]
        print(f"{sizes[-1]:.0e} against {sizes[0]:.0e} lines: status {ratio:.2f}× "
              f"(beyond `python -c pass`: {beyond:.2f}×), restart with cache caught up "
              f"{big['warm_caught_up'] / small['warm_caught_up']:.2f}×")
    checks = [
        ("status beyond python -c pass under 0.5 s", big["status"] - big["pass"] < 0.5,
         f"{big['status'] - big['pass']:.2f} s"),
        ("status within 0.5 s of the smallest size", big["status"] - small["status"] < 0.5,
         f"+{big['status'] - small['status']:.2f} s"),
        ("restart with a valid cache caught up under 2 s", big["warm_caught_up"] < 2.0,
         f"{big['warm_caught_up']:.2f} s"),
    ]
    for what, ok, value in checks:
        print(f"- {what}: {value} {'(met)' if ok else '(NOT met)'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10^3 and 10^6 lines, 1 repetition")
    parser.add_argument("--sizes", help="comma-separated line counts (default 1000,10000000)")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--keep", type=Path, help="keep the campaigns in this folder")
    parser.add_argument("--measure-engine", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_engine:
        print(json.dumps(measure_engine(args.measure_engine)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else \
        [1000, 10**6] if args.quick else [1000, 10**7]
    reps = args.reps or (1 if args.quick else 3)
    root = args.keep or Path(tempfile.mkdtemp(prefix="metric-stream-bench-"))
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        # As a user runs it: compiled modules cached (else every command compiles ~0.3 s).
        print("PYTHONDONTWRITEBYTECODE unset for the measured commands")
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; {reps} repetition(s); {root}")
    results: dict[int, dict[str, float]] = {}
    try:
        for n in sizes:
            print(f"{n} lines:", flush=True)
            results[n] = measure_size(root / f"n{n}", n, reps)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
