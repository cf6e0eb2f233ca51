"""What a rebuild needs: the campaign's code, its git state, and the environment."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cockpit.campaign import load_campaign
from cockpit.runs.provenance import (
    code_files,
    describe,
    environment,
    environment_changes,
    freeze_txt,
    git_state,
)
from tests.helpers.process import SAMPLES


def test_the_demo_code_is_its_scripts_and_the_modules_they_import(tmp_path: Path) -> None:
    folder = tmp_path / "digits"
    shutil.copytree(SAMPLES / "digits", folder)
    (folder / "unused.py").write_text("print('not run by any stage')\n")
    campaign = load_campaign(folder / "campaign.yaml")
    files = [str(p) for p in code_files(campaign)]
    assert files == ["common.py", "data_check.py", "error_analysis.py", "train.py"]
    listed = describe(code_files(campaign), folder)
    assert all(len(entry["sha256"]) == 64 and entry["bytes"] > 0 for entry in listed)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_state_gives_the_commit_and_a_patch_that_applies(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLES / "digits", repo)

    def git(*args: str, cwd: Path = repo) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              cwd=cwd, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "campaign")
    git("remote", "add", "origin", "https://example.org/team/digits.git")
    train = repo / "train.py"
    train.write_text(train.read_text().replace("--lr", "--learning-rate", 1))
    state = git_state(repo)
    assert state is not None and state["commit"] == git("rev-parse", "HEAD").strip()
    assert state["remote"] == "https://example.org/team/digits.git" and state["dirty"]
    clone = tmp_path / "clone"
    git("clone", "-q", str(repo), str(clone), cwd=tmp_path)
    (tmp_path / "change.patch").write_text(state["patch"])
    git("apply", str(tmp_path / "change.patch"), cwd=clone)
    assert (clone / "train.py").read_text() == train.read_text()
    assert git_state(tmp_path / "nowhere-git") is None


@pytest.mark.slow  # imports torch in a fresh interpreter
def test_the_environment_names_torch_exactly_and_diffs_in_words() -> None:
    torch = pytest.importorskip("torch")
    env = environment(with_nvml=False)
    assert env["torch"]["version"] == torch.__version__
    record = freeze_txt(env)  # the full record keeps the local build label
    assert f"torch=={torch.__version__}\n" in record
    later = dict(env, distributions=dict(env["distributions"], torch="9.9.9"))
    assert environment_changes(env, env) == []
    assert environment_changes(env, later) == [f"torch {env['distributions']['torch']} -> 9.9.9"]
