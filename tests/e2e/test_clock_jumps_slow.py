"""Clock steps and dead claim owners with real processes (issue 21).

- The wall clock is shifted the real way: a ``sitecustomize`` on ``PYTHONPATH`` moves
  ``time.time``, ``time.time_ns``, ``datetime.now`` and ``datetime.utcnow`` by the number
  of seconds in a file the test rewrites while ``cockpit headless --auto`` runs, and
  leaves ``time.monotonic`` alone — what an NTP step or a VM resume does to a process.
- A cockpit is killed with ``kill -9`` while it owns a claim (a background checkpoint
  verification, a launch): the next cockpit finishes the work.

(The export's claim is its lock file's ``flock``, which the kernel drops with its owner;
``test_export_kill.py`` kills exports at every phase and exports again.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psutil
import pytest

from cockpit.campaign import load_campaign
from cockpit.journal.log import parse_time
from cockpit.runs.supervisor import stage_marker_prefix
from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import wait_for
from tests.helpers.ticks import wait_for_ticks

pytestmark = pytest.mark.slow

SITECUSTOMIZE = textwrap.dedent('''
    """Shift the wall clock by the seconds in $CLOCK_SHIFT_FILE (re-read as it changes);
    the monotonic clock is left alone."""
    import datetime as _dt
    import os
    import time as _time

    _FILE = os.environ.get("CLOCK_SHIFT_FILE")
    if _FILE:
        _real_time, _real_time_ns, _mono = _time.time, _time.time_ns, _time.monotonic
        _cache = [0.0, -1.0]

        def _shift():
            now = _mono()
            if now - _cache[1] > 0.05:
                try:
                    with open(_FILE) as handle:
                        _cache[0] = float(handle.read().strip() or 0)
                except (OSError, ValueError):
                    pass
                _cache[1] = now
            return _cache[0]

        _time.time = lambda: _real_time() + _shift()
        _time.time_ns = lambda: _real_time_ns() + int(_shift() * 1e9)

        class _ShiftedDatetime(_dt.datetime):
            @classmethod
            def now(cls, tz=None):
                return cls.fromtimestamp(_time.time(), tz)

            @classmethod
            def utcnow(cls):
                return cls.fromtimestamp(_time.time(), _dt.timezone.utc).replace(tzinfo=None)

        _dt.datetime = _ShiftedDatetime
''')

# Ignores SIGTERM (the case the grace and the SIGKILL exist for); a NaN at step 3.
STUBBORN = textwrap.dedent("""
    import signal, time
    from cockpit import report
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for step in range(1, 100000):
        report.log(step, loss=float("nan") if step >= 3 else 1.0 / step)
        time.sleep(0.2)
""")

# Writes one checkpoint, then trains on (a healthy run whose restart is being proven).
CHECKPOINTER = textwrap.dedent("""
    import os, time
    from cockpit import report
    os.makedirs("ckpt/r1", exist_ok=True)
    with open("ckpt/r1/step-1.pt", "wb") as handle:
        handle.write(b"weights")
    report.checkpoint_written("ckpt/r1/step-1.pt", step=1)
    for step in range(1, 100000):
        report.log(step, loss=1.0 / step)
        time.sleep(0.2)
