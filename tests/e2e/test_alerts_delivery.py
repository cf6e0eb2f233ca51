"""Alert delivery through apprise to real servers (issue 26): an email reaches a real
SMTP server with the alert's title as its subject and its four lines intact; an ntfy
message reaches a real HTTP server with the priority of its level; a cockpit killed
with SIGKILL after a send does not send it again when the next one starts; and a
target that comes back is sent the alert by the same cockpit's retries, journaled
once as sent after its failures."""

from __future__ import annotations

import email
import json
import os
import signal
import socket
import subprocess
import sys
from datetime import datetime, timezone
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from cockpit.alerts.message import Alert
from cockpit.alerts.targets import Target
from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from tests.helpers.alert_server import AlertServer, Received
from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import wait_for
from tests.helpers.ticks import wait_for_ticks

TITLE = "cockpit critical: test-campaign · machine 1"


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def campaign_starting_now(folder: Path, stages: list[dict[str, Any]],
                          rules: list[dict[str, Any]] | None = None) -> Path:
    """A campaign whose window opens now: three days left, so no deadline warning."""
    return write_campaign(folder, stages, rules=rules,
                          start=now_utc().strftime("%Y-%m-%dT%H:%M:%SZ"))


def idle_campaign(folder: Path) -> Path:
    return campaign_starting_now(folder, [{"id": "idle", "hours": 1, "resource": "human"}])


def events(folder: Path) -> list[dict[str, Any]]:
    journal = folder / ".cockpit" / "journal.jsonl"
    if not journal.exists():
        return []  # nothing journaled yet
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


def journal_text(folder: Path) -> str:
    return (folder / ".cockpit" / "journal.jsonl").read_text()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Mailbox:
    """An aiosmtpd handler that keeps every message it is handed."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], EmailMessage]] = []

    async def handle_DATA(self, server: SMTP, session: Session,  # noqa: N802 - aiosmtpd's name
                          envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        message = email.message_from_bytes(raw, policy=policy.default)
        assert isinstance(message, EmailMessage)
        self.messages.append((str(envelope.mail_from), list(envelope.rcpt_tos), message))
        return "250 OK"


def test_a_critical_alert_reaches_a_real_smtp_server_as_a_plain_text_mail(
        tmp_path: Path) -> None:
    """mailto:// to a local server: no TLS (mailto, not mailtos), no login (no user)."""
    path = idle_campaign(tmp_path)
    mailbox = Mailbox()
    port = free_port()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        url = (f"mailto://127.0.0.1:{port}?from=cockpit@example.org&to=me@example.org"
               f"&mode=insecure")
        engine = Engine(load_campaign(path), alerts=[Target("inbox", url)])
        engine.tick()
        # Untrusted text (a rule's reason) with HTML in it: the mail shows it as it is.
        engine.alerting.notify(Alert("rule_fired:9", "critical",
                                     "rule finite-loss fired on r1: loss <b>nan</b> & worse",
                                     "stopped r1", "cockpit status campaign.yaml"),
                               now_utc(), seq=9)
        wait_for(lambda: mailbox.messages, timeout=20, what="the mail")
        wait_for(lambda: any(e["kind"] == "alert_sent" for e in events(tmp_path)),
                 timeout=10, what="alert_sent in the journal")
        engine.close()
    finally:
        controller.stop()
    assert len(mailbox.messages) == 1
    sender, recipients, message = mailbox.messages[0]
    assert (sender, recipients) == ("cockpit@example.org", ["me@example.org"])
    assert message["Subject"] == TITLE
    texts = [part for part in message.walk() if part.get_content_maintype() == "text"]
    plain = [part for part in texts if part.get_content_type() == "text/plain"]
    assert len(plain) == 1, [part.get_content_type() for part in texts]
    lines = str(plain[0].get_content()).strip().splitlines()
    assert lines[:3] == ["rule finite-loss fired on r1: loss <b>nan</b> & worse",
                         "done: stopped r1", "you: cockpit status campaign.yaml"], lines
    assert len(lines) == 5 and lines[3].endswith("left in the window"), lines
    assert lines[4] == "alert id alert:rule_fired:9:inbox"  # its stable id (issue 43)
    for part in texts:  # an HTML part, if any, escapes the words and keeps the lines
        if part.get_content_type() == "text/html":
            html = str(part.get_content())
            assert "&lt;b&gt;nan&lt;/b&gt;" in html and "<br" in html, html
    sent = [e for e in events(tmp_path) if e["kind"] == "alert_sent"]
    assert [(e["key"], e["target"]) for e in sent] == [("alert:rule_fired:9:inbox",
                                                        "inbox (mailto)")]
    text = journal_text(tmp_path)
    assert "127.0.0.1" not in text and str(port) not in text and "example.org" not in text


