"""What the guards decide and the launcher carries out: small frozen records.

The guards (:mod:`cockpit.engine.guards`) are pure: a folded state and what the observer
saw in, a list of intents out. Carrying an intent out (a journal line under the lock,
a signal, a launch) is :class:`cockpit.engine.launcher.Launcher`'s, which checks each
again under the journal lock, so two cockpits never act twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cockpit.runs.rules import Firing


@dataclass(frozen=True)
class FireRule:
    """A stop rule fired on a run (``rule_fired``; a ``stop`` rule also stops it)."""

    run: str
    firing: Firing


@dataclass(frozen=True)
class RecordOnce:
    """A once-only journal event (its ``key`` makes it once): a blind rule, a warning."""

    kind: str
    key: str
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EscalateStop:
    """A stopped run's grace has passed: SIGKILL what is left of its group."""

    run: str


@dataclass(frozen=True)
class StartStage:
    """Start a stage (``auto``: only if still ready under the lock; ``force``: anyway)."""

    stage: str
    auto: bool = False
    force: bool = False


@dataclass(frozen=True)
class StopRun:
    """Request a stop of a run (SIGTERM now, SIGKILL after the grace)."""

    run: str
    reason: str
    rule: str


Intent = FireRule | RecordOnce | EscalateStop | StartStage | StopRun
