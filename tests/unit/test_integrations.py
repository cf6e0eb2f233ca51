"""The in-process integrations carry nothing heavy (issue 42): importing them imports no
framework, a callback constructed where its framework is missing says how to install
it; what they share (numbers from tensors, canonical names beside the framework's own,
throttled progress) works without any framework; and ``cockpit check`` warns, located,
when a ``non_finite`` rule watches the Hugging Face Trainer's own (filtered) loss from a
script that does not add the integration. The real frameworks' runs are in
tests/e2e/test_integration_hf.py and tests/e2e/test_integration_lightning.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cockpit.integrations.reporting import Reporter, number
from tests.helpers.campaigns import FIXED_START, write_campaign
from tests.helpers.process import ROOT, run_cockpit

FRAMEWORKS = ("torch", "transformers", "lightning", "pytorch_lightning")
IMPORT_ONLY = f"""
import sys
import cockpit.integrations, cockpit.integrations.hf, cockpit.integrations.lightning
print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))
"""
CONSTRUCT = """
import sys
from cockpit.integrations import hf, lightning
for module in (hf, lightning):
    try:
        module.CockpitCallback()
    except ImportError as exc:
        print("ImportError:", exc)
"""


def _python(code: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_importing_the_integrations_imports_no_framework() -> None:
    assert _python(IMPORT_ONLY).strip() == "[]"


def test_a_callback_without_its_framework_says_how_to_install_it(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    for name in ("transformers", "lightning", "pytorch_lightning"):
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(
            f"raise ImportError('No module named {name} (shadowed by the test)')\n")
    out = _python(CONSTRUCT, {"PYTHONPATH": str(shadow)})
    assert ("ImportError: cockpit.integrations.hf.CockpitCallback needs the transformers "
            "package, not importable here: python3 -m pip install transformers") in out
    assert ("ImportError: cockpit.integrations.lightning.CockpitCallback needs PyTorch "
            "Lightning, not importable here: python3 -m pip install lightning (or "
            "pytorch-lightning)") in out


class Tensorish:
    """What a framework logs: a 0-d tensor (``.item()``), or a multi-element one."""

    def __init__(self, value: object) -> None:
        self.value = value

    def item(self) -> object:
        if isinstance(self.value, list):
            raise RuntimeError("a Tensor with 2 elements cannot be converted to Scalar")
        return self.value


def test_the_reporter_writes_own_and_canonical_names(tmp_path: Path) -> None:
    from cockpit import report

    report.open_report(tmp_path / "r.jsonl")
    try:
        reporter = Reporter(progress_every_s=5.0, clock=lambda: clock[0])
        clock = [100.0]
        reporter.progress(0, 10)
        wrote = reporter.metrics(2, {"train_loss": Tensorish(0.5), "val_loss": 0.7,
                                     "flag": True, "text": "x", "vec": Tensorish([1, 2])})
        assert wrote == {"train_loss": 0.5, "val_loss": 0.7, "loss": 0.5, "eval_loss": 0.7,
                         "max_steps": 10.0}
        assert reporter.progress_due() and not reporter.progress_due()
        clock[0] += 5.0
        assert reporter.progress_due()
        reporter.writes = False  # another rank of a distributed run: writes nothing
        reporter.metrics(3, {"train_loss": 0.4})
    finally:
        report.open_report(None)
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [(line["step"], line.get("loss")) for line in lines] == [(0, None), (2, 0.5)]
    assert number(Tensorish(3)) == 3.0 and number(True) is None and number("1") is None


TRAIN_HF = "from transformers import Trainer\ntrainer = Trainer()\n"


def _trainer_campaign(tmp_path: Path, script: str) -> Path:
    (tmp_path / "train.py").write_text(script)
    return write_campaign(tmp_path, [
        {"id": "train", "run": "r1", "duration": "10m", "resource": "cpu",
         "command": ["python3", "train.py"]}],
        runs={"r1": {"metrics": ["out/trainer_state.json"]}},
        rules=[{"id": "finite-loss", "kind": "non_finite", "metric": "loss"}],
        start=FIXED_START)


def test_check_warns_when_a_nan_rule_reads_the_trainers_filtered_loss(tmp_path: Path) -> None:
    path = _trainer_campaign(tmp_path, TRAIN_HF)
    done = run_cockpit("check", str(path))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    text = path.read_text().splitlines()
    line = next(i for i, t in enumerate(text, 1) if '"metrics"' in t)
    (warning,) = [w for w in done.stderr.splitlines() if "logging_nan_inf_filter" in w]
    assert warning.startswith(f"{path}:{line}:"), warning
    assert ("warning: run r1: stop rule finite-loss watches the loss from the Hugging Face "
            "Trainer's out/trainer_state.json, and its script train.py does not add the "
            "cockpit's integration") in warning
    assert "trainer.add_callback(CockpitCallback()) from cockpit.integrations.hf" in warning
    # the script adds the integration: nothing to warn about
    path = _trainer_campaign(tmp_path, TRAIN_HF + "from cockpit.integrations.hf import "
                             "CockpitCallback\ntrainer.add_callback(CockpitCallback())\n")
    done = run_cockpit("check", str(path))
    assert done.returncode == 0 and "logging_nan_inf_filter" not in done.stderr, done.stderr