def ntfy_priority(request: Received) -> str | None:
    return {k.lower(): v for k, v in request.headers.items()}.get("x-priority")


def test_ntfy_gets_the_priority_of_the_level_over_real_http(tmp_path: Path) -> None:
    """ntfy:// is plain HTTP to the named host (ntfys:// is HTTPS); apprise publishes
    as JSON to the server's root, the topic in the body, the priority in X-Priority."""
    path = idle_campaign(tmp_path)
    with AlertServer() as server:
        engine = Engine(load_campaign(path), alerts=[
            Target("phone", f"ntfy://127.0.0.1:{server.port}/cockpit-topic"),
            Target("quiet", f"ntfy://127.0.0.1:{server.port}/quiet-topic?priority=low")])
        engine.tick()
        now = now_utc()
        engine.alerting.notify(Alert("c1", "critical", "a rule stopped r1", "stopped r1",
                                     "cockpit status campaign.yaml"), now)
        engine.alerting.notify(Alert("w1", "warn", "rule slow is blind on r1", "nothing",
                                     "check the metric names"), now)
        engine.alerting.notify(Alert("i1", "info", "export verified", "wrote it",
                                     "fetch it"), now)
        wait_for(lambda: len(server.requests) >= 6, timeout=20, what="six ntfy messages")
        wait_for(lambda: len([e for e in events(tmp_path) if e["kind"] == "alert_sent"]) == 6,
                 timeout=10, what="six alert_sent lines")
        engine.close()
    assert len(server.requests) == 6
    got: dict[tuple[str, str], Received] = {}
    for request in server.requests:
        assert request.path == "/"
        payload = request.json()
        got[(payload["topic"], payload["message"].splitlines()[0])] = request
    critical = got[("cockpit-topic", "a rule stopped r1")]
    assert ntfy_priority(critical) == "max"  # ntfy's 5
    assert critical.json()["title"] == TITLE
    assert critical.json()["message"].splitlines()[1:3] == [
        "done: stopped r1", "you: cockpit status campaign.yaml"]
    warn = got[("cockpit-topic", "rule slow is blind on r1")]
    assert ntfy_priority(warn) == "high"  # ntfy's 4
    assert warn.json()["title"] == "cockpit warn: test-campaign · machine 1"
    info = got[("cockpit-topic", "export verified")]
    assert ntfy_priority(info) is None  # "default" (3): apprise sends no header
    # A URL that names its priority keeps it, whatever the level.
    assert {ntfy_priority(r) for (topic, _), r in got.items() if topic == "quiet-topic"} \
        == {"low"}
    sent = [e for e in events(tmp_path) if e["kind"] == "alert_sent"]
    assert {e["target"] for e in sent} == {"phone (ntfy)", "quiet (ntfy)"}
    text = journal_text(tmp_path)
    assert "cockpit-topic" not in text and "quiet-topic" not in text
    assert str(server.port) not in text


def headless(path: Path, url: str) -> subprocess.Popen[str]:
    """A real cockpit on ``path`` (no alerts file: only ``url``), killed by the test."""
    argv = [sys.executable, "-m", "cockpit", "headless", str(path), "--auto",
            "--interval", "0.05", "--alerts", url]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ,
                                 "COCKPIT_ALERTS": str(path.parent / "absent.yaml")})


