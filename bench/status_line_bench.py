"""What `cockpit status FILE --line` costs a tmux status bar (issue 25), against a bare
interpreter start measured in the same run (a script, not a test).

  python bench/status_line_bench.py [--runs 30]

Five cases, each the median of ``--runs`` calls through the installed console script
(what tmux runs) and through ``python -m cockpit``:

- conducted (issue 39): a conductor holds the lease (this process takes it, as a face
  would) and its status log is fresh: the conductor's line;
- stale: the lease is held but its holder has not written for an hour (hung): NOT
  WATCHED, the window still counting down;
- not-conducted: the lease is free, the last conductor's info file says when it was
  given back (``ended``) and its status log is there: ``NOT CONDUCTED since HH:MM UTC``
  from the last line, without loading the campaign;
- engine: nobody conducts and the journal was written after the last status line (a CLI
  note): the campaign is loaded to answer (its answer kept: removed before each call
  here, to time the load);
- cached: the same, the engine's kept answer read back (every call after the first).

Each case's commands are timed in turn with `python -c pass` (one of each, ``--runs``
times): each ratio is to the baseline measured under the same load. Each case's line is
checked once before it is timed.

Goals: conducted under 60 ms and under 3x `python -c pass`; issue 39: with no
conductor, the NOT CONDUCTED line (not-conducted, cached) in under 3x `python -c pass`
(same run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cockpit.campaign import load_campaign  # noqa: E402
from cockpit.common.lease import ConductorLease, read_info  # noqa: E402
from cockpit.engine import CampaignFiles, Engine  # noqa: E402
from cockpit.headless.status_log import compact_json, dumps  # noqa: E402
from cockpit.telemetry import GpuSampler  # noqa: E402
from tests.helpers.campaigns import write_campaign  # noqa: E402

CASES = ("conducted", "stale", "not-conducted", "engine", "cached")

# What each case's line must say and must not: (must hold, must not hold).
EXPECT: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "conducted": (("left", "rules"), ("NOT CONDUCTED", "NOT WATCHED")),
    "stale": (("NOT WATCHED",), ("NOT CONDUCTED",)),
    "not-conducted": (("NOT CONDUCTED since", "no cockpit runs the guards"),
                      ("NOT WATCHED",)),
    # The engine answers for itself: no face holds the lease, so it says NOT CONDUCTED.
    "engine": (("left", "NOT CONDUCTED"), ("NOT WATCHED",)),
    "cached": (("NOT CONDUCTED since",), ("NOT WATCHED",)),
}


def interleaved(argvs: dict[str, list[str]], runs: int,
                before: Callable[[], None] = lambda: None) -> dict[str, float]:
    """Median ms of each command, the commands taken in turn ``runs`` times: the baseline
    sees the same load as what it is compared with (the machine is shared and noisy).
    ``before`` runs, untimed, before each command."""
    times: dict[str, list[float]] = {name: [] for name in argvs}
    for _ in range(runs):
        for name, argv in argvs.items():
            before()
            t0 = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(got) * 1000 for name, got in times.items()}


def check_line(case: str, argv: list[str]) -> str:
    """The line the case prints, checked against :data:`EXPECT` (SystemExit if not)."""
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    must, must_not = EXPECT[case]
    missing = [w for w in must if w not in out]
    wrong = [w for w in must_not if w in out]
    if missing or wrong:
        raise SystemExit(f"{case}: unexpected line {out!r} (missing {missing}, "
                         f"should not say {wrong})")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    script = shutil.which("cockpit") or str(Path(sys.executable).with_name("cockpit"))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_campaign(Path(tmp), [
            {"id": "prep", "hours": 1, "resource": "human"},
            {"id": "pilot", "hours": 1, "resource": "human", "after": ["prep"],
             "decision_point": True}])
        campaign = load_campaign(path)
        files = CampaignFiles.of(campaign)
        engine = Engine(campaign, gpu_sampler=GpuSampler(simulate=2), actor="bench")
        engine.mark("prep", "started")  # a journal to date against
        line = dumps(compact_json(engine.tick()))
        engine.close()
        files.status_log.parent.mkdir(parents=True, exist_ok=True)
        files.status_log.write_text(line + "\n")
        results: dict[str, dict[str, float]] = {}
        lines: dict[str, str] = {}
        lease = ConductorLease(str(files.status_log.parent), 1, "headless")
        cache = files.root / "cache" / "status-line.json"

        def no_cache() -> None:
            cache.unlink(missing_ok=True)

        for case in CASES:
            now = time.time()
            before: Callable[[], None] = lambda: None  # noqa: E731
            if case in ("conducted", "stale"):
                if not lease.take():
                    raise SystemExit(f"{case}: cannot take {lease.lock_path}")
                age = 0 if case == "conducted" else 3600
                os.utime(files.journal, (now - age - 5, now - age - 5))
                os.utime(files.status_log, (now - age, now - age))
            elif case == "not-conducted":
                lease.release()  # a clean exit: the info file says when (ended)
                info = read_info(lease.info_path)
                assert info is not None and info.ended is not None, info
                os.utime(files.journal, (now - 5, now - 5))
                os.utime(files.status_log, (now - 2, now - 2))
            else:  # engine, cached: the journal written since the last line
                os.utime(files.status_log, (now - 3600, now - 3600))
                os.utime(files.journal, (now, now))
                no_cache()
                if case == "engine":
                    before = no_cache
                else:  # the first call keeps the engine's answer
                    subprocess.run([script, "status", str(path), "--line"], check=True,
                                   stdout=subprocess.DEVNULL)
                    assert cache.exists(), "the engine kept no answer"
            runs = args.runs if case != "engine" else max(5, args.runs // 3)
            lines[case] = check_line(case, [script, "status", str(path), "--line"])
            results[case] = interleaved({
                "script": [script, "status", str(path), "--line"],
                "module": [sys.executable, "-m", "cockpit", "status", str(path), "--line"],
                "bare": [sys.executable, "-c", "pass"]}, runs, before)
        lease.release()
    print(f"`cockpit status FILE --line`, median of {args.runs} "
          f"(engine: {max(5, args.runs // 3)}), each case taken in turn with "
          f"`python -c pass` (its baseline, same run)")
    for case, got in results.items():
        bare = got["bare"]
        print(f"  {case:<13} console script {got['script']:.0f} ms "
              f"({got['script'] / bare:.1f}x) · python -m cockpit {got['module']:.0f} ms "
              f"({got['module'] / bare:.1f}x) · python -c pass {bare:.0f} ms")
    for case, line in lines.items():
        print(f"  {case:<13} says: {line}")
    worst = max(max(results[c]["script"], results[c]["module"]) / results[c]["bare"]
                for c in ("not-conducted", "cached"))
    print(f"issue 39 goal: NOT CONDUCTED under 3x `python -c pass`: {worst:.1f}x -> "
          f"{'met' if worst < 3 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
