"""One conductor per campaign (issue 39), at the engine: two faces' engines on one
campaign with real leases (an flock under ``.cockpit/``), a fake clock and supervisor.
The first conducts; the other views (it folds and shows the same state, writes no
guard's event, sends no alert) and still carries out a person's action; when the
conductor closes, the viewer conducts from its next tick and carries ``--auto`` on; an
edit of the campaign file is journaled once and reloaded by both; a bad edit is said
by both and changes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from cockpit.campaign import load_campaign
from cockpit.common.lease import ConductorLease, probe, read_info
from cockpit.engine import Engine
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor, journal, report
from tests.helpers.campaigns import FINITE, FIXED_START, write_campaign
from tests.helpers.process import end, wait_for

TRAIN = {"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["train"]}
PILOT = {"id": "pilot", "hours": 1, "resource": "human"}
AFTER = {"id": "after", "hours": 1, "resource": "human", "after": ["pilot"]}
PREP = {"id": "prep", "hours": 1, "resource": "cpu", "command": ["prep"]}
NEXT = {"id": "next", "hours": 1, "resource": "cpu", "command": ["next"], "after": ["prep"]}


def face(path: Path, clock: FakeClock, sup: FakeSupervisor, name: str,
         **kwargs: Any) -> Engine:
    """An engine as a face opens it: with a lease on the campaign and machine 1."""
    campaign = load_campaign(path)
    lease = ConductorLease(str(campaign.state_dir), 1, name)
    return Engine(campaign, clock=clock, supervisor=sup, lease=lease, actor=name,
                  **kwargs).open()


def kinds_of(path: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in journal(path) if e["kind"] == kind]


def test_the_first_face_conducts_and_the_second_views_the_same_state(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor(term_exits=True)
    path = write_campaign(tmp_path, [TRAIN], rules=[FINITE], start=FIXED_START)
    conductor = face(path, clock, sup, "headless")
    viewer = face(path, clock, sup, "tui")
    try:
        assert conductor.conducting and not viewer.conducting
        # A person's action from the viewer goes through the journal lock as ever.
        viewer.start("train", now=clock.now())
        report(path, "r1", clock, 1, 0.5)
        report(path, "r1", clock, 2, float("nan"))
        clock.advance(1)
        seen = viewer.tick(clock.now())  # the viewer sees the NaN first: it acts not
        assert not kinds_of(path, "rule_fired")
        assert seen.conductor.conducted and not seen.conductor.you
        assert seen.conductor.face == "headless" and seen.conductor.pid == os.getpid()
        assert seen.conductor.words().startswith("conducted by headless, pid ")
        acted = conductor.tick(clock.now())
        assert acted.conductor.you and acted.conductor.words().startswith("you conduct")
        for _ in range(3):  # more ticks of both: still one firing, one stop request
            clock.advance(1)
            viewer.tick(clock.now())
            conductor.tick(clock.now())
        assert len(kinds_of(path, "rule_fired")) == 1
        assert len(kinds_of(path, "stop_requested")) == 1
        # Both faces fold the same journal: the same stages and rules.
        after = viewer.tick(clock.now())
        mine = conductor.tick(clock.now())
        assert [(s.id, s.state) for s in after.stages] == [(s.id, s.state) for s in mine.stages]
        assert [(r.rule, r.state) for r in after.rules] == [(r.rule, r.state) for r in mine.rules]
    finally:
        viewer.close()
        conductor.close()


def test_the_viewer_takes_over_when_the_conductor_closes_and_carries_auto_on(
        tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    path = write_campaign(tmp_path, [PREP, NEXT], start=FIXED_START)
    conductor = face(path, clock, sup, "headless", auto=True)
    viewer = face(path, clock, sup, "tui")  # opened without --auto
    try:
        conductor.tick(clock.now())
        assert sup.launched == ["prep"]  # started by the --auto conductor
        viewer.tick(clock.now())
        conductor.close()
        held, info = probe(str(tmp_path / ".cockpit"), 1)
        assert not held and info is not None and info.ended is not None and info.auto
        sup.finish("prep")
        clock.advance(1)
        snap = viewer.tick(clock.now())  # the next tick: it conducts, and goes on
        assert viewer.conducting and snap.conductor.you
        assert viewer.auto, "the takeover carries the --auto conductor's mode on"
        clock.advance(1)
        viewer.tick(clock.now())
        assert sup.launched == ["prep", "next"]  # each started once, whoever conducted
        started = [e["stage"] for e in kinds_of(path, "stage_started")]
        assert started == ["prep", "next"]
        held, info = probe(str(tmp_path / ".cockpit"), 1)
        assert held and info is not None and info.face == "tui" and info.auto
    finally:
        viewer.close()
        conductor.close()


def test_a_viewer_opened_with_auto_makes_the_conductor_start_stages(tmp_path: Path) -> None:
    """The README's layout: the screen first (it conducts, no --auto), then headless
    --auto (a viewer): stages start all the same, and stop starting once no face asks."""
    clock, sup = FakeClock(), FakeSupervisor()
    third = {"id": "third", "hours": 1, "resource": "cpu", "command": ["third"],
             "after": ["next"]}
    path = write_campaign(tmp_path, [PREP, NEXT, third], start=FIXED_START)
    screen = face(path, clock, sup, "tui")
    headless = face(path, clock, sup, "headless", auto=True)
    try:
        assert screen.conducting and not headless.conducting
        headless.tick(clock.now())  # a viewer: it starts nothing itself
        assert sup.launched == []
        snap = screen.tick(clock.now())
        assert sup.launched == ["prep"] and snap.auto
        sup.finish("prep")
        headless.close()  # nobody asks for --auto any more
        clock.advance(1)
        snap = screen.tick(clock.now())
        assert sup.launched == ["prep"] and not snap.auto
        assert snap.stage("next") is not None and snap.stage("next").state == "ready"
    finally:
        headless.close()
        screen.close()


def test_a_read_only_face_never_takes_the_lease(tmp_path: Path) -> None:
    from cockpit.fleet.open import open_engine

    path = write_campaign(tmp_path, [PILOT])
    watcher = open_engine(path, read_only=True, telemetry=False, face="tui")
    try:
        snap = watcher.tick()
        assert watcher.lease is None and not watcher.conducting
        assert not snap.conductor.conducted
        assert snap.warnings[0].startswith("NOT CONDUCTED")  # said first, on every face
        assert not probe(str(tmp_path / ".cockpit"), 1)[0]
    finally:
        watcher.close()


def test_an_edit_is_journaled_once_and_reloaded_by_every_face(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    path = write_campaign(tmp_path, [PILOT, AFTER], start=FIXED_START)
    conductor = face(path, clock, sup, "headless")
    viewer = face(path, clock, sup, "tui")
    try:
        conductor.mark("pilot", "started", now=clock.now())  # the plan is decided
        assert len(kinds_of(path, "plan_recorded")) == 1
        data = json.loads(path.read_text())
        data["stages"][1]["hours"] = 2
        path.write_text(json.dumps(data))
        for _ in range(3):
            clock.advance(2)  # past the watch's poll
            viewer.tick(clock.now())  # first: a viewer waits for the conductor
            assert viewer.reload_wanted is None or kinds_of(path, "plan_changed")
            conductor.tick(clock.now())
        changed = kinds_of(path, "plan_changed")
        assert len(changed) == 1
        assert conductor.reload_wanted is not None
        assert changed[0]["sha256"] == conductor.reload_wanted.sha256
        clock.advance(2)
        viewer.tick(clock.now())
        assert viewer.reload_wanted is not None
        assert viewer.reload_wanted.sha256 == changed[0]["sha256"]
        assert len(kinds_of(path, "plan_changed")) == 1  # the viewer journaled nothing
    finally:
        viewer.close()
        conductor.close()


def test_a_bad_edit_is_said_by_every_face_and_changes_nothing(tmp_path: Path) -> None:
    clock, sup = FakeClock(), FakeSupervisor()
    path = write_campaign(tmp_path, [PILOT], start=FIXED_START)
    conductor = face(path, clock, sup, "headless")
    viewer = face(path, clock, sup, "tui")
    try:
        conductor.mark("pilot", "started", now=clock.now())
        before = path.read_text()
        path.write_text(before.replace('"hours": 1', '"hours": "soon"', 1))
        clock.advance(2)
        snaps = [conductor.tick(clock.now()), viewer.tick(clock.now())]
        for snap in snaps:
            said = [w for w in snap.warnings if w.startswith("campaign file edit refused: ")]
            assert said and "the plan in force is unchanged" in said[0]
            # Located, by the file's own name (a narrow screen shows the location).
            assert said[0].split(": ", 1)[1].startswith(f"{path.name}:")
            assert snap.plan_refused is not None and snap.plan_refused.startswith(path.name)
        assert conductor.reload_wanted is None and viewer.reload_wanted is None
        assert not kinds_of(path, "plan_changed")
        path.write_text(before)  # put back: the warning goes
        clock.advance(2)
        assert conductor.tick(clock.now()).plan_refused is None
        assert conductor.reload_wanted is None and not kinds_of(path, "plan_changed")
    finally:
        viewer.close()
        conductor.close()


HOLDER = """
import sys, time
from cockpit.common.lease import ConductorLease
lease = ConductorLease(sys.argv[1], 1, "headless")
assert lease.take()
import subprocess
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""


