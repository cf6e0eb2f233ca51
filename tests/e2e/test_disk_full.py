"""A full disk never kills a training run through the cockpit's helpers (issue: hardening).

``cockpit.report`` drops the line, counts it and warns once; ``save_state`` says
"no space left" (not torch's "unexpected pos"), leaves no partial file and keeps the
previous one. The full disk is real: ``/dev/full`` and a 64 KiB tmpfs (root only).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPORT_SCRIPT = textwrap.dedent("""
    from cockpit import report
    for step in range(100):
        report.log(step, loss=1.0 / (step + 1))
    report.checkpoint_written("ckpt/x.pt", step=99)
    print("training survived", report.dropped())
""")


def test_report_on_a_full_disk_drops_lines_and_never_raises(tmp_path: Path) -> None:
    env = dict(os.environ, COCKPIT_REPORT="/dev/full")
    done = subprocess.run([sys.executable, "-c", REPORT_SCRIPT], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["training", "survived", "101"]
    warnings = [line for line in done.stderr.splitlines() if "dropped" in line]
    assert len(warnings) == 1 and "No space left" in warnings[0]


def test_report_writes_whole_lines_when_the_disk_is_fine(tmp_path: Path) -> None:
    target = tmp_path / "m.jsonl"
    env = dict(os.environ, COCKPIT_REPORT=str(target))
    done = subprocess.run([sys.executable, "-c", REPORT_SCRIPT], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.split()[-1] == "0"
    assert len(target.read_text().splitlines()) == 101


@contextlib.contextmanager
def mounted_tmpfs(tmp_path: Path, size: str) -> Iterator[Path]:
    """A real, small tmpfs (root only; the test is skipped elsewhere)."""
    mount = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path, "64k") as mount:
        yield mount


def test_save_state_on_a_full_disk_says_no_space_and_keeps_the_old_file(tiny_fs: Path) -> None:
    torch = pytest.importorskip("torch")
    from cockpit.resume import save_state

    small = torch.nn.Linear(4, 4)
    target = tiny_fs / "ckpt.pt"
    save_state(target, model=small, step=1)
    before = target.read_bytes()
    with pytest.raises(OSError) as caught:
        save_state(target, model=torch.nn.Linear(200, 200), step=2)
    assert "no space left" in str(caught.value) and "unexpected pos" not in str(caught.value)
    assert target.read_bytes() == before
    assert [p.name for p in tiny_fs.iterdir()] == ["ckpt.pt"]  # no temp file left


def fill(mount: Path) -> None:
    """Write a filler file into ``mount`` until its file system is full."""
    fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass  # full
    finally:
        os.close(fd)


@pytest.fixture
def full_fs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs, filled to the last byte."""
    with mounted_tmpfs(tmp_path, "256k") as mount:
        fill(mount)
        yield mount


def test_headless_keeps_ticking_on_a_full_disk_and_warns(full_fs: Path, tmp_path: Path) -> None:
    from tests.helpers.campaigns import FINITE, step_command, write_campaign

    path = write_campaign(tmp_path / "c", [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=20, sleep=0.05)},
    ], rules=[FINITE])
    done = subprocess.run(
        [sys.executable, "-m", "cockpit", "headless", str(path), "--auto", "--until-done",
         "--interval", "0.1", "--status-log", str(full_fs / "status.jsonl"),
         "--log", str(full_fs / "events.log"), "--prom", str(full_fs / "cockpit.prom")],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr
    assert "until-done: every essential stage is done" in done.stdout
    warned = [line for line in done.stderr.splitlines() if "warning" in line]
    assert any("status log" in line and "No space left" in line for line in warned)
    assert any("Prometheus file" in line for line in warned)
    assert any("event log" in line for line in warned)
    # Warned, not flooded: each lasting failure once (a minute apart at most).
    assert len(warned) <= 6, done.stderr
    assert not list(full_fs.glob(".*.tmp"))  # no half-written temp file left
