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
from decimal import Decimal

from cockpit.campaign.model import Campaign, Offer, Stage
from cockpit.common.units import Money, for_packages, format_hours
from cockpit.planning.advice import variant_stages

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
    reserved_hours: float  # the schedule's own end-to-end hours with this option
    offer: str | None = None
    cost: Money | None = None  # the package(s) this option rents; None: price unknown
    drops: tuple[str, ...] = ()
    saves_hours: float = 0.0
    moved: tuple[str, ...] = ()  # second-package: the GPU stages that run on the new machine
    packages: int = 1  # how many packages ``cost`` pays for
    # Once the window has started the package cannot be swapped: a longer one is a new
    # rental (``additional``) on top of what is spent (``spent``; ``total`` both together).
    additional: bool = False
    spent: Money | None = None
    # What the option adds to the rental as planned (0 to shorten): the measure by which
    # one option dominates another; None when a price is unknown.
    adds: Money | None = None
    # shorten: groups of interchangeable stages (:func:`interchangeable`) of which ``drops``
    # holds some, not all: any of them would do ("drop one of sweep-1, sweep-2").
    alike: tuple[tuple[str, ...], ...] = ()

    @property
    def total(self) -> Money | None:
        if self.spent is None or self.cost is None:
            return None
        return self.spent + self.cost

    def describe(self) -> str:
        verdict = "then fits" if self.fits else "still exceeds"
        then = f"reserved {format_hours(self.reserved_hours)} h, {verdict}"
        if self.kind == "offer" and self.additional:
            more = f"{self.cost} more" if self.cost else "price unknown"
            spent = (f"the {self.spent} already spent" if self.spent else
                     "the package already rented (its price unknown)")
            price = f"{more} on top of {spent}" + (f": {self.total} in all" if self.total
                                                   else "")
            return (f"rent {self.offer} as well ({price}; the window has started, so the "
                    f"package cannot be swapped): the work left runs on it, ending "
                    f"{format_hours(self.reserved_hours)} h after the first window's start, "
                    f"{verdict}")
        if self.kind == "offer":
            price = str(self.cost) if self.cost else "price unknown"
            return f"take {self.offer} ({price} {for_packages(self.packages)}): {then}"
        if self.kind == "second-package":
            price = f"{self.cost} more" if self.cost else "price unknown"
            return (f"a second {self.offer} package ({price}): run {', '.join(self.moved)} on "
                    f"it, saves {format_hours(self.saves_hours)} h ({then}) — only if the "
                    "work splits across machines and your environment allows it; GPUs are "
                    "not pooled (D12)")
        return (f"shorten: drop {self.drop_words()} (saves "
                f"{format_hours(self.saves_hours)} h: {then})")

    def drop_words(self) -> str:
        """The stages dropped, in words: ``variant-b``, ``one of sweep-1, sweep-2`` where
        interchangeable stages would do alike (a mirror image is never a second option)."""
        words: list[str] = []
        told: set[str] = set()
        for sid in self.drops:
            group = next((g for g in self.alike if sid in g), None)
            if group is None:
                words.append(sid)
            elif sid not in told:
                told.update(group)
                count = sum(1 for g in group if g in self.drops)
                many = "one" if count == 1 else str(count)
                words.append(f"{many} of {', '.join(group)}")
        return ", ".join(words)

    def as_json(self) -> dict[str, object]:
        """Every field, whatever the kind (absent ones null or empty), and the text."""
        def money(m: Money | None) -> dict[str, str] | None:
            return m.as_json() if m is not None else None

        return {"kind": self.kind, "fits": self.fits, "reserved_hours": self.reserved_hours,
                "offer": self.offer, "cost": money(self.cost), "packages": self.packages,
                "additional": self.additional, "spent": money(self.spent),
                "total": money(self.total), "adds": money(self.adds), "drops": list(self.drops),
                "saves_hours": self.saves_hours, "moved": list(self.moved),
                "one_of": [{"count": sum(1 for g in group if g in self.drops),
                            "of": list(group)} for group in self.alike],
                "text": self.describe()}


