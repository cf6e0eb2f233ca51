"""Served-session cost benchmark (a script, not a test; issue 28).

  python bench/serve_bench.py [--seconds 60] [--rounds 2]

The same campaign (8 simulated GPUs, 3 live runs reporting a loss, a 1 s tick) watched
two ways, alternately, each for ``--seconds``, ``--rounds`` times:

- tmux: `cockpit FILE` in a detached tmux session at 120x40; the cost is the cockpit's
  process plus the tmux server's (the terminal work a screen needs);
- served: `cockpit serve FILE` with one headless Chromium tab (Debian's, driven by
  Playwright) at about 120x40 cells; the cost is the server plus the tab's cockpit
  process (what runs on the rented box). The browser's own CPU is reported apart: it
  runs on the laptop.

Printed: CPU % of one core for each, and the ratio served / tmux per round.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers.campaigns import step_command, write_campaign  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def campaign(folder: Path) -> Path:
    # One GPU stage (the offer's one GPU) and two CPU ones (the second forced past the
    # CPU's claim): three runs at once.
    stages = [{"id": f"s{i}", "hours": 10, "resource": "gpu" if i == 0 else "cpu",
               "run": f"r{i}", "command": step_command(steps=100_000, sleep=0.25)}
              for i in range(3)]
    path = write_campaign(folder, stages)
    for i in range(3):
        subprocess.run([sys.executable, "-m", "cockpit", "start", str(path), f"s{i}",
                        *(["--force"] if i == 2 else [])], check=True, capture_output=True)
    return path


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def tree(pid: int) -> list[int]:
    try:
        return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return [pid]


def measure(pids_of: Callable[[], list[int]], seconds: float) -> float:
    pids = pids_of()
    c0, t0 = cpu_seconds(pids), time.monotonic()
    time.sleep(seconds)
    pids = pids_of()
    return 100.0 * (cpu_seconds(pids) - c0) / (time.monotonic() - t0)


def tmux_round(path: Path, seconds: float) -> float:
    sock = "cockpit-serve-bench"
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-x", "120", "-y", "40",
                    f"COCKPIT_SIMULATE_GPUS=8 {sys.executable} -m cockpit {path}"], check=True)
    try:
        time.sleep(8)  # first frame and the first ticks
        server = next(p.pid for p in psutil.process_iter(["cmdline"])
                      if p.info["cmdline"] and "tmux" in p.info["cmdline"][0]
                      and sock in p.info["cmdline"])
        return measure(lambda: tree(server), seconds)
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], check=False)


def served_round(path: Path, seconds: float) -> tuple[float, float]:
    from playwright.sync_api import sync_playwright

    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "serve", str(path), "--port",
                             "0", "--simulate-gpus", "8"], stdout=subprocess.PIPE, text=True)
    try:
        url = ""
        assert proc.stdout is not None
        for line in proc.stdout:
            found = re.search(r"then open:\s+(\S+)", line)
            if found:
                url = found[1]
                break
        with sync_playwright() as play:
            browser = play.chromium.launch(executable_path="/usr/bin/chromium",
                                           args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1200, "height": 780})
            page.goto(url)
            page.wait_for_timeout(8000)
            browser_pid = [p.pid for p in psutil.process_iter(["name"])
                           if p.info["name"] and "chrom" in p.info["name"]]
            pids = lambda: tree(proc.pid)  # noqa: E731
            c0, b0, t0 = cpu_seconds(pids()), cpu_seconds(browser_pid), time.monotonic()
            page.wait_for_timeout(seconds * 1000)  # the page keeps taking frames meanwhile
            elapsed = time.monotonic() - t0
            served = 100.0 * (cpu_seconds(pids()) - c0) / elapsed
            browser_cpu = 100.0 * (cpu_seconds(browser_pid) - b0) / elapsed
            browser.close()
        return served, browser_cpu
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = campaign(Path(tmp))
        try:
            for n in range(1, args.rounds + 1):
                tmux = tmux_round(path, args.seconds)
                served, browser = served_round(path, args.seconds)
                print(f"round {n}: tmux TUI {tmux:.1f} % · served {served:.1f} % "
                      f"(browser, on the laptop: {browser:.1f} %) · ratio "
                      f"{served / tmux:.2f}", flush=True)
        finally:
            for i in range(3):
                subprocess.run([sys.executable, "-m", "cockpit", "stop", str(path), f"r{i}",
                                "--reason", "bench over"], capture_output=True)


if __name__ == "__main__":
    main()
