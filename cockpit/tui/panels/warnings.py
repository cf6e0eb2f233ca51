"""The warnings line: the engine's first three warnings, hidden when there are none."""

from __future__ import annotations

from cockpit.engine.snapshot import Snapshot
from cockpit.tui.panels.base import LivePanel, block, level, styled


class WarningsPanel(LivePanel):
    def render_snapshot(self, snap: Snapshot) -> None:
        if self.display != bool(snap.warnings):
            self.display = bool(snap.warnings)
        if snap.warnings:
            self.show(block(styled([("! warning: ", level("warn")), (w, "")])
                            for w in snap.warnings[:3]))