""")


def events(path: Path) -> list[dict[str, Any]]:
    file = path.parent / ".cockpit" / "journal.jsonl"
    if not file.exists():
        return []
    out = []
    for line in file.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn line (a cockpit killed mid-write)
    return out



def of_kind(path: Path, *kinds: str) -> list[dict[str, Any]]:
    return [e for e in events(path) if e["kind"] in kinds]


def kill_marked(path: Path) -> None:
    """SIGKILL every process group the cockpit launched for this campaign."""
    campaign = load_campaign(path)
    for stage in campaign.stages:
        prefix = stage_marker_prefix(campaign, stage.id)
        for proc in psutil.process_iter():
            try:
                if proc.environ().get("COCKPIT_LAUNCH", "").startswith(prefix):
                    os.killpg(os.getpgid(proc.pid), signal.SIGKILL)
            except (psutil.Error, OSError):
                continue


@contextmanager
def headless(path: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cockpit", "headless", str(path), "--auto", "--interval", "0.5"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def shifted(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The environment of a process whose wall clock follows the returned file."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    shift = tmp_path / "shift"
    shift.write_text("0")
    pythonpath = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": pythonpath, "CLOCK_SHIFT_FILE": str(shift)}, shift


def start_iso(hours_ago: float) -> str:
    when = datetime.now(timezone.utc) - timedelta(hours=hours_ago)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_sitecustomize_shifts_wall_time_and_leaves_monotonic_alone(tmp_path: Path) -> None:
    env, shift = shifted(tmp_path)
    shift.write_text(str(2 * 86400))
    probe = ("import time, datetime; print(time.time(), datetime.datetime.now("
             "datetime.timezone.utc).timestamp(), time.monotonic())")
    wall_before, mono_before = time.time(), time.monotonic()
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={**os.environ, **env}, check=True).stdout.split()
    wall_after, mono_after = time.time(), time.monotonic()
    wall, dt_wall, mono = map(float, out)
    # Read between our two readings: the wall clock 2 days ahead, the monotonic one not.
    assert wall_before + 2 * 86400 <= wall <= wall_after + 2 * 86400
    assert abs(dt_wall - wall) < 1
    assert mono_before <= mono <= mono_after


def test_two_days_forward_for_15_s_then_back_stops_nothing_and_forces_nothing(
        tmp_path: Path) -> None:
    """The essential run has a `restart` rule of 1 h and the window ends in 71 h; 2 days
    ahead, the old cockpit stopped it at once ("no usable restart for 2d"), stopped the
    exploratory run and force-started the export (the deadline guard)."""
    env, shift = shifted(tmp_path)
    path = write_campaign(tmp_path / "c", [
        {"id": "core", "hours": 1, "resource": "gpu:0", "run": "core",
         "command": step_command(steps=110, sleep=0.2)},
        {"id": "explore", "hours": 1, "resource": "cpu", "run": "explore",
         "category": "exploratory", "command": step_command(steps=100000, sleep=0.2)},
        {"id": "export", "hours": 1, "resource": "cpu", "command": ["true"],
         "after": ["core", "explore"]},
    ], rules=[{"id": "restart-usable", "kind": "restart", "max_age": "1h"}],
        extra={"on_deadline": "stop-optional",
               "deadline": {"export_hours": 24, "retrieve_hours": 12}},
        start=start_iso(1))
    began = datetime.now(timezone.utc)
    try:
        with headless(path, env):
            wait_for(lambda: len(of_kind(path, "run_started")) == 2, 60, "both runs")
            wait_for_ticks(path, 4)  # the watch has anchored the clocks on steady ticks
            shift.write_text(str(2 * 86400))
            wait_for(lambda: of_kind(path, "clock_jump"), 60, "the step forward seen")
            # 2 days ahead for 30 ticks (>= 15 s at the 0.5 s interval): the old cockpit
            # stopped and forced at the first of them.
            wait_for_ticks(path, 30)
            shift.write_text("0")
            wait_for(lambda: len(of_kind(path, "clock_jump")) == 2, 60, "the step back seen")
            wait_for(lambda: of_kind(path, "stage_finished"), 60, "core to end")
            wait_for_ticks(path, 4)  # ticks after core's end: the export is not forced
    finally:
        kill_marked(path)
    ended = datetime.now(timezone.utc)
    lived = (ended - began).total_seconds()
    journal = events(path)
    acted = [(e["kind"], e.get("rule"), e.get("stage")) for e in journal
             if e["kind"] in ("rule_fired", "stop_requested")
             or (e["kind"] in ("stage_claimed", "stage_started") and e["stage"] == "export")]
    assert acted == []
    jumps = [e for e in journal if e["kind"] == "clock_jump"]
    assert [round(e["seconds"] / 86400) for e in jumps] == [2, -2], jumps
    # The journal never ran 2 days ahead (nor back), and the duration is the lived one.
    stamps = [parse_time(e["t"]) for e in journal]
    assert stamps == sorted(stamps)
    assert all(began - timedelta(seconds=5) <= t <= ended + timedelta(seconds=5) for t in stamps)
    (done,) = [e for e in journal if e["kind"] == "stage_finished"]
    assert done["stage"] == "core" and done["outcome"] == "done"
    assert 15 < done["elapsed_s"] <= lived, (done, lived)  # not 2 days, nor 0
    status = subprocess.run([sys.executable, "-m", "cockpit", "status", str(path), "--json"],
                            capture_output=True, text=True, check=True)
    stages = {s["id"]: s for s in json.loads(status.stdout)["stages"]}
    assert 15 < stages["core"]["elapsed_s"] <= lived


def test_a_step_back_of_1_h_right_after_a_stop_request_does_not_delay_the_sigkill(
        tmp_path: Path) -> None:
    env, shift = shifted(tmp_path)
    folder = tmp_path / "c"
    path = write_campaign(folder, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": [sys.executable, "stubborn.py"]},
    ], rules=[FINITE], start=start_iso(1))
    (folder / "stubborn.py").write_text(STUBBORN)
    try:
        with headless(path, env):
            wait_for(lambda: of_kind(path, "stop_requested"), 30, "the NaN's stop request")
            shift.write_text("-3600")
            # stop_grace 2 s then a tick or two; the bug this guards against waits the
            # hour the clock stepped back (3,600 s): a hang this wait's bound tells.
            wait_for(lambda: of_kind(path, "stop_done"), 300, "the SIGKILL after the grace")
    finally:
        kill_marked(path)
    journal = events(path)
    assert [e["kind"] for e in journal if e["kind"] == "clock_jump"] == ["clock_jump"]
    stamps = [parse_time(e["t"]) for e in journal]
    assert stamps == sorted(stamps)  # the step back is journaled, never written as time


def test_kill_9_during_a_background_verification_the_next_cockpit_verifies_again(
        tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "train.py").write_text(CHECKPOINTER)
    slow_verify = [sys.executable, "-c", "import time; time.sleep(4)"]
    path = write_campaign(folder, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": [sys.executable, "train.py"]},
    ], runs={"r1": {"checkpoints": "ckpt/r1", "verify_command": slow_verify}},
        rules=[{"id": "restart-usable", "kind": "restart", "max_age": "40s"}],
        extra={"settings": {"stop_grace": "2s", "verify_every": "1s"}}, start=start_iso(1))
    try:
        with headless(path) as first:
            wait_for(lambda: of_kind(path, "verify_started"), 30, "the verification claim")
            first.send_signal(signal.SIGKILL)
            first.wait()
        assert not of_kind(path, "checkpoint_verified")
        with headless(path):
            verified = wait_for(lambda: of_kind(path, "checkpoint_verified"), 60,
                                "the checkpoint verified by the next cockpit")
            wait_for_ticks(path, 2)  # ticks after it: no rule acts on the claim
    finally:
        kill_marked(path)
    assert verified[0]["ok"] and verified[0]["path"].endswith("step-1.pt")
    claims = of_kind(path, "verify_started")
    assert len(claims) == 2 and claims[1]["retry"] == claims[0]["seq"]
    assert claims[0]["owner_pid"] == first.pid
    assert not of_kind(path, "rule_fired", "stop_requested")


def test_kill_9_between_claim_and_launch_the_next_cockpit_launches(tmp_path: Path) -> None:
    """The old cockpit recorded such a claim as a failed launch after its grace, and auto
    mode never started the stage again."""
    path = write_campaign(tmp_path / "c", [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=100000, sleep=0.2)},
    ], start=start_iso(1))
    from tests.engine import held_start

    campaign = load_campaign(path)
    try:
        # An auto start held between its claim and the launch (a child process with an
        # injected supervisor, tests/engine/held_start.py), killed there.
        held = tmp_path / "held"
        first = subprocess.Popen(held_start.command(path, "train", "claimed", held, auto=True),
                                 cwd=held_start.ROOT, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: held.exists() or first.poll() is not None, 60,
                     "the start held after its claim")
            assert first.poll() is None, "the held start ended by itself"
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
        assert of_kind(path, "stage_claimed") and not of_kind(path, "stage_started")
        with headless(path):
            started = wait_for(lambda: of_kind(path, "stage_started"), 15,
                               "the stage launched by the next cockpit")
            wait_for_ticks(path, 2)  # ticks after it: a second launch had its chance
            live = {m.pgid for m in _marked(campaign)}
    finally:
        kill_marked(path)
    (expired,) = of_kind(path, "claim_expired")
    assert expired["stage"] == "train" and "never began" in expired["reason"]
    assert not [e for e in of_kind(path, "stage_finished") if e.get("outcome") == "failed"]
    assert live == {started[0]["pgid"]}  # one process, the one recorded


def _marked(campaign: Any) -> list[Any]:
    from cockpit.runs.supervisor import find_marked

    return find_marked(stage_marker_prefix(campaign, "train"))
