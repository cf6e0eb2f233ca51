"""Issue 42, attempts are scoped: a run started again finds the first attempt's
``version_0/metrics.csv`` (step 999) and checkpoint where it writes its own. ``cockpit
start`` warns, naming the folders and the counts (a warning, not a refusal, also in the
journal), and the snapshot shows none of the old files for the new attempt — no step,
no metric, no checkpoint — until the new process writes its own. Real processes, real
files, the real clock."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit, wait_for

# The new attempt: waits for the test's "go", then writes as Lightning does (its
# CSVLogger deletes version_0/metrics.csv and writes its own) and saves step=1.ckpt in
# two writes 0.3 s apart (a save that takes time, reported to nobody).
WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    def over():  # the test is done, or its folder is gone (a failed test: never left over)
        return Path("done").exists() or not Path("writer.py").exists()
    while not Path("go").exists():
        if over():
            sys.exit(0)
        time.sleep(0.05)
    csv = Path("out/version_0/metrics.csv")
    csv.unlink()
    csv.write_text("step,train_loss\\n1,0.5\\n")
    with open("ckpt/step=1.ckpt", "wb") as handle:
        handle.write(b"new ")
        handle.flush()
        time.sleep(0.3)
        handle.write(b"weights")
    while not over():
        time.sleep(0.05)
""")


def _campaign(folder: Path) -> Path:
    path = write_campaign(folder, [{"id": "train", "duration": "5m", "resource": "cpu",
                                    "run": "r1", "command": [sys.executable, "writer.py"]}],
                          runs={"r1": {"metrics": ["out/version_0/metrics.csv"],
                                       "checkpoints": "ckpt", "verify_command": ["true"]}})
    (folder / "writer.py").write_text(WRITER)
    # what the first attempt left, an hour ago
    (folder / "out" / "version_0").mkdir(parents=True)
    (folder / "out" / "version_0" / "metrics.csv").write_text("step,train_loss\n999,0.25\n")
    (folder / "ckpt").mkdir()
    (folder / "ckpt" / "step=999.ckpt").write_bytes(b"old weights")
    hour_ago = time.time() - 3600
    for old in (folder / "out" / "version_0" / "metrics.csv", folder / "ckpt" / "step=999.ckpt"):
        os.utime(old, (hour_ago, hour_ago))
    return path


def test_a_new_attempt_ignores_the_earlier_attempts_metrics_and_checkpoint(
        tmp_path: Path) -> None:
    folder = tmp_path / "c"
    path = _campaign(folder)
    engine = None
    try:
        started = run_cockpit("start", str(path), "train")
        assert started.returncode == 0, started.stdout + started.stderr
        ckpt, csv = folder / "ckpt", folder / "out" / "version_0" / "metrics.csv"
        warning = (f"{ckpt} holds 1 checkpoint from before this attempt: ignored for it "
                   f"until rewritten; {csv} holds 1 metrics file from before this attempt")
        assert f"cockpit start: warning: {warning}" in started.stderr  # a warning line
        assert warning in started.stdout  # the journal line printed
        journal = [json.loads(line) for line in
                   (folder / ".cockpit" / "journal.jsonl").read_text().splitlines()]
        (event,) = [e for e in journal if e["kind"] == "stage_started"]
        assert warning in event["warning"]

        engine = Engine(load_campaign(path))
        snap = engine.tick()
        run = snap.run("r1")
        assert run.state == "running" and run.step is None
        assert "loss" not in run.metrics and "train_loss" not in run.metrics
        view = run.checkpoint
        assert view is not None and view.count == 0 and view.path is None and view.step is None

        (folder / "go").touch()  # the new attempt writes its own

        def written() -> object:
            seen = engine.tick().run("r1")
            view = seen.checkpoint
            return seen if seen.step == 1 and view is not None and view.step == 1 \
                and view.save_cost_s is not None else None

        seen = wait_for(written, 60, what="the new attempt's step, checkpoint and save cost")
        assert seen.metrics["loss"] == 0.5 and seen.checkpoint.count == 1
        assert seen.checkpoint.path.endswith("step=1.ckpt")
        # measured from the file itself (created -> last written): what the landing's
        # reserve and the interval advice read, never "save not measured"
        assert seen.checkpoint.save_cost_s >= 0.3 - 0.02
    finally:
        (folder / "done").touch()
        if engine is not None:
            wait_for(lambda: engine.tick().run("r1").state != "running", 60,
                     what="the writer's exit")
            engine.close()


def test_the_export_never_passes_an_earlier_attempts_checkpoint_off_as_this_ones(
        tmp_path: Path) -> None:
    folder = tmp_path / "c"
    path = _campaign(folder)
    (folder / "done").touch()  # the new attempt ends at once, having saved nothing
    assert run_cockpit("start", str(path), "train").returncode == 0
    engine = Engine(load_campaign(path))
    try:
        wait_for(lambda: engine.tick().run("r1").state == "succeeded", 60,
                 what="the new attempt's end")
    finally:
        engine.close()
    accepted = run_cockpit("accept", str(path), "r1", "--override", "--note", "no checkpoint")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    done = run_cockpit("export", str(path), timeout=180)
    bag = folder / ".cockpit" / "export" / "test-campaign" / "test-campaign"
    names = sorted(p.name for p in bag.rglob("*.ckpt"))
    assert names == [], (names, done.stdout)  # step=999.ckpt is the first attempt's
