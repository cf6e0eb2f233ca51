"""The plan as frozen dataclasses: what was decided before the order (never rewritten)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Literal, TypeAlias

from cockpit.common.event_kinds import EXPORT_DONE, RULE_BLIND, RULE_FIRED, STAGE_FINISHED
from cockpit.common.layout import STATE_DIR as STATE_DIR  # re-exported: the model names it
from cockpit.common.units import Money

# The folder beside the campaign file where the cockpit writes everything (every file in
# it is named in cockpit.journal.paths).

CATEGORIES = ("essential", "useful", "exploratory")
# Optional stages may be dropped by a decision or a shortened protocol; essential never.
OPTIONAL_CATEGORIES = ("useful", "exploratory")


@dataclass(frozen=True)
class Offer:
    """A rental package as sold: its price covers the whole duration (D8)."""

    id: str
    gpu: str
    gpus: int
    days: float
    price: Money | None  # None: unknown until the campaign states it (D10)

    @property
    def window_hours(self) -> float:
        return self.days * 24.0


@dataclass(frozen=True)
class Package:
    """What was bought: ``count`` identical packages of one offer, from ``start``."""

    offer: Offer
    count: int
    start: datetime
    order_ref: str | None = None

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=self.offer.days)

    @property
    def cost(self) -> Money | None:
        """count × price, never × GPUs (D10); None when the price is unknown."""
        return None if self.offer.price is None else self.offer.price * self.count


@dataclass(frozen=True)
class Resource:
    """One thing a stage occupies: ``human``, ``gpu`` (all GPUs), ``gpu:N``, ``cpu``, ``none``."""

    kind: str
    gpu: int | None = None

    def __str__(self) -> str:
        return f"gpu:{self.gpu}" if self.gpu is not None else self.kind


ROLE_IDS: dict[str, tuple[str, ...]] = {
    "control": ("control", "baseline"),
    "data_check": ("data-check", "data_check", "datacheck"),
    "resume_check": ("resume-check", "resume_check"),
    "pilot": ("pilot",),
    "export": ("export",),
    "retrieval": ("retrieval", "fetch"),
}
# Runs of these roles measure, check or decide; they produce no result to accept (D21).
NO_RESULT_ROLES = ("data_check", "pilot", "resume_check")


@dataclass(frozen=True)
class Machine:
    """How to reach one machine of the campaign (``machines:``), over the system ``ssh``."""

    number: int
    ssh: str  # a host, user@host, or an alias of the OpenSSH client config
    path: str  # the campaign folder on that machine
    port: int | None = None
    ssh_config: str | None = None  # ``ssh -F``: this OpenSSH client config file instead
    cockpit: str = "cockpit"  # the cockpit command there (actions from `cockpit fleet`)


@dataclass(frozen=True)
class Stage:
    id: str
    seconds: float
    resources: tuple[Resource, ...]
    category: str
    after: tuple[str, ...] = ()
    decision_point: bool = False
    run: str | None = None
    machine: int = 1
    role: str | None = None
    command: tuple[str, ...] | str | None = None
    shell: bool = False
    cwd: Path | None = None
    env: tuple[tuple[str, str], ...] = ()
    line: int = 0

    @property
    def hours(self) -> float:
        return self.seconds / 3600.0

    @property
    def uses_gpu(self) -> bool:
        return any(r.kind == "gpu" for r in self.resources)

    @property
    def is_human(self) -> bool:
        return any(r.kind == "human" for r in self.resources)

    @property
    def resource_label(self) -> str:
        return ",".join(str(r) for r in self.resources)

    @property
    def effective_role(self) -> str | None:
        """The ``role:`` key, or the role whose name the stage's id (or run id) is.

        Only exact ids count: ``load-data`` is no data check, ``resume-writing`` no
        resume check, ``uncontrolled-sweep`` no control.
        """
        if self.role:
            return self.role
        names = (self.id.lower(), (self.run or "").lower())
        for role, ids in ROLE_IDS.items():
            if any(name in ids for name in names):
                return role
        return None


def pilots_by_position(stages: Iterable[Stage]) -> set[str]:
    """D21: the pilot is the stage before the decision point, whatever its id.

    The decision point comes when a ``decision_point: true`` stage has ended; the work
    that ended there is that stage when it measures (it has a run or uses a GPU), or else
    (a human "decide" stage) the measuring stages it comes ``after``. Plain names no
    longer decide: a decision stage called ``smoke`` is the pilot as much as ``pilot``.
    """
    order = list(stages)
    by_id = {s.id: s for s in order}

    def measures(stage: Stage) -> bool:
        return stage.run is not None or stage.uses_gpu

    found: set[str] = set()
    for stage in order:
        if not stage.decision_point:
            continue
        if measures(stage):
            found.add(stage.id)
        else:
            found |= {d for d in stage.after if d in by_id and measures(by_id[d])}
    return found


def with_pilot_roles(stages: Iterable[Stage]) -> list[Stage]:
    """The stages with ``role: pilot`` given to the pilot by position (D21), unless its
    ``role:`` key or its id names another role (a control run as the decision point
    stays a control and its result counts)."""
    order = list(stages)
    pilots = pilots_by_position(order)
    return [replace(s, role="pilot") if s.id in pilots and s.effective_role is None else s
            for s in order]


RUN_KINDS = ("train", "inference", "adapter")
RULE_KINDS = ("non_finite", "threshold", "truncation", "restart", "stalled", "underfed")
# ``stalled`` rule defaults: no new step for STALL_FACTOR x the run's own median step
# interval, and at least STALL_FLOOR_S (the implicit rule on train runs uses both).
STALL_FACTOR = 10.0
STALL_FLOOR_S = 300.0


@dataclass(frozen=True)
class ResumeCheck:
    """Resume equivalence (D17): re-run N steps from a checkpoint and compare a metric."""

    command: tuple[str, ...]
    steps: int
    metric: str = "loss"
    tolerance: float = 0.0
    # Where the resumed process writes its metrics, each under "{scratch}" (its scratch
    # folder); none: files of the run's own sources' kinds found there, and its report.
    metrics: tuple[str, ...] = ()


@dataclass(frozen=True)
class MetricCheck:
    """Acceptance: the run's last reported ``metric`` is within [min, max]."""

    metric: str
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class PredictionsCheck:
    """Acceptance: the predictions file has records, or exactly the expected ids (D23)."""

    what: Literal["non_empty", "expected_ids"]


