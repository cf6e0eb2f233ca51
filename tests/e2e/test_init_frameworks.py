"""`cockpit init DIR --framework hf|lightning` (issue 42): a complete campaign per
framework, through the real CLI, trained by the real `transformers` Trainer (a tiny
GPT-2 from a config) and the real PyTorch Lightning on CPU, nothing downloaded.

Each template passes `cockpit check` with no warning, and runs as written: headless to
the pilot's decision (exit 3), the decision, headless to the close (exit 0): the
resume check exact, the control accepted on the canonical `eval_loss`, the error
analysis written, and an export the export stage verified with each checkpoint
reloaded. A bad `--framework` is one located line, exit 2.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

import pytest

from cockpit.common.event_kinds import (
    EXPORT_DONE,
    RESULT_ACCEPTED,
    RESULT_REJECTED,
    RESUME_VERIFIED,
    RULE_FIRED,
)
from tests.helpers.process import ROOT, run_cockpit

# framework -> the template's step counts and the shorter ones the test trains: the
# stages, checkpoints, resume check, verdicts and export are the flow under test, not the
# last points of loss (the pilot keeps the checkpoints its resume check starts from).
SHORTER = {
    "hf": {'"--steps", "300"': '"--steps", "200"'},  # control and variants: 300 -> 200
    "lightning": {'"--epochs", "8"': '"--epochs", "2"', '"--epochs", "3"': '"--epochs", "2"'},
}
COMMON = {"README.md", "campaign.yaml", "train.py", "model.py", "corpus.py",
          "data_check.py", "error_analysis.py"}
# framework -> (the packages it can train with, the one line in train.py, the control's
# newest checkpoint, the error analysis's own file beside errors.md)
FRAMEWORKS = {
    "hf": (("transformers",), "trainer.add_callback(CockpitCallback())",
           "ckpt/control/checkpoint-200", "per_token.csv"),
    "lightning": (("lightning", "pytorch_lightning"), "CockpitCallback(),",
                  "ckpt/control/epoch=1-step=126.ckpt", "confusion.csv"),
}


def events(folder: Path) -> list[dict]:
    text = (folder / ".cockpit" / "journal.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def shorten_training(campaign: Path, framework: str) -> None:
    """The template as written, trained for fewer steps (each count is checked there)."""
    text = campaign.read_text()
    for old, new in SHORTER[framework].items():
        assert old in text, f"the template's step counts changed: update SHORTER ({old})"
        text = text.replace(old, new)
    campaign.write_text(text)


def test_the_wheel_carries_every_template_file() -> None:
    """Each file of each template folder matches a package-data glob (a ``*`` within one
    folder, as setuptools reads it): an installed cockpit can write every framework's."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the project's oldest Python
        tomllib = pytest.importorskip("tomli")
    assets = ROOT / "cockpit" / "assets"
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["cockpit.assets"]
    files = [PurePosixPath(p.relative_to(assets).as_posix())
             for p in (assets / "templates").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts]
    assert {f.parts[1] for f in files} >= {"init", "init_hf", "init_lightning"}

    def carried(path: PurePosixPath) -> bool:
        return any(len(g.split("/")) == len(path.parts)
                   and all(map(fnmatchcase, path.parts, g.split("/"))) for g in globs)

    assert [str(f) for f in files if not carried(f)] == []


def test_a_bad_framework_is_one_located_line_and_exit_2(tmp_path: Path) -> None:
    folder = tmp_path / "camp"
    result = run_cockpit("init", str(folder), "--framework", "tensorflow")
    assert result.returncode == 2
    assert "--framework 'tensorflow'" in result.stderr
    assert "hf, lightning, plain" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert not folder.exists()


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_framework_template_runs_to_a_verified_export(tmp_path: Path,
                                                          framework: str) -> None:
    packages, one_line, checkpoint, analysis = FRAMEWORKS[framework]
    if not any(importlib.util.find_spec(name) for name in packages):
        pytest.skip(f"the {framework} template trains with {' or '.join(packages)} "
                    "(the test extra)")
    folder = tmp_path / "camp"
    made = run_cockpit("init", str(folder), "--framework", framework)
    assert made.returncode == 0, made.stderr
    assert {p.name for p in folder.iterdir()} == COMMON
    assert one_line in (folder / "train.py").read_text()
    file = str(folder / "campaign.yaml")
    check = run_cockpit("check", file)
    assert (check.returncode, check.stdout.strip(), check.stderr) == (0, "ok", ""), \
        check.stdout + check.stderr
    shorten_training(folder / "campaign.yaml", framework)
    headless = ("headless", file, "--auto", "--until-done", "--interval", "0.2")

    first = run_cockpit(*headless, timeout=300)
    assert first.returncode == 3, first.stdout[-3000:] + first.stderr[-3000:]
    assert "waiting for a decision at pilot" in first.stdout
    decide = run_cockpit("decide", file, "continue", "--stage", "pilot",
                         "--note", "the pilot learns; go on with the plan")
    assert decide.returncode == 0, decide.stderr
    second = run_cockpit(*headless, timeout=300)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "eval_loss" in second.stdout.splitlines()[-1]  # the conclusion's canonical name

    journal = events(folder)
    resume = [e for e in journal if e["kind"] == RESUME_VERIFIED]
    assert resume and resume[-1]["run"] == "pilot" and resume[-1]["ok"] is True, resume
    verdicts = {e["run"]: (e["kind"], e.get("reason")) for e in journal
                if e["kind"] in (RESULT_ACCEPTED, RESULT_REJECTED)}
    assert verdicts.get("control", ("",))[0] == RESULT_ACCEPTED, verdicts
    assert not [e for e in journal if e["kind"] == RULE_FIRED]
    assert (folder / checkpoint).exists(), sorted(p.name for p in folder.glob("ckpt/control/*"))
    for name in ("predictions.csv", analysis, "errors.md"):
        assert (folder / "out" / "control" / name).stat().st_size > 0, name
    done = [e for e in journal if e["kind"] == EXPORT_DONE]
    assert done and done[-1]["verified"] is True and done[-1]["reload_checked"], done
    assert "control" in done[-1]["facts"]["accepted"]
