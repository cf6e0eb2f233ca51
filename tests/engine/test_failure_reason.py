"""A failed stage says why (issue 22): the exit in words (a signal by name) and the last
meaningful line of its stderr, read once when it ends, made printable, on every face;
and D15: a run a rule stopped is restarted only with --force. Real processes."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from cockpit.runs.exit_reason import exit_words, last_stderr_line
from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import run_cockpit

CRASH = textwrap.dedent("""
    import os, signal, sys
    print("loading data\\x1b]0;pwned\\x07", file=sys.stderr, flush=True)
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    def load():
        raise ValueError("bad split \\x1b[2J")
    load()
""")


def _crash_campaign(folder: Path, how: str) -> Path:
    path = write_campaign(folder, [{"id": "train", "command": [sys.executable, "crash.py", how],
                                    "duration": "10m", "resource": "cpu"}])
    (folder / "crash.py").write_text(CRASH)
    return path


def _run_to_the_end(path: Path) -> str:
    done = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       timeout=120)
    return done.stdout + done.stderr


@pytest.mark.slow
def test_a_traceback_names_its_exception_on_every_face(tmp_path: Path) -> None:
    path = _crash_campaign(tmp_path / "c", "raise")
    headless = _run_to_the_end(path)
    status = run_cockpit("status", str(path)).stdout
    # The last line of a Python traceback, after "exit code 1", its ESC shown, not sent.
    expected = "exit code 1: ValueError: bad split \\x1b[2J"
    for face in (headless, status):
        assert expected in face, face
        assert "\x1b" not in face


@pytest.mark.slow
def test_a_killed_run_names_its_signal(tmp_path: Path) -> None:
    path = _crash_campaign(tmp_path / "c", "kill")
    _run_to_the_end(path)
    status = run_cockpit("status", str(path)).stdout
    assert "killed by SIGKILL: loading data\\x1b]0;pwned\\x07" in status, status


def test_exit_words() -> None:
    assert exit_words(1) == "exit code 1"
    assert exit_words(-9) == "killed by SIGKILL"
    assert exit_words(-15, "SIGTERM") == "killed by SIGTERM"
    assert exit_words(None) is None


def test_the_last_meaningful_line_skips_frames_bars_and_the_cut_first_line(tmp_path: Path) -> None:
    err = tmp_path / "run.err"
    err.write_bytes(b"x" * 70_000 + b"\n"  # cut by the 64 KiB bound: never chosen
                    + b"Traceback (most recent call last):\n  File \"t.py\", line 3\n"
                    + b"    load()\nRuntimeError: CUDA out of memory\n"
                    + b"epoch 1:  42%|####      | 42/100 [00:01<00:02, 30.1it/s]\r"
                    + b"epoch 1: 100%|##########| 100/100 [00:03<00:00, 30.1it/s]\n\n")
    assert last_stderr_line(str(err)) == "RuntimeError: CUDA out of memory"
    assert last_stderr_line(str(tmp_path / "missing.err")) is None


@pytest.mark.slow
def test_a_run_stopped_by_a_rule_restarts_only_with_force(tmp_path: Path) -> None:
    path = write_campaign(tmp_path / "c",
                          [{"id": "train", "run": "r1", "command": step_command(30, 0.05, 3),
                            "duration": "10m"}],
                          runs={"r1": {"metrics": "metrics/r1.jsonl"}}, rules=[FINITE])
    _run_to_the_end(path)
    assert "stopped" in run_cockpit("status", str(path)).stdout
    refused = run_cockpit("start", str(path), "train")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "finite-loss" in refused.stderr and "--force" in refused.stderr
    forced = run_cockpit("start", str(path), "train", "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    run_cockpit("stop", str(path), "train", "--reason", "test over", timeout=60)
