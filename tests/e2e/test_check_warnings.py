"""``check`` warns (exit 0) on a question nothing can answer (D1) and on a paid package
with nothing to run (D12); the shipped samples and the ``init`` template stay silent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.process import run_cockpit

SAMPLES = Path(__file__).resolve().parents[2] / "sample_campaigns"
HEAD = ("campaign: w\nquestion: QUESTION\n"
        "package: {offer: rtx4090-3d, start: 2026-12-02T08:00:00Z, count: COUNT}\n"
        "stop_rules:\n  - {id: finite-loss, kind: non_finite, metric: loss}\n")


def _check(tmp_path: Path, stages: str, count: int = 1, question: str = "Train a model",
           extra: str = "") -> tuple[int, list[str]]:
    path = tmp_path / "campaign.yaml"
    path.write_text(HEAD.replace("QUESTION", question).replace("COUNT", str(count))
                    + "stages:\n" + stages + extra)
    done = run_cockpit("check", str(path))
    assert done.stdout.strip() == "ok", done.stdout + done.stderr
    prefix = f"{path}: warning: "
    return done.returncode, [line[len(prefix):] for line in done.stderr.splitlines()
                             if line.startswith(prefix)]


ONE = "  - {id: control, duration: 1h, resource: gpu, run: control}\n"


def test_a_question_with_no_conclusion_is_warned(tmp_path: Path) -> None:
    code, warnings = _check(tmp_path, ONE)
    assert code == 0
    assert ("the question 'Train a model' has no conclusion: section, so nothing can answer "
            "it (D1: name what closes it: conclusion: {metric, baseline, margin} or "
            "{metric, rule: reach_threshold, threshold})") in warnings
    _, answered = _check(tmp_path, ONE + "  - {id: variant-a, duration: 1h, resource: gpu,"
                         " run: variant-a, after: [control]}\n",
                         extra="conclusion: {metric: val/accuracy, baseline: control, "
                               "margin: 0.01}\n")
    assert not any("no conclusion" in w for w in answered)


def test_a_second_package_with_nothing_to_run_is_warned(tmp_path: Path) -> None:
    code, warnings = _check(tmp_path, ONE, count=2)
    assert code == 0
    assert ("package.count is 2 but no stage is placed on machine 2 (stages[].machine: 2): "
            "that package would be paid for and stand idle (D12: a second package runs "
            "independent variants side by side)") in warnings
    _, used = _check(tmp_path, ONE + "  - {id: variant-a, duration: 1h, resource: gpu,"
                     " run: variant-a, machine: 2}\n", count=2)
    assert not any("stand idle" in w for w in used)


@pytest.mark.parametrize("sample", ["illustrative.yaml", "quick/campaign.yaml",
                                    "digits/campaign.yaml"])
def test_the_samples_raise_neither_warning(sample: str) -> None:
    done = run_cockpit("check", str(SAMPLES / sample))
    assert done.returncode == 0, done.stderr
    assert "no conclusion" not in done.stderr and "stand idle" not in done.stderr


def test_the_init_template_checks_without_warnings(tmp_path: Path) -> None:
    assert run_cockpit("init", str(tmp_path / "x")).returncode == 0
    done = run_cockpit("check", str(tmp_path / "x" / "campaign.yaml"))
    assert done.returncode == 0 and done.stdout.strip() == "ok"
    assert "warning" not in done.stderr, done.stderr
