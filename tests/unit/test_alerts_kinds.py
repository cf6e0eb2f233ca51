"""What each kind of alert says (issue 26), pure: a journal event -> the alert (what
happened, what the cockpit did, the exact command; its level and family), an unreachable
peer, the campaign's ``alerts:`` section, and which targets are failing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from cockpit.assets import asset
from cockpit.campaign import load_campaign
from cockpit.campaign.loader import load_campaign_text
from cockpit.campaign.model import ALERT_KINDS, Campaign
from cockpit.common.errors import InputError
from cockpit.engine.alert_health import failing_targets
from cockpit.engine.alert_kinds import alert_of, peer_alert
from cockpit.engine.snapshot import EventLine, MachineView
from tests.helpers.campaigns import FIXED_START, write_campaign

T0 = datetime(2026, 12, 4, 3, 12, tzinfo=timezone.utc)


@pytest.fixture
def campaign(tmp_path: Path) -> Campaign:
    return load_campaign(write_campaign(tmp_path, [
        {"id": "pilot", "hours": 1, "resource": "cpu", "run": "r1", "decision_point": True}],
        start=FIXED_START))


def of(campaign: Campaign, **event: Any) -> Any:
    return alert_of({"seq": 7, "t": "2026-12-04T03:00:00Z", **event}, campaign, {"pilot"})


def test_a_checkpoint_that_does_not_reload_is_critical_with_the_command(campaign) -> None:
    alert = of(campaign, kind="checkpoint_verified", run="r1", ok=False,
               error="KeyError: 'model'", path="ckpt/step-40.pt", attempt=3)
    assert (alert.kind, alert.level, alert.key) == ("checkpoint", "critical", "checkpoint:r1:3")
    assert alert.what == "checkpoint of r1 does NOT reload: KeyError: 'model' (ckpt/step-40.pt)"
    assert "cockpit verify campaign.yaml r1" in alert.todo
    assert of(campaign, kind="checkpoint_verified", run="r1", ok=True) is None


@pytest.mark.parametrize(("gpu_event", "level", "todo"), [
    ("gpu_xid", "critical", "dmesg"),
    ("gpu_ecc", "critical", "nvidia-smi -q -d ECC"),
    ("gpu_throttle", "warn", "nvidia-smi -q -d PERFORMANCE"),
    ("gpu_lost", "critical", "cockpit status campaign.yaml"),
])
def test_gpu_errors_are_critical_and_held_down_clocks_a_warning(campaign, gpu_event, level,
                                                                todo) -> None:
    alert = of(campaign, kind="warning", source="gpu", gpu=0, event=gpu_event,
               message="GPU0: Xid 79 critical error: fallen off the bus")
    assert (alert.kind, alert.level) == ("gpu", level)
    assert "GPU0" in alert.what and todo in alert.todo


def test_a_low_disk_is_a_warning_and_other_warnings_stay_off_the_phone(campaign) -> None:
    alert = of(campaign, kind="warning", source="disk", key="held:disk:/x:2026120403",
               message="low disk: /x has 2.0 GiB free (warning under 10.0 GiB)")
    assert (alert.kind, alert.level, alert.key) == ("disk", "warn", "disk:7")
    assert alert.what.startswith("low disk: /x has 2.0 GiB free")
    assert of(campaign, kind="warning", source="hook", message="hook x exited 1") is None


def test_a_clock_jump_is_a_warning_saying_what_was_held(campaign) -> None:
    alert = of(campaign, kind="clock_jump", seconds=-7200.0, settle_s=30,
               **{"from": "2026-12-04T03:00:00Z", "to": "2026-12-04T01:00:00Z"})
    assert (alert.kind, alert.level) == ("clock", "warn")
    assert alert.what.startswith("the wall clock jumped back 2h")
    assert "30 s" in alert.did and "timedatectl" in alert.todo


def test_the_older_kinds_carry_their_family(campaign) -> None:
    cases = {
        "rule_fired": {"kind": "rule_fired", "run": "r1", "action": "stop", "rule": "x"},
        "stage_failed": {"kind": "stage_finished", "stage": "pilot", "outcome": "failed"},
        "rule_blind": {"kind": "rule_blind", "run": "r1", "rule": "x"},
        "decision": {"kind": "stage_finished", "stage": "pilot", "outcome": "done"},
        "export": {"kind": "export_done", "verified": True, "path": "e"},
        "deadline": {"kind": "warning", "key": "deadline_near", "message": "m"},
    }
    for family, event in cases.items():
        alert = of(campaign, **event)
        assert alert is not None and alert.kind == family, (family, alert)
        assert family in ALERT_KINDS


def test_an_unreachable_peer_names_the_machine_and_how_long() -> None:
    view = MachineView(2, "gpu2.example", False, 900.0, "ssh: connect refused", 0)
    alert = peer_alert(view, 1_700_000_000, "campaign.yaml")
    assert (alert.kind, alert.level, alert.key) == ("peer", "warn", "peer:2:1700000000")
    assert alert.what == ("machine 2 (gpu2.example) is unreachable: no answer for 15m "
                          "(ssh: connect refused)")
    assert alert.todo == "ssh gpu2.example; cockpit fleet campaign.yaml"
    never = peer_alert(MachineView(3, "h", False, None, None, 0), None, "c.yaml")
    assert never.key == "peer:3:never" and "never reached" in never.what


# ------------------------------------------------------------------ the alerts: section
BASE = """campaign: c
package: {offer: rtx4090-3d, start: 2026-12-02T08:00:00Z}
stages:
  - {id: a, hours: 1, resource: gpu}
