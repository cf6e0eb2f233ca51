"""The event log: the latest journal events, bounded; only events not yet shown are
written."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.style import Style
from textual.widgets import RichLog

from cockpit.common.event_kinds import RULE_FIRED, STOP_REQUESTED, WARNING
from cockpit.engine.snapshot import Snapshot
from cockpit.tui.panels.base import LEVEL_CLASSES, level, resolve, styled


class EventLog(RichLog):
    """The latest journal events, bounded; only events not yet shown are written."""

    COMPONENT_CLASSES: ClassVar[set[str]] = LEVEL_CLASSES

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_lines=200, wrap=False, markup=False, auto_scroll=True, **kwargs)
        self._seq = 0

    def render_snapshot(self, snap: Snapshot) -> None:
        for ev in snap.events:
            if ev.seq <= self._seq:
                continue
            self._seq = ev.seq
            style: str | Style = level("fired") if ev.kind in (RULE_FIRED, STOP_REQUESTED) \
                else (level("warn") if ev.kind == WARNING else "")
            self.write(resolve(self, styled([(f"{ev.at:%m-%d %H:%M:%S} ", level("muted")),
                                             (ev.text, style)])))
