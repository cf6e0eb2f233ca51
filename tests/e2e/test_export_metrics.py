"""Every metrics source is exported (issue 22): a TensorBoard run's event files, written
by the real writer, go into the bag with their scalars as JSON lines the cockpit's own
reader reads back; verify-export fails when an accepted run's metrics are not in the bag;
JSON-lines and CSV runs export as before."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sys
from pathlib import Path

import bagit
import pytest

from cockpit.campaign import load_campaign
from cockpit.export import export_campaign, verify_export
from cockpit.journal.fold import fold
from cockpit.journal.log import Journal
from cockpit.runs.metrics.readers import JsonlMetricsReader, open_reader
from tests.e2e.test_export_sample import NOW, START
from tests.helpers.process import run_cockpit

CSV = "step,train_loss,val_acc\n1,0.9,\n2,0.7,0.61\n"
JSONL = '{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.25}\n'


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_tb_campaign(folder: Path) -> Path:
    """Three accepted runs: ``tb`` logs to TensorBoard (two event files: the writer was
    restarted), ``jl`` to JSON lines, ``lt`` to a Lightning metrics.csv."""
    pytest.importorskip("tensorboard")
    tb = pytest.importorskip("torch.utils.tensorboard")
    import numpy as np

    logs = folder / "logs" / "tb"
    first = tb.SummaryWriter(log_dir=str(logs), flush_secs=3600)
    for step, loss in ((1, 2.0), (2, 1.0), (3, 0.5)):
        first.add_scalar("train/loss", loss, step)
    first.add_scalar("train/loss", float("nan"), 4)
    first.add_scalar("val/bpc", 1.25, 4)
    first.add_histogram("weights", np.array([0.1, 0.2]), 4)  # not a scalar: not in the JSONL
    first.add_text("note", "hello", 4)
    first.close()
    second = tb.SummaryWriter(log_dir=str(logs), flush_secs=3600)  # a restart: a 2nd file
    second.add_scalar("train/loss", 0.125, 5)
    second.close()
    assert len(list(logs.glob("events.out.tfevents.*"))) == 2
    (folder / "out").mkdir()
    (folder / "out" / "metrics.jsonl").write_text(JSONL)
    (folder / "out" / "metrics.csv").write_text(CSV)
    doc = {
        "campaign": "tb-close",
        "question": "Does a char-level LSTM reach 1.3 bpc?",
        "package": {"offer": "rtx4090-3d", "start": "2026-12-02T08:00:00Z"},
        "stages": [{"id": run, "duration": "2h", "resource": "gpu", "run": run}
                   for run in ("tb", "jl", "lt")],
        # "./logs/tb": the plan's own spelling, matched to the source the export wrote.
        "runs": {"tb": {"kind": "train", "metrics": ["./logs/tb"]},
                 "jl": {"kind": "train", "metrics": ["out/metrics.jsonl"]},
                 "lt": {"kind": "train", "metrics": ["out/metrics.csv"]}},
    }
    path = folder / "campaign.yaml"
    path.write_text(json.dumps(doc, indent=2))
    return path


def close(path: Path):  # type: ignore[no-untyped-def]
    """(campaign, state): each run started, ended with code 0 and accepted."""
    from datetime import timedelta

    campaign = load_campaign(path)
    j = Journal(campaign.state_dir / "journal.jsonl")
    j.append("plan_recorded", now=START, sha256=campaign.sha256, path=str(campaign.path))
    for i, run in enumerate(("tb", "jl", "lt")):
        at = START + timedelta(hours=2 * i)
        ev = j.append("stage_started", now=at, stage=run, run=run, pid=1, gpus=[0])
        j.append("run_started", now=at, run=run, stage=run, attempt=ev["seq"], gpus=[0],
                 params_hash="x")
        end = at + timedelta(hours=1)
        j.append("run_exited", now=end, run=run, stage=run, code=0, attempt=ev["seq"])
        j.append("stage_finished", now=end, stage=run, outcome="done")
        j.append("result_accepted", now=end, run=run, reason="checks passed", result=run)
    return campaign, fold(campaign, j.events(), NOW)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("tbexp") / "campaign"
    folder.mkdir()
    campaign, state = close(write_tb_campaign(folder))
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    assert result.verified, result.verify.render()
    return campaign, result


def _manifest(bag: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((bag / "data/manifest.json").read_text())


def test_a_tensorboard_run_exports_its_event_files_and_its_curves(exported) -> None:  # type: ignore[no-untyped-def]
    campaign, result = exported
    bag = result.bag_dir
    files = _manifest(bag)["runs"]["tb"]["files"]
    sources = campaign.folder / "logs" / "tb"
    names = sorted(p.name for p in sources.glob("events.out.tfevents.*"))
    events = [f"data/runs/tb/metrics/tb/{n}" for n in names]
    scalars = "data/runs/tb/metrics/tb.scalars.jsonl"
    assert files["metrics"] == [*events, scalars]
    # The event files byte for byte.
    for name, rel in zip(names, events, strict=True):
        assert _sha(bag / rel) == _sha(sources / name)
    [source] = files["metric_sources"]
    assert source["declared"] == "logs/tb" and source["format"] == "tensorboard"
    # 4 points from the first file (steps 1-3; step 4 carries loss and bpc in two events
    # of the same step: two points) + 1 from the restarted writer = 6 lines.
    assert source["points"] == 6

    # The JSONL read by hand: one line per point, step, t and the values written.
    lines = [json.loads(line) for line in (bag / scalars).read_text().splitlines()]
    assert len(lines) == 6
    assert all(isinstance(r["t"], float) and r["t"] > 1e9 for r in lines)  # wall time
    loss = [(r["step"], r["train/loss"]) for r in lines if "train/loss" in r]
    assert loss[:3] == [(1, 2.0), (2, 1.0), (3, 0.5)]  # exact in float32
    assert loss[3][0] == 4 and math.isnan(loss[3][1])  # NaN kept (spelled NaN)
    assert loss[4] == (5, 0.125)
    assert [(r["step"], r["val/bpc"]) for r in lines if "val/bpc" in r] == [(4, 1.25)]
    assert not any("weights" in r or "note" in r for r in lines)

    # And the cockpit's own JSON-lines reader reads the same curves back.
    reader = open_reader(bag / scalars)
    assert isinstance(reader, JsonlMetricsReader)
    points = reader.poll().points
    assert reader.garbage == 0 and len(points) == 6
    assert [p.step for p in points if "train/loss" in p.values] == [1, 2, 3, 4, 5]
    assert points[-1].values == {"train/loss": 0.125}


def test_jsonl_and_csv_runs_export_as_before(exported) -> None:  # type: ignore[no-untyped-def]
    _campaign, result = exported
    bag = result.bag_dir
    runs = _manifest(bag)["runs"]
    assert runs["jl"]["files"]["metrics"] == ["data/runs/jl/metrics/metrics.jsonl"]
    assert runs["lt"]["files"]["metrics"] == ["data/runs/lt/metrics/metrics.csv"]
    assert (bag / "data/runs/jl/metrics/metrics.jsonl").read_text() == JSONL
    assert (bag / "data/runs/lt/metrics/metrics.csv").read_text() == CSV
    assert not list(bag.glob("data/runs/*/metrics/*.scalars.jsonl"))[1:]  # tb's alone


@pytest.fixture
def bag(exported, tmp_path):  # type: ignore[no-untyped-def]
    """A private copy of the exported bag (in the campaign folder, as exported)."""
    _campaign, result = exported
    copy = result.bag_dir.parent / f"copy-{tmp_path.name}"
    shutil.copytree(result.bag_dir, copy)
    yield copy
    shutil.rmtree(copy, ignore_errors=True)


def _rewrite_manifest(bag: Path, change) -> None:  # type: ignore[no-untyped-def]
    data = _manifest(bag)
    change(data)
    (bag / "data/manifest.json").write_text(json.dumps(data, indent=2))
    bagit.Bag(str(bag)).save(manifests=True)  # re-hashed: only the planted problem is left


def test_a_bag_without_the_metrics_fails_verify_export(bag) -> None:  # type: ignore[no-untyped-def]
    # What the export wrote before issue 22: "metrics": [] and no metrics file.
    shutil.rmtree(bag / "data/runs/tb/metrics", ignore_errors=True)

    def drop(data: dict) -> None:  # type: ignore[type-arg]
        data["runs"]["tb"]["files"].update(metrics=[], metric_sources=[])
    _rewrite_manifest(bag, drop)
    done = run_cockpit("verify-export", str(bag), "--no-reload")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "NOT verified" in done.stdout and "[FAIL] metrics exported" in done.stdout
    assert ("run tb is accepted but none of its metrics is in the bag (runs.tb.metrics in "
            "the plan: ./logs/tb)") in done.stdout
    failing = [c.name for c in verify_export(bag, reload=False).checks if not c.ok]
    assert failing == ["metrics exported"]


def test_a_listed_metrics_file_missing_from_the_bag_fails(bag) -> None:  # type: ignore[no-untyped-def]
    rel = "data/runs/tb/metrics/tb.scalars.jsonl"
    (bag / rel).unlink()
    bagit.Bag(str(bag)).save(manifests=True)  # the hashes agree: only the manifest knows
    report = verify_export(bag, reload=False)
    assert [c.name for c in report.checks if not c.ok] == ["metrics exported"]
    assert report.check("metrics exported").failures == (
        f"run tb: the metrics file {rel!r} listed in data/manifest.json is not in the bag",)


def test_a_declared_source_with_no_file_fails(bag) -> None:  # type: ignore[no-untyped-def]
    def drop_source(data: dict) -> None:  # type: ignore[type-arg]
        data["runs"]["jl"]["files"]["metric_sources"][0]["files"] = []
    _rewrite_manifest(bag, drop_source)
    report = verify_export(bag, reload=False)
    assert report.check("metrics exported").failures == (
        "run jl: its metrics source 'out/metrics.jsonl' (runs.jl.metrics in the plan) has "
        "no file in the bag",)


def test_hostile_event_files_are_named_not_exported(tmp_path: Path) -> None:
    folder = tmp_path / "campaign"
    folder.mkdir()
    path = write_tb_campaign(folder)
    logs = folder / "logs" / "tb"
    [real, _] = sorted(logs.glob("events.out.tfevents.*"))
    outside = tmp_path / "outside.bin"
    outside.write_bytes(real.read_bytes())  # a valid event file, outside the campaign
    os.symlink(outside, logs / "events.out.tfevents.9999999998.evil.1.0")
    (logs / "events.out.tfevents.9999999999.empty.1.0").write_bytes(b"")  # killed writer
    campaign, state = close(path)
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    # (The skip names the link's target, here under /tmp: "no temporary paths" says so.)
    assert result.verify.check("metrics exported").ok, result.verify.render()
    reasons = {Path(s["source"]).name: s["reason"] for s in result.skipped}
    assert "symlink pointing outside the campaign" in reasons[
        "events.out.tfevents.9999999998.evil.1.0"]
    assert "empty event file" in reasons["events.out.tfevents.9999999999.empty.1.0"]
    held = sorted(p.name for p in (result.bag_dir / "data/runs/tb/metrics/tb").iterdir())
    assert held == sorted(p.name for p in (real, _))
    # The scalars are the bag's own files' (6 points), never the planted file's.
    [source] = _manifest(result.bag_dir)["runs"]["tb"]["files"]["metric_sources"]
    assert source["points"] == 6


def test_without_the_extra_the_event_files_still_go_and_the_export_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "campaign"
    folder.mkdir()
    campaign, state = close(write_tb_campaign(folder))
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing."
                        "event_file_loader", None)  # the import fails as without the extra
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    files = _manifest(result.bag_dir)["runs"]["tb"]["files"]
    assert len(files["metrics"]) == 2 and not any("scalars" in f for f in files["metrics"])
    assert any("pip install 'cockpit[tensorboard]'" in w and "run tb" in w
               for w in result.warnings), result.warnings
    assert result.verified  # the curves are in the bag, as event files
    assert any("without their scalars" in w for w in result.verify.warnings)