@dataclass(frozen=True)
class CheckpointCheck:
    """Acceptance: the newest complete checkpoint reloads in a fresh process (D17, D23)."""


# One announced check of a run's ``acceptance:`` list (D15, D20).
AcceptanceCheck: TypeAlias = MetricCheck | PredictionsCheck | CheckpointCheck


@dataclass(frozen=True)
class Run:
    """One configuration's run: what it reads, writes and needs to resume (D15, D16)."""

    id: str
    kind: str = "train"
    metrics: tuple[Path, ...] = ()
    checkpoints: Path | None = None
    pattern: str | None = None
    predictions: Path | None = None
    outputs: tuple[Path, ...] = ()
    params: dict[str, object] = field(default_factory=dict)
    params_file: Path | None = None
    base_model: str | None = None
    base_revision: str | None = None
    result: str = ""
    # False for `result: none` (the default for data-check, pilot and resume-check runs):
    # such a run needs no verdict and never counts as an accepted result (D21).
    produces_result: bool = True
    tolerable_loss_s: float | None = None
    verify_command: tuple[str, ...] | None = None
    resume_check: ResumeCheck | None = None
    allow_unsafe_pickle: bool = False
    expected_ids: Path | None = None
    acceptance: tuple[AcceptanceCheck, ...] = ()
    # How the model is built: "module:function" in the campaign's code, called with the
    # run's params; the export's reload.py rebuilds it and loads the checkpoint (D22).
    model: str | None = None
    # The run's own metric names mapped to canonical ones ({their_name: canonical}),
    # beside the table of aliases (cockpit.common.metric_names).
    metric_names: dict[str, str] = field(default_factory=dict)

    @property
    def result_id(self) -> str:
        return self.result or self.id


