"""A campaign caught mid-flight for the TUI's snapshot and layout tests.

Three runs running under a fake supervisor (no processes: the screen must not depend
on timing), their metric reports written with fixed times, one run's loss gone NaN so
its rule has fired; a fixed clock, fixed host and simulated GPUs make the screen stable.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from cockpit.runs import supervisor
from cockpit.runs.supervisor import report_path
from cockpit.telemetry import DiskInfo, GpuSampler, HostInfo
from tests.engine.test_engine_guards import FakeSupervisor
from tests.helpers.campaigns import FINITE, FIXED_START, write_campaign

NOW = datetime(2026, 12, 2, 20, 30, tzinfo=timezone.utc)  # in the FIXED_START window
STARTED = NOW - timedelta(minutes=40)


class FixedHost:
    def sample(self) -> HostInfo:
        return HostInfo(cpu_percent=12.0, cpu_count=16, load1=1.0, mem_used=6 * 2**30,
                        mem_total=64 * 2**30, swap_used=0, swap_total=0,
                        disks=(DiskInfo("/data", 200 * 2**30, 500 * 2**30, False),),
                        own_cpu_percent=1.0, own_rss=60 * 2**20, warnings=())


def write_reports(engine: Engine, run: str, steps: int, max_steps: int,
                  nan_at: int | None = None, records: int = 12000) -> None:
    path = report_path(engine.campaign, run)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(1, 41):
        step = steps * i // 40
        loss = float("nan") if nan_at and step >= nan_at else 2.5 / (1 + step / 300) + 0.05
        rec: dict[str, Any] = {"t": (STARTED + timedelta(minutes=i)).timestamp(), "step": step,
                               "loss": loss, "val/accuracy": 0.5 + 0.4 * step / max_steps,
                               "records": float(records), "max_steps": max_steps}
        lines.append(json.dumps(rec).replace("NaN", '"nan"'))
    path.write_text("\n".join(lines) + "\n")


def running_campaign(tmp_path: Path) -> Engine:
    path = write_campaign(tmp_path, [
        {"id": "prep", "hours": 2, "resource": "human"},
        {"id": "pilot", "hours": 1, "resource": "human", "after": ["prep"],
         "decision_point": True},
        {"id": "control", "hours": 10, "resource": "gpu", "run": "control",
         "command": ["true"]},
        {"id": "variant-a-long-name", "hours": 10, "resource": "cpu", "run": "variant-a",
         "category": "useful", "command": ["true"]},
        {"id": "diverge", "hours": 4, "resource": "cpu", "run": "wild-lr",
         "category": "exploratory", "command": ["true"]},
        {"id": "report", "hours": 3, "resource": "human", "after": ["pilot"],
         "category": "useful"},
        {"id": "export", "hours": 0.5, "resource": "cpu", "role": "export",
         "after": ["control"]},
    ], runs={"control": {"acceptance": [{"metric": "val/accuracy", "min": 0.8}]},
             "variant-a": {"acceptance": [{"metric": "val/accuracy", "min": 0.8}]}},
        rules=[FINITE, {"id": "loss-ceiling", "kind": "threshold", "metric": "loss",
                        "max": 3.0, "after_step": 10, "runs": ["control", "variant-a"]}],
        start=FIXED_START)
    clock = [STARTED]
    engine = Engine(load_campaign(path), clock=lambda: clock[0], actor="tui",
                    supervisor=FakeSupervisor(),  # type: ignore[arg-type]
                    gpu_sampler=GpuSampler(simulate=2, clock=lambda: 1000.0),
                    host_sampler=FixedHost())  # type: ignore[arg-type]
    engine.mark("prep", "done", now=STARTED - timedelta(hours=2))
    # The launch marker hashes the campaign's (temporary) path, and the events panel
    # shows it (200x60): a fixed one keeps the snapshot the same from run to run.
    real_mark = supervisor.campaign_mark
    supervisor.campaign_mark = lambda campaign: "0123456789abcdef"  # type: ignore[assignment]
    try:
        for stage in ("control", "variant-a-long-name", "diverge"):
            engine.start(stage, force=True, now=STARTED)
    finally:
        supervisor.campaign_mark = real_mark  # type: ignore[assignment]
    write_reports(engine, "control", 2400, 6000)
    write_reports(engine, "variant-a", 1800, 6000)
    write_reports(engine, "wild-lr", 900, 3000, nan_at=700)
    clock[0] = NOW
    engine.tick(NOW)  # the NaN fires its rule; the stop is requested (fake: keeps running)
    for stream in engine.observer.streams.values():  # staleness by the fixed clock, not the wall's
        for reader in stream.readers:
            reader._clock = NOW.timestamp  # type: ignore[attr-defined]
            reader.last_record_at = NOW.timestamp()
    return engine
