"""What the hours bought (issue 27), on a real campaign: a headless cockpit with
simulated GPUs records; two stages run one after the other with a gap between them;
``status --json`` measures the gap to the second against the journal's own times, and
the GPU-hours held are exactly busy + idle + unrecorded.

Time is never priced (issue 41, D8): a campaign shaped like the illustrative plan (a
person's preparation, a CPU data check, a GPU pilot, a person's review, the export) runs
to its close; no surface — ``status --json``, ``status``, REPORT.md, the bag's manifest,
``next``, the Prometheus text, the TUI's screen — puts a currency next to a duration,
the human and CPU stretches are their own kinds, and the rest of the window after the
close is unused, not a gap."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from cockpit.journal.paths import CampaignFiles
from cockpit.telemetry.flight import RecordingReader, RecordingUnreadable
from tests.helpers.campaigns import step_command, write_campaign
from tests.helpers.process import end, pilot_until, run_cockpit, wait_for

# A currency next to a duration, either order: what no hour may ever carry (D8).
PRICED_TIME = re.compile(
    r"(\d+h|\d+m|\d+ ?s|hours?)\b[^\n]{0,30}\b\d+(\.\d+)? ?(USD|EUR)"
    r"|\b\d+(\.\d+)? ?(USD|EUR)\b[^\n]{0,30}\b(\d+h|\d+m|\d+ ?s|hours?)\b")


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
    assert "share" not in gap and gap["window_share"] == round(gap["seconds"] / (3 * 86400), 6)
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
    assert "| idle gap between stages |" in section and "share of the window" in section
    assert "price" not in section


def headless(path: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop("COCKPIT_SIMULATE_GPUS", None)
    return subprocess.Popen([sys.executable, "-m", "cockpit", "headless", str(path),
                             "--simulate-gpus", "1", "--interval", "0.2", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys(v)}
    return set()


def svg_text(svg: str) -> str:
    """A Textual screenshot's text: each screen line cut at the panels' borders, so a
    line holds one panel's words (two panels side by side never read as one line)."""
    rows: dict[int, list[str]] = {}
    for line, text in re.findall(
            r'clip-path="url\(#terminal-(?:\d+-)?line-(\d+)\)">([^<]*)</text>', svg):
        rows.setdefault(int(line), []).append(html.unescape(text).replace("\xa0", " "))
    return "\n".join(cell for n in sorted(rows) for cell in re.split("[│┃]", "".join(rows[n])))


def closed_campaign(folder: Path) -> Path:
    """The illustrative plan's shape in seconds, run to its close: a person prepares, the
    CPU checks the data, the GPU runs the pilot, a person reviews, the export closes it.
    Each human stretch lasts until the recording has gone on past it (a second at least)."""
    path = write_campaign(folder, [
        {"id": "prep", "hours": 4, "resource": "human"},
        {"id": "data-check", "hours": 2, "resource": "cpu", "after": ["prep"],
         "command": [sys.executable, "-c", "import time; time.sleep(1.5)"]},
        {"id": "pilot", "hours": 3, "resource": "gpu", "after": ["data-check"], "run": "pilot",
         "command": step_command(steps=10, sleep=0.1)},
        {"id": "review", "hours": 4, "resource": "human", "after": ["pilot"]},
        {"id": "export", "duration": "30m", "resource": "cpu", "after": ["review"],
         "role": "export"},
    ])
    recorder = CampaignFiles.beside(path).recorder
    cockpit = headless(path)
    try:
        for stage, ran in (("prep", None), ("data-check", "stage_finished"),
                           ("pilot", "stage_finished"), ("review", None)):
            if ran is None:  # a person's stage: marked, held, then marked done
                assert run_cockpit("mark", str(path), stage, "started").returncode == 0
                began = wait_for(lambda s=stage: stage_time(path, "stage_started", s),
                                 what=f"{stage}'s start")
                wait_for(lambda b=began: recorded_to(recorder, b + 1.5), timeout=60,
                         what=f"the recording 1.5 s into {stage}")
                assert run_cockpit("mark", str(path), stage, "done").returncode == 0
            else:
                started = run_cockpit("start", str(path), stage)
                assert started.returncode == 0, started.stdout + started.stderr
                wait_for(lambda s=stage, k=ran: stage_time(path, k, s), timeout=90,
                         what=f"{stage}'s end")
        for what in ("started", "done"):
            assert run_cockpit("mark", str(path), "export", what).returncode == 0
    finally:
        cockpit.send_signal(signal.SIGTERM)
        cockpit.wait(timeout=60)
    return path


