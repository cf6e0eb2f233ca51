"""The names a light reader needs to find the campaign's state without loading it.

Standard library only: `cockpit status --line` (what tmux runs every few seconds)
imports this and nothing of the engine. :mod:`cockpit.journal.paths` names every other
file under the folder; it takes these names from here.
"""

from __future__ import annotations

STATE_DIR = ".cockpit"  # beside the campaign file
JOURNAL = "journal.jsonl"  # the campaign's one source of truth
STATUS_LOG = "status.jsonl"  # the default status log, one compact JSON line per tick
# Where headless records the status log it writes (one absolute path), so that
# `status --line` finds a custom `--status-log` without being told.
STATUS_LOG_POINTER = "status-log.path"
# The last status line the engine computed for `status --line` while nobody conducted,
# keyed by the journal's size and mtime: the next call answers from it, not the engine.
STATUS_LINE_CACHE = "cache/status-line.json"
# The conductor's lease (issue 39): an flock on this file (per machine: ``conductor-1``,
# ``conductor-fleet``), held by the one face that acts; beside it, who holds it.
CONDUCTOR_LOCK = "conductor-{}.lock"
CONDUCTOR_INFO = "conductor-{}.json"
# Every face opened with --auto holds a shared flock on this file while it lives: the
# conductor starts stages by itself while anybody holds it (a viewer's --auto counts).
AUTO_LOCK = "auto-{}.lock"
