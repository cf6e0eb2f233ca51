"""A full sample campaign closed and exported: two accepted runs, one stopped (D19-D24).

The journal is driven directly (the processes are not the point here); acceptance is
judged by ``auto_accept`` with real fresh-process reloads. ``build_sample`` is shared by
the other export tests.
"""

from __future__ import annotations

import json
import os
import struct
import tarfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import bagit
import pytest

from cockpit.campaign import load_campaign
from cockpit.close import acceptance as _acceptance  # noqa: F401  (registers the acceptance schema)
from cockpit.close import conclusion as _conclusion  # noqa: F401  (registers the close sections)
from cockpit.close.acceptance import auto_accept
from cockpit.engine import Engine
from cockpit.export import ExportError, export_campaign, verify_export
from cockpit.export import payload as payload_module
from cockpit.journal.fold import fold
from cockpit.journal.log import Journal

START = datetime(2026, 12, 2, 8, 0, tzinfo=timezone.utc)
NOW = START + timedelta(hours=30)
REVISION = "0123456789abcdef0123456789abcdef01234567"
IDS = [f"doc-{i}" for i in range(6)]


def write_safetensors(path: Path, count: int = 4, pad: int = 0) -> Path:
    header = {"w": {"dtype": "F32", "shape": [count + pad], "data_offsets": [0, 4 * (count + pad)]}}
    raw = json.dumps(header).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\1" * (4 * (count + pad)))
    return path


def _metrics(path: Path, accuracy: float, loss: float = 0.3) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"step": s, "loss": loss * 2 / s, "val/accuracy": accuracy - 0.1 / s})
             for s in (1, 2)]
    lines.append(json.dumps({"step": 20, "loss": loss, "val/accuracy": accuracy}))
    path.write_text("\n".join(lines) + "\n")


def _predictions(path: Path, ids: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{"id": i, "label": "x"} for i in ids]))