@dataclass(frozen=True)
class Plan:
    slots: tuple[Slot, ...]
    figures: Figures
    options: tuple[Option, ...]
    cost: Money | None

    @property
    def fitting(self) -> tuple[Option, ...]:
        return tuple(o for o in self.options if o.fits)


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
                    *, elapsed_hours: float = 0.0, dropped: Iterable[str] = (),
                    ) -> tuple[Option, ...]:
    """Longer offers of the same GPU that fit, shortened protocols (D11), and a second
    package when independent GPU work could run on it (D12).

    ``reserved_without(drops)`` gives the end-to-end hours with those stages dropped;
    ``droppable`` limits which stages may still be dropped (not yet started ones);
    ``reserved_moving(stages)`` the hours with those stages on a second machine;
    ``elapsed_hours`` how much of the window has gone (over 0: the package is rented and a
    longer one is an additional rental); ``dropped`` the stages already dropped.
    Every option saves something, none is listed twice, none drops every variant (the
    question could no longer be answered), and none is dominated: another option that
    fits, adds no more money and drops a subset of its stages is never worse.
    """
    offer = campaign.package.offer
    count = campaign.package.count
    started = elapsed_hours > 0
    spent = campaign.package.cost if started else None
    options: list[Option] = []
    for other in sorted(campaign.offers.values(), key=lambda o: (o.days, o.id)):
        if not (_same_card(other, offer) and other.days > offer.days):
            continue
        # Started: the new rental runs from now and holds the work left; before the
        # start, the longer package replaces the planned one.
        if max(elapsed_hours, 0.0) + other.window_hours < reserved_hours:
            continue
        cost = None if other.price is None else other.price * count
        planned = campaign.package.cost
        # Started: all of it comes on top; before: the difference with the planned one.
        adds = cost if started or cost is None else \
            None if planned is None else _minus(cost, planned)
        options.append(Option("offer", True, _round(reserved_hours), offer=other.id,
                              cost=cost, packages=count, additional=started, spent=spent,
                              adds=adds))
    options.extend(_shorten_options(campaign, reserved_hours, reserved_without, droppable,
                                    set(dropped)))
    if reserved_moving is not None:
        second = _second_package(campaign, reserved_hours, reserved_moving)
        if second is not None:
            options.append(second)
    return tuple(o for i, o in enumerate(options) if not _dominated(i, options))


def _minus(a: Money, b: Money) -> Money | None:
    if a.currency != b.currency:
        return None
    return Money(a.amount - b.amount, a.currency)


def _no_dearer(a: Money | None, b: Money | None) -> bool:
    """Whether ``a`` is known to add no more money than ``b``."""
    return a is not None and b is not None and a.currency == b.currency \
        and a.amount <= b.amount


def _dominated(index: int, options: list[Option]) -> bool:
    """Another option fits, adds no more and drops a subset of this one's stages (D11):
    strictly better in one of them, or the same and listed earlier. A second package
    dominates nothing: it holds only if the work splits across machines (D12)."""
    me = options[index]
    for j, other in enumerate(options):
        if j == index or not other.fits or other.kind == "second-package" \
                or not _no_dearer(other.adds, me.adds) \
                or not set(other.drops) <= set(me.drops):
            continue
        strictly = (not me.fits or set(other.drops) < set(me.drops)
                    or not _no_dearer(me.adds, other.adds))
        if strictly or j < index:
            return True
    return False


def no_options_reason(campaign: Campaign, reserved_hours: float | None = None,
                      options: Iterable[Option] = ()) -> str:
    """Why no option makes the plan fit (D11), in words: "nothing fits: ..."."""
    offer = campaign.package.offer
    longer = sorted((o for o in campaign.offers.values()
                     if _same_card(o, offer) and o.days > offer.days),
                    key=lambda o: o.window_hours)
    if longer:
        most = longer[-1]
        held = (f" {format_hours(reserved_hours)} h" if reserved_hours is not None else
                " the plan")
        parts = [f"no {offer.gpu} package of the catalog holds{held} (the longest, "
                 f"{most.id}, holds {format_hours(most.window_hours)} h)"]
    else:
        parts = [f"the catalog has no longer {offer.gpu} package"]
    shorten = [o for o in options if o.kind == "shorten"]
    second = [o for o in options if o.kind == "second-package"]
    optional = [s for s in campaign.stages if s.category != "essential"]
    if shorten:
        best = max(shorten, key=lambda o: o.saves_hours)
        parts.append(f"dropping what the question can spare saves at most "
                     f"{format_hours(best.saves_hours)} h ({best.drop_words()})")
    elif optional:
        parts.append("dropping the optional stages saves no time, or would leave the "
                     "question without a variant")
    else:
        parts.append("every stage is essential")
    if second:
        parts.append(f"a second package saves {format_hours(second[0].saves_hours)} h")
    return ("nothing fits: " + "; ".join(parts)
            + "; revise the question or shorten the essential work (D4, D11)")


