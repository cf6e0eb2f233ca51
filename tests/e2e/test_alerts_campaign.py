"""Alerts during a real campaign (issue 26): a NaN stop reaches a real HTTP server as a
critical alert with what happened, what the cockpit did and what to do; delivery is
journaled by label (never the URL), a restarted cockpit does not send it again, and a
target that is down is journaled as failed while the others get it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.helpers.alert_server import AlertServer
from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import wait_for
from tests.helpers.ticks import wait_for_ticks

SECRET = "tk_5e1d7c"


def events(folder: Path) -> list[dict]:
    journal = folder / ".cockpit" / "journal.jsonl"
    if not journal.exists():
        return []  # nothing journaled yet
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


def messages(server: AlertServer) -> list[str]:
    """What the server got, less the deadline warning (the test campaign's window is
    fixed in time: by some dates it is near its end)."""
    return [m for r in server.requests if "rental window" not in (m := r.json()["message"])
            .splitlines()[0]]


def headless(path: Path, *urls: str, until_done: bool = True) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "cockpit", "headless", str(path), "--auto",
            "--interval", "0.05", *(a for url in urls for a in ("--alerts", url))]
    if until_done:
        argv.append("--until-done")
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ,
                                 "COCKPIT_ALERTS": str(path.parent / "absent.yaml")})


def test_a_nan_stop_reaches_the_phone_once_and_a_dead_target_is_journaled(
        tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "cpu", "run": "r1", "category": "exploratory",
         "command": step_command(steps=400, sleep=0.05, nan_at=6)},
    ], rules=[FINITE])
    with AlertServer() as phone, AlertServer(status=500) as broken:
        urls = (f"json://127.0.0.1:{phone.port}/hook?token={SECRET}",
                f"json://127.0.0.1:{broken.port}/x")
        first = headless(path, *urls)
        out, err = first.communicate(timeout=90)
        assert first.returncode == 0, out[-2000:] + err[-2000:]
        alerts = [r.json() for r in phone.requests]
        fired = [a for a in alerts if "finite-loss" in a["message"]]
        assert len(fired) == 1, alerts
        lines = fired[0]["message"].splitlines()
        assert fired[0]["title"] == "cockpit critical: test-campaign · machine 1"
        assert lines[0].startswith("rule finite-loss fired on r1: ") and "nan" in lines[0]
        assert lines[1] == "done: stopped r1"
        assert lines[2].startswith("you: cockpit status campaign.yaml")
        assert lines[3].endswith("left in the window") or "window" in lines[3]
        journal = events(tmp_path)
        sent = [e for e in journal if e["kind"] == "alert_sent"]
        assert [e["target"] for e in sent if "finite" in e["what"]] == ["cli-1 (json)"]
        failed = [e for e in journal if e["kind"] == "alert_failed"]
        assert failed and failed[0]["target"] == "cli-2 (json)"
        assert "HTTP 500" in failed[0]["error"]
        text = (tmp_path / ".cockpit" / "journal.jsonl").read_text()
        assert SECRET not in text and "127.0.0.1" not in text  # no URL in the journal

        # A restart (the run is over, its events are history): nothing is sent again.
        # Its first tick resumes what is owed (the broken target's failed send is tried
        # again: journaled); then a few ticks more, and a TERM: the sender's queue is
        # drained before the process ends, so whatever it had queued has been sent.
        before = len(phone.requests)
        owed = len([e for e in failed if e["target"] == "cli-2 (json)"])
        again = headless(path, *urls, until_done=False)
        try:
            wait_for(lambda: len([e for e in events(tmp_path) if e["kind"] == "alert_failed"
                                  and e["target"] == "cli-2 (json)"]) > owed, timeout=60,
                     what="the restarted cockpit's retry of the broken target")
            wait_for_ticks(path, 20)
        finally:
            again.terminate()
            again.communicate(timeout=30)
        assert again.returncode == 0
        assert len(phone.requests) == before


def test_a_dead_target_never_slows_the_tick(tmp_path: Path) -> None:
    """The sender is a thread: a target that never answers costs the tick nothing."""
    from datetime import datetime, timezone

    from cockpit.alerts.message import Alert
    from cockpit.alerts.targets import Target
    from cockpit.campaign import load_campaign
    from cockpit.engine import Engine

    path = write_campaign(tmp_path, [{"id": "idle", "hours": 1, "resource": "human"}])
    slow: list[bool] = []
    hanging, release = threading.Event(), threading.Event()

    def never_answers(*_args: object) -> str:
        hanging.set()
        release.wait(60)  # held until the test has ticked (a bound, not a pace)
        slow.append(True)
        return "no connection"

    engine = Engine(load_campaign(path), alerts=[Target("dead", "json://10.255.255.1/x")],
                    alert_send=never_answers)
    engine.tick()
    now = datetime.now(timezone.utc)
    engine.alerting.notify(Alert("k1", "critical", "x", "y", "z"), now)
    assert hanging.wait(30), "the send never began"
    ticks = [engine.tick() for _ in range(5)]
    assert len(ticks) == 5 and not slow  # five ticks while the send still hangs
    release.set()
    wait_for(lambda: slow, timeout=20, what="the hanging send to end")
    wait_for(lambda: any(e["kind"] == "alert_failed" for e in events(tmp_path)), timeout=10)
    engine.close()


def test_an_unsettled_alert_is_sent_by_the_next_cockpit_and_then_never_again(
        tmp_path: Path) -> None:
    """A target down when the alert came: the failure is journaled with the alert's
    words; the next cockpit sends it once the target is back; a third sends nothing."""
    from datetime import datetime, timezone

    from cockpit.alerts.message import Alert
    from cockpit.alerts.targets import Target
    from cockpit.campaign import load_campaign
    from cockpit.engine import Engine

    start = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")  # no deadline near
    path = write_campaign(tmp_path, [{"id": "idle", "hours": 1, "resource": "human"}],
                          start=start)
    with AlertServer(status=503) as server:
        target = Target("phone", f"json://127.0.0.1:{server.port}/hook?token={SECRET}")
        first = Engine(load_campaign(path), alerts=[target])
        first.tick()
        first.alerting.notify(Alert("rule_fired:7", "critical", "rule x fired on r1",
                                    "stopped r1", "cockpit status c.yaml"),
                              datetime.now(timezone.utc), seq=7)
        wait_for(lambda: any(e["kind"] == "alert_failed" for e in events(tmp_path)),
                 timeout=30, what="the first failure")
        first.close()  # its retry was 30 s away: the next cockpit must not forget it
        server.status = 200
        second = Engine(load_campaign(path), alerts=[target])
        second.tick()
        wait_for(lambda: any(e["kind"] == "alert_sent" for e in events(tmp_path)),
                 timeout=30, what="the resend")
        second.close()
        third = Engine(load_campaign(path), alerts=[target])
        third.tick()  # what it owes is queued in this tick: nothing, it is settled
        # A probe queued after it: once the probe is sent, the sender has been through
        # everything the tick queued before (one thread, in order).
        third.alerting.notify(Alert("probe", "critical", "probe", "-", "-"),
                              datetime.now(timezone.utc))
        wait_for(lambda: any(e["kind"] == "alert_sent" and "probe" in e["key"]
                             for e in events(tmp_path)), timeout=30, what="the probe")
        third.close()
    bodies = [m for m in messages(server) if m.splitlines()[0] != "probe"]
    assert len(bodies) == 2 and bodies[0] == bodies[1]  # the same words, once delivered
    assert bodies[1].splitlines()[:2] == ["rule x fired on r1", "done: stopped r1"]
    sent = [e for e in events(tmp_path) if e["kind"] == "alert_sent" and "probe" not in e["key"]]
    assert len(sent) == 1 and sent[0]["attempt"] == 2
    assert sent[0]["key"] == "alert:rule_fired:7:phone"
    assert SECRET not in (tmp_path / ".cockpit" / "journal.jsonl").read_text()


def test_a_burst_of_warnings_is_rate_limited_into_a_digest(tmp_path: Path) -> None:
    from datetime import datetime, timezone

    from cockpit.alerts.message import Alert
    from cockpit.alerts.targets import Target
    from cockpit.campaign import load_campaign
    from cockpit.engine import Engine
    from cockpit.engine.alerting import RateLimit

    start = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")  # no deadline near
    path = write_campaign(tmp_path, [{"id": "idle", "hours": 1, "resource": "human"}],
                          start=start)
    with AlertServer() as server:
        engine = Engine(load_campaign(path), alerts=[
            Target("phone", f"json://127.0.0.1:{server.port}/hook")])
        engine.alerting.limit = RateLimit(limit=3, window_s=2.0)
        engine.tick()
        now = datetime.now(timezone.utc)
        for i in range(7):
            engine.alerting.notify(Alert(f"w{i}", "warn", f"warning {i}", "-", "-"), now)
        engine.alerting.notify(Alert("c", "critical", "a rule stopped r1", "-", "-"), now)
        wait_for(lambda: len(messages(server)) >= 4, timeout=30, what="the first alerts")
        # Once the 2 s window has room again, a tick sends the digest: tick until it has.
        wait_for(lambda: engine.tick() and len(messages(server)) >= 5, timeout=30,
                 what="the digest")
        engine.close()
    said = [m.splitlines()[0] for m in messages(server)]
    assert sorted(said[:4]) == sorted(["warning 0", "warning 1", "warning 2",
                                       "a rule stopped r1"])  # a critical one always goes
    assert said[4].startswith("4 more alerts in the last 2s, held back: warning 3; "
                              "warning 4; warning 5; and 1 more"), said[4]
    assert len(said) == 5
