"""A verdict uses each metric's real last value, however big the metric file is.

A 20 MB file once got a run accepted on a value from its middle: the one-shot read
stopped at 16 MiB. The tail reader reads from the end; the whole-file fallback reads
to the end.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from cockpit.runs.metrics.tail import last_values
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit

BIG_WRITER = """
import json, os, time
from cockpit import report
path = os.environ["COCKPIT_REPORT"]
t = time.time()
line = json.dumps({"t": t, "step": 0, "loss": 0.1, "val/accuracy": 0.97, "pad": "x" * 200})
with open(path, "a") as handle:
    for step in range(1, 90_000):  # ~22 MB of good values...
        handle.write(line.replace('"step": 0', f'"step": {step}') + "\\n")
report.log(90_000, **{"val/accuracy": 0.42, "loss": 0.1})  # ...and a bad last one
report.log(90_001, loss=0.1)  # later lines without the metric must not hide it
"""


def test_a_20_mb_metric_file_is_judged_on_its_last_value(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text(BIG_WRITER)
    path = write_campaign(
        tmp_path,
        stages=[{"id": "control", "duration": "5m", "resource": "cpu", "run": "control",
                 "command": [sys.executable, "big.py"]}],
        runs={"control": {"acceptance": [{"metric": "val/accuracy", "min": 0.9}]}})
    result = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.2",
                         timeout=240)
    report = tmp_path / ".cockpit" / "runs" / "control" / "report.jsonl"
    assert report.stat().st_size > 20 * 2**20
    events = [json.loads(line) for line in
              (tmp_path / ".cockpit" / "journal.jsonl").read_text().splitlines()]
    verdicts = [e for e in events if e["kind"] in ("result_accepted", "result_rejected")]
    assert [v["kind"] for v in verdicts] == ["result_rejected"], result.stdout + result.stderr
    assert "0.42" in json.dumps(verdicts[0])


def test_the_tail_reader_stops_early_and_honours_the_attempt(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    now = time.time()
    lines = [{"t": now - 100, "step": 1, "acc": 0.99, "old_only": 1.0}]  # an earlier attempt
    lines += [{"t": now + i, "step": i, "acc": 0.5 + i / 1000, "loss": 1.0} for i in range(100)]
    lines += [{"t": now + 200, "event": "checkpoint_written", "path": "x"}, {"garbage": "["}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n{torn")
    found = last_values([path], ["acc"], since=now - 1)
    assert found.values["acc"] == 0.5 + 99 / 1000 and found.last_step == 99
    assert "old_only" not in found.values
    everything = last_values([path], None, since=None)
    assert everything.values["old_only"] == 1.0 and everything.values["acc"] == found.values["acc"]
