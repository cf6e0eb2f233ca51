"""What the hours bought (issue 27), on a real campaign: a headless cockpit with
simulated GPUs records; two stages run one after the other with a gap between them;
``status --json`` measures the gap to the second against the journal's own times, and
the GPU-hours held are exactly busy + idle + unrecorded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from cockpit.journal.paths import CampaignFiles
from cockpit.telemetry.flight import RecordingReader, RecordingUnreadable
from tests.helpers.campaigns import step_command, write_campaign
from tests.helpers.process import run_cockpit, wait_for


def journal(path: Path) -> list[dict[str, Any]]:
    text = CampaignFiles.beside(path).journal.read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def stage_time(path: Path, kind: str, stage: str) -> float | None:
    for event in journal(path):
        if event["kind"] == kind and event.get("stage") == stage:
            return datetime.fromisoformat(event["t"].replace("Z", "+00:00")).timestamp()
    return None


def recorded_to(store: Path, t: float) -> bool:
    try:
        with RecordingReader.open(store) as reader:
            span = reader.raw_span("gpu")
    except RecordingUnreadable:
        return False
    return span is not None and span[1] >= t


def test_the_gap_between_two_stages_is_measured_to_the_second(tmp_path: Path) -> None:
    path = write_campaign(tmp_path / "c", [
        {"id": "a", "hours": 1, "resource": "gpu", "run": "ra",
         "command": step_command(steps=20, sleep=0.1)},
        {"id": "b", "hours": 1, "resource": "gpu", "run": "rb", "after": ["a"],
         "command": step_command(steps=20, sleep=0.1)},
    ], offer="duo-3d", extra={"offers": [{"id": "duo-3d", "gpu": "RTX 4090", "gpus": 2,
                                          "days": 3, "price": "94.28"}]})
    env = dict(os.environ)
    env.pop("COCKPIT_SIMULATE_GPUS", None)
    cockpit = subprocess.Popen([sys.executable, "-m", "cockpit", "headless", str(path),
                                "--simulate-gpus", "2", "--interval", "0.2"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        assert run_cockpit("start", str(path), "a").returncode == 0
        a_end = wait_for(lambda: stage_time(path, "stage_finished", "a"), timeout=90,
                         what="stage a's end")
        # The gap: b starts once the recording has gone on 3.5 s past a's end.
        wait_for(lambda: recorded_to(CampaignFiles.beside(path).recorder, a_end + 3.5),
                 timeout=60, what="3.5 s recorded after a's end (the gap)")
        assert run_cockpit("start", str(path), "b").returncode == 0
        b_end = wait_for(lambda: stage_time(path, "stage_finished", "b"), timeout=90,
                         what="stage b's end")
        wait_for(lambda: recorded_to(CampaignFiles.beside(path).recorder, b_end + 1),
                 timeout=60, what="the recording past b's end")
    finally:
        cockpit.send_signal(signal.SIGTERM)
        cockpit.wait(timeout=60)
    a_start = stage_time(path, "stage_started", "a")
    b_start = stage_time(path, "stage_started", "b")
    assert a_start is not None and b_start is not None

    result = run_cockpit("status", str(path), "--json")
    assert result.returncode == 0, result.stderr
    hours = json.loads(result.stdout)["hours"]
    between = [g for g in hours["gaps"] if g["kind"] == "between"]
    assert len(between) == 1
    gap = between[0]
    assert gap["seconds"] == round(b_start) - round(a_end)
    assert abs(gap["seconds"] - (b_start - a_end)) <= 1 and gap["seconds"] >= 3
    assert datetime.fromisoformat(gap["start"].replace("Z", "+00:00")).timestamp() \
        == round(a_end)
    assert gap["share"]["currency"] == "USD" and float(gap["share"]["amount"]) >= 0
    assert [g["kind"] for g in hours["gaps"]] == ["before", "between", "after"]

    overall = hours["overall"]
    assert overall["held_gpu_s"] == 2 * hours["window"]["elapsed_s"]
    stages = {s["stage"]: s for s in hours["stages"]}
    for part in (overall, hours["between_stages"], *stages.values()):
        assert part["held_gpu_s"] == part["busy_gpu_s"] + part["idle_gpu_s"] \
            + part["unrecorded_gpu_s"]
    assert sum(s["held_gpu_s"] for s in stages.values()) \
        + hours["between_stages"]["held_gpu_s"] == overall["held_gpu_s"]
    # Stage a ran while the cockpit recorded: every second of it is busy or idle, its
    # power read (the simulated GPUs report it), and it held both GPUs.
    a = stages["a"]
    assert a["seconds"] == round(a_end) - round(a_start) and a["gpus"] == [0, 1]
    assert a["held_gpu_s"] == 2 * a["seconds"]
    assert a["unrecorded_gpu_s"] == 0 and a["kwh"] is not None and a["kwh"] > 0
    # The window began 12 h before anything was recorded: most of it is unrecorded,
    # never counted busy or idle.
    assert overall["unrecorded_gpu_s"] > overall["held_gpu_s"] * 0.9

    # The export: REPORT.md's GPU-hours add up to the window's held hours, and the
    # bag's manifest carries the same section as status --json's.
    exported = run_cockpit("export", str(path), "--no-reload", "--no-tar")
    assert exported.returncode == 0, exported.stdout + exported.stderr
    bag = CampaignFiles.beside(path).root / "export" / "test-campaign" / "test-campaign"
    report = (bag / "data" / "REPORT.md").read_text()
    section = report.split("## What the hours bought", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in section.splitlines() if line.startswith("| ") and "GPU-h" not in line
            and "---" not in line and len(line.split("|")) == 11}
    held = {name: float(cells[1]) for name, cells in rows.items()}
    assert set(held) == {"a", "b", "(between stages)", "**window**"}
    window = held.pop("**window**")
    assert abs(sum(held.values()) - window) <= 0.005 * 3  # each cell rounded to 0.01
    for cells in rows.values():  # held = busy + idle + unrecorded, to the rounding
        assert abs(float(cells[1]) - sum(float(c) for c in cells[2:5])) <= 0.015
    manifest = json.loads((bag / "data" / "manifest.json").read_text())
    exact = manifest["hours"]["overall"]
    assert f"GPU-seconds held {exact['held_gpu_s']} = busy {exact['busy_gpu_s']} + idle " \
        f"{exact['idle_gpu_s']} + unrecorded {exact['unrecorded_gpu_s']} " \
        f"(2 GPU(s) × {manifest['hours']['window']['elapsed_s']} s elapsed)" in section
    assert exact["held_gpu_s"] == exact["busy_gpu_s"] + exact["idle_gpu_s"] \
        + exact["unrecorded_gpu_s"] == 2 * manifest["hours"]["window"]["elapsed_s"]
    assert "between |" in section and "share of the price" in section