async def tui_text(path: Path) -> tuple[str, str]:
    """The budget panel's text and the whole screen's, of a cockpit opened on it."""
    from cockpit.fleet.open import open_engine
    from cockpit.tui.app import CockpitApp

    engine = open_engine(path, simulate_gpus=1, read_only=True, actor="tui")
    app = CockpitApp(engine, interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        panel = await pilot_until(
            pilot, lambda: "unused after close" in str(app.query_one("#budget").render())
            and str(app.query_one("#budget").render()), what="the budget panel's hours")
        return panel, svg_text(app.export_screenshot())


def test_no_hour_is_priced_on_any_surface_of_a_closed_campaign(tmp_path: Path) -> None:
    path = closed_campaign(tmp_path / "c")
    seen: dict[str, str] = {}

    status = run_cockpit("status", str(path), "--json")
    assert status.returncode == 0, status.stderr
    hours = json.loads(status.stdout)["hours"]
    seen["status --json"] = json.dumps(hours, indent=1)
    assert not {"share", "gaps_share", "price", "amount", "currency"} & keys(hours)
    gaps = hours["gaps"]
    kinds = [(g["kind"], g["stages"]) for g in gaps]
    assert ("human", ["prep"]) in kinds and ("human", ["review"]) in kinds, kinds
    assert ("cpu", ["data-check"]) in kinds, kinds
    # The export closed it: the rest of the window, to its end, is unused, not a gap.
    tail = gaps[-1]
    assert tail["kind"] == "after_close" and tail["end"] == hours["window"]["end"]
    assert hours["gaps_by_kind"]["after_close"]["window_share"] > 0.5  # 60 h of 72 left
    assert hours["gaps_total"]["seconds"] == sum(
        g["seconds"] for g in gaps if g["kind"] in ("before", "between", "after", "none"))
    assert 0 < hours["gaps_total"]["window_share"] < 0.25  # the 12 h before the first stage
    assert not [g for g in gaps if g["kind"] == "after"
                and g["start"] >= tail["start"]]  # nothing after the close is idle

    text = run_cockpit("status", str(path))
    assert text.returncode == 0, text.stderr
    seen["status"] = text.stdout
    assert "GPU-hours: GPU-h " in text.stdout and "idle gaps " in text.stdout
    assert "unused after the close " in text.stdout and "human stages " in text.stdout

    exported = run_cockpit("export", str(path), "--no-reload", "--no-tar")
    assert exported.returncode == 0, exported.stdout + exported.stderr
    bag = CampaignFiles.beside(path).root / "export" / "test-campaign" / "test-campaign"
    report = (bag / "data" / "REPORT.md").read_text()
    seen["REPORT.md"] = report
    manifest = json.loads((bag / "data" / "manifest.json").read_text())
    seen["manifest.json"] = json.dumps(manifest, indent=1)
    assert not {"share", "gaps_share"} & keys(manifest["hours"])
    assert manifest["hours"]["gaps"][-1]["kind"] == "after_close"
    section = report.split("## What the hours bought", 1)[1].split("\n## ", 1)[0]
    for words in ("a human stage ran: prep", "a human stage ran: review",
                  "CPU stage: data-check", "unused after the close", "share of the window"):
        assert words in section, words
    assert "price" not in section and "USD" not in section

    out = tmp_path / "next.yaml"
    made = run_cockpit("next", str(path), "--out", str(out))
    assert made.returncode == 0, made.stdout + made.stderr
    seen["next"] = made.stdout + out.read_text()
    assert "unused after the close:" in seen["next"]
    assert "human stages ran " in seen["next"] and "CPU stages ran " in seen["next"]
    # The rest of the window after the close is no idle gap.
    assert not [line for line in seen["next"].splitlines()
                if "idle gap" in line and f"to {hours['window']['end']}" in line]

    prom = tmp_path / "cockpit.prom"
    cockpit = headless(path, "--prom", str(prom))
    try:
        seen["prometheus"] = wait_for(
            lambda: prom.exists() and 'kind="after_close"' in prom.read_text()
            and prom.read_text(), timeout=60, what="the Prometheus textfile")
    finally:
        end(cockpit)
    samples = {kind: float(value) for kind, value in re.findall(
        r'^cockpit_window_no_gpu_stage_seconds\{.*kind="(\w+)".*\} (\S+)$',
        seen["prometheus"], re.MULTILINE)}
    assert set(samples) == {"idle", "human", "cpu", "after_close"}
    assert samples["after_close"] > 0.5 * 3 * 86400 and samples["human"] >= 2

    seen["TUI budget panel"], seen["TUI screen"] = asyncio.run(tui_text(path))
    assert "unused after close" in seen["TUI screen"]

    for surface, body in seen.items():
        found = PRICED_TIME.search(body)
        assert found is None, f"{surface}: a duration priced: {found[0]!r}"
        assert "of the price" not in body, surface
