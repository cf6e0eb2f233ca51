"""The landing's export on a full disk (issue 43): the export folder is a real 64 KiB
tmpfs, too small for the bag. The landing says the export failed and that it landed
WITHOUT a verified export (never a ✓), leaves no half-written bag or temporary folder
on the full disk, keeps its journal whole, and an export made once there is room again
is verified. Root only (a tmpfs is mounted); skipped elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from tests.e2e.test_disk_full import mounted_tmpfs
from tests.e2e.test_landing import WINDOW_H, AheadClock
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit, wait_for


def journal(folder: Path) -> list[dict]:
    path = folder / ".cockpit" / "journal.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def landing(folder: Path) -> dict[str, dict]:
    return {e["phase"]: e for e in journal(folder) if e["kind"] == "landing"}


def test_a_full_disk_during_the_landings_export_is_said_and_leaves_nothing_half_written(
        tmp_path: Path) -> None:
    start = datetime.now(timezone.utc) - timedelta(hours=WINDOW_H) + timedelta(hours=2)
    forever = [sys.executable, "step.py", "100000", "0.05", "0", "0"]
    path = write_campaign(tmp_path, [
        {"id": "control", "hours": 1, "resource": "cpu", "run": "control",
         "category": "useful", "command": forever}],
        start=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        extra={"on_deadline": "land", "deadline": {"export_hours": "1m",
                                                    "retrieve_hours": "1m"}})
    exports = tmp_path / ".cockpit" / "export"
    exports.mkdir(parents=True)
    with mounted_tmpfs(exports, "64k") as full:
        target = exports / "test-campaign"
        subprocess.run(["mount", "--bind", str(full), str(exports)], check=True)
        try:
            clock = AheadClock()
            engine = Engine(load_campaign(path), auto=True, clock=clock)
            wait_for(lambda: engine.tick().run("control").state == "running", timeout=30,
                     what="the run")
            point = engine.tick().window.point_of_no_return
            assert point is not None
            clock.ahead = (point - datetime.now(timezone.utc)).total_seconds() + 1
            wait_for(lambda: engine.tick() and "landed" in landing(tmp_path), timeout=90,
                     what="the landing's end")
            phases = landing(tmp_path)
            assert phases["exported"]["ok"] is False, phases["exported"]
            assert "FAILED" in phases["exported"]["text"], phases["exported"]
            assert phases["landed"]["text"].startswith("landed WITHOUT a verified export")
            assert engine.until_done(engine.state()).code == 5
            engine.close()
            # Nothing half-written on the full disk: no bag, no tar, no temporary folder.
            left = sorted(p.name for p in target.rglob("*")) if target.exists() else []
            assert left == [], left
        finally:
            subprocess.run(["umount", str(exports)], check=False)
    # The journal stayed whole (every line parses), and with room again an export verifies.
    assert all(isinstance(e, dict) for e in journal(tmp_path))
    done = run_cockpit("export", str(path), timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr  # exit 1: not verified
    assert (exports / "test-campaign" / "test-campaign.tar").stat().st_size > 64 * 1024
