"""Alerts the engine sends without a journal event saying so (issue 26), with a fake
clock and a fake sender, in milliseconds: a decision or a verdict waiting longer than
``alerts.pending_after_minutes`` (once per stage or run attempt), the campaign closed
with its cost per accepted result, and the campaign's ``alerts.send`` routing a kind to
one label only. The sender thread is the real one; only the send is replaced."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

from cockpit.alerts.message import Alert
from cockpit.alerts.targets import Target
from cockpit.engine import Engine
from cockpit.telemetry.model import DiskInfo, GpuInfo, GpuReading, HostInfo
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor, journal, make
from tests.helpers.process import wait_for

PHONE = Target("phone", "json://127.0.0.1:9/phone")
MAIL = Target("mail", "json://127.0.0.1:9/mail")


class Inbox:
    """What each target was sent (label, first line of the body, level)."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def send(self, target: Target, title: str, body: str, level: str) -> None:
        with self._lock:
            self.got.append((target.label, body.splitlines()[0], level))

    def lines(self, label: str | None = None) -> list[str]:
        with self._lock:
            return [what for who, what, _ in self.got if label in (None, who)]


def engine_with(tmp_path: Path, stages: list[dict], clock: FakeClock, inbox: Inbox,
                **kwargs: Any) -> tuple[Engine, Path]:
    return make(tmp_path, stages, clock, FakeSupervisor(), alerts=[PHONE, MAIL],
                alert_send=inbox.send, **kwargs)


def settle(engine: Engine, inbox: Inbox, count: int) -> None:
    """Wait for the sender thread to have sent ``count`` alerts (and no more to come)."""
    wait_for(lambda: len(inbox.got) >= count, timeout=10, what=f"{count} alerts")


PILOT = {"id": "pilot", "hours": 1, "resource": "human", "decision_point": True}
AFTER = {"id": "train", "hours": 1, "resource": "human", "after": ["pilot"]}


def test_a_decision_pending_past_the_limit_is_sent_once(tmp_path: Path) -> None:
    clock, inbox = FakeClock(), Inbox()
    engine, _ = engine_with(tmp_path, [PILOT, AFTER], clock, inbox,
                            extra={"alerts": {"pending_after_minutes": 20}})
    engine.tick(clock.now())
    engine.mark("pilot", "done", now=clock.now())
    engine.tick(clock.now())
    settle(engine, inbox, 2)  # the decision needed, once per target
    assert inbox.lines("phone") == ["a decision is needed after pilot"]
    clock.advance(19 * 60)
    engine.tick(clock.now())
    clock.advance(2 * 60)  # 21 min pending: past the campaign's 20
    engine.tick(clock.now())
    settle(engine, inbox, 4)
    assert inbox.lines("phone")[1:] == ["a decision has been pending after pilot for 21m"]
    for _ in range(3):  # once per (stage, attempt): later ticks send nothing more
        clock.advance(600)
        engine.tick(clock.now())
    engine.close()
    assert len(inbox.got) == 4, inbox.got


def test_nothing_is_sent_for_a_wait_under_the_limit(tmp_path: Path) -> None:
    clock, inbox = FakeClock(), Inbox()
    engine, _ = engine_with(tmp_path, [PILOT, AFTER], clock, inbox)  # default: 30 min
    engine.tick(clock.now())
    engine.mark("pilot", "done", now=clock.now())
    for _ in range(29):
        clock.advance(60)
        engine.tick(clock.now())
    settle(engine, inbox, 2)
    engine.close()
    assert [what for what in inbox.lines() if "pending" in what] == []


def test_a_run_awaiting_its_verdict_past_the_limit_is_sent(tmp_path: Path) -> None:
    clock, sup, inbox = FakeClock(), FakeSupervisor(), Inbox()
    engine, _ = make(tmp_path, [{"id": "train", "hours": 1, "resource": "cpu", "run": "r1",
                                 "command": ["train"]}], clock, sup, alerts=[PHONE],
                     runs={"r1": {"acceptance": [{"metric": "val/accuracy", "min": 0.9}]}},
                     alert_send=inbox.send)
    engine.verification.judge_runs = lambda now: None  # no cockpit judges it (or one hangs)
    engine.start("train", now=clock.now())
    engine.tick(clock.now())
    sup.finish("train", 0)
    engine.tick(clock.now())
    assert engine.state().runs["r1"].verdict is None
    clock.advance(31 * 60)
    engine.tick(clock.now())
    settle(engine, inbox, 1)
    engine.close()
    assert inbox.lines("phone") == [
        "run r1 ended 31m ago and its result still has no verdict"], inbox.got


