"""Pure planner tests: schedule, window figures, money and options (D6, D7, D9-D11)."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

from cockpit.campaign import BUILTIN_OFFERS, Campaign, Package, Resource, Stage, load_campaign
from cockpit.common.units import Money
from cockpit.planning.schedule import plan_campaign, schedule, union_hours

SAMPLES = Path(__file__).resolve().parents[2] / "sample_campaigns"
START = datetime(2026, 12, 2, 8, tzinfo=timezone.utc)


def stage(sid: str, hours: float, res: str = "gpu", after: tuple[str, ...] = (),
          category: str = "essential", machine: int = 1, gpu: int | None = None) -> Stage:
    resource = Resource("gpu", gpu) if gpu is not None else Resource(res)
    return Stage(sid, hours * 3600, (resource,), category, after=after, machine=machine)


def campaign(stages: list[Stage], offer: str = "rtx4090-3d", count: int = 1) -> Campaign:
    pkg = Package(BUILTIN_OFFERS[offer], count, START)
    return Campaign("t", "q", pkg, dict(BUILTIN_OFFERS), tuple(stages), Path("/x/c.yaml"), "0")


def spans(slots):
    return {s.stage.id: (s.start, s.end) for s in slots}


def test_illustrative_plan_reproduces_d7_48h_in_72h():
    plan = plan_campaign(load_campaign(SAMPLES / "illustrative.yaml"))
    assert plan.figures.window_hours == 72
    assert plan.figures.reserved_hours == 48
    assert plan.figures.unused_hours == 24
    assert plan.figures.fits and plan.figures.exceeds_by_hours == 0
    assert plan.options == ()
    # Human and machine stages overlap somewhere (D6).
    human = [(s.start, s.end) for s in plan.slots if s.stage.is_human]
    gpu = [(s.start, s.end) for s in plan.slots if s.stage.uses_gpu]
    assert any(h0 < g1 and g0 < h1 for h0, h1 in human for g0, g1 in gpu)


def test_d11_overrun_of_30h_takes_78h_exceeds_by_6_and_offers_the_7_day_package():
    plan = plan_campaign(load_campaign(SAMPLES / "illustrative.yaml"), overrun_hours=30)
    assert plan.figures.reserved_hours == 78
    assert plan.figures.exceeds_by_hours == 6
    assert not plan.figures.fits
    offers = {o.offer: o for o in plan.options if o.kind == "offer"}
    assert offers["rtx4090-7d"].cost == Money(Decimal("110"), "USD")
    shorten = [o for o in plan.options if o.kind == "shorten"]
    assert shorten[0].drops == ("variant-b",) and shorten[0].saves_hours == 10
    assert shorten[0].fits
    # Essential stages are never dropped by a shortened protocol.
    essential = {s.id for s in load_campaign(SAMPLES / "illustrative.yaml").stages
                 if s.category == "essential"}
    assert all(not (set(o.drops) & essential) for o in shorten)


def test_two_3_day_packages_cost_94_28_usd():
    c = campaign([stage("a", 1)], count=2)
    assert c.package.cost == Money(Decimal("94.28"), "USD")
    assert str(c.package.cost) == "94.28 USD"


def test_b200_package_price_is_unknown_and_never_multiplied_by_gpus():
    c = campaign([stage("a", 1)], offer="b200-3d")
    assert BUILTIN_OFFERS["b200-3d"].gpus == 2
    assert c.package.cost is None
    priced = BUILTIN_OFFERS["b200-3d"].__class__("b200-3d", "B200", 2, 3, Money(Decimal("500"),
                                                                                  "USD"))
    pkg = Package(priced, 1, START)
    assert pkg.cost == Money(Decimal("500"), "USD")  # the package price, not 2 x 500


def test_same_gpu_never_runs_two_stages_at_once_whatever_the_order():
    slots = schedule([stage("a", 3), stage("b", 2), stage("h", 4, res="human")], 1)
    s = spans(slots)
    assert s["a"] == (0, 3) and s["b"] == (3, 5)
    assert s["h"] == (0, 4)  # a human stage overlaps the GPU


def test_gpu_n_stages_on_different_gpus_overlap_but_gpu_takes_all():
    slots = schedule([stage("a", 3, gpu=0), stage("b", 2, gpu=1), stage("all", 1, res="gpu")], 2)
    s = spans(slots)
    assert s["a"] == (0, 3) and s["b"] == (0, 2)
    assert s["all"] == (3, 4)


def test_separate_machines_do_not_share_gpus():
    slots = schedule([stage("a", 3, machine=1), stage("b", 3, machine=2)], 1)
    assert spans(slots) == {"a": (0, 3), "b": (0, 3)}


def test_dependencies_and_dropped_stages_count_as_ended():
    stages = [stage("a", 2), stage("b", 5, after=("a",), category="exploratory"),
              stage("c", 1, after=("b",))]
    s = spans(schedule(stages, 1, dropped={"b"}))
    assert s["b"] == (2, 2) and s["c"] == (2, 3)


def test_a_later_ready_stage_fills_a_gap_and_ties_go_by_file_order():
    stages = [stage("h1", 2, res="human"), stage("g1", 1, after=("h1",)),
              stage("g0", 1), stage("g2", 1)]
    s = spans(schedule(stages, 1))
    assert s["g0"] == (0, 1) and s["g2"] == (1, 2) and s["g1"] == (2, 3)


def test_gpu_busy_hours_is_a_union_and_human_hours_counted():
    c = campaign([stage("a", 2, gpu=0), stage("b", 3, gpu=0, after=("a",)),
                  stage("h", 4, res="human")])
    figs = plan_campaign(c).figures
    assert figs.gpu_busy_hours == 5 and figs.human_hours == 4 and figs.reserved_hours == 5
    assert union_hours([(0, 2), (1, 3), (5, 6)]) == 4


def test_fixed_intervals_and_not_before_for_forecasts():
    stages = [stage("a", 2), stage("b", 2, after=("a",))]
    s = spans(schedule(stages, 1, fixed={"a": (0, 3.5)}, not_before=4))
    assert s["a"] == (0, 3.5) and s["b"] == (4, 6)
