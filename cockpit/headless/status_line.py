"""The one-line status for a tmux status bar, from one compact status-log object.

Deliberately light (standard library and cockpit.common.units only): `cockpit status --line`
answers from the live status log's last line without loading the campaign, NVML,
psutil or the engine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cockpit.common.units import format_duration


def status_line(compact: dict[str, Any]) -> str:
    """`61h12m left · fits +17h · GPU 98% · ckpt 12m · rules ok` — never more than one line."""
    left = compact["window"]["left_s"]
    parts = [f"{_hours_minutes(left)} left" if left > 0 else "window ended"]
    fc = compact["forecast"]
    parts.append(f"{fc['verdict']} {format_duration(fc['slack_s'], signed=True)}")
    if compact.get("gpu_status") == "unavailable":
        parts.append("GPU n/a")
    elif compact.get("gpu_util_mean") is not None:
        sim = "sim " if compact.get("gpu_status") == "simulated" else ""
        parts.append(f"GPU {sim}{compact['gpu_util_mean']:.0f}%")
    if compact.get("ckpt_age_s") is not None:
        parts.append(f"ckpt {format_duration(compact['ckpt_age_s'])}")
    fired = compact["rules"]["fired"]
    warned = compact["rules"].get("warn") or []  # a warn rule that fired (a stalled run)
    blind = compact["rules"].get("blind") or []  # unknown is not ok (issue 22)
    if fired or warned or blind:
        parts.append("rules" + (f" FIRED {','.join(fired)}" if fired else "")
                     + (f" warn {','.join(warned)}" if warned else "")
                     + (f" ◌ {len(blind)} blind" if blind else ""))
    elif compact["rules"].get("ok", 1) or not compact["rules"].get("waiting"):
        parts.append("rules ok")
    else:  # every rule waits for its run to start: none has watched anything yet
        parts.append("rules waiting")
    if compact.get("decisions_pending"):
        parts.append("decide " + ",".join(compact["decisions_pending"]))
    return " · ".join(parts).replace("\n", " ")


def _hours_minutes(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m"


def read_last_line(path: Path, max_bytes: int = 256 * 1024) -> str | None:
    """The last complete line of a file, reading only its tail."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            tail = handle.read()
    except OSError:
        return None
    lines = tail.split(b"\n")
    for raw in reversed(lines[:-1] if tail.endswith(b"\n") else lines[:-1]):
        if raw.strip():
            return raw.decode("utf-8", errors="replace")
    return None