def test_the_campaign_closed_is_sent_with_the_cost_per_accepted_result(tmp_path: Path) -> None:
    clock, sup, inbox = FakeClock(), FakeSupervisor(), Inbox()
    engine, _ = make(tmp_path, [{"id": "train", "hours": 1, "resource": "cpu", "run": "r1",
                                 "command": ["train"]}], clock, sup, alerts=[PHONE],
                     alert_send=inbox.send)
    engine.start("train", now=clock.now())
    engine.tick(clock.now())
    sup.finish("train", 0)
    engine.tick(clock.now())
    engine.tick(clock.now())
    assert [w for w in inbox.lines() if "closed" in w] == []  # its result awaits a verdict
    engine.accept("r1", "good", now=clock.now())
    engine.tick(clock.now())
    wait_for(lambda: any("closed" in w for w in inbox.lines()), timeout=10, what="closed")
    engine.tick(clock.now())
    engine.close()
    closed = [w for w in inbox.lines() if "closed" in w]
    assert closed == ["the campaign closed: every essential stage is done; 47.14 USD per "
                      "accepted result (1 accepted)"], inbox.got


def test_the_campaign_routes_a_kind_to_one_label_only(tmp_path: Path) -> None:
    clock, inbox = FakeClock(), Inbox()
    engine, _ = engine_with(tmp_path, [PILOT], clock, inbox, extra={"alerts": {"send": {
        "rule_fired": ["phone"], "export": [], "stage_failed": ["nobody-here"]}}})
    engine.tick(clock.now())
    now = clock.now()
    engine.alerting.notify(Alert("rule_fired:1", "critical", "a rule fired", "-", "-",
                                 kind="rule_fired"), now)
    engine.alerting.notify(Alert("export:2", "info", "an export", "-", "-", kind="export"), now)
    engine.alerting.notify(Alert("stage_failed:3", "critical", "a stage failed", "-", "-",
                                 kind="stage_failed"), now)
    engine.alerting.notify(Alert("gpu:4", "critical", "an Xid", "-", "-", kind="gpu"), now)
    settle(engine, inbox, 3)
    clock.advance(1)
    engine.tick(clock.now())
    engine.close()
    assert sorted((who, what) for who, what, _ in inbox.got) == [
        ("mail", "an Xid"), ("phone", "a rule fired"), ("phone", "an Xid")]


def test_a_wall_clock_step_does_not_age_a_wait(tmp_path: Path) -> None:
    """Two days forward on the wall clock, a minute of real time: the decision has been
    pending a minute (monotonic), not two days; the jump itself is a warning."""
    from cockpit.engine.clockwatch import SETTLE_S
    from tests.engine.test_clock_jumps import SteppingClock

    clock, inbox = SteppingClock(), Inbox()
    engine, _ = engine_with(tmp_path, [PILOT, AFTER], clock, inbox)
    engine.tick()
    engine.mark("pilot", "done", now=clock.now())
    engine.tick()
    clock.step = timedelta(days=2)
    for _ in range(int(SETTLE_S) + 60):
        clock.advance(1)
        engine.tick()
    engine.close()
    said = inbox.lines("phone")
    assert any(w.startswith("the wall clock jumped forward 2d") for w in said), said
    assert not [w for w in said if "pending" in w], said


class FakeGpu:
    """One GPU whose throttle reasons a test sets."""

    throttle: tuple[str, ...] = ()

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def sample(self) -> GpuReading:
        gpu = GpuInfo(0, "H200", None, 90.0, 50.0, 1, 2, 85.0, 600.0, 700.0, 1980, 2619,
                      None, self.throttle, (), False, ())
        return GpuReading("ok", None, (gpu,), (), (), "550")


class FakeHost:
    """A host whose one disk a test makes low."""

    low = False

    def sample(self) -> HostInfo:
        disk = DiskInfo("/data", 2**30 if self.low else 2**40, 2**41, self.low)
        return HostInfo(1.0, 8, 0.1, 1, 2, 0, 0, (disk,), 0.1, 1, ())


def test_held_down_clocks_and_a_low_disk_are_journaled_when_each_begins(tmp_path) -> None:
    clock, inbox, gpu, host = FakeClock(), Inbox(), FakeGpu(), FakeHost()
    engine, path = engine_with(tmp_path, [PILOT], clock, inbox, gpu_sampler=gpu,
                               host_sampler=host)
    engine.tick(clock.now())
    gpu.throttle, host.low = ("hw thermal", "sw power cap"), True
    for _ in range(5):  # held for five ticks: journaled once each
        clock.advance(10)
        engine.tick(clock.now())
    gpu.throttle, host.low = (), False
    clock.advance(10)
    engine.tick(clock.now())
    gpu.throttle = ("sw thermal",)  # a new episode, the same hour: the key holds it
    clock.advance(10)
    engine.tick(clock.now())
    engine.close()
    held = [e for e in journal(path) if e["kind"] == "warning"
            and e.get("source") in ("gpu", "disk")]
    assert [e["message"] for e in held] == [
        "GPU0 clocks held down: hw thermal",
        "low disk: /data has 1.0 GiB free (warning under 10.0 GiB)"], held
    assert held[0]["event"] == "gpu_throttle" and held[0]["gpu"] == 0
    said = sorted(inbox.lines("phone"))
    assert said == ["GPU0 clocks held down: hw thermal",
                    "low disk: /data has 1.0 GiB free (warning under 10.0 GiB)"], said