def write_sample(folder: Path, *, accuracy_a: float = 0.84, artifact_pad: int = 0,
                 extra: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ids.txt").write_text("\n".join(IDS) + "\n")
    checks = [{"metric": "val/accuracy", "min": 0.7}, {"predictions": "expected_ids"},
              {"checkpoint": "reloads"}]
    _metrics(folder / "out/control/metrics.jsonl", 0.80)
    _metrics(folder / "out/variant-a/metrics.jsonl", accuracy_a)
    _metrics(folder / "out/variant-b/metrics.jsonl", 0.5, loss=float("nan"))
    _predictions(folder / "out/control/predictions.json", IDS)
    _predictions(folder / "out/variant-a/predictions.json", IDS)
    (folder / "out/control/errors.md").write_text("# error analysis\nconfusions: 3\n")
    write_safetensors(folder / "ckpt/control/model-step10.safetensors")
    write_safetensors(folder / "ckpt/control/model-step20.safetensors", pad=artifact_pad)
    adapter = folder / "ckpt/variant-a/checkpoint-20"
    write_safetensors(adapter / "adapter_model.safetensors", pad=artifact_pad)
    (adapter / "adapter_config.json").write_text(json.dumps(
        {"base_model_name_or_path": "org/base-7b", "peft_type": "LORA", "r": 8}))
    write_safetensors(folder / "ckpt/variant-b/model-step3.safetensors")
    doc = {
        "campaign": "sample-close",
        "question": "Does a LoRA adapter (variant-a) beat the control by 0.02 accuracy?",
        "package": {"offer": "rtx4090-3d", "start": "2026-12-02T08:00:00Z",
                    "order_ref": "ITG-4711"},
        "stages": [
            {"id": "data-check", "duration": "1h", "resource": "cpu", "role": "data_check"},
            {"id": "control", "after": ["data-check"], "duration": "6h", "resource": "gpu",
             "run": "control", "role": "control"},
            {"id": "variant-a", "after": ["control"], "duration": "6h", "resource": "gpu",
             "run": "variant-a", "category": "useful"},
            {"id": "variant-b", "after": ["control"], "duration": "6h", "resource": "gpu",
             "run": "variant-b", "category": "exploratory"},
            {"id": "export", "after": ["variant-a", "variant-b"], "duration": "2h",
             "resource": "human", "role": "export"},
        ],
        "runs": {
            "control": {"kind": "inference", "metrics": ["out/control/metrics.jsonl"],
                        "checkpoints": "ckpt/control", "params": {"lr": 0.001, "epochs": 2},
                        "predictions": "out/control/predictions.json",
                        "expected_ids": "ids.txt", "outputs": ["out/control/errors.md"],
                        "acceptance": checks},
            "variant-a": {"kind": "adapter", "metrics": ["out/variant-a/metrics.jsonl"],
                          "checkpoints": "ckpt/variant-a", "params": {"lr": 0.0002, "r": 8},
                          "predictions": "out/variant-a/predictions.json",
                          "expected_ids": "ids.txt", "base_model": "org/base-7b",
                          "base_revision": REVISION, "acceptance": checks},
            "variant-b": {"kind": "inference", "metrics": ["out/variant-b/metrics.jsonl"],
                          "checkpoints": "ckpt/variant-b", "params": {"lr": 0.5},
                          "acceptance": [checks[0], checks[2]]},
        },
        "stop_rules": [{"id": "finite-loss", "kind": "non_finite", "metric": "loss"}],
        "conclusion": {"metric": "val/accuracy", "better": "higher", "baseline": "control",
                       "margin": 0.02, "variants": ["variant-a", "variant-b"]},
        "deadline": {"export_hours": 2, "retrieve_hours": 1},
    }
    doc.update(extra or {})
    path = folder / "campaign.yaml"
    path.write_text(json.dumps(doc, indent=2))
    return path


def drive_journal(campaign, *, stop_b: bool = True) -> Journal:
    """What the engine would have journaled for the sample, with fixed times."""
    j = Journal(campaign.state_dir / "journal.jsonl")
    t = START
    j.append("plan_recorded", now=t, sha256=campaign.sha256, path=str(campaign.path))
    j.append("stage_started", now=t, stage="data-check", manual=True)
    j.append("stage_finished", now=t + timedelta(minutes=50), stage="data-check", outcome="done")
    j.append("note", now=t + timedelta(minutes=50), stage="data-check",
             text="corpus checked: 0 truncated")
    for run, begin, hours in (("control", 1, 7), ("variant-a", 8, 5.5), ("variant-b", 13.5, 1)):
        started = t + timedelta(hours=begin)
        ev = j.append("stage_started", now=started, stage=run, run=run, pid=1, gpus=[0])
        j.append("run_started", now=started, run=run, stage=run, attempt=ev["seq"], gpus=[0],
                 params_hash="x")
        end = started + timedelta(hours=hours)
        if run == "variant-b" and stop_b:
            j.append("rule_fired", now=end, run=run, stage=run, rule="finite-loss",
                     reason="loss is nan at step 3", value="nan", step=3, action="stop",
                     attempt=ev["seq"])
            j.append("stop_requested", now=end, run=run, stage=run, rule="finite-loss",
                     reason="loss is nan at step 3", step=3, attempt=ev["seq"])
            j.append("run_exited", now=end, run=run, stage=run, code=-15, attempt=ev["seq"])
            j.append("stop_done", now=end, run=run, stage=run, attempt=ev["seq"],
                     rule="finite-loss")
            j.append("stage_finished", now=end, stage=run, outcome="stopped")
        else:
            j.append("run_exited", now=end, run=run, stage=run, code=0, attempt=ev["seq"])
            j.append("stage_finished", now=end, stage=run, outcome="done")
    j.append("note", now=t + timedelta(hours=14), stage="variant-a",
             text="adapter took 0.5 h less than planned")
    j.append("cost", now=t + timedelta(hours=15), label="extra storage", amount="3.50",
             currency="USD")
    return j


def ok_verifier(path, kind, **_kw):
    from cockpit.runs.checkpoints.reload_check import VerifyReport
    return VerifyReport(True, kind, str(path), layout="stand-in")


def build_sample(folder: Path, *, judge: bool | str = True, **kwargs):
    """(campaign, state) for the sample; ``judge`` runs auto_accept (real reloads)."""
    path = write_sample(folder, **kwargs)
    campaign = load_campaign(path)
    drive_journal(campaign)
    if judge == "journal":  # verdicts written directly: no reloads, for speed
        j = Journal(campaign.state_dir / "journal.jsonl")
        for run, kind in (("control", "result_accepted"), ("variant-a", "result_accepted"),
                          ("variant-b", "result_rejected")):
            j.append(kind, now=NOW, run=run, reason="checks passed" if "acc" in kind
                     else "stopped (loss is nan at step 3)", result=run)
    elif judge:
        # Acceptance with a stand-in verifier: the real fresh-process reload imports torch
        # for the adapter folder (seconds on 2 cores); the export below reloads for real.
        engine = Engine(campaign)
        written = auto_accept(engine, NOW, verifier=ok_verifier)
        assert {e["run"]: e["kind"] for e in written} == {
            "control": "result_accepted", "variant-a": "result_accepted",
            "variant-b": "result_rejected"}, written
    state = fold(campaign, Journal(campaign.state_dir / "journal.jsonl").events(), NOW)
    return campaign, state


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sample") / "campaign"
    campaign, state = build_sample(folder)
    result = export_campaign(campaign, state, now=NOW)
    return campaign, state, result


# ------------------------------------------------------------------ tests


def test_sample_export_is_a_valid_verified_bag(exported):
    campaign, _state, result = exported
    assert result.bag_dir == campaign.state_dir / "export" / "sample-close" / "sample-close"
    bagit.Bag(str(result.bag_dir)).validate()  # the Library of Congress validator agrees
    assert result.verified, result.verify.render()
    assert result.verify.reload_checked
    names = {c.name for c in result.verify.checks}
    assert names == {"bag valid", "runs accounted for", "metrics exported",
                     "telemetry minutes", "expected ids",
                     "no empty file", "no temporary paths", "adapters pinned",
                     "artifacts reload", "environment"}
    info = (result.bag_dir / "bag-info.txt").read_text()
    for words in ("Campaign-Id: sample-close", "Order-Reference: ITG-4711",
                  "Offer: 1 x rtx4090-3d", "Window: 2026-12-02T08:00:00+00:00",
                  "Created: 2026-12-03T14:00:00.000000Z", "Payload-Oxum:"):
        assert words in info


def test_payload_holds_plan_journal_runs_and_reload(exported):
    campaign, _state, result = exported
    data = result.bag_dir / "data"
    assert (data / "plan/campaign.yaml").read_bytes() == campaign.path.read_bytes()
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest["plan"]["sha256"] == campaign.sha256
    assert manifest["cockpit_version"]
    runs = manifest["runs"]
    assert runs["control"]["status"] == "accepted"
    assert runs["variant-a"]["status"] == "accepted"
    assert runs["variant-b"]["status"] == "stopped"
    assert "loss is nan at step 3" in runs["variant-b"]["reason"]
    assert (data / "runs/variant-b/STOP_REASON.txt").read_text().startswith(
        "stopped by rule finite-loss at step 3")
    assert json.loads((data / "runs/control/params.json").read_text()) == {"epochs": 2,
                                                                           "lr": 0.001}
    assert (data / "runs/control/metrics/metrics.jsonl").is_file()
    assert (data / "runs/control/outputs/errors.md").is_file()
    # final: only the newest complete checkpoint of an accepted run; none of the stopped one.
    assert [p.name for p in (data / "runs/control/artifacts").iterdir()] == [
        "model-step20.safetensors"]
    assert not (data / "runs/variant-b/artifacts").exists()
    files = {f["path"]: f for f in manifest["files"]}
    assert files["data/runs/control/predictions/predictions.json"]["size"] > 0
    reload = json.loads((data / "reload.json").read_text())
    adapter = next(a for a in reload["artifacts"] if a["run"] == "variant-a")
    assert adapter["base_model"] == "org/base-7b" and adapter["base_revision"] == REVISION
    assert reload["python"] and "cockpit" in reload["packages"]
    text = (data / "RELOAD.md").read_text()
    assert "data/runs/control/artifacts/model-step20.safetensors" in text
    assert f"revision='{REVISION}'" in text


def test_report_plan_vs_realized_budget_and_timeline(exported):
    _campaign, _state, result = exported
    report = (result.bag_dir / "data/REPORT.md").read_text()
    assert "Does a LoRA adapter" in report
    assert "variant-a (val/accuracy 0.84, +0.04) beats the baseline control" in report
    assert "| variant-a | useful | 2026-12-02 15:00 – 2026-12-02 21:00 | 6.00 |" in report
    assert "-30m" in report  # variant-a: 5.5 h observed against 6 h planned
    assert "adapter took 0.5 h less than planned" in report
    assert "run `variant-b` stopped by `finite-loss` at step 3" in report
    assert "rental share per accepted result: 23.57 USD" in report  # D21
    assert "extra storage: 3.50 USD" in report
    assert "![timeline" in report
    svg = (result.bag_dir / "data/timeline.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<rect") >= 5 + 4


def test_tar_sha_fetch_and_journal_event(exported):
    campaign, _state, result = exported
    assert result.tar_path is not None and result.tar_path.is_file()
    sha_line = (result.tar_path.parent / "sample-close.tar.sha256").read_text()
    assert sha_line.split()[0] == result.tar_sha256
    import hashlib
    assert hashlib.sha256(result.tar_path.read_bytes()).hexdigest() == result.tar_sha256
    with tarfile.open(result.tar_path) as tar:
        assert "sample-close/bagit.txt" in tar.getnames()
    assert any(c.startswith("rsync -av --partial") and str(result.tar_path) in c
               for c in result.fetch_commands)
    assert (result.root / "FETCH.txt").read_text().count(str(result.tar_path)) >= 2
    events = Journal(campaign.state_dir / "journal.jsonl").events()
    done = [e for e in events if e["kind"] == "export_done"]
    assert done[-1]["sha256"] == result.tar_sha256 and done[-1]["verified"] is True
    assert done[-1]["size"] == result.size_bytes > 0
    assert "export written" in result.summary()


def test_large_artifacts_hard_linked_small_files_copied(tmp_path):
    campaign, state = build_sample(tmp_path / "c", judge="journal", artifact_pad=300_000)
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    art = result.bag_dir / "data/runs/control/artifacts/model-step20.safetensors"
    src = campaign.folder / "ckpt/control/model-step20.safetensors"
    assert os.stat(art).st_ino == os.stat(src).st_ino  # linked: no second copy
    assert result.linked == 2
    plan = result.bag_dir / "data/plan/campaign.yaml"
    assert os.stat(plan).st_ino != os.stat(campaign.path).st_ino
    assert result.verified and result.tar_path is None
    # A second export finds the artifact hashes in the cache and replaces the first.
    again = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    assert again.verified and again.bag_dir == result.bag_dir
    assert not list(result.root.parent.glob(".sample-close.*-*"))


def test_symlink_out_of_the_campaign_is_never_followed(tmp_path):
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("not campaign data")
    folder = tmp_path / "c"
    write_sample(folder)
    out = folder / "out/control"
    (out / "leak.txt").symlink_to(secret)
    (out / "inside.md").symlink_to(out / "errors.md")
    path = folder / "campaign.yaml"
    doc = json.loads(path.read_text())
    doc["runs"]["control"]["outputs"] = ["out/control"]
    path.write_text(json.dumps(doc))
    campaign = load_campaign(path)
    drive_journal(campaign)
    state = fold(campaign, Journal(campaign.state_dir / "journal.jsonl").events(), NOW)
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    outputs = result.bag_dir / "data/runs/control/outputs/control"
    assert (outputs / "inside.md").read_text().startswith("# error analysis")
    assert not (outputs / "leak.txt").exists()
    assert any("leak.txt" in s["source"] and "outside the campaign" in s["reason"]
               for s in result.skipped)
    assert "not campaign data" not in "".join(
        p.read_text(errors="replace") for p in result.bag_dir.rglob("*") if p.is_file())


def test_full_disk_leaves_the_previous_export_whole(tmp_path, monkeypatch):
    campaign, state = build_sample(tmp_path / "c", judge=False)
    first = export_campaign(campaign, state, now=NOW, verify_reload=False)
    calls = {"n": 0}
    real = payload_module.copy_hashed

    def failing(src, dst):
        calls["n"] += 1
        if calls["n"] == 4:
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(payload_module, "copy_hashed", failing)
    with pytest.raises(ExportError, match="no space left"):
        export_campaign(campaign, state, now=NOW, verify_reload=False)
    assert verify_export(first.bag_dir, reload=False).ok
    assert hashlib_file(first.tar_path) == first.tar_sha256
    assert not list(first.root.parent.glob(".sample-close.tmp-*"))


def hashlib_file(path: Path) -> str:
    import hashlib
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_out_dir_that_is_not_an_export_is_refused(tmp_path):
    campaign, state = build_sample(tmp_path / "c", judge=False)
    mine = tmp_path / "precious"
    mine.mkdir()
    (mine / "thesis.tex").write_text("do not delete")
    with pytest.raises(ExportError, match="not a cockpit export"):
        export_campaign(campaign, state, out_dir=mine, now=NOW, verify_reload=False)
    assert (mine / "thesis.tex").read_text() == "do not delete"
    out = tmp_path / "exports" / "close"
    result = export_campaign(campaign, state, out_dir=out, now=NOW, verify_reload=False,
                             artifacts="all")
    assert result.bag_dir == out / "sample-close" and result.verified
    names = {p.name for p in (result.bag_dir / "data/runs/control/artifacts").iterdir()}
    assert names == {"model-step10.safetensors", "model-step20.safetensors"}
    none = export_campaign(campaign, state, out_dir=out, now=NOW, verify_reload=False,
                           artifacts="none")
    assert not (none.bag_dir / "data/runs/control/artifacts").exists()
