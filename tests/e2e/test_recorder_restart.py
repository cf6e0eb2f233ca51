"""History that survives a kill -9 (issue 27): a real headless cockpit with simulated
GPUs records its telemetry; killed with SIGKILL and started again, the history it had
committed before the kill is still there, readable through the recorder's reader, the
new cockpit goes on in the same store, and the store is not corrupt."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from cockpit.journal.paths import CampaignFiles
from cockpit.telemetry.flight import (
    Point,
    RecordingReader,
    RecordingUnreadable,
    gpu_series,
    host_series,
)
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import wait_for


def headless(path: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop("COCKPIT_SIMULATE_GPUS", None)
    return subprocess.Popen([sys.executable, "-m", "cockpit", "headless", str(path),
                             "--simulate-gpus", "2", "--interval", "0.2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def recorded(store: Path, after: float = 0.0, seconds: int = 6) -> tuple[int, int] | None:
    """The raw span of the GPUs once it holds ``seconds`` committed after ``after``."""
    try:
        with RecordingReader.open(store) as reader:
            span = reader.raw_span("gpu")
    except RecordingUnreadable:
        return None
    return span if span and span[1] - max(span[0], after) >= seconds else None


def history(store: Path) -> dict[str, list[Point]]:
    with RecordingReader.open(store) as reader:
        return {"util0": reader.series(gpu_series(0, "util"), 0, 2**40),
                "util1": reader.series(gpu_series(1, "util"), 0, 2**40),
                "cpu": reader.series(host_series("mem_used"), 0, 2**40)}


def test_history_before_a_kill_9_is_readable_after_a_restart(tmp_path: Path) -> None:
    path = write_campaign(tmp_path / "c", [{"id": "wait", "hours": 1, "resource": "human"}])
    store = CampaignFiles.beside(path).recorder
    first = headless(path)
    try:
        wait_for(lambda: recorded(store), timeout=90, what="a first committed batch")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    assert first.returncode == -signal.SIGKILL
    before = history(store)
    killed_at = before["util0"][-1].t
    assert len(before["util0"]) >= 6 and len(before["cpu"]) >= 6

    second = headless(path)
    try:
        wait_for(lambda: recorded(store, after=killed_at), timeout=90,
                 what="the restarted cockpit's batches")
    finally:
        second.send_signal(signal.SIGTERM)  # a clean stop writes what waits
        second.wait(timeout=60)
    assert second.returncode == 0
    after = history(store)
    for name, points in before.items():
        kept = [p for p in after[name] if p.t <= killed_at]
        assert kept == points, name  # every point committed before the kill, unchanged
        assert after[name][-1].t > killed_at + 5, name  # and the new cockpit's after it
    db = sqlite3.connect(f"{store.as_uri()}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        db.close()
    assert not list(store.parent.glob("recorder.sqlite.unreadable-*"))
