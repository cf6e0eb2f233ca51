"""`cockpit status --line` (issue 25): answered from the freshest status log a face
wrote, with the standard library alone; a log nobody writes any more says so; a custom
headless `--status-log` is found untold; after the close it says what is left to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from cockpit.campaign import load_campaign
from cockpit.common.lease import ConductorLease
from cockpit.engine import Engine
from cockpit.headless.status_line import line_from_status_log, status_line
from cockpit.headless.status_log import compact_json, dumps
from cockpit.telemetry import GpuSampler
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit, wait_for

HEAVY = ("cockpit.engine", "cockpit.campaign", "yaml", "pynvml", "psutil", "textual",
         "cockpit.journal")


def a_compact(path: Path) -> dict:
    """A real status line's object, as a face writes it."""
    snap = Engine(load_campaign(path), gpu_sampler=GpuSampler(simulate=1)).tick()
    return json.loads(dumps(compact_json(snap)))


def write_log(log: Path, compact: dict, age_s: float = 0.0) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(json.dumps(compact) + "\n")
    stamp = time.time() - age_s
    os.utime(log, (stamp, stamp))
    journal = log.parent / "journal.jsonl"
    if journal.exists():  # nothing written since the face wrote its line
        os.utime(journal, (stamp - 1, stamp - 1))


def idle_campaign(folder: Path) -> Path:
    return write_campaign(folder, [{"id": "idle", "hours": 1, "resource": "human"}])


def conducting(folder: Path) -> ConductorLease:
    """This test process holds the campaign's lease: the log is a conductor's."""
    lease = ConductorLease(str(folder / ".cockpit"), 1, "headless")
    assert lease.take()
    return lease


def test_a_live_log_answers_without_importing_the_engine_yaml_or_nvml(tmp_path: Path):
    path = idle_campaign(tmp_path)
    compact = a_compact(path)
    compact["rules"]["fired"] = ["finite-loss@r9"]
    write_log(tmp_path / ".cockpit" / "status.jsonl", compact)
    lease = conducting(tmp_path)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "cockpit", "status",
                           str(path), "--line"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.strip() == status_line(compact)
    assert "rules FIRED finite-loss@r9" in proc.stdout
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()}
    assert not [m for m in imported if m.startswith(HEAVY)], sorted(imported)
    lease.release()  # nobody conducts now: said, still without the engine
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "cockpit", "status",
                           str(path), "--line"], capture_output=True, text=True, timeout=60)
    # What the last line knew stays (a fired rule is a fact), never "rules ok".
    assert "NOT CONDUCTED since " in proc.stdout and "rules FIRED finite-loss@r9" in proc.stdout
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()}
    assert not [m for m in imported if m.startswith(HEAVY)], sorted(imported)


def test_a_log_no_face_writes_any_more_says_nobody_watches(tmp_path: Path):
    path = idle_campaign(tmp_path)
    compact = a_compact(path)
    left_now = compact["window"]["left_s"]
    compact["window"]["left_s"] = 999 * 3600  # the figure as it stood: not read any more
    write_log(tmp_path / ".cockpit" / "status.jsonl", compact, age_s=3 * 3600)
    line = run_cockpit("status", str(path), "--line").stdout.strip()
    # No face holds the lease: nobody conducts, since the last line was written.
    assert "NOT CONDUCTED since " in line and "(3h)" in line
    assert "rules ok" not in line  # nobody watches the rules: unknown is not ok
    # The window counts down from its end, not from the stale line's figure.
    hours = int(line.split("h", 1)[0])
    assert abs(hours * 3600 - left_now) < 3700


def test_a_clock_stepped_back_is_not_live(tmp_path: Path):
    path = idle_campaign(tmp_path)
    write_log(tmp_path / ".cockpit" / "status.jsonl", a_compact(path), age_s=-600)
    lease = conducting(tmp_path)
    line = line_from_status_log(path)
    lease.release()
    assert line is not None and "NOT WATCHED" in line and "clock stepped back" in line


