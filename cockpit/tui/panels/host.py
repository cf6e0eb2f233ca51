"""The host line: CPU, RAM, the fullest disk and the cockpit's own footprint."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text

from cockpit.common.units import format_percent
from cockpit.engine.snapshot import Snapshot
from cockpit.telemetry import format_bytes
from cockpit.tui.panels.base import LivePanel, level, styled


class HostLine(LivePanel):
    """Host readings, redrawn at most every ``every_s``: second-by-second CPU noise is
    not worth bytes on an SSH link."""

    every_s = 5.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next = 0.0

    def forget(self) -> None:
        super().forget()
        self._next = 0.0

    def render_snapshot(self, snap: Snapshot) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.every_s
        h = snap.host
        if h is None:
            self.show(Text("host: not sampled", style=level("muted")))
            return
        disk = ""
        if h.disks:
            d = min(h.disks, key=lambda d: d.free)
            disk = f" · disk free {format_bytes(d.free)}" + (" (LOW)" if d.low else "")
        # Rounded so the line (and the wire) stays still while nothing really moves.
        self.show(styled([
            ("host ", "bold"),
            (f"CPU {format_percent(h.cpu_percent):>4} of {h.cpu_count} · RAM "
             f"{format_bytes(h.mem_used)}/"
             f"{format_bytes(h.mem_total)}{disk}", ""),
            (" · cockpit ", "bold"),
            (f"{format_percent(h.own_cpu_percent)} CPU {h.own_rss / 2**20:.0f} MB RSS", ""),
        ]))
