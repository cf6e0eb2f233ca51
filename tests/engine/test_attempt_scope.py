"""Issue 42, attempts are scoped: a run started again finds the first attempt's
``version_0/metrics.csv`` (step 999) and checkpoint where it writes its own. ``cockpit
start`` warns, naming the folders and the counts (a warning, not a refusal, also in the
journal), and the snapshot shows none of the old files for the new attempt — no step,
no metric, no checkpoint — until the new process writes its own. Real processes, real
files, the real clock."""

from __future__ import annotations

import errno
import json
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import TextIO

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit, wait_for

# The new attempt: takes its orders from the test through a FIFO (outside the campaign
# folder: the export copies that folder), so it waits on events, never on a clock. On
# "go" it writes as Lightning does (its CSVLogger deletes version_0/metrics.csv and writes
# its own) and saves step=1.ckpt in two writes, the second when the test says "more" (a
# save that takes time, reported to nobody); it ends when the test closes its end.
WRITER = textwrap.dedent("""
    import signal, sys
    from pathlib import Path
    signal.alarm(600)  # a test that never opened its end: never left over
    with open(sys.argv[1]) as ctl:  # blocks until the test opens its end
        if ctl.readline().strip() != "go":
            sys.exit(0)  # "done", or the test ended (EOF)
        csv = Path("out/version_0/metrics.csv")
        csv.unlink()
        csv.write_text("step,train_loss\\n1,0.5\\n")
        with open("ckpt/step=1.ckpt", "wb") as handle:
            handle.write(b"new ")
            handle.flush()
            ctl.readline()
            handle.write(b"weights")
        ctl.read()
""")
SAVE_S = 0.3  # how long the save takes: the test says "more" once the first half is this old


def _orders(folder: Path) -> TextIO:
    """The test's end of the writer's FIFO, once the writer reads it (an event)."""
    def opened() -> int | None:
        try:
            return os.open(folder.parent / "ctl", os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:  # ENXIO: no reader yet
            if exc.errno != errno.ENXIO:
                raise
            return None
    fd = wait_for(opened, 60, what="the writer reading its orders")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "w", buffering=1)


def _campaign(folder: Path) -> Path:
    path = write_campaign(folder, [{"id": "train", "duration": "5m", "resource": "cpu",
                                    "run": "r1", "command": [sys.executable, "writer.py",
                                                             str(folder.parent / "ctl")]}],
                          runs={"r1": {"metrics": ["out/version_0/metrics.csv"],
                                       "checkpoints": "ckpt", "verify_command": ["true"]}})
    (folder / "writer.py").write_text(WRITER)
    os.mkfifo(folder.parent / "ctl")
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
    engine, orders = None, None
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

        orders = _orders(folder)
        orders.write("go\n")  # the new attempt writes its own
        half = folder / "ckpt" / "step=1.ckpt"
        wait_for(lambda: half.exists() and half.stat().st_size == 4
                 and time.time() - half.stat().st_mtime >= SAVE_S, 60,
                 what="the first half of the save, written SAVE_S ago")
        orders.write("more\n")

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
        assert seen.checkpoint.save_cost_s >= SAVE_S - 0.02
    finally:
        if orders is not None:
            orders.close()  # the writer ends
        if engine is not None:
            wait_for(lambda: engine.tick().run("r1").state != "running", 60,
                     what="the writer's exit")
            engine.close()


def test_the_export_never_passes_an_earlier_attempts_checkpoint_off_as_this_ones(
        tmp_path: Path) -> None:
    folder = tmp_path / "c"
    path = _campaign(folder)
    assert run_cockpit("start", str(path), "train").returncode == 0
    with _orders(folder) as orders:
        orders.write("done\n")  # the new attempt ends at once, having saved nothing
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
