"""verify-export: each failure planted one at a time in a good export, and named (D23)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import bagit
import pytest

from cockpit.export import export_campaign, verify_export
from cockpit.export.temp_paths import is_temporary
from cockpit.runs.checkpoints.reload_check import verify_checkpoint
from tests.e2e.test_export_sample import NOW, build_sample, ok_verifier

CHECKS = ("bag valid", "runs accounted for", "metrics exported", "telemetry minutes",
          "expected ids",
          "no empty file", "no temporary paths", "adapters pinned", "artifacts reload",
          "environment")


@pytest.fixture(scope="module")
def good_bag(tmp_path_factory):
    folder = tmp_path_factory.mktemp("verify") / "campaign"
    campaign, state = build_sample(folder)
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    assert result.verified, result.verify.render()
    return result.bag_dir


@pytest.fixture
def bag(good_bag, tmp_path):
    """A private copy of the good bag (inside the same campaign folder, as exported)."""
    copy = good_bag.parent / f"copy-{tmp_path.name}"
    shutil.copytree(good_bag, copy)
    yield copy
    shutil.rmtree(copy, ignore_errors=True)


def rebag(path: Path) -> None:
    """Re-hash after planting, so only the planted problem is left to find."""
    bagit.Bag(str(path)).save(manifests=True)


def only_failure(report, name: str, words: str) -> None:
    failing = [c.name for c in report.checks if not c.ok]
    assert failing == [name], report.render()
    assert any(words in f for f in report.check(name).failures), report.render()
    assert not report.ok and report.exit_code == 1


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def test_good_bag_passes_every_check(bag):
    report = verify_export(bag, reload=False)  # the reload of a good bag: test_export_sample
    assert report.ok, report.render()
    assert [c.name for c in report.checks] == list(CHECKS)
    assert verify_export(bag.parent, reload=False).bag != ""  # a root is accepted too


def test_tampered_file(bag):
    target = bag / "data/runs/control/metrics/metrics.jsonl"
    target.write_text(target.read_text().replace("0.8", "0.9"))
    report = verify_export(bag, reload=False)
    only_failure(report, "bag valid", "data/runs/control/metrics/metrics.jsonl")


def test_missing_run(bag):
    edit_json(bag / "data/manifest.json", lambda d: d["runs"].pop("variant-b"))
    rebag(bag)
    only_failure(verify_export(bag, reload=False), "runs accounted for",
                 "run variant-b of the plan is not accounted for")


def test_stopped_run_without_reason(bag):
    edit_json(bag / "data/manifest.json",
              lambda d: d["runs"]["variant-b"].update(reason=""))
    rebag(bag)
    only_failure(verify_export(bag, reload=False), "runs accounted for",
                 "run variant-b is stopped without a reason")


def _set_ids(bag: Path, ids: list[str]) -> None:
    path = bag / "data/runs/variant-a/predictions/predictions.json"
    path.write_text(json.dumps([{"id": i} for i in ids]))
    rebag(bag)


def test_missing_id(bag):
    _set_ids(bag, [f"doc-{i}" for i in range(5)])
    only_failure(verify_export(bag, reload=False), "expected ids",
                 "run variant-a: 1 expected id(s) missing: doc-5")


def test_extra_id(bag):
    _set_ids(bag, [f"doc-{i}" for i in range(6)] + ["doc-99"])
    only_failure(verify_export(bag, reload=False), "expected ids",
                 "run variant-a: 1 unexpected id(s): doc-99")


def test_empty_file(bag):
    (bag / "data/runs/control/outputs/empty.txt").write_bytes(b"")
    rebag(bag)
    only_failure(verify_export(bag, reload=False), "no empty file",
                 "data/runs/control/outputs/empty.txt is empty")


def test_tmp_path_in_a_payload(bag):
    (bag / "data/runs/control/outputs/notes.txt").write_text(
        "weights were read from /tmp/tmpq8x1z2ab/model.bin before the copy\n")
    rebag(bag)
    only_failure(verify_export(bag, reload=False), "no temporary paths",
                 "data/runs/control/outputs/notes.txt points into a temporary folder: "
                 "/tmp/tmpq8x1z2ab/model.bin")


def test_paths_in_the_campaign_are_fine_others_warn(bag):
    manifest = json.loads((bag / "data/manifest.json").read_text())
    (bag / "data/runs/control/outputs/notes.txt").write_text(
        f"inputs in {manifest['campaign_folder']}/ids.txt and /srv/corpus/v3/train.jsonl\n")
    rebag(bag)
    report = verify_export(bag, reload=False)
    assert report.ok, report.render()
    assert any("/srv/corpus/v3/train.jsonl" in w for w in report.warnings)


def test_adapter_without_revision(bag):
    def drop(d):
        for a in d["artifacts"]:
            if a["run"] == "variant-a":
                a["base_revision"] = None
    edit_json(bag / "data/reload.json", drop)
    rebag(bag)
    only_failure(verify_export(bag, reload=False), "adapters pinned",
                 "carries no base model revision")


def test_adapter_on_a_moving_branch(bag):
    def branch(d):
        for a in d["artifacts"]:
            if a["run"] == "variant-a":
                a["base_revision"] = "main"
    edit_json(bag / "data/reload.json", branch)
    rebag(bag)
    only_failure(verify_export(bag, reload=False), "adapters pinned", "a moving branch name")


def files_for_real(path, kind, **kw):
    """The real fresh-process reload for files; folders (the adapter, whose reload imports
    torch: seconds here) pass — test_export_sample reloads them for real."""
    if Path(path).is_dir():
        return ok_verifier(path, kind)
    return verify_checkpoint(path, kind, **kw)


def test_artifact_that_does_not_reload(bag):
    art = bag / "data/runs/control/artifacts/model-step20.safetensors"
    art.unlink()  # never write through a possible hard link into the campaign
    art.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"w\": broken")
    rebag(bag)
    report = verify_export(bag, reload=True, verifier=files_for_real)
    only_failure(report, "artifacts reload",
                 "data/runs/control/artifacts/model-step20.safetensors (run control) does "
                 "not reload in a fresh process")
    # Without reloading, the same bag passes: the reload is what catches it.
    assert verify_export(bag, reload=False).ok


def test_is_temporary():
    assert is_temporary("/tmp/x") and is_temporary("/var/tmp/a/b") and is_temporary("/dev/shm/q")
    assert is_temporary("/home/u/pytest-of-u/pytest-3/t0/model.pt")
    assert is_temporary("/scratch/tmpab12cd34/model.pt")
    assert not is_temporary("/home/u/data/model.pt")
    assert not is_temporary("/srv/templates/x")


def test_prediction_formats(tmp_path):
    from cockpit.close.acceptance import compare_ids, read_prediction_ids

    (tmp_path / "p.json").write_text('[{"id": 1}, {"id": "b"}]')
    (tmp_path / "p.jsonl").write_text('{"id": 1, "y": 0}\n\n{"id": "b", "y": 1}\n')
    (tmp_path / "p.csv").write_text("id,label\n1,x\nb,y\n")
    for name in ("p.json", "p.jsonl", "p.csv"):
        assert read_prediction_ids(tmp_path / name) == ["1", "b"], name
    (tmp_path / "bad.csv").write_text("key,label\n1,x\n")
    with pytest.raises(ValueError, match="no id column|without an id column"):
        read_prediction_ids(tmp_path / "bad.csv")
    assert compare_ids(["1", "b"], ["1", "1", "b"]) == ["duplicated id(s): 1"]
