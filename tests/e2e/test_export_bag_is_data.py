"""A bag is data: verify-export never runs or unpickles anything because the bag says so.

The attack (issue 14): change a bag's reload.json to a command that plants a marker
file, point an artifact at a pickle that plants a marker when unpickled with
``allow_unsafe_pickle``, drop a ``torch.py`` beside ``bagit.txt``, then re-hash the
manifests with the ``bagit`` library so the bag is "valid". ``cockpit verify-export``
must create no marker, say what it refused and how to opt in; with ``--trust-commands``
the bag's command (and its unsafe load) does run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import bagit
import pytest

from cockpit.export import export_campaign, verify_export
from tests.e2e.test_export_sample import NOW, build_sample
from tests.helpers.process import run_cockpit

torch = pytest.importorskip("torch", reason="the hostile pickle is written with torch.save")


class _Plant:
    """Unpickling this opens (creates) a file: the stand-in for any code a pickle runs."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):  # noqa: D105
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def exported_bag(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bagdata") / "campaign"
    campaign, state = build_sample(folder, judge="journal")
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=False)
    assert result.verified, result.verify.render()
    return result.bag_dir


@pytest.fixture
def bag(exported_bag, tmp_path):
    copy = exported_bag.parent / f"copy-{tmp_path.name}"
    shutil.copytree(exported_bag, copy)
    yield copy
    shutil.rmtree(copy, ignore_errors=True)


def tamper(bag: Path, markers: Path) -> dict[str, Path]:
    """Plant the three attacks, re-hash the bag: it validates as a BagIt bag."""
    planted = {name: markers / name for name in ("command-ran", "pickle-ran", "torch-py-ran")}
    torch.save({"model": _Plant(planted["pickle-ran"])},
               bag / "data/runs/variant-a/evil.pt")
    (bag / "torch.py").write_text(f"open({str(planted['torch-py-ran'])!r}, 'w').close()\n"
                                  "raise ImportError('not the real torch')\n")
    path = bag / "data/reload.json"
    doc = json.loads(path.read_text())
    for entry in doc["artifacts"]:
        if entry["run"] == "control":
            entry["verify_command"] = [
                sys.executable, "-c",
                f"open({str(planted['command-ran'])!r}, 'w').close()", "{checkpoint}"]
        if entry["run"] == "variant-a":
            entry.update(path="data/runs/variant-a/evil.pt", kind="inference",
                         allow_unsafe_pickle=True)
    path.write_text(json.dumps(doc, indent=2))
    bagit.Bag(str(bag)).save(manifests=True)
    assert bagit.Bag(str(bag)).is_valid()
    return planted


def cockpit_script() -> str:
    """The installed ``cockpit`` command: unlike ``python -m``, it does not put the folder
    it is run from on the module path, as a user's shell command would not."""
    script = Path(sys.executable).parent / "cockpit"
    if not script.exists():
        pytest.skip("no installed cockpit command beside this python")
    return str(script)


