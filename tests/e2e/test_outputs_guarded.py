"""The small trust holes of issue 21, each with a real process or file: output files that
are symbolic links are refused like the journal, the screen refuses to run without a
terminal (naming headless), a launch on a full disk is journaled as such, and a full
disk is exit 1 with the path, never 2 ("bad input").
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.common.fsutil import write_atomic
from cockpit.headless.status_log import RotatingFile
from tests.e2e.test_disk_full import fill, mounted_tmpfs
from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import run_cockpit


def _campaign(folder: Path) -> Path:
    return write_campaign(folder, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=3, sleep=0.01)},
    ], rules=[FINITE])


@pytest.mark.parametrize("flag", ["--status-log", "--log", "--prom"])
def test_headless_refuses_an_output_that_is_a_symlink(tmp_path: Path, flag: str) -> None:
    path = _campaign(tmp_path / "c")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "out.link"
    link.symlink_to(victim)
    done = run_cockpit("headless", str(path), "--until-done", "--interval", "0.1", flag,
                       str(link), timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "symbolic link" in done.stderr and str(link) in done.stderr
    assert victim.read_text() == "precious\n"


def test_the_default_status_log_planted_as_a_symlink_is_refused(tmp_path: Path) -> None:
    path = _campaign(tmp_path / "c")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (path.parent / ".cockpit").mkdir(exist_ok=True)
    (path.parent / ".cockpit" / "status.jsonl").symlink_to(victim)
    done = run_cockpit("headless", str(path), "--until-done", "--interval", "0.1", timeout=60)
    assert done.returncode == 2 and "status.jsonl" in done.stderr
    assert victim.read_text() == "precious\n"


def test_a_symlink_planted_while_running_is_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    log = tmp_path / "events.log"
    log.symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link"):
        RotatingFile(log).write_line("an event")
    prom = tmp_path / "cockpit.prom"
    # the temporary file (named by the writer's pid, which a local attacker can guess),
    # planted as a link: opened without following it
    (tmp_path / f".cockpit.prom.{os.getpid()}.tmp").symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link"):
        write_atomic(prom, "cockpit_window_seconds_left 1\n")
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("words", [["FILE"], ["tui", "FILE"], ["fleet", "FILE"]])
@pytest.mark.timeout(60)
def test_the_screen_without_a_terminal_exits_2_naming_headless(tmp_path: Path,
                                                                words: list[str]) -> None:
    path = _campaign(tmp_path / "c")
    args = [str(path) if w == "FILE" else w for w in words]
    done = run_cockpit(*args, timeout=30, input="")  # stdin and stdout are pipes
    assert done.returncode == 2, done.stdout[-500:] + done.stderr
    assert "headless" in done.stderr and "terminal" in done.stderr
    assert "\x1b" not in done.stdout  # no screen escapes into the pipe


@contextlib.contextmanager
def full_disk_at(tmp_path: Path, target: Path) -> Iterator[None]:
    """A full 256 KiB tmpfs bind-mounted on ``target`` (a folder of the campaign)."""
    target.mkdir(parents=True, exist_ok=True)
    with mounted_tmpfs(tmp_path, "256k") as mount:
        fill(mount)
        if subprocess.run(["mount", "--bind", str(mount), str(target)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot bind-mount here")
        try:
            yield
        finally:
            subprocess.run(["umount", str(target)], check=False)


@pytest.fixture
def full_logs(tmp_path: Path) -> Iterator[Path]:
    """A campaign whose ``.cockpit/logs`` (the runs' output and exit files) is a full
    disk, its journal on the ordinary one."""
    path = _campaign(tmp_path / "c")
    with full_disk_at(tmp_path, path.parent / ".cockpit" / "logs"):
        yield path


def test_a_launch_on_a_full_disk_is_refused_and_journaled_as_no_space(full_logs: Path) -> None:
    done = run_cockpit("start", str(full_logs), "train", timeout=60)
    events = [json.loads(line) for line in
              (full_logs.parent / ".cockpit" / "journal.jsonl").read_text().splitlines()]
    started = [e for e in events if e["kind"] == "stage_started"]
    for e in started:  # the old behaviour: said "started", left a run to die later
        try:
            os.killpg(e["pgid"], signal.SIGKILL)
        except (ProcessLookupError, KeyError):
            pass
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no space left" in done.stderr and str(full_logs.parent / ".cockpit" / "logs") \
        in done.stderr
    finished = [e for e in events if e["kind"] == "stage_finished"]
    assert not started
    assert finished and "no space left" in finished[-1]["reason"]


def test_enospc_is_exit_1_with_the_path_not_bad_input(tmp_path: Path) -> None:
    path = _campaign(tmp_path / "c")
    state = path.parent / ".cockpit"
    with full_disk_at(tmp_path, state):
        done = run_cockpit("note", str(path), "train", "a note on a full disk", timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no space left" in done.stderr and str(state / "journal.jsonl") in done.stderr
    assert "internal error" not in done.stderr


@pytest.mark.slow
def test_a_run_that_dies_on_a_full_disk_is_journaled_as_no_space(tmp_path: Path) -> None:
    path = write_campaign(tmp_path / "c", [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": [sys.executable, "-c", "import time; time.sleep(2)"]},
    ])
    logs = path.parent / ".cockpit" / "logs"
    logs.mkdir(parents=True)
    with mounted_tmpfs(tmp_path, "4m") as mount:
        if subprocess.run(["mount", "--bind", str(mount), str(logs)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot bind-mount here")
        try:
            started = run_cockpit("start", str(path), "train", timeout=60)
            assert started.returncode == 0, started.stderr
            fd = os.open(logs / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
            try:  # the disk fills while the run lives: its exit file cannot be written
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError:
                pass
            finally:
                os.close(fd)
            run_cockpit("headless", str(path), "--until-done", "--interval", "0.2",
                        "--status-log", str(tmp_path / "status.jsonl"), timeout=60)
        finally:
            subprocess.run(["umount", str(logs)], check=False)
    events = [json.loads(line) for line in
              (path.parent / ".cockpit" / "journal.jsonl").read_text().splitlines()]
    finished = [e for e in events if e["kind"] == "stage_finished"]
    assert finished, events
    assert "no space left" in finished[-1]["reason"] and "killed?" not in finished[-1]["reason"]
