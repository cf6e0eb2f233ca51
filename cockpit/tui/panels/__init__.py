"""The live panels of the main screen, one widget per module; each renders one part of
a Snapshot in place.

Every panel keeps what it last drew and touches the screen only when that changed: a
Static is updated only when its text differs, a table updates only the cells whose
value changed and removes only rows whose key went away. Histories (GPU sparklines, the
event log) are bounded. Colours come from the themes through the ``level--*``
component classes (:mod:`cockpit.tui.panels.base`).
"""

from cockpit.tui.panels.base import LivePanel, PanelResized, level
from cockpit.tui.panels.budget import BudgetPanel, budget_lines
from cockpit.tui.panels.events import EventLog
from cockpit.tui.panels.gpus import GpuPanel, spark_cells
from cockpit.tui.panels.host import HostLine
from cockpit.tui.panels.now import NowPanel, gpu_summary_line, now_lines
from cockpit.tui.panels.rules import RulesPanel, rules_text
from cockpit.tui.panels.runs import RunsTable, loss_cell, run_rows, step_text
from cockpit.tui.panels.stages import StagesTable, stage_rows
from cockpit.tui.panels.table import LiveTable
from cockpit.tui.panels.timeline import Timeline, timeline_text
from cockpit.tui.panels.warnings import WarningsPanel
from cockpit.tui.panels.window import WindowPanel

__all__ = ["BudgetPanel", "EventLog", "GpuPanel", "HostLine", "LivePanel", "LiveTable",
           "NowPanel", "PanelResized", "RulesPanel", "RunsTable", "StagesTable", "Timeline",
           "WarningsPanel", "WindowPanel", "budget_lines", "gpu_summary_line", "level",
           "loss_cell", "now_lines", "rules_text", "run_rows", "spark_cells", "stage_rows",
           "step_text", "timeline_text"]
