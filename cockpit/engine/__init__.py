"""The engine: ``tick(now) -> Snapshot`` and the actions, for both faces.

Reads the journal (folded into state), metric streams, process states and
telemetry; evaluates stop rules; in auto mode starts what is ready; and returns an
immutable Snapshot. Every action ends as journal events, claimed under the
journal lock so two cockpits on one campaign never act twice. A read-only engine
(``cockpit status``) computes the same snapshot and never writes or signals.

:class:`Engine` (``facade``) is a thin facade over parts composed, not stacked; no
part inherits another. Where each behaviour lives:

- ``facade``      the Engine: its parts, ``tick`` as a list of steps, the actions' face
- ``ports``       the edges as Protocols (clock, journal, supervisor, samplers, peers)
- ``timebase``    the clock, wall-clock jumps (``clockwatch``), monotonic ages of events
- ``scope``       which stages and runs are this machine's; ids checked
- ``history``     journal + peers, folded and cached; announcing events to the faces
- ``observer``    metric streams, checkpoint scans, telemetry (the only part that polls)
- ``guards``      pure: state + observations -> intents (``intents``); until-done
- ``launcher``    start (claims, launch, reconcile), stop, the intents carried out
- ``exits``       the stages that ended
- ``verification`` background checkpoint reloads and acceptance verdicts
- ``recorder``    verdicts, notes, costs, marks, decisions, the plan's record (D24)
- ``evidence``    verify, verify --resume, export
- ``hooks``       a person's commands run on events
- ``recorded``    the flight recording read back for the faces (``telemetry_history``)
- ``build``       the pure ``build_snapshot``; ``readiness`` (pure) ready/waiting/blocked

The engine knows no fleet: the other machines come as a ``PeerSource`` and remote
actions as ``Actions``, handed in by whoever opens it (``cockpit.fleet.open``).
"""

from __future__ import annotations

from cockpit.common.errors import ActionRefused, InputError
from cockpit.engine.facade import (
    Actions,
    Engine,
    LocalActions,
    default_samplers,
    machine_from_env,
)
from cockpit.engine.guards import ExitVerdict
from cockpit.engine.launcher import params_hash
from cockpit.engine.ports import Clock, SystemClock, utc_now
from cockpit.engine.telemetry_history import Recorded, columns, thinned
from cockpit.journal.events import EVENT_KINDS, describe_event
from cockpit.journal.log import JournalError
from cockpit.journal.paths import CampaignFiles

__all__ = ["EVENT_KINDS", "ActionRefused", "Actions", "CampaignFiles", "Clock", "Engine",
           "ExitVerdict", "InputError", "JournalError", "LocalActions", "Recorded",
           "SystemClock", "columns", "default_samplers", "describe_event", "machine_from_env",
           "params_hash", "thinned", "utc_now"]