def test_a_cockpit_killed_after_a_send_does_not_send_it_again(tmp_path: Path) -> None:
    path = campaign_starting_now(tmp_path, [
        {"id": "train", "hours": 1, "resource": "cpu", "run": "r1", "category": "exploratory",
         "command": step_command(steps=400, sleep=0.05, nan_at=6)},
    ], rules=[FINITE])
    with AlertServer() as server:
        url = f"json://127.0.0.1:{server.port}/hook"
        first = headless(path, url)
        try:
            sent = wait_for(lambda: [e for e in events(tmp_path) if e["kind"] == "alert_sent"
                                     and e["alert"].startswith("alert:rule_fired:")],
                            timeout=30, what="the rule's alert_sent")
        finally:
            os.kill(first.pid, signal.SIGKILL)
            first.communicate(timeout=30)
        assert first.returncode == -signal.SIGKILL
        second = headless(path, url)
        try:
            # ~60 ticks of its own: time to resend, were it to (its first tick resumes
            # what is owed). A TERM then drains its sender before it ends.
            wait_for_ticks(path, 60)
        finally:
            second.terminate()
            _, err = second.communicate(timeout=30)
        assert second.returncode == 0, err[-2000:]  # it ran the whole time, no crash
    fired = [r.json() for r in server.requests if "finite-loss" in r.json()["message"]]
    assert len(fired) == 1, [r.json()["message"] for r in server.requests]
    assert fired[0]["title"] == TITLE
    journal = events(tmp_path)
    assert [e["alert"] for e in journal if e["kind"] == "alert_sent"] == \
        [sent[0]["alert"]]
    assert len([e for e in journal if e["kind"] == "rule_fired"]) == 1
    assert not [e for e in journal if e["kind"] == "alert_failed"]


def test_the_same_cockpit_retries_until_the_target_is_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cockpit.engine.alerting as alerting

    monkeypatch.setattr(alerting, "RETRY_S", (0.5, 0.5, 0.5, 0.5))  # read at each retry
    path = idle_campaign(tmp_path)
    key, probe = "alert:rule_fired:3:phone", "alert:probe:phone"
    with AlertServer(status=503) as server:
        engine = Engine(load_campaign(path), alerts=[
            Target("phone", f"json://127.0.0.1:{server.port}/hook")])
        engine.tick()
        engine.alerting.notify(Alert("rule_fired:3", "critical", "rule x fired on r1",
                                     "stopped r1", "cockpit status campaign.yaml"),
                               now_utc(), seq=3)
        wait_for(lambda: any(e["kind"] == "alert_failed" for e in events(tmp_path)),
                 timeout=20, what="the first failure")
        server.status = 200
        # Within 20 s: retried after the 0.5 s waits, not the 30 s default.
        wait_for(lambda: any(e["kind"] == "alert_sent" for e in events(tmp_path)),
                 timeout=20, what="the retry's success")
        # Past two more retry waits of the sender: a probe that fails twice and is sent
        # on its third try. By then a settled alert would have been sent again, were it to.
        server.status = 503
        engine.alerting.notify(Alert("probe", "critical", "probe", "-", "-"), now_utc())
        wait_for(lambda: any(e["kind"] == "alert_failed" and e.get("alert") == probe
                             and e["attempt"] == 2 for e in events(tmp_path)),
                 timeout=20, what="the probe's second failure")
        server.status = 200
        wait_for(lambda: any(e["kind"] == "alert_sent" and e.get("alert") == probe
                             for e in events(tmp_path)), timeout=20, what="the probe sent")
        engine.close()
    mine = [e for e in events(tmp_path) if e.get("alert") == key]
    kinds = [e["kind"] for e in mine]
    assert kinds[-1] == "alert_sent" and kinds.count("alert_sent") == 1, kinds
    # Claimed once before the first try (issue 39), then failed until the target is back.
    assert kinds[0] == "alert_claimed" and kinds.count("alert_claimed") == 1, kinds
    assert set(kinds[1:-1]) == {"alert_failed"} and len(kinds) >= 3, kinds
    tries = mine[1:]
    assert all("HTTP 503" in e["error"] and e["final"] is False for e in tries[:-1])
    assert [e["attempt"] for e in tries] == list(range(1, len(tries) + 1))
    assert mine[-1]["key"] == key
    # One request per try; the server answered the last one with 200, the rest 503.
    said = [r.json()["message"].splitlines()[0] for r in server.requests]
    assert said.count("rule x fired on r1") == len(tries) and said.count("probe") >= 3, said
    assert said[:len(tries)] == ["rule x fired on r1"] * len(tries)
