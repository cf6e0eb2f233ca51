"""The alert outbox as a pure fold over journal events (issue 43): what is owed to each
target in force (its horizon, levels and routing), what settles a delivery (sent, given
up, a digest covering it), what a restart resends (a claim or a failure never settled),
and its cache body read back the same."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from cockpit.campaign import load_campaign
from cockpit.campaign.model import Campaign
from cockpit.common.event_kinds import (
    ALERT_CLAIMED,
    ALERT_FAILED,
    ALERT_SENT,
    ALERT_TARGETS,
    STAGE_FINISHED,
    WARNING,
)
from cockpit.engine.alert_kinds import alert_of
from cockpit.engine.outbox import Outbox, owed_counts, owed_words
from cockpit.engine.outbox import outbox_of as fold_outbox
from tests.helpers.campaigns import FIXED_START, write_campaign

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    folder = tmp_path_factory.mktemp("outbox")
    return load_campaign(write_campaign(folder, [
        {"id": f"f{i}", "hours": 1, "resource": "human"} for i in range(3)],
        start=FIXED_START, extra={"alerts": {"send": {"disk": ["team"]}}}))


class Log:
    """Events as the journal numbers them, one minute apart."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, kind: str, minutes: float | None = None, **fields: Any) -> int:
        seq = len(self.events) + 1
        at = T0 + timedelta(minutes=seq if minutes is None else minutes)
        self.events.append({"seq": seq, "t": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                            "kind": kind, **fields})
        return seq

    def targets(self, *labels: str, phase: str = "open", levels: tuple[str, ...] = (
            "info", "warn", "critical")) -> int:
        return self.add(ALERT_TARGETS, phase=phase, pid=1, targets=[
            {"label": lb, "target": f"{lb} (json)", "levels": list(levels)} for lb in labels])

    def failed(self, stage: str, minutes: float | None = None) -> int:
        return self.add(STAGE_FINISHED, minutes, stage=stage, outcome="failed", code=3)


def keys(box: Outbox) -> list[tuple[str, str]]:
    return [(o.alert.key, t.label) for o, t in box.owed()]


def test_what_is_owed_to_a_target_begins_with_its_force_and_its_grace(plan: Campaign) -> None:
    log = Log()
    log.failed("f0", minutes=-600)  # days before: never owed
    near = log.failed("f1", minutes=0)  # five minutes before the phone: its grace
    log.targets("phone", phase="open")
    log.add(ALERT_TARGETS, minutes=5, phase="closed", pid=1, targets=[])
    after = log.failed("f2")  # while no cockpit ran
    box = fold_outbox(plan, log.events, alert_of)
    assert keys(box) == [(f"stage_failed:{near}", "phone"), (f"stage_failed:{after}", "phone")]
    owed = {o.seq: o for o, _ in box.owed()}
    assert owed[near].watched is None and owed[after].watched is False
    assert owed_words(owed_counts(box, lambda key: False)) == "alerts owed: 2 (phone (json))"


def test_a_delivery_is_settled_by_its_send_its_last_failure_or_a_digest(plan: Campaign) -> None:
    log = Log()
    log.targets("phone", "team")
    one, two, three = log.failed("f0"), log.failed("f1"), log.failed("f2")
    disk = log.add(WARNING, message="disk low", source="disk")  # routed to team only
    key = f"alert:stage_failed:{one}:phone"
    log.add(ALERT_CLAIMED, key="claim:" + key, alert=key, target="phone (json)",
            level="critical", what="stage f0 failed", title="t", body="b")
    log.add(ALERT_SENT, key=key, alert=key, attempt=1)
    log.add(ALERT_FAILED, key=f"alert:stage_failed:{two}:phone",
            alert=f"alert:stage_failed:{two}:phone", final=True, attempt=5)
    log.add(ALERT_SENT, key="alert:digest:1:3:team", alert="alert:digest:1:3:team",
            covers=[f"alert:stage_failed:{n}:team" for n in (one, two, three)])
    box = fold_outbox(plan, log.events, alert_of)
    assert keys(box) == [(f"stage_failed:{three}", "phone"), (f"disk:{disk}", "team")]
    assert box.begun == {}
    assert owed_counts(box, lambda key: False) == (("phone (json)", 1), ("team (json)", 1))
    # The journal's own keys settle too (what the engine passes).
    assert keys(box) and not box.owed(lambda k: True)


def test_a_claim_or_a_failure_never_settled_is_kept_with_its_words(plan: Campaign) -> None:
    log = Log()
    log.targets("phone")
    seq = log.failed("f0")
    key = f"alert:stage_failed:{seq}:phone"
    log.add(ALERT_CLAIMED, key="claim:" + key, alert=key, target="phone (json)",
            level="critical", what="stage f0 failed", title="the title", body="the words")
    box = fold_outbox(plan, log.events, alert_of)
    assert box.begun[key].kind == ALERT_CLAIMED and box.begun[key].body == "the words"
    log.add(ALERT_FAILED, alert=key, final=False, attempt=2, error="HTTP 503",
            title="the title", body="the words", level="critical", what="stage f0 failed")
    box = fold_outbox(plan, log.events, alert_of)
    assert (box.begun[key].kind, box.begun[key].attempt) == (ALERT_FAILED, 2)
    assert keys(box) == [(f"stage_failed:{seq}", "phone")]  # still owed


def test_levels_and_a_target_leaving_decide_what_is_owed(plan: Campaign) -> None:
    log = Log()
    log.targets("phone", levels=("critical",))
    log.add(WARNING, message="disk low", source="disk")  # warn: phone does not take it
    log.failed("f0")
    log.targets("pager")  # the next conductor sends to the pager only
    box = fold_outbox(plan, log.events, alert_of)
    assert [label for _, label in keys(box)] == ["pager"]  # in its grace, as the phone's


def test_the_cache_body_reads_back_the_same_and_a_forged_one_is_refused(
        plan: Campaign) -> None:
    log = Log()
    log.targets("phone")
    seq = log.failed("f0")
    log.add(ALERT_CLAIMED, key="claim:x", alert=f"alert:stage_failed:{seq}:phone",
            title="t", body="b", level="critical", what="w")
    box = fold_outbox(plan, log.events, alert_of)
    again = Outbox(plan, alert_of)
    again.restore(box.encode())
    assert again.encode() == box.encode() and keys(again) == keys(box)
    again.feed(log.events)  # the tail read again after the cache: nothing twice
    assert keys(again) == keys(box)
    for forged in ({}, {**box.encode(), "pending": [[1, "x", None, {}]]},
                   {**box.encode(), "in_force": "phone"}):
        fresh = Outbox(plan, alert_of)
        with pytest.raises((KeyError, TypeError, ValueError)):
            fresh.restore(forged)
        assert fresh.encode() == Outbox(plan, alert_of).encode()  # nothing taken


def test_a_journal_read_again_from_its_first_line_starts_the_outbox_again(
        plan: Campaign, tmp_path: Path) -> None:
    log = Log()
    log.targets("phone")
    log.failed("f0")
    box = fold_outbox(plan, log.events, alert_of)
    box.feed(log.events[:1])  # seq 1 again: a replaced journal
    assert keys(box) == [] and box.last_seq == 1
