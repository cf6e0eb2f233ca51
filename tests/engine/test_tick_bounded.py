"""A tick never waits for a slow check (issue 14): an acceptance ``checkpoint: reloads``
with a 5 s ``verify_command`` runs in the background verifier; every tick meanwhile stays
short, and the verdict is journaled on a later tick. Real engine, real processes."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from tests.helpers.campaigns import write_campaign

TRAIN = textwrap.dedent("""
    import os
    from cockpit import report
    os.makedirs("ckpt/r1", exist_ok=True)
    with open("ckpt/r1/step-1.pt", "wb") as handle:
        handle.write(b"weights")
    report.checkpoint_written("ckpt/r1/step-1.pt", step=1)
    report.log(1, loss=0.5)
""")
SLOW = [sys.executable, "-c", "import time; time.sleep(5)"]


def slow_campaign(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text(TRAIN)
    return write_campaign(folder, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": [sys.executable, "train.py"]},
    ], runs={"r1": {"checkpoints": "ckpt/r1", "verify_command": SLOW,
                    "acceptance": [{"checkpoint": "reloads"}]}})


def verdicts(path: Path) -> list[dict[str, Any]]:
    lines = (path.parent / ".cockpit" / "journal.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines)
            if e["kind"] in ("result_accepted", "result_rejected")]


def test_a_slow_acceptance_reload_never_blocks_a_tick(tmp_path: Path) -> None:
    path = slow_campaign(tmp_path)
    engine = Engine(load_campaign(path), actor="test")
    engine.start("train")
    ticks: list[float] = []
    judging_ticks = 0
    deadline = time.monotonic() + 60
    while not verdicts(path):
        assert time.monotonic() < deadline, "the verdict never arrived"
        began = time.perf_counter()
        snap = engine.tick()
        ticks.append(time.perf_counter() - began)
        assert ticks[-1] < 0.5, f"a tick took {ticks[-1]:.2f} s"
        judging_ticks += snap.run("r1").state == "succeeded" and not verdicts(path)
        time.sleep(0.05)
    assert judging_ticks >= 10, "the check did not run while the engine ticked"
    (verdict,) = verdicts(path)
    assert verdict["kind"] == "result_accepted" and verdict["run"] == "r1"
    assert "reloads in a fresh process" in verdict["reason"]
    assert engine.until_done(engine.state()).code == 0


def test_until_done_waits_for_a_verdict_still_being_checked(tmp_path: Path) -> None:
    path = slow_campaign(tmp_path)
    engine = Engine(load_campaign(path), actor="test")
    engine.start("train")
    deadline = time.monotonic() + 30
    while engine.tick().run("r1").state != "succeeded":
        assert time.monotonic() < deadline, "the run never ended"
        time.sleep(0.05)
    assert not verdicts(path)
    assert engine.until_done(engine.state()).reason == "judging"
