"""`cockpit status` shows the real last step of a metric file bigger than one poll reads
(issue 14: a 20 MB file showed step 211,373 of 12,347,407). The stream's latest values
are seeded from the file's tail; the incremental reading for the rules still starts at
the beginning and catches up over later polls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cockpit.journal.log import Journal
from cockpit.runs.metrics.stream import MetricStream
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit

MB = 1024 * 1024


def big_metric_file(path: Path, size: int) -> int:
    """JSON lines up to ``size`` bytes; the accuracy is reported every 1000 steps only.
    Returns the last step."""
    path.parent.mkdir(parents=True, exist_ok=True)
    step = 0
    written = 0
    with path.open("w") as handle:
        chunk = []
        while written < size:
            step += 1
            record = {"step": step, "loss": round(1.0 / step, 9)}
            if step % 1000 == 0:
                record["val/accuracy"] = round(step / 10**7, 6)
            line = json.dumps(record) + "\n"
            chunk.append(line)
            written += len(line)
            if len(chunk) >= 10000:
                handle.write("".join(chunk))
                chunk = []
        handle.write("".join(chunk))
    return step


@pytest.mark.slow  # a 20 MB metric file
def test_status_json_shows_the_last_step_of_a_20_mb_metric_file(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1"},
    ], runs={"r1": {"metrics": ["out/metrics.jsonl"]}})
    metrics = tmp_path / "out" / "metrics.jsonl"
    last = big_metric_file(metrics, 20 * MB)
    assert metrics.stat().st_size > 16 * MB  # more than one poll reads
    journal = Journal(tmp_path / ".cockpit" / "journal.jsonl")
    started = journal.append("stage_started", stage="train", run="r1", manual=True)
    journal.append("run_started", run="r1", stage="train", attempt=started["seq"])
    result = run_cockpit("status", str(path), "--json", timeout=300)  # hang guard; 20 MB read
    assert result.returncode == 0, result.stderr
    (run,) = [r for r in json.loads(result.stdout)["runs"] if r["id"] == "r1"]
    assert run["step"] == last
    assert run["metrics"]["loss"] == round(1.0 / last, 9)
    assert run["metrics"]["val/accuracy"] == round((last // 1000 * 1000) / 10**7, 6)


@pytest.mark.slow  # a large metric file, read twice
def test_a_seeded_stream_keeps_its_tail_values_while_the_rules_read_from_the_start(
        tmp_path: Path) -> None:
    from cockpit.runs.metrics.tail import seed_from_tail

    metrics = tmp_path / "m.jsonl"
    last = big_metric_file(metrics, 20 * MB)
    stream = MetricStream([metrics])
    seed_from_tail(stream)
    assert stream.latest_step == last
    first = stream.poll()  # the incremental read: from the start, bounded
    assert first[0].step == 1 and first[-1].step < last
    assert stream.latest_step == last  # older points do not pull the snapshot back
    while stream.poll():
        pass
    assert stream.latest_step == last
    with metrics.open("a") as handle:  # new points after the catch-up move it on
        handle.write(json.dumps({"step": last + 1, "loss": 0.1}) + "\n")
    stream.poll()
    assert stream.latest_step == last + 1 and stream.latest["loss"] == 0.1
