"""The alert outbox across kill -9 (issue 43), with real processes against a real HTTP
receiver: a headless cockpit killed at each step of a delivery (before the claim, after
the claim, during the send, after the send) and started again: every alert arrives, at
most one arrives twice and only when the kill came during the send, each message with
its stable id (in the body and in an ``X-Cockpit-Alert-Id`` header). Events journaled
11 minutes ago while no cockpit ran are all sent by the next one, criticals one by one
and saying how late, a flood of warnings as one digest, hostile text printable; ``status``
counts what is owed meanwhile; a hanging target never stops the ticks; the target's
token is never written anywhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from cockpit.common.event_kinds import STAGE_FINISHED, WARNING
from cockpit.journal.log import Journal
from cockpit.journal.paths import CampaignFiles
from tests.helpers.alert_server import AlertServer, Received
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import run_cockpit, wait_for
from tests.helpers.ticks import wait_for_ticks

SECRET = "tk_43c0ffee"
OWED = "cli-1 (json)"


def events(folder: Path) -> list[dict[str, Any]]:
    journal = folder / ".cockpit" / "journal.jsonl"
    if not journal.exists():
        return []  # nothing journaled yet
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


def of_kind(folder: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in events(folder) if e["kind"] == kind]


def campaign(folder: Path, stages: int = 1) -> Path:
    """Human stages only: the cockpit runs nothing; the test journals what happens. The
    window opens now (no deadline warning)."""
    start = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return write_campaign(folder, [{"id": f"f{i}", "hours": 1, "resource": "human"}
                                   for i in range(stages)], start=start)


def headless(path: Path, url: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "cockpit", "headless", str(path), "--interval", "0.05",
            "--alerts", url]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ,
                                 "COCKPIT_ALERTS": str(path.parent / "absent.yaml")})


def opened(path: Path, proc: subprocess.Popen[str]) -> None:
    """Wait until ``proc`` conducts with its target (its ``alert_targets`` line)."""
    pid = proc.pid
    wait_for(lambda: any(e.get("pid") == pid and e.get("phase") == "open"
                         for e in of_kind(path.parent, "alert_targets")),
             timeout=60, what="the cockpit's alert_targets line")


def killed(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def stopped(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]


def last_status(path: Path) -> dict[str, Any]:
    lines = CampaignFiles.beside(path).status_log.read_text().splitlines()
    return dict(json.loads(lines[-1]))


def xid(path: Path, now: datetime | None = None) -> int:
    """A GPU Xid warning journaled (a critical alert), its seq."""
    return int(Journal(CampaignFiles.beside(path).journal).append(
        WARNING, now=now, message="GPU 0: Xid 79 (fell off the bus)", source="gpu",
        event="gpu_xid", gpu=0)["seq"])


def header_id(request: Received) -> str | None:
    return {k.lower(): v for k, v in request.headers.items()}.get("x-cockpit-alert-id")


STEPS = ("before_claim", "after_claim", "during_send", "after_send")


@pytest.mark.parametrize("step", STEPS)
def test_a_kill_at_each_step_of_a_delivery_loses_nothing_and_repeats_only_mid_send(
        tmp_path: Path, step: str) -> None:
    path = campaign(tmp_path)
    with AlertServer() as server:
        url = f"json://127.0.0.1:{server.port}/hook?token={SECRET}"
        first = headless(path, url)
        try:
            opened(path, first)
            late = datetime.now(timezone.utc) - timedelta(minutes=11)
            if step == "before_claim":
                # The event journaled under the journal's lock, held until the cockpit is
                # dead: whatever it read, no claim of it could be written.
                journal = Journal(CampaignFiles.beside(path).journal)
                with journal.transaction() as txn:
                    seq = int(txn.append(WARNING, now=late, message="GPU 0: Xid 79",
                                         source="gpu", event="gpu_xid", gpu=0)["seq"])
                    killed(first)
                assert not of_kind(tmp_path, "alert_claimed")
            else:
                server.hold = {"after_claim": "before_read",
                               "during_send": "after_read"}.get(step)
                seq = xid(path, late)
                key = f"alert:gpu:{seq}:cli-1"
                if step == "after_send":
                    wait_for(lambda: any(e.get("alert") == key
                                         for e in of_kind(tmp_path, "alert_sent")),
                             timeout=60, what="alert_sent")
                else:
                    assert server.arrived.wait(60), "the send never reached the receiver"
                    assert [e["alert"] for e in of_kind(tmp_path, "alert_claimed")] == [key]
                killed(first)
                server.release.set()  # the held request ends (dropped, or answered late)
        finally:
            if first.poll() is None:
                killed(first)
        key = f"alert:gpu:{seq}:cli-1"
        assert not any(e.get("alert") == key for e in of_kind(tmp_path, "alert_sent")) \
            or step == "after_send"
        second = headless(path, url)
        try:
            opened(path, second)
            wait_for(lambda: any(e.get("alert") == key for e in of_kind(tmp_path, "alert_sent")),
                     timeout=60, what="the alert settled")
            wait_for_ticks(path, 20)  # time to send it again, were it to
        finally:
            stopped(second)
        got = [r for r in server.requests if "Xid 79" in r.json()["message"]]
    assert len(got) == (2 if step == "during_send" else 1), [r.json() for r in got]
    for request in got:  # each with its stable id, in the body and in a header
        assert f"alert id {key}" in request.json()["message"].splitlines(), request.json()
        assert header_id(request) == key, request.headers
    if step == "during_send":
        assert "sent again" in got[1].json()["message"]
    if step == "before_claim":  # late, and the journal says a cockpit saw it and died
        assert "(from 11m ago: the cockpit that saw it stopped before sending)" in \
            got[0].json()["message"].splitlines()[0], got[0].json()
    lines = events(tmp_path)
    assert [e["alert"] for e in lines if e["kind"] == "alert_sent"] == [key]
    assert not last_status(path)["alerts_owed"]  # nothing owed after the restart
    text = (tmp_path / ".cockpit" / "journal.jsonl").read_text()
    assert SECRET not in text and str(server.port) not in text


def test_what_happened_while_no_cockpit_ran_is_sent_by_the_next_one(tmp_path: Path) -> None:
    """A cockpit ran with the target and stopped; 11 minutes ago six stages failed (one
    with escape codes and markup in its reason) and 200 warnings came, journaled while
    no cockpit ran: ``status`` counts them owed; the next cockpit sends the six one by
    one, each saying how late, and the warnings as one digest; then nothing is owed."""
    path = campaign(tmp_path, stages=6)
    with AlertServer() as server:
        url = f"json://127.0.0.1:{server.port}/hook?token={SECRET}"
        first = headless(path, url)
        opened(path, first)
        stopped(first)  # a clean stop: the journal says no cockpit runs
        log = Journal(CampaignFiles.beside(path).journal)
        then = datetime.now(timezone.utc) - timedelta(minutes=11)
        hostile = "\x1b[31mOOM\x1b]0;pwned\x07 <b>killed</b>"
        for i in range(6):
            log.append(STAGE_FINISHED, now=then, stage=f"f{i}", outcome="failed",
                           code=3, reason=hostile if i == 0 else None)
        for i in range(200):
            log.append(WARNING, now=then, message=f"disk low {i}", source="disk")
        env = {"COCKPIT_ALERTS": str(tmp_path / "absent.yaml")}
        shown = run_cockpit("status", str(path), env=env)
        assert shown.returncode == 0, shown.stderr
        assert f"alerts owed: 206 ({OWED})" in shown.stdout, shown.stdout
        as_json = json.loads(run_cockpit("status", str(path), "--json", env=env).stdout)
        assert as_json["alerts_owed"] == {OWED: 206}
        line = run_cockpit("status", str(path), "--line", env=env).stdout  # the tmux bar
        assert "alerts owed 206" in line, line
        assert server.requests == []  # nobody sent anything meanwhile
        second = headless(path, url)
        try:
            wait_for(lambda: len(server.requests) >= 7, timeout=60, what="seven messages")
            wait_for(lambda: last_status(path).get("alerts_owed") == {}, timeout=60,
                     what="nothing owed")
            wait_for_ticks(path, 20)  # time to send more, were it to
        finally:
            stopped(second)
        messages = [r.json()["message"] for r in server.requests]
    assert len(messages) == 7, messages  # bounded: six criticals and one digest
    failed = sorted(m for m in messages if " failed: " in m.splitlines()[0])
    assert len(failed) == 6, messages
    for i, message in enumerate(failed):
        first_line = message.splitlines()[0]
        assert first_line.startswith(f"stage f{i} failed: ") and first_line.endswith(
            "(from 11m ago, while no cockpit ran)"), first_line
        assert message.splitlines()[-1].startswith("alert id alert:stage_failed:")
    assert "\x1b" not in failed[0] and "\x07" not in failed[0]  # printable, shown escaped
    assert "\\x1b[31mOOM" in failed[0] and "<b>killed</b>" in failed[0], failed[0]
    (digest,) = [m for m in messages if " failed: " not in m.splitlines()[0]]
    assert digest.splitlines()[0].startswith("200 alerts owed, sent as one: disk low 0; "
                                             "disk low 1; disk low 2; and 197 more"), digest
    after = run_cockpit("status", str(path), "--json", env=env)
    assert json.loads(after.stdout)["alerts_owed"] == {}
    for output in (shown.stdout, after.stdout,
                   (tmp_path / ".cockpit" / "journal.jsonl").read_text(),
                   CampaignFiles.beside(path).status_log.read_text()):
        assert SECRET not in output and str(server.port) not in output


def test_a_hanging_target_never_stops_the_ticks(tmp_path: Path) -> None:
    """The receiver takes the message and never answers: the cockpit's ticks go on (its
    status log keeps growing, the alert counted owed) while the send hangs."""
    path = campaign(tmp_path)
    with AlertServer(hold="after_read") as server:
        proc = headless(path, f"json://127.0.0.1:{server.port}/hook")
        try:
            opened(path, proc)
            xid(path)
            assert server.arrived.wait(60), "the send never reached the receiver"
            wait_for_ticks(path, 20)  # twenty ticks while the send hangs
            assert last_status(path)["alerts_owed"] == {OWED: 1}
            assert not of_kind(tmp_path, "alert_sent")  # it still hangs
        finally:
            stopped(proc)
