"""Two headless faces on one campaign (issue 39), real processes: the first conducts and
alone writes the status log and the campaign's figures; the viewer's Prometheus file
says only that somebody conducts; a kill -9 of the conductor hands everything to the
viewer at its next tick; with both gone, `status --line` says NOT CONDUCTED."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.campaigns import write_campaign
from tests.helpers.process import end, run_cockpit, wait_for

pytestmark = pytest.mark.slow


class Face:
    """A headless cockpit and every line it printed (read by a thread: never blocks)."""

    def __init__(self, path: Path, prom: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cockpit", "headless", str(path), "--interval", "0.2",
             "--simulate-gpus", "1", "--prom", str(prom)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def said(self, words: str) -> bool:
        return any(words in line for line in self.lines)


def families(prom: Path) -> dict[str, list[float]]:
    text = prom.read_text() if prom.exists() else ""
    return {f.name: [s.value for s in f.samples] for f in text_string_to_metric_families(text)}


def status_lines(path: Path) -> list[dict]:
    log = path.parent / ".cockpit" / "status.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_one_headless_writes_the_outputs_and_a_kill_hands_them_over(tmp_path: Path) -> None:
    path = write_campaign(tmp_path / "c", [{"id": "prep", "hours": 1, "resource": "human"}])
    first_prom, second_prom = tmp_path / "first.prom", tmp_path / "second.prom"
    first = Face(path, first_prom)
    second: Face | None = None
    try:
        wait_for(lambda: first.said("conducting"), timeout=60, what="the first conducts")
        second = Face(path, second_prom)
        wait_for(lambda: second.said("viewer: conducted by headless, pid "
                                     f"{first.proc.pid}"), timeout=60, what="a viewer")
        wait_for(lambda: "cockpit_conducted" in families(second_prom), timeout=60,
                 what="the viewer's metrics file")
        # The viewer's file says only that somebody conducts; the conductor's has all.
        assert families(second_prom) == {"cockpit_conducted": [1.0]}
        wait_for(lambda: "cockpit_window_remaining_seconds" in families(first_prom),
                 timeout=60, what="the conductor's figures")
        assert families(first_prom)["cockpit_conducted"] == [1.0]
        # Every status line so far is the conductor's own.
        lines = wait_for(lambda: status_lines(path), timeout=60, what="a status line")
        assert {line["conductor"]["pid"] for line in lines} == {first.proc.pid}
        assert all(line["conductor"]["you"] for line in lines)

        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(timeout=30)
        wait_for(lambda: second.said("conducting: "), timeout=60, what="the takeover")
        wait_for(lambda: "cockpit_window_remaining_seconds" in families(second_prom),
                 timeout=60, what="the taker's figures")
        wait_for(lambda: status_lines(path)[-1]["conductor"]["pid"] == second.proc.pid,
                 timeout=60, what="the taker's status line")
        line = run_cockpit("status", str(path), "--line").stdout
        assert "NOT CONDUCTED" not in line, line
    finally:
        end(first.proc)
        if second is not None:
            end(second.proc)
    line = run_cockpit("status", str(path), "--line").stdout
    assert "NOT CONDUCTED since " in line, line
    shown = json.loads(run_cockpit("status", str(path), "--json").stdout)
    assert shown["conductor"]["conducted"] is False
    assert shown["warnings"][0].startswith("NOT CONDUCTED")
