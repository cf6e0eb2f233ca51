"""Opening an engine for a campaign file: the one place that knows both the engine and
the fleet. The faces and the commands call :func:`open_engine`.

It loads the campaign, makes the other machines' journals a peer source for the
engine's history (pulled in the background, once now, or read from the copies), the
default samplers, and, for `cockpit fleet`, an engine with no journal of its own whose
actions run on the owning machine (:class:`~cockpit.fleet.remote.RemoteActions`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from cockpit.common.lease import ConductorLease
from cockpit.engine import CampaignFiles, Engine, default_samplers, machine_from_env
from cockpit.engine.ports import Clock
from cockpit.fleet.peers import PeerSet
from cockpit.fleet.remote import RemoteActions
from cockpit.telemetry import GpuSampler, HostSampler


def open_engine(path: str | Path, *, auto: bool = False, actor: str = "cockpit",
                simulate_gpus: int | None = None, read_only: bool = False,
                telemetry: bool = True, clock: Clock | Callable[[], datetime] | None = None,
                machine: int | None = None, fleet: bool = False, pull: str = "once",
                alerts: Sequence[str] | None = None, face: str | None = None,
                lease: ConductorLease | None = None) -> Engine:
    """Load the campaign file, make its peers and samplers, and open the engine.

    ``simulate_gpus`` is the ``--simulate-gpus`` value (None: COCKPIT_SIMULATE_GPUS
    or real NVML). ``telemetry=False`` samples nothing (a one-shot action needs no
    NVML start-up). ``machine`` is this cockpit's machine (None: COCKPIT_MACHINE, or
    1); ``fleet`` makes the read-only engine of `cockpit fleet` (every machine a peer,
    no journal of its own, actions over SSH). With ``machines:`` in the campaign the
    other machines' journals are pulled: ``pull="background"`` in a thread (the faces),
    ``"once"`` now, within a time limit (one-shot commands), ``"cache"`` not at all.
    ``alerts``: a face sends alerts (None: a one-shot command, none); the targets are
    the alerts file's and these URLs (``--alerts``). ``face`` (``headless``, ``tui``,
    ``serve``, ``demo``, ``fleet``): a face that may conduct (issue 39) holds a lease on
    the campaign and machine, and conducts while it holds it (``lease``: one handed over
    from the engine this one replaces); a one-shot command has none."""
    from cockpit.alerts.targets import load_targets
    from cockpit.campaign import load_campaign
    from cockpit.journal.writer import NullJournal
    from cockpit.telemetry import simulate_count_from_env

    campaign = load_campaign(path)
    own: int | None = None if fleet else (machine or machine_from_env())
    peers: PeerSet | None = None
    if campaign.machines and (fleet or set(campaign.machines) - {own}):
        peers = PeerSet(campaign, own)
        if pull == "background":
            peers.start()
        elif pull == "once":
            peers.pull_now()
    gpu: GpuSampler | None = None
    host: HostSampler | None = None
    if telemetry and not fleet:
        gpu, host = default_samplers(campaign, simulate_count_from_env(simulate_gpus))
    if lease is None and face is not None and not read_only:  # the fleet's too
        lease = ConductorLease(str(CampaignFiles.of(campaign).root), own, face)
    engine = Engine(campaign, gpu_sampler=gpu, host_sampler=host, auto=auto and not fleet,
                    read_only=read_only or fleet, clock=clock, actor=actor, machine=own,
                    peers=peers, journal=NullJournal() if fleet else None,
                    alerts=load_targets(urls=alerts) if alerts is not None and not fleet
                    else (), lease=lease)
    # What reopen_engine needs to open this campaign again, as it was opened.
    engine.opened_with = dict(path=path, auto=auto, actor=actor, simulate_gpus=simulate_gpus,
                              read_only=read_only, telemetry=telemetry, clock=clock,
                              machine=machine, fleet=fleet, pull=pull, alerts=alerts,
                              face=face)
    if fleet:
        engine.actions = RemoteActions(campaign, state=engine.state,
                                       pull=_puller(peers))
    return engine.open()


def reopen_engine(engine: Engine) -> Engine:
    """The campaign opened anew after its file changed (:attr:`Engine.reload_wanted`),
    with the options it was opened with; the lease goes over to the new engine, so a
    conductor stays the conductor and no viewer takes over in between."""
    options = dict(engine.opened_with)
    engine.close(keep_lease=True)
    return open_engine(options.pop("path"), lease=engine.lease, **options)


def _puller(peers: PeerSet | None) -> Callable[[], None] | None:
    """After a remote action: pull now, so the next tick shows what it wrote."""
    if peers is None:
        return None
    return lambda: peers.pull_now(timeout=10.0)
