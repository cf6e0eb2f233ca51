"""The campaign as Prometheus metrics: one registry, rendered once a tick for both ways
of being scraped (node_exporter's textfile, ``headless --prom-port``).

:data:`FAMILIES` is the registry: each metric's name, help, labels and how its samples
are read from a Snapshot. The docs' metric table, the textfile, the HTTP endpoint and
the shipped dashboard and alert rules all name metrics from it (a test holds them to
it). Naming follows Prometheus's conventions: base units in the names (``_seconds``,
``_bytes``, ``_ratio``, ``_celsius``, ``_watts``, the package's currency as ``_usd``),
Unix times as ``_timestamp_seconds``, every state as a *state set* (one series per
known state, 1 for the current one), so a dashboard or an alert compares labels, not
strings. Every series carries ``campaign`` and ``machine``.

Labels stay bounded: only names the campaign file declares (stages, runs, rules), GPU
indices and UUIDs, and the fixed words of a state set; never a note, a reason or a
metric name a run reported. Label values are made printable, cut to
:data:`LABEL_LIMIT` characters and escaped as the text format requires. A figure the
cockpit does not know is absent, never 0: Grafana shows "No data", not a fine value.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from cockpit.common.printable import printable
from cockpit.engine.snapshot import Money, RunView, Snapshot

LABEL_LIMIT = 120
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Sample = tuple[tuple[str, ...], float | None]  # label values (after campaign, machine)

STAGE_STATES = ("ready", "needs-person", "waiting", "blocked", "running", "done",
                "failed", "stopped", "skipped", "dropped")
RUN_STATES = ("not_started", "running", "succeeded", "failed", "stopped")
RULE_STATES = ("ok", "warn", "fired", "blind", "waiting")
RELOAD_STATES = ("ok", "failed", "unverified", "none")  # none: no checkpoint yet
VERDICTS = ("accepted", "rejected", "none")
FORECAST_VERDICTS = ("fits", "tight", "exceeds")
READING_STATES = ("ok", "simulated", "unavailable")
LANDING_STATES = ("off", "armed", "landing", "landed")  # armed: on_deadline: land


@dataclass(frozen=True)
class Family:
    name: str  # for a money family, ends in _<currency>: see currency_name
    help: str
    labels: tuple[str, ...]
    samples: Callable[[Snapshot], Iterable[Sample]]
    money: bool = False  # one family per currency (the name's suffix)


def _ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _state_set(current: str, known: tuple[str, ...]) -> Iterable[tuple[str, float]]:
    """One sample per known state (1 for the current one); a state the code does not
    list yet is still shown, never hidden."""
    for state in known if current in known else (*known, current):
        yield state, 1.0 if state == current else 0.0


def _campaign(read: Callable[[Snapshot], float | None]) -> Callable[[Snapshot], Iterable[Sample]]:
    return lambda snap: [((), read(snap))]


def _per_run(read: Callable[[RunView], float | None]) -> Callable[[Snapshot], Iterable[Sample]]:
    return lambda snap: [((r.id,), read(r)) for r in snap.runs]


def _reload_state(run: RunView) -> str:
    ckpt = run.checkpoint
    if ckpt is None or ckpt.path is None:
        return "none"
    if ckpt.verified is None:
        return "unverified"
    return "ok" if ckpt.verified == "ok" else "failed"


def _key_metric(run: RunView) -> float | None:
    if run.key_metric is None:
        return None
    value = run.metrics.get(run.key_metric)
    return float(value) if isinstance(value, (int, float)) else None


def _pnr_left(snap: Snapshot) -> float | None:
    pnr = snap.window.point_of_no_return
    return None if pnr is None else (pnr - snap.taken_at).total_seconds()


def _gpus(read: Callable[..., float | None]) -> Callable[[Snapshot], Iterable[Sample]]:
    return lambda snap: [((str(g.index), g.uuid or ""), read(g))
                         for g in snap.gpus.gpus if not g.lost]


def _landing_state(snap: Snapshot) -> str:
    if snap.landing:
        return "landed" if snap.landing[-1].split(" ", 1)[-1].startswith("landed:") \
            else "landing"
    return "armed" if snap.window.landing_mode else "off"


def _disks(read: Callable[..., float | None]) -> Callable[[Snapshot], Iterable[Sample]]:
    return lambda snap: [] if snap.host is None else [((d.path,), read(d))
                                                      for d in snap.host.disks]


def _host(read: Callable[..., float | None]) -> Callable[[Snapshot], Iterable[Sample]]:
    return lambda snap: [((), None if snap.host is None else read(snap.host))]


def _peers(read: Callable[..., float | None]) -> Callable[[Snapshot], Iterable[Sample]]:
    return lambda snap: [((str(m.machine),), read(m)) for m in snap.machines]


def _hours(attr: str) -> Callable[[Snapshot], Iterable[Sample]]:
    return lambda snap: [((), None if snap.hours is None
                          else float(getattr(snap.hours.overall, attr)))]


def _gap_kinds(snap: Snapshot) -> Iterable[Sample]:
    # Time only, never money (D8): every kind while the hours are known (0 is a real 0).
    totals = {} if snap.hours is None else snap.hours.kind_totals()
    return [((kind,), float(seconds)) for kind, seconds in totals.items()]


def _money(read: Callable[[Snapshot], Iterable[Money]]) -> Callable[[Snapshot], Iterable[Sample]]:
    # The currency travels as the first label value; render() moves it into the name.
    return lambda snap: [((m.currency,), float(m.amount)) for m in read(snap)]


def _committed(snap: Snapshot) -> Iterable[Money]:
    b = snap.budget
    return () if b is None or b.committed is None else (b.committed,)


def _incurred(snap: Snapshot) -> Iterable[Money]:
    b = snap.budget
    return () if b is None or b.cost_incurred is None else b.cost_incurred


def _share(snap: Snapshot) -> Iterable[Money]:
    b = snap.budget
    return () if b is None or b.share_per_accepted is None else (b.share_per_accepted,)


FAMILIES: tuple[Family, ...] = (
    Family("cockpit_snapshot_timestamp_seconds",
           "When the cockpit took these figures (Unix time); old means no cockpit watches.",
           (), _campaign(lambda s: s.taken_at.timestamp())),
    Family("cockpit_conducted", "1 while a cockpit conducts this campaign on this machine "
           "(runs its guards, alerts and recording); 0: NOT CONDUCTED.", (),
           _campaign(lambda s: 1.0 if s.conductor.conducted else 0.0)),
    Family("cockpit_info", "1, with the package offer as a label.", ("offer",),
           lambda s: [((s.offer,), 1.0)]),
    Family("cockpit_window_end_timestamp_seconds", "When the rental window ends.", (),
           _campaign(lambda s: s.window.end.timestamp())),
    Family("cockpit_window_remaining_seconds", "Seconds left in the rental window.", (),
           _campaign(lambda s: s.window.remaining_s)),
    Family("cockpit_window_used_ratio", "Share of the rental window used (0 to 1).", (),
           _campaign(lambda s: s.window.used_pct / 100.0)),
    Family("cockpit_point_of_no_return_timestamp_seconds",
           "The last moment a landing can begin and the results be home by the window "
           "end (absent: not known yet).", (),
           _campaign(lambda s: _ts(s.window.point_of_no_return))),
    Family("cockpit_point_of_no_return_remaining_seconds",
           "Seconds to the point of no return (negative: past it).", (),
           _campaign(_pnr_left)),
    Family("cockpit_retrieve_by_timestamp_seconds",
           "The last moment to fetch the export before the window ends (D19).", (),
           _campaign(lambda s: s.window.retrieval_deadline.timestamp())),
    Family("cockpit_forecast_end_timestamp_seconds", "When the forecast says the plan ends.",
           (), _campaign(lambda s: s.window.forecast_end.timestamp())),
    Family("cockpit_forecast_slack_seconds", "Window end minus forecast end (negative: "
           "exceeds).", (), _campaign(lambda s: s.window.forecast_slack_s)),
    Family("cockpit_forecast_verdict", "1 for the forecast's verdict (fits, tight, exceeds).",
           ("verdict",), lambda s: [((v,), x) for v, x in _state_set(s.window.verdict,
                                                                      FORECAST_VERDICTS)]),
    Family("cockpit_decisions_pending", "Decision points waiting for a person.", (),
           _campaign(lambda s: float(len(s.pending_decisions)))),
    Family("cockpit_exported", "1 once a verified export is written (current or stale).", (),
           _campaign(lambda s: 0.0 if s.exported_at is None else 1.0)),
    Family("cockpit_export_stale", "1 when the newest export predates a verdict, a "
           "verified checkpoint of an accepted run or a change of the answer: export "
           "again (absent: no export).", (),
           _campaign(lambda s: None if s.export is None or not s.export.exported
                     else float(s.export.stale is not None))),
    Family("cockpit_closed", "1 once the question is answered and its verified export is "
           "current (0: not exported, stale, or the question open).", (),
           _campaign(lambda s: None if s.export is None else float(s.export.closed))),
    Family("cockpit_landing_state", "1 for the landing's state (off; armed: on_deadline: "
           "land; landing; landed).", ("state",),
           lambda s: [((v,), x) for v, x in _state_set(_landing_state(s), LANDING_STATES)]),
    Family("cockpit_warnings", "Warnings the cockpit shows now (GPU, disk, clock, peers).",
           (), _campaign(lambda s: float(len(s.warnings)))),
    Family("cockpit_stage_state", "1 for a stage's current state.", ("stage", "state"),
           lambda s: [((st.id, v), x) for st in s.stages
                      for v, x in _state_set(st.state, STAGE_STATES)]),
    Family("cockpit_stage_planned_seconds", "A stage's planned duration.", ("stage",),
           lambda s: [((st.id,), st.planned_s) for st in s.stages]),
    Family("cockpit_stage_elapsed_seconds", "A stage's elapsed time.", ("stage",),
           lambda s: [((st.id,), st.elapsed_s) for st in s.stages]),
    Family("cockpit_run_state", "1 for a run's current state.", ("run", "state"),
           lambda s: [((r.id, v), x) for r in s.runs for v, x in _state_set(r.state,
                                                                             RUN_STATES)]),
    Family("cockpit_run_step", "The last step a run reported.", ("run",),
           _per_run(lambda r: None if r.step is None else float(r.step))),
    Family("cockpit_run_max_steps", "The steps a run is planned to take.", ("run",),
           _per_run(lambda r: None if r.max_steps is None else float(r.max_steps))),
    Family("cockpit_run_steps_per_second", "A run's steps per second over the last minute.",
           ("run",), _per_run(lambda r: r.rate)),
    Family("cockpit_run_seconds_since_step", "Seconds since a running run's last step.",
           ("run",), _per_run(lambda r: r.stale_s)),
    Family("cockpit_run_key_metric", "The last value of a run's key metric (its loss when "
           "it reports one; NaN when it diverged).", ("run",), _per_run(_key_metric)),
    Family("cockpit_run_checkpoint_age_seconds", "Age of a run's newest checkpoint.",
           ("run",), _per_run(lambda r: r.checkpoint.age_s if r.checkpoint else None)),
    Family("cockpit_run_checkpoint_bytes", "Size of a run's newest checkpoint.", ("run",),
           _per_run(lambda r: None if r.checkpoint is None or r.checkpoint.size is None
                    else float(r.checkpoint.size))),
    Family("cockpit_run_checkpoint_reload", "1 for whether a run's newest verified "
           "checkpoint reloads (ok, failed, unverified, none: no checkpoint yet).",
           ("run", "state"), lambda s: [((r.id, v), x) for r in s.runs
                                         for v, x in _state_set(_reload_state(r),
                                                                RELOAD_STATES)]),
    Family("cockpit_run_verdict", "1 for a result's verdict (accepted, rejected, none).",
           ("run", "verdict"), lambda s: [((r.id, v), x) for r in s.runs if r.produces_result
                                           for v, x in _state_set(r.verdict or "none",
                                                                  VERDICTS)]),
    Family("cockpit_rule_state", "1 for a stop rule's state on a run (blind: its metric "
           "was never seen; waiting: the run has not started).", ("rule", "run", "state"),
           lambda s: [((r.rule, r.run, v), x) for r in s.rules
                      for v, x in _state_set(r.state, RULE_STATES)]),
    Family("cockpit_gpu_reading_status", "1 for the GPU readings' source (ok: NVML, "
           "simulated: not real readings, unavailable).", ("status",),
           lambda s: [((v,), x) for v, x in _state_set(s.gpus.status, READING_STATES)]),
    Family("cockpit_gpu_lost", "1 when a GPU fell off the bus or stopped answering.",
           ("gpu", "uuid"), lambda s: [((str(g.index), g.uuid or ""), float(g.lost))
                                       for g in s.gpus.gpus]),
    Family("cockpit_gpu_utilization_ratio", "GPU utilization (0 to 1).", ("gpu", "uuid"),
           _gpus(lambda g: None if g.util is None else g.util / 100.0)),
    Family("cockpit_gpu_memory_used_bytes", "GPU memory used.", ("gpu", "uuid"),
           _gpus(lambda g: g.mem_used)),
    Family("cockpit_gpu_memory_total_bytes", "GPU memory in all.", ("gpu", "uuid"),
           _gpus(lambda g: g.mem_total)),
    Family("cockpit_gpu_temperature_celsius", "GPU temperature.", ("gpu", "uuid"),
           _gpus(lambda g: g.temp)),
    Family("cockpit_gpu_power_watts", "GPU power draw.", ("gpu", "uuid"),
           _gpus(lambda g: g.power)),
    Family("cockpit_host_cpu_ratio", "The machine's CPU use (0 to 1, all cores).", (),
           _host(lambda h: None if h.cpu_percent is None else h.cpu_percent / 100.0)),
    Family("cockpit_host_memory_used_bytes", "The machine's memory in use.", (),
           _host(lambda h: float(h.mem_used))),
    Family("cockpit_host_memory_total_bytes", "The machine's memory in all.", (),
           _host(lambda h: float(h.mem_total))),
    Family("cockpit_disk_free_bytes", "Free space on a filesystem the campaign writes to "
           "(its folder, checkpoints, exports).", ("path",), _disks(lambda d: float(d.free))),
    Family("cockpit_disk_total_bytes", "Size of that filesystem.", ("path",),
           _disks(lambda d: float(d.total))),
    Family("cockpit_disk_low", "1 when that filesystem is under the campaign's disk warning.",
           ("path",), _disks(lambda d: float(d.low))),
    Family("cockpit_peer_reachable", "1 when another machine of the campaign answered its "
           "last pull, 0 when not (absent: not reached yet).", ("peer",),
           _peers(lambda m: None if m.reachable is None else float(m.reachable))),
    Family("cockpit_peer_data_age_seconds", "Age of the newest good pull of a peer's journal.",
           ("peer",), _peers(lambda m: m.data_age_s)),
    Family("cockpit_gpu_held_seconds", "GPU-seconds held since the window began (all GPUs).",
           (), _hours("held_s")),
    Family("cockpit_gpu_busy_seconds", "Held GPU-seconds at or above the busy utilization.",
           (), _hours("busy_s")),
    Family("cockpit_gpu_idle_seconds", "Held GPU-seconds below the busy utilization.", (),
           _hours("idle_s")),
    Family("cockpit_gpu_unrecorded_seconds", "Held GPU-seconds no cockpit recorded.", (),
           _hours("unrecorded_s")),
    Family("cockpit_window_no_gpu_stage_seconds", "Seconds of the window no stage held "
           "any GPU, by kind: idle (nothing ran), human or cpu (such a stage ran), "
           "after_close (the rest of the window after the close). Time, never money.",
           ("kind",), _gap_kinds),
    Family("cockpit_accepted_results", "Accepted results (D21).", (),
           _campaign(lambda s: None if s.budget is None else float(s.budget.accepted))),
    Family("cockpit_budget_committed_usd", "The package's price, committed (D20).", (),
           _money(_committed), money=True),
    Family("cockpit_budget_incurred_usd", "Cost incurred: the package and other costs.", (),
           _money(_incurred), money=True),
    Family("cockpit_cost_per_accepted_result_usd", "The rental's share per accepted "
           "result (absent: undefined, no result accepted).", (), _money(_share), money=True),
)


def currency_name(name: str, currency: str) -> str:
    """A money family's name in a currency: ``..._usd`` → ``..._eur`` (the currency is a
    checked three-letter code; anything else is not written)."""
    return name.rsplit("_", 1)[0] + "_" + currency.lower()


def bounded_label(value: str) -> str:
    """A label's value as a person reads it: printable (escapes shown, not obeyed) and at
    most LABEL_LIMIT characters."""
    text = printable(value, LABEL_LIMIT)
    return text if len(text) <= LABEL_LIMIT else text[:LABEL_LIMIT - 1] + "…"


@functools.lru_cache(maxsize=4096)  # the same few names every tick
def label_value(value: str) -> str:
    """:func:`bounded_label`, escaped for the text format."""
    text = bounded_label(value)
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def render(snap: Snapshot, families: Iterable[Family] | None = None) -> str:
    """The snapshot in the Prometheus text exposition format (version 0.0.4); a viewer
    publishes only :data:`VIEWER_FAMILIES` (whether anybody conducts)."""
    machine = "all" if snap.machine is None else str(snap.machine)
    base = f'campaign="{label_value(snap.campaign)}",machine="{label_value(machine)}"'
    blocks: dict[str, list[str]] = {}
    helps: dict[str, str] = {}
    for family in FAMILIES if families is None else families:
        if not family.money:
            blocks.setdefault(family.name, [])
            helps[family.name] = family.help
        for values, value in family.samples(snap):
            if value is None:
                continue
            name = family.name
            if family.money:
                currency, values = values[0], values[1:]
                if not (len(currency) == 3 and currency.isascii() and currency.isalpha()):
                    continue
                name = currency_name(family.name, currency)
                helps.setdefault(name, f"{family.help} In {currency.upper()}.")
            body = "".join(f',{k}="{label_value(v)}"'
                           for k, v in zip(family.labels, values, strict=True))
            blocks.setdefault(name, []).append(f"{name}{{{base}{body}}} {_number(float(value))}")
    out: list[str] = []
    for name, lines in blocks.items():
        out += [f"# HELP {name} {helps[name]}", f"# TYPE {name} gauge", *lines]
    return "\n".join(out) + "\n"


# What a viewer's endpoint or file says: the conductor publishes the figures.
VIEWER_FAMILIES = tuple(f for f in FAMILIES if f.name == "cockpit_conducted")


def metric_names() -> tuple[str, ...]:
    """Every family's name (money families in USD), in the registry's order."""
    return tuple(f.name for f in FAMILIES)
