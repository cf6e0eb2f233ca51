"""A checkpoint the run reported written is complete at once (the resume-check race).

The pilot writes its last checkpoint and exits; the resume check starts well under the
scanner's 2 s settle time later. ``cockpit verify`` must take the run's own
``checkpoint_written`` report as proof, and keep the settle time for files nobody
reported.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from cockpit.campaign import load_campaign
from cockpit.common.errors import InputError
from cockpit.runs.checkpoints.verifier import choose_checkpoint
from cockpit.runs.supervisor import report_path
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit


def _campaign(folder: Path) -> Path:
    return write_campaign(
        folder,
        stages=[{"id": "train", "duration": "5m", "resource": "gpu", "run": "r",
                 "command": [sys.executable, "-c", "pass"]}],
        runs={"r": {"checkpoints": "ckpt"}})


def _fresh_checkpoint(folder: Path, step: int) -> Path:
    (folder / "ckpt").mkdir(exist_ok=True)
    path = folder / "ckpt" / f"step-{step:06d}.pt"
    path.write_bytes(b"weights" * 100)
    return path


def _report(campaign_path: Path, path: Path, step: int) -> None:
    campaign = load_campaign(campaign_path)
    report = report_path(campaign, "r")
    report.parent.mkdir(parents=True, exist_ok=True)
    with report.open("a") as handle:
        handle.write(json.dumps({"t": time.time(), "event": "checkpoint_written",
                                 "path": str(path), "step": step, "seconds": 0.01}) + "\n")


def test_a_reported_checkpoint_is_complete_at_once(tmp_path: Path) -> None:
    path = _campaign(tmp_path)
    ckpt = _fresh_checkpoint(tmp_path, 10)
    _report(path, ckpt, 10)
    campaign = load_campaign(path)
    chosen = choose_checkpoint(campaign, campaign.runs["r"], "newest")
    assert Path(chosen.path) == ckpt and chosen.reported


def test_an_unreported_fresh_file_still_settles(tmp_path: Path) -> None:
    path = _campaign(tmp_path)
    _fresh_checkpoint(tmp_path, 10)  # just written, nobody said it is complete
    campaign = load_campaign(path)
    with pytest.raises(InputError, match="no complete checkpoint"):
        choose_checkpoint(campaign, campaign.runs["r"], "newest")


def test_only_the_reported_one_of_two_fresh_files_counts(tmp_path: Path) -> None:
    path = _campaign(tmp_path)
    first = _fresh_checkpoint(tmp_path, 10)
    _fresh_checkpoint(tmp_path, 20)  # being written: not reported yet
    _report(path, first, 10)
    campaign = load_campaign(path)
    chosen = choose_checkpoint(campaign, campaign.runs["r"], "newest")
    assert Path(chosen.path) == first


def test_cockpit_verify_right_after_the_write_finds_it(tmp_path: Path) -> None:
    """The CLI path the resume-check stage takes, with no time for files to settle."""
    path = _campaign(tmp_path)
    ckpt = _fresh_checkpoint(tmp_path, 10)
    _report(path, ckpt, 10)
    result = run_cockpit("verify", str(path), "r", "--checkpoint", "newest")
    # The bytes are no real checkpoint: the reload fails (exit 1) — but it was *found*.
    assert "no complete checkpoint" not in result.stderr, result.stderr
    assert str(ckpt) in result.stdout + result.stderr