def test_verify_export_runs_nothing_the_bag_asks_for(bag, tmp_path):
    planted = tamper(bag, tmp_path)
    done = subprocess.run([cockpit_script(), "verify-export", "."], cwd=bag,
                          capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert [p.name for p in planted.values() if p.exists()] == [], out
    assert done.returncode == 1, out  # the pickle does not load safely: NOT verified
    assert "NOT verified" in out
    assert "this bag asks for a custom reload command" in out
    assert "not run; rerun with --trust-commands to run it" in out
    assert "with unsafe unpickling (allow_unsafe_pickle): not honoured" in out
    assert "rerun with --trust-commands to allow it" in out
    # The control artifact was still reloaded, by the built-in worker.
    assert "model-step20.safetensors (run control)" not in out


def test_trust_commands_runs_what_the_bag_asks(bag, tmp_path):
    planted = tamper(bag, tmp_path)
    done = subprocess.run([cockpit_script(), "verify-export", ".", "--trust-commands",
                           "--json"], cwd=bag, capture_output=True, text=True, timeout=300)
    assert planted["command-ran"].exists(), done.stdout + done.stderr
    assert planted["pickle-ran"].exists(), done.stdout + done.stderr
    # The worker never imports from the folder it is checked from, trusted or not.
    assert not planted["torch-py-ran"].exists()
    assert json.loads(done.stdout)["refused"] == []


def test_python_m_from_the_bag_folder_is_safe_too(bag, tmp_path):
    planted = tamper(bag, tmp_path)
    (bag / "torch.py").unlink()  # python -m puts the bag on the cockpit's own path
    bagit.Bag(str(bag)).save(manifests=True)
    result = run_cockpit("verify-export", str(bag), "--json", cwd=tmp_path, timeout=300)
    report = json.loads(result.stdout)
    assert not planted["command-ran"].exists() and not planted["pickle-ran"].exists()
    assert len(report["refused"]) == 2 and not report["ok"]


def _edit_reload(bag: Path, run: str, **change) -> None:
    path = bag / "data/reload.json"
    doc = json.loads(path.read_text())
    for entry in doc["artifacts"]:
        if entry["run"] == run:
            entry.update(change)
    path.write_text(json.dumps(doc, indent=2))
    bagit.Bag(str(bag)).save(manifests=True)


def stand_in(path, kind, **_kw):
    from cockpit.runs.checkpoints.reload_check import VerifyReport

    return VerifyReport(True, kind, str(path), layout="stand-in")


@pytest.mark.parametrize("where", ["/etc/passwd", "../../../../../../etc/passwd",
                                   "data/../../campaign.yaml"])
def test_artifact_paths_never_leave_the_bag(bag, where):
    _edit_reload(bag, "control", path=where)
    report = verify_export(bag, reload=True, verifier=stand_in)
    failures = report.check("artifacts reload").failures
    assert any("is not a file or folder of the bag: not loaded" in f for f in failures), \
        report.render()


def test_a_symbolic_link_in_the_bag_is_not_followed(bag, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("doc-0\ndoc-1\n")
    ids = bag / "data/runs/control/expected_ids/ids.txt"
    ids.unlink()
    os.symlink(secret, ids)
    report = verify_export(bag, reload=False)
    assert not report.check("bag valid").ok  # bagit calls the link unsafe
    assert any("is not a file of the bag: not read" in f
               for f in report.check("expected ids").failures), report.render()


def test_the_export_runs_the_campaign_files_own_command(tmp_path):
    """The campaign file is the person's own: the export's check runs its verify_command;
    verify-export of the same bag later does not (it reads the command from the bag)."""
    from cockpit.campaign import load_campaign
    from cockpit.journal.fold import fold
    from cockpit.journal.log import Journal
    from tests.e2e.test_export_sample import drive_journal, write_sample

    path = write_sample(tmp_path / "c")
    marker = tmp_path / "c" / "command-ran"  # in the campaign: no path into /tmp exported
    doc = json.loads(path.read_text())
    doc["runs"]["control"]["verify_command"] = [
        sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x')", "{checkpoint}"]
    path.write_text(json.dumps(doc))
    campaign = load_campaign(path)
    journal = drive_journal(campaign)
    for run in ("control", "variant-a"):
        journal.append("result_accepted", now=NOW, run=run, reason="checks passed", result=run)
    state = fold(campaign, Journal(campaign.state_dir / "journal.jsonl").events(), NOW)
    result = export_campaign(campaign, state, now=NOW, tar=False, verifier=stand_in)
    assert result.verified and marker.read_text() == "x", result.verify.render()
    assert result.verify.refused == []
    report = verify_export(result.bag_dir, verifier=stand_in)
    assert marker.read_text() == "x" and report.ok  # reported, not run: still verified
    assert any("asks for a custom reload command" in r for r in report.refused)


def test_no_check_reads_through_a_planted_link(bag, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("weights at /tmp/tmpq8x1z2ab/model.bin\n")
    (bag / "data/runs/control/outputs/notes.txt").symlink_to(outside)
    report = verify_export(bag, reload=False)
    assert not report.check("bag valid").ok
    assert report.check("no temporary paths").ok, report.render()  # never read
