"""Builders for small campaign folders used by the engine and process tests."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

# A stage script: writes N metric lines via cockpit.report, then exits with a code.
# "nan_at" makes the loss NaN from that step on; "sleep" paces the steps.
STEP_SCRIPT = textwrap.dedent("""
    import sys, time
    from cockpit import report
    steps, sleep = int(sys.argv[1]), float(sys.argv[2])
    nan_at, code = int(sys.argv[3]), int(sys.argv[4])
    for step in range(1, steps + 1):
        loss = float("nan") if nan_at and step >= nan_at else 1.0 / step
        report.log(step, loss=loss, **{"val/accuracy": 0.5 + step / (2 * steps)})
        report.progress(step, steps)
        time.sleep(sleep)
    sys.exit(code)
""")


def step_command(steps: int = 5, sleep: float = 0.05, nan_at: int = 0, code: int = 0) -> list[str]:
    return [sys.executable, "step.py", str(steps), str(sleep), str(nan_at), str(code)]


def write_campaign(folder: Path, stages: list[dict], runs: dict | None = None,
                   rules: list[dict] | None = None, extra: dict | None = None,
                   offer: str = "rtx4090-3d", start: str = "2026-12-02T08:00:00Z") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "step.py").write_text(STEP_SCRIPT)
    doc: dict = {
        "campaign": "test-campaign",
        "question": "does it work?",
        "package": {"offer": offer, "start": start},
        "stages": stages,
        "settings": {"stop_grace": "2s"},
    }
    if runs:
        doc["runs"] = runs
    if rules:
        doc["rules"] = rules
        doc["stop_rules"] = doc.pop("rules")
    if extra:
        doc.update(extra)
    path = folder / "campaign.yaml"
    # JSON is YAML: no dependency on a YAML writer's style.
    path.write_text(json.dumps(doc, indent=2))
    return path


FINITE = {"id": "finite-loss", "kind": "non_finite", "metric": "loss"}
