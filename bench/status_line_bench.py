"""What `cockpit status FILE --line` costs a tmux status bar (issue 25), against a bare
interpreter start measured in the same run (a script, not a test).

  python bench/status_line_bench.py [--runs 30]

Three cases, each the median of ``--runs`` calls through the installed console script
(what tmux runs) and through ``python -m cockpit``:

- live: a face wrote the status log a moment ago (headless or the TUI);
- unwatched: no face has written for an hour and nothing was journaled since (the line
  says NOT WATCHED, the window still counts down) — the fallback when no cockpit runs;
- engine: the journal was written after the last status line (a CLI note): the campaign
  is loaded to answer.

Goal: live and unwatched under 60 ms and under 3x `python -c pass`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.headless_bench import latency  # noqa: E402  (median ms of a command)
from cockpit.campaign import load_campaign  # noqa: E402
from cockpit.engine import CampaignFiles, Engine  # noqa: E402
from cockpit.headless.status_log import compact_json, dumps  # noqa: E402
from cockpit.telemetry import GpuSampler  # noqa: E402
from tests.helpers.campaigns import write_campaign  # noqa: E402


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
        for case in ("live", "unwatched", "engine"):
            now = time.time()
            if case == "live":
                os.utime(files.journal, (now - 5, now - 5))
                os.utime(files.status_log, (now, now))
            elif case == "unwatched":
                os.utime(files.journal, (now - 3601, now - 3601))
                os.utime(files.status_log, (now - 3600, now - 3600))
            else:
                os.utime(files.status_log, (now - 3600, now - 3600))
                os.utime(files.journal, (now, now))
            runs = args.runs if case != "engine" else max(5, args.runs // 3)
            results[case] = {
                "script": latency([script, "status", str(path), "--line"], runs),
                "module": latency([sys.executable, "-m", "cockpit", "status", str(path),
                                     "--line"], runs)}
        bare = latency([sys.executable, "-c", "pass"], args.runs)
    print(f"`cockpit status FILE --line`, median of {args.runs} "
          f"(engine: {max(5, args.runs // 3)}); `python -c pass` {bare:.0f} ms (baseline)")
    for case, got in results.items():
        print(f"  {case:<10} console script {got['script']:.0f} ms "
              f"({got['script'] / bare:.1f}x) · python -m cockpit {got['module']:.0f} ms "
              f"({got['module'] / bare:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
