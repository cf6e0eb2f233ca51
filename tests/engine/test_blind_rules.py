"""Unknown is not ok (issue 22): a rule whose metric the run never reported is *blind*,
never ✓. A misspelled metric, a metrics folder that does not exist and a reader whose
extra is not installed each leave the rule blind on every face (status text and JSON,
``--line``, the headless lines, REPORT.md, the TUI's rules panel), journaled once; a
run that ended blind to a stop rule, or whose last loss is NaN, is accepted only with
``--override --note``; ``check`` fails on the missing extra and warns on a folder the
command does not name. Real processes and files."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cockpit.runs.blind import SourceStatus, blind_reason
from tests.helpers.campaigns import FIXED_START, write_campaign
from tests.helpers.process import run_cockpit

# A run that writes its own JSON lines (no cockpit.report): `--metrics PATH STEPS NAN_AT`.
WRITER = textwrap.dedent("""
    import json, os, sys
    assert sys.argv[1] == "--metrics"
    path, steps, nan_at = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as out:
        for step in range(1, steps + 1):
            loss = float("nan") if nan_at and step >= nan_at else 1.0 / step
            out.write(json.dumps({"step": step, "train/loss": loss, "val/bpc": 2.0 / step})
                      + "\\n")
""")

# `tensorboard` shadowed: its import fails as when the extra is not installed.
SHADOW = "raise ImportError('No module named tensorboard (shadowed by the test)')\n"


def _campaign(folder: Path, *, metric: str = "train/loss", declared: str = "logs/r1.jsonl",
              nan_at: int = 0, acceptance: list[dict[str, Any]] | None = None,
              start: str | None = None) -> Path:
    run: dict[str, Any] = {"metrics": declared}
    if acceptance:
        run["acceptance"] = acceptance
    path = write_campaign(folder, [
        {"id": "train", "run": "r1", "duration": "10m", "resource": "cpu",
         "command": [sys.executable, "writer.py", "--metrics", "logs/r1.jsonl", "5",
                     str(nan_at)]},
    ], runs={"r1": run}, rules=[{"id": "loss-cap", "kind": "threshold", "metric": metric,
                                 "max": 100, "action": "stop"}], start=start)
    (folder / "writer.py").write_text(WRITER)
    return path


def _shadow_env(folder: Path) -> dict[str, str]:
    shadow = folder / "shadow"
    (shadow / "tensorboard").mkdir(parents=True)
    (shadow / "tensorboard" / "__init__.py").write_text(SHADOW)
    return {"PYTHONPATH": os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])}


def _tensorboard_folder(folder: Path) -> None:
    """Real event files (written here, where the extra is installed) in ``tb/r1``."""
    pytest.importorskip("tensorboard")
    tb = pytest.importorskip("torch.utils.tensorboard")
    w = tb.SummaryWriter(log_dir=str(folder / "tb" / "r1"))
    w.add_scalar("train/loss", 0.5, 1)
    w.close()


def _journal(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / ".cockpit" / "journal.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


CASES = {
    # rule on train/los; the run writes train/loss and val/bpc
    "misspelled": dict(metric="train/los"),
    # the campaign watches out/r1, the run writes logs/r1.jsonl
    "missing-folder": dict(declared="out/r1"),
    # event files in tb/r1, read without the tensorboard package
    "missing-extra": dict(declared="tb/r1"),
}
EXPECTED = {
    "misspelled": "train/los never seen — the run reports train/loss, val/bpc "
                  "(did you mean loss, reported as train/loss?)",
    "missing-folder": "does not exist; the run reports no metrics",
    "missing-extra": "needs the tensorboard package, not installed: "
                     "python3 -m pip install 'cockpit[tensorboard]'",
}


@pytest.mark.slow  # an export per case (~10 s each)
@pytest.mark.parametrize("case", list(CASES))
def test_a_rule_that_never_saw_its_metric_is_blind_on_every_face(tmp_path: Path,
                                                                  case: str) -> None:
    env: dict[str, str] = {}
    if case == "missing-extra":
        _tensorboard_folder(tmp_path)
        env = _shadow_env(tmp_path)
    path = _campaign(tmp_path, **CASES[case])  # type: ignore[arg-type]
    prom = tmp_path / "cockpit.prom"
    done = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       "--prom", str(prom), env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    want = EXPECTED[case]
    assert ('cockpit_rule_state{campaign="test-campaign",machine="1",rule="loss-cap",'
            'run="r1",state="blind"} 1.0') in prom.read_text()
    # headless: the journaled line, at the end of the run
    assert "rule loss-cap is blind on run r1 (the run ended blind): " in done.stdout
    assert want in done.stdout, done.stdout
    # journaled once, although every later tick sees the same blind rule
    again = run_cockpit("headless", str(path), "--until-done", "--interval", "0.1", env=env)
    assert again.returncode == 0, again.stderr
    blind = [e for e in _journal(tmp_path) if e["kind"] == "rule_blind"]
    assert len(blind) == 1 and blind[0]["rule"] == "loss-cap" and blind[0]["ended"] is True
    # status: never counted as ok
    status = run_cockpit("status", str(path), env=env).stdout
    # loss-cap blind; the default stalled rule watched r1 to its end and held: 1 ok
    assert "rules: 1 ok, 0 fired, 1 ◌ blind" in status, status
    assert "loss-cap on r1: ◌ blind: " in status and want in status
    (rule,) = [r for r in json.loads(run_cockpit("status", str(path), "--json", env=env
                                                   ).stdout)["rules"] if r["rule"] == "loss-cap"]
    assert rule["state"] == "blind" and want in rule["reason"]
    # --line, from the headless status log's last line
    line = run_cockpit("status", str(path), "--line", env=env).stdout
    assert "◌ 1 blind" in line and "rules ok" not in line, line
    # REPORT.md
    exported = run_cockpit("export", str(path), env=env, timeout=120)
    assert exported.returncode == 0, exported.stderr
    (report,) = (tmp_path / ".cockpit" / "export").glob("*/*/data/REPORT.md")
    text = report.read_text()
    assert "## Rules blind to their metric" in text
    assert "- ◌ blind: run `r1`, rule `loss-cap`: " in text and want in text


def test_the_tui_rules_panel_shows_blind(tmp_path: Path) -> None:
    pytest.importorskip("textual")
    from cockpit.campaign import load_campaign
    from cockpit.engine import Engine
    from cockpit.tui.app import CockpitApp

    path = _campaign(tmp_path, metric="train/los")
    assert run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       timeout=120).returncode == 0

    from tests.helpers.process import pilot_until

    def rules_lines(app: CockpitApp) -> list[str]:
        return str(app.query_one("#rules-panel").render()).splitlines()

    async def panel() -> list[str]:
        app = CockpitApp(Engine(load_campaign(path), auto=False), interval=0.1)
        async with app.run_test(size=(120, 40)) as pilot:
            lines: list[str] = await pilot_until(
                pilot, lambda: any("blind" in line for line in rules_lines(app))
                and rules_lines(app), what="a blind rule in the rules panel")
            return lines

    lines = asyncio.run(panel())
    assert lines[0].startswith("◌ loss-cap"), lines
    assert lines[1].strip().startswith("◌ blind r1: train/los never seen"), lines
    assert not any("✓" in line for line in lines[:2]), lines  # the blind rule's own lines


def test_accept_of_a_run_that_ended_blind_needs_override_and_note(tmp_path: Path) -> None:
    path = _campaign(tmp_path, metric="train/los")
    assert run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       timeout=120).returncode == 0
    refused = run_cockpit("accept", str(path), "r1")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "ended blind to stop rule loss-cap: train/los never seen" in refused.stderr
    assert "--override --note" in refused.stderr
    no_note = run_cockpit("accept", str(path), "r1", "--override")
    assert no_note.returncode == 2 and "needs a --note" in no_note.stderr
    done = run_cockpit("accept", str(path), "r1", "--override", "--note", "rule typo, "
                       "loss checked by hand")
    assert done.returncode == 0, done.stderr
    (ev,) = [e for e in _journal(tmp_path) if e["kind"] == "result_accepted"]
    assert ev["override"] is True and "loss-cap" in ev["checks"][0]


def test_accept_of_a_nan_last_loss_is_refused(tmp_path: Path) -> None:
    # No rule watches the loss (the rule watches val/bpc, seen): only the NaN refuses.
    path = _campaign(tmp_path, metric="val/bpc", nan_at=4)
    assert run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       timeout=120).returncode == 0
    refused = run_cockpit("accept", str(path), "r1")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    # steps 4 and 5 wrote NaN: the last train/loss is nan
    assert "its last train/loss is nan (non-finite)" in refused.stderr
    assert "blind" not in refused.stderr
    assert run_cockpit("accept", str(path), "r1", "--override", "--note", "diverged at the "
                       "end; the step-3 checkpoint is the result").returncode == 0


def test_auto_verdict_rejects_a_run_blind_to_a_stop_rule(tmp_path: Path) -> None:
    path = _campaign(tmp_path, metric="train/los",
                     acceptance=[{"metric": "val/bpc", "max": 1.0},
                                 {"metric": "val/bpx", "max": 1.0}])
    assert run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       timeout=120).returncode == 0
    verdicts = [e for e in _journal(tmp_path) if e["kind"].startswith("result_")]
    # val/bpc = 2/5 = 0.4 <= 1.0 passes; the blind stop rule alone rejects it
    assert [e["kind"] for e in verdicts] == ["result_rejected"]
    assert "val/bpc 0.4 <= 1" in verdicts[0]["reason"]
    assert "ended blind to stop rule loss-cap" in verdicts[0]["reason"]
    # an acceptance check on a metric never seen is blind too, with the names it has
    assert "blind: val/bpx never seen — the run reports train/loss, val/bpc (did you mean " \
           "val/bpc?)" in verdicts[0]["reason"]


def test_check_fails_on_a_missing_extra_with_the_install_command(tmp_path: Path) -> None:
    path = _campaign(tmp_path, declared="tb/r1")
    env = _shadow_env(tmp_path)
    failed = run_cockpit("check", str(path), env=env)
    assert failed.returncode == 2, failed.stdout + failed.stderr
    # located at the run's metrics key; says what to do
    assert f"{path}:" in failed.stderr and "run r1: metrics tb/r1" in failed.stderr
    assert "python3 -m pip install 'cockpit[tensorboard]'" in failed.stderr
    assert "Traceback" not in failed.stderr
    pytest.importorskip("tensorboard.backend.event_processing.event_file_loader")
    assert run_cockpit("check", str(path)).returncode == 0  # with the extra: fine


def test_check_warns_on_a_metrics_folder_the_command_does_not_name(tmp_path: Path) -> None:
    path = _campaign(tmp_path, declared="out/r1")
    checked = run_cockpit("check", str(path))
    assert checked.returncode == 0, checked.stderr
    assert "warning: stage train: its command writes --metrics logs/r1.jsonl, but run r1 " \
           "declares metrics out/r1" in checked.stderr
    line = next(ln for ln in checked.stderr.splitlines() if "--metrics" in ln)
    assert line.startswith(f"{path}:")  # located
    same = _campaign(tmp_path / "same")  # declares logs/r1.jsonl, as its command writes
    assert "warning: stage" not in run_cockpit("check", str(same)).stderr


def test_blind_words_and_edges() -> None:
    reported = {"train/loss", "val/bpc", "max_steps"}
    assert blind_reason("train/loss", "running", reported) is None  # seen
    assert blind_reason("train/los", "not_started", set()) is None  # pending, not blind
    assert blind_reason(None, "running", set()) is None  # restart rules watch no metric
    assert blind_reason("x", "running", set(), SourceStatus(behind=True)) is None
    # max_steps is the cockpit's progress, not a metric to propose
    assert blind_reason("lr", "succeeded", reported) == \
        "lr never seen — the run reports train/loss, val/bpc"
    assert blind_reason("loss", "running", set(), SourceStatus(missing=("out/m.jsonl",))) == \
        "loss never seen — its metrics source out/m.jsonl does not exist; " \
        "the run reports no metrics"


def test_a_running_run_is_blind_at_once_and_journaled_once_after_the_grace(
        tmp_path: Path) -> None:
    from cockpit.campaign import load_campaign
    from cockpit.engine import Engine
    from cockpit.engine.guards import BLIND_GRACE_S
    from tests.engine.test_engine_guards import FakeClock, FakeSupervisor

    path = _campaign(tmp_path, metric="train/los", start=FIXED_START)  # the FakeClock's
    data = yaml_safe(path)
    data["stop_rules"].append({"id": "seen", "kind": "non_finite", "metric": "train/loss"})
    data["conclusion"] = {"metric": "val/bpx", "baseline": "r1"}
    path.write_text(json.dumps(data))
    clock = FakeClock()
    engine = Engine(load_campaign(path), clock=clock, supervisor=FakeSupervisor())
    before = {r.rule: r.state for r in engine.tick().rules if not r.implicit}
    assert before == {"loss-cap": "waiting", "seen": "waiting"}  # not started: not blind
    engine.start("train")
    metrics = tmp_path / "logs" / "r1.jsonl"
    metrics.parent.mkdir()
    metrics.write_text('{"step": 1, "train/loss": 0.5}\n')
    snap = engine.tick()
    assert {r.rule: r.state for r in snap.rules if not r.implicit} == {"loss-cap": "blind",
                                                                         "seen": "ok"}
    assert [r.reason for r in snap.rules if r.rule == "loss-cap"] == [
        "train/los never seen — the run reports train/loss (did you mean loss, reported "
        "as train/loss?)"]

    def blind_events() -> list[dict[str, Any]]:
        return [e for e in _journal(tmp_path) if e["kind"] == "rule_blind"]

    # the conclusion's metric is blind on the run it compares: said, not "reported no ..."
    assert snap.conclusion is not None and snap.conclusion.endswith(
        "(blind: r1: val/bpx never seen — the run reports train/loss)"), snap.conclusion

    clock.advance(BLIND_GRACE_S - 1)
    engine.tick()
    assert blind_events() == []  # within the grace: its first reports may still come
    clock.advance(2)
    for _ in range(3):
        engine.tick()
        clock.advance(5)
    (event,) = blind_events()
    assert event["rule"] == "loss-cap" and event["ended"] is False
    assert event["attempt"] == engine.state().runs["r1"].attempt


def yaml_safe(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())  # write_campaign writes JSON
    return data


def test_a_rule_for_every_run_is_blind_only_where_it_can_tell() -> None:
    data_check = {"data/rows", "data/truncated"}
    # a loss rule for every run says nothing about the data check: it reports other metrics
    assert blind_reason("loss", "succeeded", data_check, strict=False) is None
    # ... unless a name it reports is close (a misspelling), or it reports nothing at all
    assert blind_reason("data/truncate", "succeeded", data_check, strict=False) == \
        "data/truncate never seen — the run reports data/rows, data/truncated " \
        "(did you mean data/truncated?)"
    assert blind_reason("loss", "running", set(), strict=False) == \
        "loss never seen — the run reports no metrics"
    assert blind_reason("loss", "running", data_check, SourceStatus(unreadable=("no extra",)),
                        strict=False) == \
        "loss never seen — no extra; the run reports data/rows, data/truncated"
    # a rule that names the run (runs: [...]) is blind there whatever the run reports
    assert blind_reason("loss", "succeeded", data_check) == \
        "loss never seen — the run reports data/rows, data/truncated"


def test_command_folders_reads_both_spellings_and_skips_what_is_not_a_path() -> None:
    from cockpit.runs.source_check import command_folders

    assert command_folders(["python", "t.py", "--logdir", "runs/a", "--checkpoint-dir=ck",
                            "--metrics", "acc,f1", "--out", "--verbose"]) == [
        ("--logdir", "metrics", "runs/a"), ("--checkpoint-dir", "checkpoints", "ck")]
    assert command_folders("python t.py --metrics out/m.jsonl") == [
        ("--metrics", "metrics", "out/m.jsonl")]


def test_an_unreadable_source_is_blind_not_a_backlog(tmp_path: Path) -> None:
    from cockpit.runs.blind import source_status
    from cockpit.runs.metrics.stream import MetricStream

    odd = tmp_path / "m.jsonl"
    odd.mkdir()  # a folder where the metrics file should be
    stream = MetricStream([odd])
    stream.poll()
    status = source_status(stream, [odd])
    assert not status.behind and status.unreadable == (f"{odd} is not a regular file",)
    assert blind_reason("loss", "running", set(), status) == \
        f"loss never seen — {odd} is not a regular file; the run reports no metrics"


def test_the_conclusion_metric_blind_on_a_run_it_compares_is_listed_for_the_report(
        tmp_path: Path) -> None:
    from cockpit.campaign import load_campaign
    from cockpit.close.acceptance import blind_rules_of
    from cockpit.engine import Engine

    path = _campaign(tmp_path, metric="val/bpc")  # the rule sees its metric
    data = yaml_safe(path)
    data["conclusion"] = {"metric": "val/bpx", "baseline": "r1"}
    path.write_text(json.dumps(data))
    done = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       timeout=120)
    assert "succeeded" in run_cockpit("status", str(path)).stdout, done.stdout + done.stderr
    engine = Engine(load_campaign(path), read_only=True)
    assert blind_rules_of(engine.campaign, engine.state(), "r1") == [
        "the conclusion's metric: val/bpx never seen — the run reports train/loss, val/bpc "
        "(did you mean val/bpc?)"]


def test_a_running_run_waits_for_its_first_report_two_minutes_before_it_is_blind(
        tmp_path: Path) -> None:
    """The documented 2 min: half a second after its start a run has reported nothing
    yet; its rule is *waiting* (never ok), and nobody is called. Blind — on every face,
    a NEEDS A PERSON — once the run has run 2 min without reporting the metric."""
    from cockpit.campaign import load_campaign
    from cockpit.engine import Engine
    from cockpit.runs.blind import BLIND_GRACE_S
    from tests.engine.test_engine_guards import FakeClock, FakeSupervisor

    assert BLIND_GRACE_S == 120.0  # docs/campaign-file.md and docs/domain.md: 2 min
    path = _campaign(tmp_path, start=FIXED_START)  # a rule on train/loss, nothing written
    clock = FakeClock()
    engine = Engine(load_campaign(path), clock=clock, supervisor=FakeSupervisor())
    engine.start("train")

    def loss_cap() -> tuple[str, str | None, list[str]]:
        snap = engine.tick()
        (rule,) = [r for r in snap.rules if r.rule == "loss-cap"]
        return rule.state, rule.reason, [n.kind for n in snap.needs_person()]

    clock.advance(0.5)
    state, reason, needs = loss_cap()
    assert state == "waiting" and "no report from the run yet" in (reason or ""), reason
    assert "blind" not in needs
    clock.advance(BLIND_GRACE_S - 1.5)  # 119 s after the start
    assert loss_cap()[0] == "waiting"
    clock.advance(2)  # 121 s: no report came
    state, reason, needs = loss_cap()
    assert state == "blind" and "train/loss never seen" in (reason or "")
    assert "blind" in needs
