"""Resume points in a landing's export (issue 41), the journal driven directly and real
torch checkpoints on CPU: a run that ended and awaits a verdict when the landing exports
has its newest VERIFIED checkpoint in the bag (not a newer, unverified one), marked as a
resume point, not an accepted result, in manifest.json, RELOAD.md and REPORT.md, and
reloaded by the export's check in a fresh process. And a checkpoint the landing verified
that changed on disk afterwards is not passed off as the verified one: the export does
not verify, and says why."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cockpit.campaign import load_campaign
from cockpit.export import export_campaign
from cockpit.journal.log import Journal
from tests.helpers.campaigns import recent_start

torch = pytest.importorskip("torch", reason="real checkpoints, reloaded in a fresh process")

NOTE = "a resume point, not an accepted result"


def _checkpoint(path: Path, step: int) -> Path:
    from cockpit.resume import save_state

    model = torch.nn.Linear(4, 2)
    return save_state(path, model=model, optimizer=torch.optim.SGD(model.parameters(), 0.1),
                      step=step)


def _campaign(folder: Path) -> Path:
    folder.mkdir(parents=True)
    doc = {"campaign": "resume-points", "question": "does it land?",
           "package": {"offer": "rtx4090-3d", "start": recent_start()},
           "stages": [{"id": "control", "hours": 1, "resource": "gpu", "run": "control"},
                      {"id": "variant", "hours": 1, "resource": "gpu", "run": "variant",
                       "after": ["control"]}],
           "runs": {"control": {"checkpoints": "ckpt/control",
                                "acceptance": [{"checkpoint": "reloads"}]},
                    "variant": {"checkpoints": "ckpt/variant"}},
           "on_deadline": "land"}
    path = folder / "campaign.yaml"
    path.write_text(json.dumps(doc))
    return path


def _ran(j: Journal, run: str, t: datetime, *, stopped: bool = False) -> None:
    started = j.append("stage_started", now=t, stage=run, run=run, pid=1, gpus=[0])
    j.append("run_started", now=t, run=run, stage=run, attempt=started["seq"], gpus=[0])
    end = t + timedelta(minutes=30)
    if stopped:
        j.append("stop_requested", now=end, run=run, stage=run, rule="landing",
                 reason="landing before the window ends", attempt=started["seq"])
    j.append("run_exited", now=end, run=run, stage=run, code=-15 if stopped else 0,
             attempt=started["seq"])
    if stopped:
        j.append("stop_done", now=end, run=run, stage=run, attempt=started["seq"],
                 rule="landing")
    j.append("stage_finished", now=end, stage=run, outcome="stopped" if stopped else "done")


def test_a_verdict_pending_runs_newest_verified_checkpoint_is_exported_marked(tmp_path):
    path = _campaign(tmp_path / "c")
    folder = path.parent
    verified = _checkpoint(folder / "ckpt/control/step-000100.pt", 100)
    campaign = load_campaign(path)
    j = Journal(campaign.state_dir / "journal.jsonl")
    t = datetime.now(timezone.utc) - timedelta(hours=2)
    j.append("plan_recorded", now=t, sha256=campaign.sha256, path=str(campaign.path))
    _ran(j, "control", t)
    j.append("checkpoint_verified", now=datetime.now(timezone.utc), run="control", ok=True,
             path=str(verified), auto=True)
    # Written after that check and never verified: not what the landing carries.
    newer = _checkpoint(folder / "ckpt/control/step-000200.pt", 200)
    os.utime(newer, (newer.stat().st_mtime + 5, newer.stat().st_mtime + 5))
    j.append("landing", now=datetime.now(timezone.utc), key="landing:began", phase="began",
             text="the point of no return has come", point=t.isoformat(),
             reserve={"save_s": 0, "save_from": "nothing running", "reload_s": 0,
                      "reload_from": "nothing running", "export_s": 60,
                      "export_from": "deadline.export_hours", "retrieval_s": 60,
                      "retrieval_from": "deadline.retrieve_hours", "margin_s": 600,
                      "total_s": 720})

    result = export_campaign(campaign, tar=False)
    assert result.verified, result.verify.render()
    bag = result.bag_dir / "data"
    manifest = json.loads((bag / "manifest.json").read_text())
    control = manifest["runs"]["control"]
    assert control["status"] == "unjudged"
    point = control["resume_point"]
    assert point["path"] == "data/runs/control/resume/step-000100.pt", point
    assert point["note"] == NOTE and point["expected"] is True
    assert "awaits a verdict" in point["why"]
    exported = result.bag_dir / point["path"]
    assert exported.read_bytes() == verified.read_bytes()
    assert not list((bag / "runs/control").rglob("step-000200.pt"))  # not the unverified one
    assert manifest["runs"]["variant"]["resume_point"] is None  # never ran: nothing
    entry = next(e for e in json.loads((bag / "reload.json").read_text())["artifacts"]
                 if e["run"] == "control")
    assert entry["resume_point"] is True and entry["chosen_for_result"] is False
    reload_md = (bag / "RELOAD.md").read_text()
    assert "## Resume points (not accepted results)" in reload_md
    assert f"### Run control: {NOTE}" in reload_md and "No accepted artifact" in reload_md
    report = (bag / "REPORT.md").read_text()
    landing = report[report.index("## Landing"):]
    assert f"Brought home, each *{NOTE}*:" in landing
    assert "- run `control`: `data/runs/control/resume/step-000100.pt` (" in landing
    check = result.verify.check("artifacts reload")
    assert check.ok and "1 resume point(s), not accepted results, reloaded too" in check.detail


def test_a_checkpoint_that_changed_after_the_landing_verified_it_is_not_passed_off(tmp_path):
    path = _campaign(tmp_path / "c")
    folder = path.parent
    saved = _checkpoint(folder / "ckpt/control/step-000100.pt", 100)
    info = saved.stat()
    campaign = load_campaign(path)
    j = Journal(campaign.state_dir / "journal.jsonl")
    t = datetime.now(timezone.utc) - timedelta(hours=2)
    j.append("plan_recorded", now=t, sha256=campaign.sha256, path=str(campaign.path))
    _ran(j, "control", t, stopped=True)
    for phase in ("began", "saved", "verified"):
        j.append("landing", now=t, key=f"landing:{phase}", phase=phase, text=phase,
                 **({} if phase == "began" else {
                     "run": "control", "path": str(saved), "size_bytes": info.st_size,
                     "mtime": info.st_mtime, "ok": True}))
    # The run wrote over the same name before it stopped: not the file that was verified.
    _checkpoint(saved, 101)
    os.utime(saved, (info.st_mtime + 5, info.st_mtime + 5))

    result = export_campaign(campaign, tar=False, verify_reload=False)
    assert not result.verified
    assert any("run control: its resume point (a checkpoint the landing brought home) is "
               "not in this export" in f and "changed after the landing verified it" in f
               for f in result.verify.failures), result.verify.render()
    manifest = json.loads((result.bag_dir / "data/manifest.json").read_text())
    assert manifest["runs"]["control"]["resume_point"]["path"] is None
    assert not list((result.bag_dir / "data/runs/control").rglob("step-*.pt"))
    report = (result.bag_dir / "data/REPORT.md").read_text()
    assert "- run `control`: **not in this export**: " in report
