"""The landing and a wall clock that steps near the point of no return (issue 43),
with a fake clock whose wall and monotonic readings part the way a real machine's do:
a step forward of an hour that comes back within the settle never lands early; one
that stays, even past the window's end, never skips the landing; a step back of an
hour never delays it past the point it was heading for (by more than the settle)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cockpit.common.event_kinds import LANDING
from cockpit.engine import Engine
from cockpit.engine.clockwatch import SETTLE_S
from tests.engine.test_clock_jumps import SteppingClock, ticks
from tests.engine.test_engine_guards import START, FakeSupervisor, journal, make

STAGES = [{"id": "train", "hours": 1, "resource": "gpu:0", "run": "r1", "command": ["train"]}]
LAND = {"on_deadline": "land", "deadline": {"export_hours": "30m", "retrieve_hours": "10m"}}
HOUR = timedelta(hours=1)


def landing(path: Path) -> list[dict[str, Any]]:
    return [e for e in journal(path) if e["kind"] == LANDING]


def before_the_point(tmp_path: Path, seconds: int) -> tuple[Engine, SteppingClock, Path,
                                                            datetime]:
    """A running run, ``seconds`` before the point of no return (nothing landed yet)."""
    clock = SteppingClock(START)
    engine, path = make(tmp_path, STAGES, clock, FakeSupervisor(term_exits=True), extra=LAND)
    engine.start("train")
    point = engine.tick().window.point_of_no_return
    assert point is not None and point - START > 2 * HOUR
    clock.t = point - timedelta(seconds=seconds)  # real time moves on: wall and monotonic
    engine.tick()
    assert landing(path) == []
    return engine, clock, path, point


def began_at(path: Path) -> datetime:
    (began,) = [e for e in landing(path) if e["phase"] == "began"]
    return datetime.fromisoformat(began["t"].replace("Z", "+00:00"))


def test_a_step_forward_that_comes_back_never_lands_early(tmp_path: Path) -> None:
    engine, clock, path, point = before_the_point(tmp_path, 120)
    clock.step = HOUR  # an hour ahead, past the point, for ten seconds
    ticks(engine, clock, 10)
    clock.step = timedelta(0)
    ticks(engine, clock, 100)  # up to 10 s before the real point
    assert landing(path) == [], landing(path)
    ticks(engine, clock, int(SETTLE_S) + 20)
    assert point <= began_at(path) <= point + timedelta(seconds=SETTLE_S + 2)
    engine.close()


def test_a_step_forward_past_the_window_end_never_skips_the_landing(tmp_path: Path) -> None:
    engine, clock, path, point = before_the_point(tmp_path, 60)
    end = engine.campaign.package.end
    clock.step = HOUR
    assert clock.now() > end  # the wall clock reads past the window's end
    ticks(engine, clock, 5)
    assert landing(path) == []  # a jump decides nothing while it holds
    ticks(engine, clock, int(SETTLE_S) + 5)  # the step stays: believed
    phases = [(e["phase"], e.get("run")) for e in landing(path)]
    assert ("began", None) in phases and ("stopped", "r1") in phases, phases
    engine.close()


def test_a_step_back_never_delays_the_landing_past_its_point(tmp_path: Path) -> None:
    engine, clock, path, point = before_the_point(tmp_path, 60)
    clock.step = -HOUR  # the wall clock an hour behind, and it stays
    ticks(engine, clock, 60 + int(SETTLE_S) + 5)
    assert clock.now() < point - timedelta(minutes=50)  # by the wall, not yet
    phases = [(e["phase"], e.get("run")) for e in landing(path)]
    assert ("began", None) in phases and ("stopped", "r1") in phases, phases
    engine.close()