def test_a_killed_conductor_frees_the_lease_and_its_runs_never_hold_it(tmp_path: Path) -> None:
    """kill -9 of the holder releases the lease (the OS closes its file), though a
    process it started (a run) lives on: the descriptor is not inherited."""
    state = tmp_path / ".cockpit"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(state)],
                              stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert holder.stdout is not None
        child = int(holder.stdout.readline())
        assert probe(str(state), 1)[0]
        mine = ConductorLease(str(state), 1, "tui")
        assert not mine.take()
        info = read_info(str(state / "conductor-1.json"))
        assert info is not None and info.pid == holder.pid and info.ended is None
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        wait_for(lambda: not probe(str(state), 1)[0], timeout=10, what="the lease freed")
        assert mine.take()
        os.kill(child, 0)  # the run still lives, and did not keep the lease
        mine.release()
    finally:
        end(holder)
        if child:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_planted_link_is_never_taken_as_the_lease(tmp_path: Path) -> None:
    state = tmp_path / ".cockpit"
    state.mkdir()
    (state / "conductor-1.lock").symlink_to(tmp_path / "elsewhere")
    lease = ConductorLease(str(state), 1, "tui")
    assert not lease.take()
    assert lease.problem is not None and "conductor-1.lock" in lease.problem
    assert not (tmp_path / "elsewhere").exists()


