"""The plan as decided (D24): the campaign file's full text kept in the journal.

The journal records the file's text (zlib, base64) when the plan is first recorded and
again at every later change, each with its sha256. The plan as decided is the first
text; planned-versus-realized is measured against it, and each later change is shown
as a dated diff. The campaign file itself is never rewritten.
"""

from __future__ import annotations

import base64
import difflib
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cockpit.campaign import Campaign, load_campaign_text
from cockpit.common.errors import InputError
from cockpit.common.event_kinds import PLAN_CHANGED, PLAN_RECORDED
from cockpit.journal.log import parse_time

PLAN_KINDS = (PLAN_RECORDED, PLAN_CHANGED)


def pack(text: str) -> str:
    return base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii")


def unpack(data: str) -> str:
    return zlib.decompress(base64.b64decode(data.encode("ascii"))).decode("utf-8")


@dataclass(frozen=True)
class PlanVersion:
    at: datetime
    sha256: str
    text: str | None  # None: recorded by an older cockpit that kept only the hash


def plan_versions(events: Iterable[Mapping[str, Any]]) -> list[PlanVersion]:
    """Every recorded version of the campaign file, oldest (the decided one) first."""
    versions: list[PlanVersion] = []
    for ev in events:
        if ev.get("kind") not in PLAN_KINDS or not isinstance(ev.get("sha256"), str):
            continue
        text = None
        packed = ev.get("text_z")
        if isinstance(packed, str):
            try:
                text = unpack(packed)
            except (ValueError, zlib.error, UnicodeDecodeError):
                text = None  # a damaged copy: the hash still says which version it was
        versions.append(PlanVersion(parse_time(str(ev["t"])), str(ev["sha256"]), text))
    return versions


def decided_campaign(campaign: Campaign, events: Iterable[Mapping[str, Any]]) -> Campaign:
    """The campaign as decided: the first recorded text, read as if it were the file.
    The current file when nothing (or only a hash) was recorded, or it no longer reads."""
    versions = plan_versions(events)
    if not versions or versions[0].text is None or versions[0].sha256 == campaign.sha256:
        return campaign
    try:
        return load_campaign_text(versions[0].text, campaign.path)
    except InputError:
        return campaign


@dataclass(frozen=True)
class PlanChange:
    at: datetime
    sha256: str
    diff: str  # unified diff against the version before it ("" when a text is missing)


def plan_changes(events: Iterable[Mapping[str, Any]], current: Campaign | None = None,
                 now: datetime | None = None) -> list[PlanChange]:
    """Each change after the decided plan, with its date and its diff: the versions the
    journal holds and, given ``current`` (the file as it is now), the file itself when
    the journal does not hold it yet — an edit that no tick journaled (the next one
    will), dated ``now``. ``status`` compares the file with the journal the same way,
    so REPORT.md lists an edit whether or not a tick ran in between (D24)."""
    versions = plan_versions(events)
    if current is not None and versions and versions[-1].sha256 != current.sha256:
        versions.append(PlanVersion(now or versions[-1].at, current.sha256, current.text))
    changes: list[PlanChange] = []
    for before, after in zip(versions, versions[1:], strict=False):
        diff = ""
        if before.text is not None and after.text is not None:
            diff = "".join(difflib.unified_diff(
                before.text.splitlines(keepends=True), after.text.splitlines(keepends=True),
                f"campaign.yaml ({before.sha256[:12]})", f"campaign.yaml ({after.sha256[:12]})"))
        changes.append(PlanChange(after.at, after.sha256, diff))
    return changes
