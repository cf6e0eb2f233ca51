"""The README's browser screenshot: `PYTHONPATH=. python docs/browser_screenshot.py`.

A real campaign (a GPU stage and a CPU stage running, a human stage waiting, 8
simulated GPUs) served by `cockpit serve`, opened in Debian's Chromium driven headless
by Playwright (`pip install -e '.[test]'`), saved as docs/cockpit-browser.png.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.helpers.campaigns import step_command, write_campaign

DOCS = Path(__file__).resolve().parent
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def cockpit(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "cockpit", *args], check=True, capture_output=True)


def main() -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        path = write_campaign(Path(tmp), [
            {"id": "control", "hours": 6, "resource": "gpu", "run": "control",
             "command": step_command(steps=100_000, sleep=0.2)},
            {"id": "eval-set", "hours": 2, "resource": "cpu", "run": "evalset",
             "command": step_command(steps=100_000, sleep=0.5)},
            {"id": "review", "hours": 1, "resource": "human", "after": ["control"]}])
        cockpit("start", str(path), "control")
        cockpit("start", str(path), "eval-set")
        server = subprocess.Popen([sys.executable, "-m", "cockpit", "serve", str(path),
                                   "--port", "0", "--simulate-gpus", "8"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            url = next(m[1] for line in server.stdout
                       if (m := re.search(r"then open:\s+(\S+)", line)))
            with sync_playwright() as play:
                browser = play.chromium.launch(executable_path="/usr/bin/chromium",
                                               args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 860})
                page.goto(url)
                time.sleep(20)  # the first frame, then a few ticks of telemetry and steps
                page.screenshot(path=str(DOCS / "cockpit-browser.png"))
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
            for run in ("control", "evalset"):
                subprocess.run([sys.executable, "-m", "cockpit", "stop", str(path), run,
                                "--reason", "screenshot taken"], capture_output=True)


if __name__ == "__main__":
    main()