def test_a_takeover_sends_what_the_dead_conductor_owed_once(tmp_path: Path) -> None:
    """The conductor fired a rule and died before its alert went out (here: it had no
    target); the viewer that takes over sends that alert, once; a delivery the dead one
    had claimed and never settled is sent once more, said as such, then settled."""
    from cockpit.journal.log import Journal
    from tests.engine.test_alerts_engine import PHONE, Inbox

    clock, sup = FakeClock(), FakeSupervisor(term_exits=True)
    path = write_campaign(tmp_path, [TRAIN], rules=[FINITE], start=FIXED_START)
    conductor = face(path, clock, sup, "headless")
    inbox, bodies = Inbox(), []

    def send(target: Any, title: str, body: str, level: str) -> None:
        bodies.append(body)
        inbox.send(target, title, body, level)

    viewer = face(path, clock, sup, "tui", alerts=[PHONE], alert_send=send)
    try:
        conductor.start("train", now=clock.now())
        report(path, "r1", clock, 1, float("nan"))
        clock.advance(1)
        conductor.tick(clock.now())
        viewer.tick(clock.now())  # it sees the firing as a viewer: no alert yet
        assert len(kinds_of(path, "rule_fired")) == 1
        # A delivery the dead conductor claimed and never settled (killed mid-send).
        Journal(tmp_path / ".cockpit" / "journal.jsonl").append(
            "alert_claimed", key="claim:alert:decision:999:phone",
            alert="alert:decision:999:phone", target="phone (json)", level="warn",
            what="a decision is needed after pilot", title="cockpit: decide",
            body="a decision is needed after pilot", for_seq=999)
        assert not inbox.got
        conductor.close()
        clock.advance(1)
        viewer.tick(clock.now())
        wait_for(lambda: len(kinds_of(path, "alert_sent")) >= 2, timeout=10,
                 what="both owed alerts sent")
        for _ in range(3):
            clock.advance(1)
            viewer.tick(clock.now())
        lines = inbox.lines("phone")
        assert sorted(lines) == sorted(["rule finite-loss fired on r1: loss is nan (non-finite)",
                                        "a decision is needed after pilot"]), lines
        sent = {e["alert"] for e in kinds_of(path, "alert_sent")}
        assert sent == {"alert:decision:999:phone",
                        f"alert:rule_fired:{kinds_of(path, 'rule_fired')[0]['seq']}:phone"}
        resent = next(b for b in bodies if b.startswith("a decision"))
        assert "sent again" in resent and "alert:decision:999:phone" in resent
        fired = next(b for b in bodies if b.startswith("rule finite-loss"))
        assert "sent again" not in fired  # never sent before: no repeat to warn of
    finally:
        viewer.close()
        conductor.close()
