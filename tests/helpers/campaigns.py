"""Builders for small campaign folders used by the engine and process tests."""

from __future__ import annotations

import json
import sys
import textwrap
from datetime import datetime, timedelta, timezone
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


# The window start of a campaign driven by a fake clock pinned to this date (its ticks
# pass explicit times from tests.engine.test_engine_guards.START).
FIXED_START = "2026-12-02T08:00:00Z"


def recent_start(hours_ago: int = 12) -> str:
    """A window start ``hours_ago`` before now, on the hour: a real-clock test's campaign
    is inside its window whatever the date (a 3-day offer has 60 h left), never near its
    end (no deadline warning) and never over."""
    now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    return (now - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def move_window_to_now(path: Path) -> Path:
    """A copied sample campaign file (its window starts FIXED_START) moved to a window
    that starts :func:`recent_start`: for a test that runs it on the real clock."""
    text = path.read_text()
    fixed = f"start: {FIXED_START}"
    assert text.count(fixed) == 1, f"{path}: no single '{fixed}' to move"
    path.write_text(text.replace(fixed, f"start: {recent_start()}"))
    return path


def write_campaign(folder: Path, stages: list[dict], runs: dict | None = None,
                   rules: list[dict] | None = None, extra: dict | None = None,
                   offer: str = "rtx4090-3d", start: str | None = None) -> Path:
    """A campaign file (JSON, which is YAML) with a step.py beside it; the window starts
    ``start`` (default: :func:`recent_start`; a fake-clock test passes FIXED_START)."""
    start = start or recent_start()
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