"""


def test_the_alerts_section_routes_kinds_by_label(tmp_path: Path) -> None:
    campaign = load_campaign_text(BASE + """alerts:
  pending_after_minutes: 45
  send:
    rule_fired: [phone]
    export: [phone, mail]
    digest: mail
    closed: []
""", tmp_path / "c.yaml")
    assert campaign.alerts.pending_after_s == 45 * 60
    assert dict(campaign.alerts.send) == {"rule_fired": ("phone",), "export": ("phone", "mail"),
                                          "digest": ("mail",), "closed": ()}
    default = load_campaign_text(BASE, tmp_path / "c.yaml").alerts
    assert default.pending_after_s == 30 * 60 and not default.send


@pytest.mark.parametrize(("section", "line", "words"), [
    ("  send:\n    rule_fird: [phone]\n", 7, "unknown alert kind 'rule_fird' in alerts.send "
                                            "(did you mean 'rule_fired'?"),
    ("  pending_after_minutes: 0\n", 6, "alerts.pending_after_minutes must be a positive"),
    ("  pending_after_minutes: 20000\n", 6, "is more than a week"),
    ("  pending_after_minutes: soon\n", 6, "must be a number"),
    ("  send:\n    export: [\"my phone\"]\n", 7, "alerts.send.export: a target label"),
    ("  send: [phone]\n", 6, "alerts.send must be a mapping"),
    ("  sned: {}\n", 6, "unknown key 'sned' in alerts (did you mean 'send'?)"),
])
def test_the_alerts_section_gives_located_errors(tmp_path: Path, section: str, line: int,
                                                 words: str) -> None:
    with pytest.raises(InputError) as caught:
        load_campaign_text(BASE + "alerts:\n" + section, tmp_path / "c.yaml")
    problems = caught.value.problems
    assert len(problems) == 1, problems
    assert problems[0].line == line and words in problems[0].message, problems[0]


# ------------------------------------------------------------------ failing targets
def delivery(seq: int, kind: str, target: str, alert: str, minutes: int = 0,
             **fields: Any) -> EventLine:
    at = T0 + timedelta(minutes=minutes)
    return EventLine(seq, at, kind, "", fields=MappingProxyType(
        {"seq": seq, "kind": kind, "target": target, "alert": alert, **fields}))


def test_a_target_whose_newest_delivery_failed_is_shown_with_its_words_and_since() -> None:
    lines = [
        delivery(1, "alert_sent", "phone (ntfy)", "alert:a:phone"),
        delivery(2, "alert_failed", "phone (ntfy)", "alert:b:phone", 0, error="HTTP 500"),
        delivery(3, "alert_sent", "mail (mailto)", "alert:b:mail", 1),
        delivery(4, "alert_failed", "phone (ntfy)", "alert:b:phone", 2, error="HTTP 503"),
        delivery(5, "alert_failed", "phone (ntfy)", "alert:c:phone", 3, error="HTTP 503"),
        delivery(6, "alert_failed", "mail (mailto)", "alert:c:mail", 4, error="no connection",
                 machine=2),  # another machine's delivery: its own cockpit's
    ]
    assert failing_targets(lines) == [
        "alerts: phone (ntfy) failing since 03:12 UTC: HTTP 503 (2 alerts unsent)"]


def test_a_target_that_delivers_again_is_no_longer_failing() -> None:
    lines = [
        delivery(1, "alert_failed", "phone (ntfy)", "alert:a:phone", error="HTTP 503"),
        delivery(2, "alert_sent", "phone (ntfy)", "alert:a:phone", 1),
    ]
    assert failing_targets(lines) == []
    again = [*lines, delivery(3, "alert_failed", "phone (ntfy)", "alert:b:phone", 5,
                              error="no connection", final=True)]
    assert failing_targets(again) == [
        "alerts: phone (ntfy) failing since 03:17 UTC: no connection (1 alert unsent)"]


def test_the_init_templates_commented_example_is_a_valid_section(tmp_path: Path) -> None:
    text = asset("templates", "init", "campaign.yaml").read_text(encoding="utf-8")
    lines = text.splitlines()
    first = lines.index("# alerts:")
    block = [lines[first]] + [ln for ln in lines[first + 1:first + 8] if ln.startswith("#  ")]
    section = "\n".join(ln[2:] for ln in block) + "\n"
    alerts = load_campaign_text(BASE + section, tmp_path / "c.yaml").alerts
    assert alerts.pending_after_s == 30 * 60
    assert dict(alerts.send) == {"rule_fired": ("phone",), "export": ("phone", "mail")}
    assert "ntfy://ntfy.sh/<your-topic>" in text and "~/.config/cockpit/alerts.yaml" in text


def test_the_landing_alerts_carry_the_fetch_command(campaign) -> None:
    began = of(campaign, kind="landing", phase="began", text="the point of no return has come")
    assert (began.kind, began.level) == ("landing", "warn")
    landed = of(campaign, kind="landing", phase="landed", ok=True, text="landed: fetch it now",
                fetch="rsync -av --partial u@h:/x/c.tar .")
    assert (landed.level, landed.todo) == ("critical", "rsync -av --partial u@h:/x/c.tar .")
    assert of(campaign, kind="landing", phase="saved", text="r1 saved") is None  # steps: screen
    near = of(campaign, kind="warning", key="landing_near", message="the landing begins in 59m")
    assert near.kind == "landing" and near.what == "the landing begins in 59m"
    assert "cockpit export campaign.yaml" in near.todo