@dataclass(frozen=True)
class StopRule:
    """A stop rule fixed before the runs (D14)."""

    id: str
    kind: str
    metric: str | None = None
    min: float | None = None
    max: float | None = None
    after_step: int = 0
    max_age_s: float | None = None
    action: str = "stop"  # stop | warn
    runs: tuple[str, ...] = ()  # empty: every run
    factor: float = STALL_FACTOR  # stalled: x the run's median step interval
    floor_s: float = STALL_FLOOR_S  # stalled: never sooner than this
    # underfed: every GPU of the run under this utilization (%) for ``for_s`` seconds
    # (input-bound or stuck); both set on an underfed rule, None on the others.
    util_below: float | None = None
    for_s: float | None = None
    # True: the default ``stalled`` rule on train runs, added when the file declares none
    # (shown like any rule, outside the D14 hash: no person fixed it).
    implicit: bool = False

    def applies_to(self, run_id: str) -> bool:
        return not self.runs or run_id in self.runs


@dataclass(frozen=True)
class Settings:
    """How the cockpit behaves for this campaign (all optional, with defaults)."""

    stop_grace_s: float = 10.0
    idle_util_pct: float = 5.0
    idle_grace_s: float = 600.0
    disk_warn_bytes: int = 10 * 2**30
    tolerable_loss_s: float = 2 * 3600.0
    mtbi_s: float = 24 * 3600.0
    transfer_rate_bytes_s: float | None = None
    verify_timeout_s: float = 300.0
    verify_every_s: float = 600.0
    deadline_warn_s: float = 12 * 3600.0
    # Folders outside the campaign's own whose files the export may copy (D19): every
    # payload path must lie, symlinks resolved, in the campaign folder or one of these.
    export_outside: tuple[Path, ...] = ()
    # How the export is fetched from your own machine (FETCH.txt): the address, SSH port
    # and user you reach this machine with (behind a rental's port or proxy); None: from
    # $SSH_CONNECTION, else this machine's name.
    fetch_host: str | None = None
    fetch_port: int | None = None
    fetch_user: str | None = None


HOOK_EVENTS = (RULE_FIRED, STAGE_FINISHED, "decision_needed", "deadline_near",
               EXPORT_DONE, "gpu_lost")


@dataclass(frozen=True)
class Hook:
    """A person's command run when ``event`` happens (one of HOOK_EVENTS)."""

    event: str
    command: tuple[str, ...] | str
    shell: bool = False
    timeout_s: float = 30.0


# The families of alerts (issue 26) an ``alerts.send`` entry may route by label.
ALERT_KINDS = (RULE_FIRED, "stage_failed", RULE_BLIND, "decision", "verdict", "checkpoint",
               "gpu", "disk", "clock", "peer", "deadline", "export", "closed", "digest",
               "landing")


@dataclass(frozen=True)
class AlertsSpec:
    """The campaign's ``alerts:`` section: when a wait is worth a person's phone, and which
    kinds go to which target labels (a kind not named: every target)."""

    pending_after_s: float = 30 * 60.0
    send: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ConclusionSpec:
    """How the question is answered (D1, D2): variants against the baseline on a metric."""

    metric: str
    baseline: str | None  # None only under rule reach_threshold
    better: str = "higher"
    margin: float = 0.0
    variants: tuple[str, ...] = ()  # empty: every other run that produces a result
    # beat_baseline: an accepted variant beats the accepted baseline by the margin.
    # reach_threshold: an accepted variant reaches `threshold`; when every variant was
    # judged and none does, that negative answer closes the question (D2).
    rule: str = "beat_baseline"
    threshold: float | None = None


ON_DEADLINE = ("warn", "stop-optional", "land")


