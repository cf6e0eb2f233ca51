"""A tick never waits for a slow check (issue 14): an acceptance ``checkpoint: reloads``
whose ``verify_command`` does not end until the test lets it runs in the background
verifier; ticks meanwhile come back while the check provably still runs, and the verdict
is journaled on a later tick. Real engine, real processes."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import wait_for

TRAIN = textwrap.dedent("""
    import os
    from cockpit import report
    os.makedirs("ckpt/r1", exist_ok=True)
    with open("ckpt/r1/step-1.pt", "wb") as handle:
        handle.write(b"weights")
    report.checkpoint_written("ckpt/r1/step-1.pt", step=1)
    report.log(1, loss=0.5)
""")
# The slow check: says it began (a file), then holds until the test creates the release
# file; a check that never ends unless told, so no tick can outwait it by chance.
SLOW = textwrap.dedent("""
    import os, pathlib, sys, time
    began, release = sys.argv[1], sys.argv[2]
    pathlib.Path(began).touch()
    while not os.path.exists(release):
        time.sleep(0.02)
""")


def slow_campaign(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text(TRAIN)
    (folder / "slow_check.py").write_text(SLOW)
    check = [sys.executable, str(folder / "slow_check.py"), str(began(folder)),
             str(release(folder))]
    return write_campaign(folder, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": [sys.executable, "train.py"]},
    ], runs={"r1": {"checkpoints": "ckpt/r1", "verify_command": check,
                    "acceptance": [{"checkpoint": "reloads"}]}})


def began(folder: Path) -> Path:
    return folder / "check-began"


def release(folder: Path) -> Path:
    return folder / "check-may-end"


def verdicts(path: Path) -> list[dict[str, Any]]:
    lines = (path.parent / ".cockpit" / "journal.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines)
            if e["kind"] in ("result_accepted", "result_rejected")]


def test_a_slow_acceptance_reload_never_blocks_a_tick(tmp_path: Path) -> None:
    path = slow_campaign(tmp_path)
    engine = Engine(load_campaign(path), actor="test")
    engine.start("train")
    try:
        # Tick until the run ended and its reload check is running (it said so).
        wait_for(lambda: engine.tick().run("r1").state == "succeeded"
                 and began(tmp_path).exists(), 60, "the run's end and its check begun")
        # The check holds until released: each of these ticks comes back while it runs.
        for _ in range(10):
            snap = engine.tick()
            assert snap.run("r1").state == "succeeded" and not verdicts(path)
        assert not release(tmp_path).exists()  # the check was running all along
        assert engine.until_done(engine.state()).reason == "judging"
    finally:
        release(tmp_path).touch()
    wait_for(lambda: engine.tick() and verdicts(path), 60, "the verdict on a later tick")
    (verdict,) = verdicts(path)
    assert verdict["kind"] == "result_accepted" and verdict["run"] == "r1"
    assert "reloads in a fresh process" in verdict["reason"]
    assert engine.until_done(engine.state()).code == 0


def test_until_done_waits_for_a_verdict_still_being_checked(tmp_path: Path) -> None:
    path = slow_campaign(tmp_path)
    engine = Engine(load_campaign(path), actor="test")
    engine.start("train")
    try:
        wait_for(lambda: engine.tick().run("r1").state == "succeeded", 30, "the run's end")
        assert not verdicts(path)
        assert engine.until_done(engine.state()).reason == "judging"
    finally:
        release(tmp_path).touch()


def test_nobody_is_asked_for_a_verdict_while_the_acceptance_checks_judge(
        tmp_path: Path) -> None:
    """"awaits a verdict" (NEEDS A PERSON) only once the automatic acceptance has had its
    say: while the run's reload check runs in the background the run is *judging*, and
    the check's verdict leaves nothing to ask. A run with no acceptance check is asked
    for at once (nothing else will judge it)."""
    path = slow_campaign(tmp_path)
    data = json.loads(path.read_text())
    data["stages"].append({"id": "plain", "hours": 1, "resource": "cpu", "run": "r2",
                           "command": [sys.executable, "-c", "pass"]})
    path.write_text(json.dumps(data))
    engine = Engine(load_campaign(path), actor="test")
    engine.start("train")
    engine.start("plain")
    try:
        wait_for(lambda: engine.tick().run("r1").state == "succeeded"
                 and began(tmp_path).exists(), 60, "the run's end and its check begun")
        for _ in range(3):
            snap = engine.tick()
            asked = [n.key for n in snap.needs_person() if n.kind == "verdict"]
            assert not verdicts(path)
            assert "verdict:r1" not in asked, asked  # its check is still judging it
            assert snap.run("r1").judging
        wait_for(lambda: "verdict:r2" in [n.key for n in engine.tick().needs_person()], 30,
                 "the run without checks asked for at once")
    finally:
        release(tmp_path).touch()
    wait_for(lambda: engine.tick() and verdicts(path), 60, "the verdict on a later tick")
    snap = engine.tick()
    assert snap.run("r1").verdict == "accepted" and not snap.run("r1").judging
    assert "verdict:r1" not in [n.key for n in snap.needs_person()]