def _shorten_options(campaign: Campaign, reserved_hours: float,
                     reserved_without: Callable[[set[str]], float],
                     droppable: Iterable[str] | None,
                     dropped: set[str] | None = None) -> list[Option]:
    allowed = None if droppable is None else set(droppable)
    optional = [s.id for s in campaign.stages if s.category in ("exploratory", "useful")
                and (allowed is None or s.id in allowed)]
    exploratory = [s.id for s in campaign.stages if s.category == "exploratory"
                   and s.id in optional]
    useful = [sid for sid in optional if sid not in exploratory]
    # The question needs one variant left to compare (D1, D11): never drop them all.
    variants = {s.id for s in variant_stages(campaign)} - (dropped or set())
    # Exploratory work goes first (D3); useful work only after all exploratory work.
    candidates = [{sid} for sid in exploratory] + [set(exploratory)]
    candidates += [set(exploratory) | {sid} for sid in useful] + [set(optional)]
    window = campaign.package.offer.window_hours
    groups = interchangeable(campaign, optional)
    found: dict[tuple[str, ...], float] = {}  # drops -> the schedule's hours without them
    for drops in candidates:
        if not drops or (variants and variants <= drops):
            continue
        shorter = reserved_without(drops)
        if _saving(reserved_hours, shorter) <= 0:
            continue
        # Keep only the stages whose drop matters: "notes, variant-x" saves what
        # "variant-x" alone saves when notes runs beside the GPU work.
        for sid in sorted(drops):
            rest = drops - {sid}
            if rest:
                without = reserved_without(rest)
                if without <= shorter + 1e-9:
                    drops, shorter = rest, without
        # Mirror images are one option: dropping sweep-2 is dropping sweep-1.
        drops = _canonical(drops, groups)
        key = tuple(s.id for s in campaign.stages if s.id in drops)
        found[key] = min(found.get(key, shorter), shorter)
    kept = [key for key, hours in found.items()
            if not any(set(other) < set(key) and found[other] <= hours for other in found)]
    options = []
    for key in sorted(kept, key=lambda k: (found[k] > window, len(k), found[k])):
        shorter = found[key]
        options.append(Option("shorten", shorter <= window, _round(shorter), drops=key,
                              saves_hours=_round(reserved_hours - shorter),
                              adds=_nothing(campaign),
                              alike=tuple(g for g in groups
                                          if 0 < len(set(g) & set(key)) < len(g))))
    return options[:4]


def interchangeable(campaign: Campaign, ids: Iterable[str]) -> list[tuple[str, ...]]:
    """Groups (two or more, in plan order) of the stages ``ids`` that are mirror images to
    the schedule and the question: the same duration, resources, machine, category, role
    and decision point, the same stages before them and after them, and each a variant of
    the question or none. Dropping one of a group is dropping any other."""
    wanted = set(ids)
    variants = {s.id for s in variant_stages(campaign)}
    by_key: dict[tuple[object, ...], list[str]] = {}
    for stage in campaign.stages:
        if stage.id not in wanted:
            continue
        dependents = frozenset(s.id for s in campaign.stages if stage.id in s.after)
        key = (stage.seconds, stage.resource_label, stage.machine, stage.category,
               stage.effective_role, stage.decision_point, frozenset(stage.after),
               dependents, stage.id in variants, stage.run is None)
        by_key.setdefault(key, []).append(stage.id)
    return [tuple(g) for g in by_key.values() if len(g) > 1]


def _canonical(drops: set[str], groups: Iterable[tuple[str, ...]]) -> set[str]:
    """``drops`` with each interchangeable group's members replaced by its first ones."""
    out = set(drops)
    for group in groups:
        count = len(out & set(group))
        out -= set(group)
        out |= set(group[:count])
    return out


def _saving(reserved_hours: float, shorter: float) -> float:
    # Rounded as shown: a saving that rounds to 0 h is no saving (the option itself
    # carries the schedule's exact figures).
    return float(format_hours(reserved_hours - shorter))


def _nothing(campaign: Campaign) -> Money:
    """Zero in the package's currency: what shortening adds to the rental."""
    price = campaign.package.offer.price
    return Money(Decimal(0), price.currency if price is not None else "USD")


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
    if not moved or _saving(reserved_hours, best) <= 0:
        return None
    offer = campaign.package.offer
    return Option("second-package", best <= offer.window_hours, _round(best), offer=offer.id,
                  cost=offer.price, saves_hours=_round(reserved_hours - best),
                  moved=tuple(s for s in gpu_stages if s in moved), adds=offer.price)


def _same_card(a: Offer, b: Offer) -> bool:
    return a.gpu == b.gpu and a.gpus == b.gpus


def plan_campaign(campaign: Campaign, overrun_hours: float = 0.0,
                  dropped: Iterable[str] = ()) -> Plan:
    """The plan as ordered: scheduled from the window's start, before it (so a longer
    package would replace the planned one; during the window the forecast prices it as
    an additional rental)."""
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
                                                   reserved_moving, dropped=base)
    return Plan(slots, figs, options, campaign.package.cost)


def _round(value: float) -> float:
    return round(value, 4)
