"""Resource-constrained schedule, window figures and overrun options (D5-D7, D11).

Pure functions of the campaign model: no clock, no files. Times are hours from the
window start. A stage starts when every stage in ``after`` has ended (a dropped stage
counts as ended) and its resources are free: ``human`` is one person across all
machines, ``gpu`` takes every GPU of its machine, ``gpu:N`` one GPU, ``cpu`` the
machine's CPU; stages sharing nothing overlap (D6). Ties go by file order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from cockpit.campaign.model import Campaign, Offer, Stage
from cockpit.units import Money, for_packages, format_hours

ResourceKey = tuple[object, ...]


@dataclass(frozen=True)
class Slot:
    stage: Stage
    start: float
    end: float
    dropped: bool = False

    @property
    def hours(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Figures:
    window_hours: float
    reserved_hours: float
    unused_hours: float
    exceeds_by_hours: float
    fits: bool
    gpu_busy_hours: float
    human_hours: float
    overrun_hours: float = 0.0


@dataclass(frozen=True)
class Option:
    """One way out when the plan does not fit (D11)."""

    kind: str  # "offer" | "shorten" | "second-package"
    fits: bool
    reserved_hours: float
    offer: str | None = None
    cost: Money | None = None
    drops: tuple[str, ...] = ()
    saves_hours: float = 0.0
    moved: tuple[str, ...] = ()  # second-package: the GPU stages that run on the new machine
    packages: int = 1  # how many packages ``cost`` pays for

    def describe(self) -> str:
        verdict = "then fits" if self.fits else "still exceeds"
        if self.kind == "offer":
            price = str(self.cost) if self.cost else "price unknown"
            return f"take {self.offer} ({price} {for_packages(self.packages)})"
        if self.kind == "second-package":
            price = f"{self.cost} more" if self.cost else "price unknown"
            return (f"a second {self.offer} package ({price}): run {', '.join(self.moved)} on "
                    f"it, saves {format_hours(self.saves_hours)} h, {verdict} — only if the "
                    "work splits across machines and your environment allows it; GPUs are "
                    "not pooled (D12)")
        return (f"shorten: drop {', '.join(self.drops)} (saves "
                f"{format_hours(self.saves_hours)} h, {verdict})")


@dataclass(frozen=True)
class Plan:
    slots: tuple[Slot, ...]
    figures: Figures
    options: tuple[Option, ...]
    cost: Money | None


def resource_keys(stage: Stage, gpus_per_machine: int) -> list[ResourceKey]:
    keys: list[ResourceKey] = []
    for res in stage.resources:
        if res.kind == "human":
            keys.append(("human",))
        elif res.kind == "cpu":
            keys.append(("cpu", stage.machine))
        elif res.kind == "gpu":
            indices = range(gpus_per_machine) if res.gpu is None else (res.gpu,)
            keys.extend(("gpu", stage.machine, i) for i in indices)
    return keys


def resource_conflict(stage: Stage, running: Iterable[Stage],
                      gpus_per_machine: int) -> tuple[str, str] | None:
    """Whether ``stage`` may start while ``running`` run: None, or the first of them that
    holds a resource it needs and that resource in words. The one answer for the planner
    (stages placed over the same hours) and for ``start``/``--auto`` (stages running now),
    so the plan and the live campaign agree (D6): ``cpu`` is its machine's, held by one
    stage at a time; ``none`` shares everything."""
    mine = set(resource_keys(stage, gpus_per_machine))
    for other in running:
        shared = mine & set(resource_keys(other, gpus_per_machine)) if other.id != stage.id \
            else set()
        if shared:
            return other.id, _key_words(min(shared, key=str))
    return None


def _key_words(key: ResourceKey) -> str:
    if key[0] == "gpu":
        return f"GPU {key[2]} of machine {key[1]}"
    if key[0] == "cpu":
        return f"the CPU of machine {key[1]}"
    return "the person"


def schedule(
    stages: Iterable[Stage],
    gpus_per_machine: int,
    *,
    durations: Mapping[str, float] | None = None,
    dropped: Iterable[str] = (),
    fixed: Mapping[str, tuple[float, float]] | None = None,
    not_before: float = 0.0,
) -> tuple[Slot, ...]:
    """Place every stage; ``durations`` (hours) override the plan, ``fixed`` pins realized
    (start, end) intervals, and nothing unpinned starts before ``not_before``."""
    order = list(stages)
    dropped_ids = set(dropped)
    fixed = fixed or {}
    hours = {s.id: (durations or {}).get(s.id, s.hours) for s in order}
    ends: dict[str, float] = {}
    slots: dict[str, Slot] = {}

    for stage in order:
        if stage.id in fixed and stage.id not in dropped_ids:
            start, end = fixed[stage.id]
            slots[stage.id] = Slot(stage, start, end)
            ends[stage.id] = end

    pending = [s for s in order if s.id not in slots]
    while pending:
        ready = next((s for s in pending if all(d in ends for d in s.after)), None)
        if ready is None:  # a cycle: the loader refuses these, so only bad callers get here
            raise ValueError("stages have a dependency cycle")
        pending.remove(ready)
        earliest = max([not_before, *(ends[d] for d in ready.after)])
        if ready.id in dropped_ids:
            slots[ready.id] = Slot(ready, earliest, earliest, dropped=True)
            ends[ready.id] = earliest
            continue
        length = hours[ready.id]
        start = _first_free(ready, [sl for sl in slots.values() if not sl.dropped], earliest,
                            length, gpus_per_machine)
        slots[ready.id] = Slot(ready, start, start + length)
        ends[ready.id] = start + length
    return tuple(slots[s.id] for s in order)


def _first_free(stage: Stage, placed: list[Slot], earliest: float, length: float,
                gpus_per_machine: int) -> float:
    """The first time from ``earliest`` at which ``stage`` may run ``length`` hours: no
    stage placed over those hours holds what it needs (:func:`resource_conflict`)."""
    candidates = sorted({earliest, *(sl.end for sl in placed if sl.end > earliest)})
    for t in candidates:
        during = [sl.stage for sl in placed if sl.start < t + length and sl.end > t]
        if resource_conflict(stage, during, gpus_per_machine) is None:
            return t
    return candidates[-1]  # unreachable: after the last end nothing is placed


def union_hours(intervals: Iterable[tuple[float, float]]) -> float:
    total = 0.0
    current_start = current_end = None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total


def figures(slots: Iterable[Slot], window_hours: float, overrun_hours: float = 0.0) -> Figures:
    live = [s for s in slots if not s.dropped and s.end > s.start]
    if live:
        reserved = max(s.end for s in live) - min(s.start for s in live)
    else:
        reserved = 0.0
    reserved += overrun_hours
    gpu = union_hours((s.start, s.end) for s in live if s.stage.uses_gpu)
    human = union_hours((s.start, s.end) for s in live if s.stage.is_human)
    unused = window_hours - reserved
    return Figures(
        window_hours=window_hours,
        reserved_hours=_round(reserved),
        unused_hours=_round(max(unused, 0.0)),
        exceeds_by_hours=_round(max(-unused, 0.0)),
        fits=unused >= 0,
        gpu_busy_hours=_round(gpu),
        human_hours=_round(human),
        overrun_hours=overrun_hours,
    )


def overrun_options(campaign: Campaign, reserved_hours: float,
                    reserved_without: Callable[[set[str]], float],
                    droppable: Iterable[str] | None = None,
                    reserved_moving: Callable[[set[str]], float] | None = None,
                    ) -> tuple[Option, ...]:
    """Longer offers of the same GPU that fit, shortened protocols (D11), and a second
    package when independent GPU work could run on it (D12).

    ``reserved_without(drops)`` gives the end-to-end hours with those stages dropped;
    ``droppable`` limits which stages may still be dropped (not yet started ones);
    ``reserved_moving(stages)`` the hours with those stages on a second machine.
    Every option saves something, none is listed twice, and no option drops more than
    another one that saves as much.
    """
    offer = campaign.package.offer
    options: list[Option] = []
    for other in sorted(campaign.offers.values(), key=lambda o: (o.days, o.id)):
        if _same_card(other, offer) and other.days > offer.days \
                and other.window_hours >= reserved_hours:
            cost = None if other.price is None else other.price * campaign.package.count
            options.append(Option("offer", True, reserved_hours, offer=other.id, cost=cost,
                                  packages=campaign.package.count))
    options.extend(_shorten_options(campaign, reserved_hours, reserved_without, droppable))
    if reserved_moving is not None:
        second = _second_package(campaign, reserved_hours, reserved_moving)
        if second is not None:
            options.append(second)
    return tuple(options)


def no_options_reason(campaign: Campaign) -> str:
    """Why a plan that does not fit has no option (D11), in words."""
    offer = campaign.package.offer
    longer = [o for o in campaign.offers.values() if _same_card(o, offer) and o.days > offer.days]
    optional = [s for s in campaign.stages if s.category != "essential"]
    parts = [f"no longer {offer.gpu} package in the catalog holds the plan" if longer else
             f"the catalog has no longer {offer.gpu} package",
             "dropping the optional stages saves no time" if optional else
             "every stage is essential"]
    return ("no option: " + " and ".join(parts)
            + "; revise the question or shorten the essential work (D4, D11)")


def _saving(reserved_hours: float, shorter: float) -> float:
    # Rounded as shown: a saving that rounds to 0 h is no saving.
    return float(format_hours(reserved_hours - shorter))


def _shorten_options(campaign: Campaign, reserved_hours: float,
                     reserved_without: Callable[[set[str]], float],
                     droppable: Iterable[str] | None) -> list[Option]:
    allowed = None if droppable is None else set(droppable)
    optional = [s.id for s in campaign.stages if s.category in ("exploratory", "useful")
                and (allowed is None or s.id in allowed)]
    exploratory = [s.id for s in campaign.stages if s.category == "exploratory"
                   and s.id in optional]
    useful = [sid for sid in optional if sid not in exploratory]
    # Exploratory work goes first (D3); useful work only after all exploratory work.
    candidates = [{sid} for sid in exploratory] + [set(exploratory)]
    candidates += [set(exploratory) | {sid} for sid in useful] + [set(optional)]
    window = campaign.package.offer.window_hours
    found: dict[tuple[str, ...], float] = {}
    for drops in candidates:
        if not drops:
            continue
        saves = _saving(reserved_hours, reserved_without(drops))
        if saves <= 0:
            continue
        # Keep only the stages whose drop matters: "notes, variant-x" saves what
        # "variant-x" alone saves when notes runs beside the GPU work.
        for sid in sorted(drops):
            rest = drops - {sid}
            if rest and _saving(reserved_hours, reserved_without(rest)) >= saves:
                drops = rest
        key = tuple(s.id for s in campaign.stages if s.id in drops)
        found[key] = saves
    kept = [key for key, saves in found.items()
            if not any(set(other) < set(key) and found[other] >= saves for other in found)]
    options = []
    for key in sorted(kept, key=lambda k: (reserved_hours - found[k] > window, len(k),
                                           -found[k])):
        shorter = reserved_hours - found[key]
        options.append(Option("shorten", shorter <= window, _round(shorter), drops=key,
                              saves_hours=found[key]))
    return options[:4]


def _second_package(campaign: Campaign, reserved_hours: float,
                    reserved_moving: Callable[[set[str]], float]) -> Option | None:
    """Greedy: move GPU stages to a second machine while that shortens the plan."""
    if campaign.package.count != 1:
        return None
    gpu_stages = [s.id for s in campaign.stages if s.uses_gpu]
    moved: set[str] = set()
    best = reserved_hours
    for sid in reversed(gpu_stages):  # later stages move; the first (the control) stays
        trial = reserved_moving(moved | {sid})
        if trial < best - 1e-9:
            moved.add(sid)
            best = trial
    saves = _saving(reserved_hours, best)
    if not moved or saves <= 0:
        return None
    offer = campaign.package.offer
    return Option("second-package", best <= offer.window_hours, _round(best), offer=offer.id,
                  cost=offer.price, saves_hours=saves,
                  moved=tuple(s for s in gpu_stages if s in moved))


def _same_card(a: Offer, b: Offer) -> bool:
    return a.gpu == b.gpu and a.gpus == b.gpus


def plan_campaign(campaign: Campaign, overrun_hours: float = 0.0,
                  dropped: Iterable[str] = ()) -> Plan:
    offer = campaign.package.offer
    slots = schedule(campaign.stages, offer.gpus, dropped=dropped)
    figs = figures(slots, offer.window_hours, overrun_hours)
    base = set(dropped)

    def reserved_without(drops: set[str]) -> float:
        shorter = schedule(campaign.stages, offer.gpus, dropped=base | drops)
        return figures(shorter, offer.window_hours, overrun_hours).reserved_hours

    def reserved_moving(moved: set[str]) -> float:
        stages = [replace(s, machine=2) if s.id in moved else s for s in campaign.stages]
        split = schedule(stages, offer.gpus, dropped=base)
        return figures(split, offer.window_hours, overrun_hours).reserved_hours

    droppable = [s.id for s in campaign.stages if s.id not in base]
    options = () if figs.fits else overrun_options(campaign, figs.reserved_hours,
                                                   reserved_without, droppable,
                                                   reserved_moving)
    return Plan(slots, figs, options, campaign.package.cost)


def _round(value: float) -> float:
    return round(value, 4)
