"""kill -9 at random points of an export: never a complete-looking bad export, never a
damaged previous one (the export is built aside and renamed into place)."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from cockpit.export import export_campaign, root_swap, verify_export
from cockpit.journal.log import sha256_file
from cockpit.runs import provenance
from tests.e2e.test_export_sample import NOW, build_sample

PHASES = ("plan_written", "runs_written", "payload_written", "bag_written", "verified",
          "tar_written", "ready_to_rename", "old_moved_aside", "renamed")
# Between the payload written and the rename: where an export is most tempting to trust.
LATE = ("payload_written", "bag_written", "verified", "tar_written", "ready_to_rename",
        "old_moved_aside")


def _export_in_child(campaign, out: Path, pause_at: str | None) -> tuple[int, int]:
    """Fork a child that exports and reports each phase on a pipe: (pid, read fd).
    With ``pause_at`` it waits right after that phase, so the kill lands exactly there."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: export, then leave without running pytest's teardown
        code = 1
        try:
            os.close(read_fd)
            def progress(phase: str) -> None:
                os.write(write_fd, f"{phase}\n".encode())
                if phase == pause_at:
                    # Held here until the parent's kill -9 (the alarm ends a child whose
                    # parent never sends it).
                    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # not pytest-timeout's
                    signal.alarm(120)
                    while True:
                        signal.pause()

            export_campaign(campaign, None, out_dir=out, now=NOW, verify_reload=False,
                            journal=False, progress=progress)
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def _wait_phase(read_fd: int, phase: str | None) -> bool:
    seen = b""
    while phase is not None:
        chunk = os.read(read_fd, 4096)
        if not chunk:
            return False  # the child finished (or died) before that phase
        seen += chunk
        if f"{phase}\n".encode() in seen:
            return True
    return True


def _assert_sound(root: Path, previous_sha: str) -> str:
    """The invariants after a kill; returns the tar hash of the export now in place."""
    parent = root.parent
    visible = [p.name for p in parent.iterdir() if not p.name.startswith(".")]
    assert visible in ([root.name], []), visible
    if not root.exists():
        # Killed between moving the previous export aside and renaming the new one in:
        # the previous export is whole, aside, and the next export puts it back.
        aside = sorted(parent.glob(f".{root.name}.old-*"))
        assert len(aside) == 1
        assert json.loads((aside[0] / "export.json").read_text())["tar_sha256"] == previous_sha
        root_swap.recover(root)
        assert root.exists()
    info = json.loads((root / "export.json").read_text())
    assert sha256_file(root / info["tar"]) == info["tar_sha256"]
    report = verify_export(root, reload=False)  # bagit's validation included
    assert report.ok and report.check("bag valid").ok, report.render()
    return info["tar_sha256"]


@pytest.mark.slow  # 22 exports, each killed
def test_kill_9_at_random_points_never_leaves_a_bad_export(tmp_path, monkeypatch):
    # The environment (a fresh interpreter importing torch: seconds of CPU) is measured
    # once, for real, and reused by the 22 exports below: what is tried here is the
    # rename under kill -9, and the children inherit it by the fork.
    measured = provenance.environment()
    monkeypatch.setattr(provenance, "environment", lambda: dict(measured))
    campaign, state = build_sample(tmp_path / "c", judge="journal", artifact_pad=300_000)
    out = tmp_path / "exports" / "close"
    first = export_campaign(campaign, state, out_dir=out, now=NOW, verify_reload=False)
    previous = first.tar_sha256
    rng = random.Random(8493)
    late_kills = 0
    order = [p for p in PHASES for _ in (0, 1)]  # each phase twice: once exact, once after
    for trial in range(20):
        phase = order[trial] if trial < 18 else None
        exact = trial % 2 == 0  # even trials stop exactly at the phase, odd ones a bit later
        pid, read_fd = _export_in_child(campaign, out, phase if exact else None)
        try:
            reached = _wait_phase(read_fd, phase)
            if phase is None:
                time.sleep(rng.uniform(0.0, 0.15))  # a random moment, no phase aimed at
            elif not exact:
                time.sleep(rng.uniform(0.0, 0.003))
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        finally:
            os.close(read_fd)
        killed = os.WIFSIGNALED(status)
        if killed and reached and phase in LATE:
            late_kills += 1
        previous = _assert_sound(out, previous)
    assert late_kills >= 1
    # Leftovers of killed exports never accumulate: the next export clears them.
    final = export_campaign(campaign, state, out_dir=out, now=NOW, verify_reload=False)
    assert final.verified
    assert [p.name for p in out.parent.iterdir() if not p.name.endswith(".lock")] == ["close"]
