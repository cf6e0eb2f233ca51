"""One rule for every payload path, and verified means every accepted result is in the
bag (issue 14).

Every path whose files go into the export (params, metrics, predictions, expected ids,
outputs, checkpoints) must lie, symlinks resolved, inside the campaign folder or under
``settings.export_outside``: ``cockpit check`` says so at the path (FILE:LINE:COL, exit
2), the export skips and names anything else, and an accepted run whose artifact did
not make it into the bag fails verification by name.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from cockpit.campaign import load_campaign
from cockpit.common.errors import InputError
from cockpit.export import export_campaign, verify_export
from tests.e2e.test_export_sample import NOW, build_sample, write_safetensors, write_sample
from tests.helpers.process import run_cockpit


def _edit(path: Path, change) -> Path:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2))
    return path


# ------------------------------------------------------- verified means every result


def test_newest_checkpoint_symlinked_out_fails_verification_naming_the_run(tmp_path):
    campaign, state = build_sample(tmp_path / "c", judge="journal")
    outside = write_safetensors(tmp_path / "elsewhere" / "model-step30.safetensors")
    os.symlink(outside, campaign.folder / "ckpt/control/model-step30.safetensors")
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    assert not result.verified
    assert any("accepted run control has no artifact in this export" in f
               for f in result.verify.failures), result.verify.render()
    assert any("model-step30.safetensors" in s["source"] and "outside the campaign"
               in s["reason"] for s in result.skipped)
    assert any("run control is accepted but its checkpoint" in w for w in result.warnings)
    assert not (result.bag_dir / "data/runs/control/artifacts").exists()


def test_checkpoint_folder_symlinked_out_fails_verification_and_check(tmp_path):
    campaign, state = build_sample(tmp_path / "c", judge="journal")
    real = tmp_path / "scratch" / "ckpt-control"
    (campaign.folder / "ckpt/control").rename(real.parent.mkdir() or real)
    os.symlink(real, campaign.folder / "ckpt/control")
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    assert not result.verified
    assert any("accepted run control has no artifact" in f for f in result.verify.failures)
    # cockpit check sees it too, at the path, and says how to allow it.
    with pytest.raises(InputError, match=r"checkpoints path 'ckpt/control' \(a symlink to "):
        load_campaign(campaign.path)
    _edit(campaign.path, lambda d: d.setdefault("settings", {}).update(
        export_outside=[str(tmp_path / "scratch")]))
    allowed = load_campaign(campaign.path)
    result = export_campaign(allowed, state, now=NOW, verify_reload=False, tar=False)
    # (Only "no temporary paths" fails here: the plan names the pytest folder.)
    assert result.verify.check("artifacts reload").ok, result.verify.render()
    assert (result.bag_dir / "data/runs/control/artifacts/model-step20.safetensors").is_file()


def test_no_reload_still_requires_the_artifact(tmp_path):
    campaign, state = build_sample(tmp_path / "c", judge="journal")
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    assert result.verified
    bag = result.bag_dir
    art = bag / "data/runs/control/artifacts/model-step20.safetensors"
    manifest = json.loads((bag / "data/manifest.json").read_text())
    assert manifest["runs"]["control"]["artifact_expected"] is True
    assert manifest["runs"]["variant-b"]["artifact_expected"] is False  # stopped
    art.unlink()
    report = verify_export(bag, reload=False)
    assert any("accepted run control: its artifact" in f and "is not in the bag" in f
               for f in report.check("artifacts reload").failures), report.render()


def test_artifacts_none_expects_no_artifact(tmp_path):
    campaign, state = build_sample(tmp_path / "c", judge="journal")
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False,
                             artifacts="none")
    assert result.verified, result.verify.render()
    assert any("accepted run control has no artifact" in w for w in result.verify.warnings)


# ------------------------------------------------------------ one rule for every path


@pytest.mark.parametrize("where", ["/etc/passwd", "../../../../../../../../etc/passwd"])
def test_outputs_outside_the_campaign_are_a_located_check_error(tmp_path, where):
    path = write_sample(tmp_path / "c")
    _edit(path, lambda d: d["runs"]["control"].update(outputs=["out/control/errors.md", where]))
    result = run_cockpit("check", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    text = path.read_text()
    line = next(i for i, t in enumerate(text.splitlines(), 1) if json.dumps(where) in t)
    assert re.search(rf"{re.escape(str(path))}:{line}:\d+: .*outputs path "
                     rf"{re.escape(repr(where))} is outside the campaign folder", result.stderr), \
        result.stderr
    assert "settings.export_outside" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("key", ["metrics", "predictions", "expected_ids", "params",
                                 "checkpoints"])
def test_every_payload_key_follows_the_same_rule(tmp_path, key):
    path = write_sample(tmp_path / "c")
    elsewhere = tmp_path / "elsewhere" / "file.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text("{}")
    value = [str(elsewhere)] if key == "metrics" else str(elsewhere)
    _edit(path, lambda d: d["runs"]["control"].update({key: value}))
    with pytest.raises(InputError, match=f"{key} path .* is outside the campaign folder"):
        load_campaign(path)
    _edit(path, lambda d: d.setdefault("settings", {}).update(export_outside=["../elsewhere"]))
    assert load_campaign(path).export_roots()[1] == elsewhere.parent.resolve()


def test_a_symlink_planted_after_check_is_refused_at_export(tmp_path):
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("not campaign data")
    campaign, state = build_sample(tmp_path / "c", judge="journal")
    errors = campaign.folder / "out/control/errors.md"
    errors.unlink()
    errors.symlink_to(secret)  # outputs: [out/control/errors.md], now pointing out
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    assert any(s["source"] == "out/control/errors.md" and "outside the campaign" in s["reason"]
               for s in result.skipped), result.skipped
    assert "not campaign data" not in "".join(
        p.read_text(errors="replace") for p in result.bag_dir.rglob("*") if p.is_file())


def test_export_outside_lets_a_named_folder_in(tmp_path):
    shared = tmp_path / "shared-results"
    shared.mkdir()
    (shared / "confusion.csv").write_text("a,b\n1,2\n")
    path = write_sample(tmp_path / "c")
    _edit(path, lambda d: (d["runs"]["control"].update(
        outputs=["out/control/errors.md", str(shared / "confusion.csv")]),
        d.setdefault("settings", {}).update(export_outside=[str(shared)])))
    assert run_cockpit("check", str(path)).returncode == 0
    campaign, state = build_sample(tmp_path / "c2", judge="journal")
    campaign = load_campaign(_edit(campaign.path, lambda d: (
        d["runs"]["control"].update(outputs=[str(shared / "confusion.csv")]),
        d.setdefault("settings", {}).update(export_outside=[str(shared)]))))
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    assert (result.bag_dir / "data/runs/control/outputs/confusion.csv").read_text() == \
        "a,b\n1,2\n"
    assert not result.skipped
