"""An export that went stale says so, and "closed" means the question is answered
(issue 41), with real processes: a campaign whose stages a person starts, exported while
its variant was rejected (the question open: never "closed"); the variant rerun and
accepted; `status --json`, `status --line`, `status` and the status log say the export
is stale, `--until-done` without --auto exits 6; then `headless --auto --until-done`
runs the export stage again and exits 0 only after the second export."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cockpit.journal.log import Journal
from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import run_cockpit

# The step script's val/accuracy ends at 1.0 after 3 steps: min 0.6 passes, and the
# question asks whether the variant reaches 0.9 (it does, once it is judged).
PASSES = {"metric": "val/accuracy", "min": 0.6}


def _campaign(folder: Path) -> Path:
    def stage(sid: str, **extra: object) -> dict:
        return {"id": sid, "duration": "5m", "resource": "cpu", **extra}

    return write_campaign(folder, stages=[
        stage("control", run="control", command=step_command(3, 0.01)),
        stage("variant", run="variant", after=["control"], command=step_command(3, 0.01)),
        stage("export", role="export", after=["control", "variant"],
              command=[sys.executable, "-m", "cockpit", "export", "campaign.yaml"])],
        runs={"control": {"acceptance": [PASSES]},
              # The predictions are missing on the first run: rejected, but not on the
              # question's metric (D2): the question stays open.
              "variant": {"acceptance": [PASSES, {"predictions": "non_empty"}],
                          "predictions": "preds.jsonl"}},
        rules=[FINITE],
        extra={"conclusion": {"metric": "val/accuracy", "rule": "reach_threshold",
                              "threshold": 0.9, "variants": ["variant"]}})


def _headless(path: Path, *auto: str) -> tuple[int, str]:
    done = run_cockpit("headless", str(path), *auto, "--until-done", "--interval", "0.1",
                       timeout=240)
    return done.returncode, done.stdout + done.stderr


def _exports(path: Path) -> list[dict]:
    events = Journal(path.parent / ".cockpit" / "journal.jsonl").events()
    return [dict(e) for e in events if e["kind"] == "export_done"]


def _last_status_log(path: Path) -> dict:
    lines = (path.parent / ".cockpit" / "status.jsonl").read_text().splitlines()
    return json.loads(lines[-1])


def _start_and_conduct(path: Path, stage: str, *force: str) -> tuple[int, str]:
    """A person starts a stage; a conductor without --auto records its end and verdict
    (no --auto conductor before it either: a takeover would carry --auto on)."""
    started = run_cockpit("start", str(path), stage, *force)
    assert started.returncode == 0, started.stderr
    return _headless(path)


def test_a_stale_export_says_so_everywhere_and_auto_exports_again(tmp_path: Path) -> None:
    path = _campaign(tmp_path)
    assert _start_and_conduct(path, "control")[0] == 3  # the variant waits for a person
    assert _start_and_conduct(path, "variant")[0] == 3  # the export waits for a person
    code, out = _start_and_conduct(path, "export")
    # Exported while the variant was rejected for its predictions: the question open.
    assert code == 4, out
    (first,) = _exports(path)
    assert first["verified"] and first["facts"]["answered"] is False
    line = run_cockpit("status", str(path), "--line").stdout
    assert line.startswith("exported, question open: variant: rejected"), line
    assert "closed" not in line  # an open question never reads "closed"
    assert _last_status_log(path)["closed"] is None

    # The variant rerun with its predictions, and accepted by a conductor without --auto.
    (tmp_path / "preds.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n')
    code, out = _start_and_conduct(path, "variant", "--force")
    assert code == 6, out  # never 0 on a stale export
    assert "the export is stale (predates 1 verdict (variant); the question is answered " \
           "now): cockpit export campaign.yaml" in out
    assert len(_exports(path)) == 1  # nobody exported again
    assert "NEEDS A PERSON: export STALE: predates 1 verdict (variant)" in out
    why = "predates 1 verdict (variant); the question is answered now"
    logged = _last_status_log(path)
    assert logged["closed"] is None and logged["export"]["stale"] is True
    assert logged["export"]["why"] == why
    status = json.loads(run_cockpit("status", str(path), "--json").stdout)
    assert status["export"]["stale"] is True and status["export"]["why"] == why
    assert status["export"]["closed"] is False
    line = run_cockpit("status", str(path), "--line").stdout
    assert line.startswith(f"export STALE: {why} — cockpit export campaign.yaml"), line
    assert "closed" not in line
    text = run_cockpit("status", str(path)).stdout
    assert f"export STALE: {why} — cockpit export campaign.yaml" in text
    export_stage = next(s for s in text.splitlines() if s.startswith("✓ export "))
    assert f"(export STALE: {why})" in export_stage

    # --auto runs the export stage again, and exits 0 only once that export is written.
    code, out = _headless(path, "--auto")
    assert code == 0, out
    exports = _exports(path)
    assert len(exports) == 2 and exports[1]["facts"]["answered"] is True
    lines = out.splitlines()
    written = next(i for i, s in enumerate(lines) if "export written and verified" in s)
    done = next(i for i, s in enumerate(lines) if "until-done:" in s)
    assert written < done and lines[done].endswith("(exit 0)"), out
    line = run_cockpit("status", str(path), "--line").stdout
    assert line.startswith("closed — fetch by "), line
    status = json.loads(run_cockpit("status", str(path), "--json").stdout)
    assert status["export"] == {**status["export"], "stale": False, "closed": True,
                                "question_open": None, "words": "closed"}
