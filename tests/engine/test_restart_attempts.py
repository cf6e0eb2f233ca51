"""D15, a restarted run: a run a rule stopped, restarted with ``start --force``, keeps
every attempt: each attempt's GPU time in the budget, each stop in REPORT.md and in
what ``cockpit next`` writes. Real processes, real files."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from cockpit.journal.log import Journal, parse_time
from tests.helpers.campaigns import FINITE, write_campaign
from tests.helpers.process import run_cockpit

# The first attempt's loss goes NaN at step 3 and it keeps stepping until stopped; the
# attempt after it (a marker file says one ran) finishes its 3 steps cleanly. The first
# attempt loads for 1.5 s (0.0004 h) first: its time must show in hours to 4 places
# whatever the machine's speed (a stop at step 3 alone took 0.2-0.5 s, a rounding away).
FLAKY = textwrap.dedent("""
    import math, os, sys, time
    from cockpit import report
    first = not os.path.exists("attempted")
    open("attempted", "w").close()
    if first:
        time.sleep(1.5)
    for step in range(1, 200 if first else 4):
        loss = math.nan if first and step >= 3 else 1.0 / step
        report.log(step, loss=loss)
        time.sleep(0.05)
""")


def _campaign(folder: Path) -> Path:
    path = write_campaign(folder, [{"id": "train", "run": "r1", "duration": "10m",
                                    "resource": "gpu", "command": [sys.executable, "flaky.py"]}],
                          rules=[FINITE])
    (folder / "flaky.py").write_text(FLAKY)
    return path


def _seconds(events: list[dict], attempt: int) -> float:
    """An attempt's time from the journal, by hand: run_exited's measured elapsed_s,
    else its wall time from run_started to run_exited."""
    started = next(e for e in events if e["kind"] == "run_started" and e["attempt"] == attempt)
    exited = next(e for e in events if e["kind"] == "run_exited" and e["attempt"] == attempt)
    if isinstance(exited.get("elapsed_s"), (int, float)):
        return float(exited["elapsed_s"])
    return (parse_time(exited["t"]) - parse_time(started["t"])).total_seconds()


@pytest.mark.slow
def test_a_forced_restart_keeps_every_attempt(tmp_path: Path) -> None:
    path = _campaign(tmp_path / "c")
    first = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                        timeout=120)
    assert first.returncode == 1, first.stdout + first.stderr  # the essential stage stopped
    assert run_cockpit("start", str(path), "train").returncode == 1  # refused without --force
    forced = run_cockpit("start", str(path), "train", "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    second = run_cockpit("headless", str(path), "--until-done", "--interval", "0.1",
                         timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr

    events = Journal(tmp_path / "c" / ".cockpit" / "journal.jsonl").events()
    attempts = [e["attempt"] for e in events if e["kind"] == "run_started"]
    assert len(attempts) == 2
    stops = [e for e in events if e["kind"] == "stop_requested"]
    assert [s["attempt"] for s in stops] == [attempts[0]] and stops[0]["step"] == 3
    # One GPU each (the 1-GPU package): both attempts' seconds, in hours to 4 places.
    first_s, second_s = _seconds(events, attempts[0]), _seconds(events, attempts[1])
    expected = round((first_s + second_s) / 3600, 4)
    assert expected != round(second_s / 3600, 4)  # the first attempt's time matters here
    budget = json.loads(run_cockpit("budget", str(path), "--json").stdout)
    assert budget["gpu_hours"] == {"r1": expected}
    (earlier,) = budget["earlier_attempts"]
    assert (earlier["run"], earlier["attempt"], earlier["of"], earlier["outcome"]) == (
        "r1", 1, 2, "stopped")
    assert earlier["gpu_hours"] == round(first_s / 3600, 4)
    assert earlier["reason"].startswith("stopped by finite-loss at step 3: ")
    text = run_cockpit("budget", str(path)).stdout
    assert "(2 attempts)" in text and "r1 attempt 1 of 2: stopped by finite-loss" in text

    exported = run_cockpit("export", str(path), timeout=120)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    (report,) = (tmp_path / "c" / ".cockpit" / "export").glob("*/*/data/REPORT.md")
    report_text = report.read_text()
    stops_section = report_text.split("## Stops", 1)[1].split("## Budget", 1)[0]
    assert "- run `r1` attempt 1 of 2 stopped by `finite-loss` at step 3" in stops_section
    assert "- run `r1` ran 2 attempts; the last one succeeded" in stops_section
    assert "No run was stopped." not in stops_section

    nxt = run_cockpit("next", str(path))
    assert nxt.returncode == 0, nxt.stdout + nxt.stderr
    written = (tmp_path / "c" / "campaign.next.yaml").read_text()
    assert "run r1 attempt 1 of 2 was stopped by finite-loss at step 3" in written


def test_start_of_a_done_stage_needs_force(tmp_path: Path) -> None:
    """A stage that is done starts again only with --force, as the screen asks first:
    without it, one line and exit 2, and nothing is launched."""
    from tests.helpers.campaigns import step_command

    path = write_campaign(tmp_path, [{"id": "train", "run": "r1", "duration": "10m",
                                      "resource": "cpu", "command": step_command(3, 0.01)}])
    done = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

    def started() -> int:
        events = Journal(tmp_path / ".cockpit" / "journal.jsonl").events()
        return sum(1 for e in events if e["kind"] == "stage_started")

    assert started() == 1
    again = run_cockpit("start", str(path), "train")
    assert again.returncode == 2, again.stdout + again.stderr
    assert again.stderr.strip().splitlines() == [
        "cockpit start: stage 'train' is done; --force starts it again (a new attempt, the "
        "earlier one kept)"]
    assert "Traceback" not in again.stderr and started() == 1  # nothing launched
    forced = run_cockpit("start", str(path), "train", "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert started() == 2
