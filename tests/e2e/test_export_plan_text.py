"""`export` / `verify-export` never report the plan's compressed text as a path (issue
43): the journal keeps the campaign file's text zlib-compressed and base64-encoded
(``text_z``); its '/' once read as "names /Onz2/jj5…, outside the export"."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from cockpit.common.event_kinds import PLAN_CHANGED
from cockpit.export.temp_paths import _ABS_PATH
from cockpit.journal.log import Journal
from cockpit.journal.plan_record import pack
from tests.e2e.test_export_cli import run
from tests.e2e.test_export_sample import START, build_sample


def packed_with_paths(text: str) -> str:
    """The plan's text, padded until its packed form holds what reads as a path of two
    parts or more (as many real plans' do)."""
    for n in range(5000):
        packed = pack(f"{text}\n# {'x' * n}\n")
        if any(m.group(1).count("/") >= 2 for m in _ABS_PATH.finditer(f'"{packed}"')):
            return packed
    raise AssertionError("no padding made a path-like packed text")


def test_the_plans_packed_text_is_never_named_as_a_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    campaign, _state = build_sample(tmp_path / "c", judge="journal")
    packed = packed_with_paths(campaign.text)
    fragments = {m.group(1) for m in _ABS_PATH.finditer(f'"{packed}"')}
    Journal(campaign.state_dir / "journal.jsonl").append(
        PLAN_CHANGED, now=START + timedelta(hours=1), sha256="0" * 64,
        path=str(campaign.path), text_z=packed)
    code, out = run(capsys, "export", str(campaign.path), "--no-reload")
    assert code == 0, out
    assert "verified" in out
    root = campaign.state_dir / "export" / campaign.id
    code, verified = run(capsys, "verify-export", str(root), "--no-reload", "--json")
    assert code == 0
    report = json.loads(verified)
    assert report["ok"] is True
    said = out + verified
    for fragment in fragments:
        assert fragment not in said, fragment
    # The packed text itself is in the exported journal, untouched.
    exported = (root / campaign.id / "data/journal/journal.jsonl").read_text()
    assert packed in exported
