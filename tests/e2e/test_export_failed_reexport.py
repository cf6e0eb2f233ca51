"""A failed re-export never destroys the verified one (issue 14).

A verified export, then the next export is written and fails verification: it exits
1, the previous tar's sha256 is unchanged, ``export.json`` still names the previous
export, and the failed one is kept beside it (``<id>.failed-<time>``) for inspection.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import pytest

from cockpit.cli.closing import add_close_commands
from cockpit.export import export_campaign, verify_export
from cockpit.journal.log import Journal
from cockpit.runs.checkpoints.reload_check import VerifyReport, verify_checkpoint
from tests.e2e.test_export_sample import IDS, NOW, build_sample


def run(capsys, *words: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="cockpit")
    add_close_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(words))
    code = args.handler(args)
    return code, capsys.readouterr().out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow  # three exports
def test_failed_reexport_is_kept_beside_the_verified_one(tmp_path, capsys):
    campaign, _state = build_sample(tmp_path / "c", judge="journal")
    code, out = run(capsys, "export", str(campaign.path), "--no-reload")
    assert code == 0, out
    root = campaign.state_dir / "export" / campaign.id
    tar = root / f"{campaign.id}.tar"
    before_sha, before_info = sha256(tar), (root / "export.json").read_text()
    assert json.loads(before_info)["verified"] is True

    # The accepted run's predictions lose an id: the next export fails "expected ids".
    preds = campaign.folder / "out/control/predictions.json"
    preds.write_text(json.dumps([{"id": i} for i in IDS[:-1]]))
    code, out = run(capsys, "export", str(campaign.path), "--no-reload", "--json")
    assert code == 1
    data = json.loads(out)
    assert data["verified"] is False and data["current"] is False
    assert data["current_bag"] == str(root / campaign.id)
    assert sha256(tar) == before_sha  # the verified tar, byte for byte
    assert (root / "export.json").read_text() == before_info
    assert verify_export(root, reload=False).ok  # the bag beside the tar is whole too
    failed = sorted(root.parent.glob(f"{campaign.id}.failed-*"))
    assert [str(p) for p in failed] == [data["kept_failed"]]
    report = verify_export(failed[0], reload=False)
    assert not report.ok and any("doc-5" in f for f in report.failures)
    assert "FAILED verification" in (failed[0] / "FETCH.txt").read_text()
    assert json.loads((failed[0] / "export.json").read_text())["current"] is False
    events = [e for e in Journal(campaign.state_dir / "journal.jsonl").events()
              if e["kind"] == "export_done"]
    assert events[-1]["verified"] is False and events[-1]["kept_failed"] == str(failed[0])
    assert events[-1]["current"] == str(root / campaign.id)

    # In words: which one failed, where it is, which one is current.
    code, out = run(capsys, "export", str(campaign.path), "--no-reload")
    assert code == 1
    assert "kept for inspection" in out and "did not replace the verified export" in out
    assert f"current export (verified): {root / campaign.id}" in out
    assert f"tar sha256 {before_sha}" in out
    assert len(list(root.parent.glob(f"{campaign.id}.failed-*"))) == 2
    assert sha256(tar) == before_sha

    # Fixed: the next export verifies and replaces the previous one; the failed ones are
    # left for the person to inspect (never copied into the bag).
    preds.write_text(json.dumps([{"id": i} for i in IDS]))
    code, out = run(capsys, "export", str(campaign.path), "--no-reload")
    assert code == 0, out
    assert json.loads((root / "export.json").read_text())["verified"] is True
    assert not any("failed-" in p.as_posix() for p in (root / campaign.id).rglob("*"))


def test_garbage_checkpoint_fails_the_reexport_and_keeps_the_verified_tar(tmp_path):
    campaign, state = build_sample(tmp_path / "c", judge="journal")

    def reload_files(path, kind, **kw):  # files for real, the adapter folder stands in
        if Path(path).is_dir():
            return VerifyReport(True, kind, str(path), layout="stand-in")
        return verify_checkpoint(path, kind, **kw)

    first = export_campaign(campaign, state, now=NOW, verifier=reload_files)
    assert first.verified, first.verify.render()
    art = campaign.folder / "ckpt/control/model-step20.safetensors"
    art.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"w\": garbage")
    again = export_campaign(campaign, state, now=NOW, verifier=reload_files)
    assert not again.verified and not again.current
    assert "does not reload" in " ".join(again.verify.failures)
    assert sha256(first.tar_path) == first.tar_sha256
    assert json.loads((first.root / "export.json").read_text())["tar_sha256"] == \
        first.tar_sha256
    assert again.kept_failed is not None and again.bag_dir.parent == again.kept_failed
    assert again.tar_path is not None and again.tar_path.parent == again.kept_failed
    assert sha256(again.tar_path) == again.tar_sha256 != first.tar_sha256


def test_without_a_verified_export_the_failed_one_is_the_root(tmp_path):
    campaign, state = build_sample(tmp_path / "c", judge="journal")
    (campaign.folder / "out/control/predictions.json").write_text("[]")
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    assert not result.verified and result.current and result.kept_failed is None
    assert result.bag_dir == result.root / campaign.id
    assert not list(result.root.parent.glob(f"{campaign.id}.failed-*"))