def test_headless_records_its_custom_status_log_and_the_line_finds_it(tmp_path: Path):
    path = idle_campaign(tmp_path / "campaign")
    custom = tmp_path / "elsewhere" / "my-status.jsonl"
    custom.parent.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "headless", str(path),
                             "--interval", "0.1", "--status-log", str(custom)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: custom.exists() and custom.read_text().count("\n") >= 2,
                 what="the custom status log")
        pointer = tmp_path / "campaign" / ".cockpit" / "status-log.path"
        assert pointer.read_text().strip() == str(custom.resolve())
        # An old default log is there too: the freshest one answers.
        write_log(tmp_path / "campaign" / ".cockpit" / "status.jsonl", a_compact(path),
                  age_s=7200)
        line = run_cockpit("status", str(path), "--line").stdout.strip()
        assert "NOT WATCHED" not in line and "rules" in line and "left" in line
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_hostile_log_or_pointer_never_reaches_the_terminal_raw(tmp_path: Path):
    path = idle_campaign(tmp_path)
    compact = a_compact(path)
    compact["decisions_pending"] = ["pilot\x1b]52;c;ZXZpbA==\x07\x1b[2J"]
    write_log(tmp_path / ".cockpit" / "status.jsonl", compact)
    line = run_cockpit("status", str(path), "--line").stdout
    assert "\x1b" not in line and "\x07" not in line and line.count("\n") == 1
    # A pointer that is a link, or far too long, is not followed.
    state = tmp_path / ".cockpit"
    (state / "status-log.path").write_text("/" + "x" * 10_000 + "\n")
    assert line_from_status_log(path) is not None
    (state / "status-log.path").unlink()
    (tmp_path / "target").write_text(str(tmp_path / "nowhere.jsonl"))
    (state / "status-log.path").symlink_to(tmp_path / "target")
    assert line_from_status_log(path) is not None


def test_a_log_that_is_not_a_status_line_falls_back_to_the_engine(tmp_path: Path):
    path = idle_campaign(tmp_path)
    log = tmp_path / ".cockpit" / "status.jsonl"
    log.parent.mkdir()
    log.write_text('{"not": "a status line"}\n')
    result = run_cockpit("status", str(path), "--line")
    assert result.returncode == 0 and "left" in result.stdout and "rules" in result.stdout


def test_after_the_close_the_line_says_fetch_by(tmp_path: Path):
    path = idle_campaign(tmp_path)
    compact = a_compact(path)
    deadline = time.time() + 20 * 3600 + 120
    compact["closed"] = {"exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                         "fetch_by": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deadline))}
    write_log(tmp_path / ".cockpit" / "status.jsonl", compact)
    line = run_cockpit("status", str(path), "--line").stdout
    assert line.startswith("closed — fetch by ") and "(20h" in line
    assert "fits" not in line and "exceeds" not in line  # no forecast for a closed campaign
    compact["closed"]["fetch_by"] = "2020-01-01T00:00:00Z"
    write_log(tmp_path / ".cockpit" / "status.jsonl", compact)
    assert "fetch deadline 01-01 00:00 UTC passed" in run_cockpit(
        "status", str(path), "--line").stdout


def test_after_a_real_export_the_line_says_closed_even_with_no_face_running(tmp_path: Path):
    from tests.helpers.campaigns import step_command

    path = write_campaign(tmp_path, stages=[
        {"id": "control", "duration": "5m", "resource": "cpu", "run": "control",
         "command": step_command(2, 0.01)}])
    done = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1")
    assert done.returncode == 0, done.stderr
    before = run_cockpit("status", str(path), "--line").stdout
    assert "closed" not in before
    # Exported with no accepted result: the question is open, never "closed" (issue 41).
    assert run_cockpit("export", str(path)).returncode == 0
    line = run_cockpit("status", str(path), "--line").stdout
    assert line.startswith("exported, question open: no accepted result · "), line
    assert "closed" not in line
    # Accepted since: that export is stale, said, until it is exported again.
    assert run_cockpit("accept", str(path), "control", "--note", "good").returncode == 0
    line = run_cockpit("status", str(path), "--line").stdout
    assert line.startswith("export STALE: predates 1 verdict (control); the question is "
                           "answered now — cockpit export campaign.yaml · "), line
    exported = run_cockpit("export", str(path))
    assert exported.returncode == 0, exported.stderr
    # headless's last line predates the export: the journal is newer, the engine answers
    # once, and the next call answers from what it kept (nobody conducts: said).
    after = run_cockpit("status", str(path), "--line").stdout
    assert after.startswith("closed — fetch by "), after
    cache = tmp_path / ".cockpit" / "cache" / "status-line.json"
    assert cache.exists()
    again = run_cockpit("status", str(path), "--line").stdout
    assert again.startswith("closed — fetch by ") and "NOT CONDUCTED since " in again
    assert line_from_status_log(path) is not None  # answered without the engine
    status = json.loads(run_cockpit("status", str(path), "--json").stdout)
    assert status["window"]["retrieval_deadline"][11:16] in after  # the same deadline
