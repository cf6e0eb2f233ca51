"""A full disk never kills a training run through the cockpit's helpers (issue: hardening).

``cockpit.report`` drops the line, counts it and warns once; ``save_state`` says
"no space left" (not torch's "unexpected pos"), leaves no partial file and keeps the
previous one. The full disk is real: ``/dev/full`` and a 64 KiB tmpfs (root only).
"""

from __future__ import annotations

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


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / f"tiny-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


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
