"""The plan as frozen dataclasses: what was decided before the order (never rewritten)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from cockpit.units import Money

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
    extras: dict[str, object] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def state_dir(self) -> Path:
        """Everything the cockpit writes lives here, beside the campaign file."""
        return self.folder / ".cockpit"

    def stage(self, stage_id: str) -> Stage:
        for stage in self.stages:
            if stage.id == stage_id:
                return stage
        raise KeyError(stage_id)