@dataclass(frozen=True)
class DeadlineSpec:
    """What must still fit in the window at its end (D19): export, then retrieval."""

    export_s: float = 2 * 3600.0
    retrieve_s: float = 1 * 3600.0
    # The landing (on_deadline: land): kept beyond the measured times, and how long
    # before the point of no return the person is told.
    landing_margin_s: float = 10 * 60.0
    landing_lead_s: float = 60 * 60.0


@dataclass(frozen=True)
class Campaign:
    """A loaded, validated campaign file."""

    id: str
    question: str
    package: Package
    offers: dict[str, Offer]
    stages: tuple[Stage, ...]
    path: Path
    sha256: str
    runs: Mapping[str, Run] = field(default_factory=dict)
    stop_rules: tuple[StopRule, ...] = ()
    settings: Settings = field(default_factory=Settings)
    hooks: Mapping[str, Hook] = field(default_factory=dict)
    conclusion: ConclusionSpec | None = None
    deadline: DeadlineSpec = field(default_factory=DeadlineSpec)
    on_deadline: str = "warn"  # one of ON_DEADLINE
    machines: Mapping[int, Machine] = field(default_factory=dict)  # D12: how to reach each
    alerts: AlertsSpec = field(default_factory=AlertsSpec)  # issue 26: routing, waits
    text: str = field(default="", repr=False, compare=False)  # the file as read

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def state_dir(self) -> Path:
        """Everything the cockpit writes lives here, beside the campaign file."""
        return self.folder / STATE_DIR

    def stage(self, stage_id: str) -> Stage:
        return self._stage_index[0][stage_id]  # KeyError: not a stage of the plan

    def resolve(self, path: Path) -> Path:
        """Relative paths in a campaign file are relative to its folder."""
        return path if path.is_absolute() else self.folder / path

    def export_roots(self) -> tuple[Path, ...]:
        """The folders the export copies from (symlinks resolved): the campaign's own
        and those of ``settings.export_outside``. One rule for every payload path."""
        return export_roots(self.folder, self.settings.export_outside)

    def stage_of_run(self, run_id: str) -> Stage | None:
        return self._stage_index[1].get(run_id)

    @cached_property
    def _stage_index(self) -> tuple[dict[str, Stage], dict[str, Stage]]:
        """Stages by id and by run (the first stage of a run), looked up per journal
        event: built once (a frozen plan)."""
        by_run: dict[str, Stage] = {}
        for s in self.stages:
            if s.run is not None:
                by_run.setdefault(s.run, s)
        return {s.id: s for s in self.stages}, by_run


def question_variants(campaign: Campaign) -> tuple[str, ...]:
    """The runs the conclusion compares: its ``variants:``, or else every run that
    produces a result other than the baseline."""
    spec = campaign.conclusion
    if spec is None:
        return ()
    return spec.variants or tuple(r.id for r in campaign.runs.values()
                                  if r.id != spec.baseline and r.produces_result)


def model_module_file(folder: Path, spec: str) -> Path | None:
    """The file of the campaign folder that a ``model: "module:function"`` names (None:
    the module is not a file of the folder, e.g. an installed package's)."""
    parts = spec.partition(":")[0].split(".")
    base = folder.resolve().joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file() and candidate.resolve().is_relative_to(folder.resolve()):
            return candidate.resolve()
    return None


def export_roots(folder: Path, outside: tuple[Path, ...] = ()) -> tuple[Path, ...]:
    """The campaign folder and the ``export_outside`` folders, symlinks resolved."""
    return tuple(Path(os.path.realpath(p if p.is_absolute() else folder / p))
                 for p in (folder, *outside))


def exportable(path: Path, roots: tuple[Path, ...]) -> bool:
    """Whether ``path``, symlinks resolved, lies in one of ``roots``: the one rule every
    payload path follows (plan, params, metrics, predictions, expected ids, outputs,
    checkpoints), at ``cockpit check`` and at the export."""
    real = os.path.realpath(path)
    return any(real == str(r) or real.startswith(str(r).rstrip(os.sep) + os.sep)
               for r in roots)
