"""One metric, one name across frameworks (issue 42): the canonical names and their
aliases (cockpit.common.metric_names) used by the metric stream, the rules, blind's
did-you-mean and the campaign file's ``runs.ID.metric_names``; and NaN never hidden: a
loss of exactly 0.0 beside a non-finite grad_norm at the same step is a non-finite loss.
Real files, written as each framework writes them (TensorBoard by its real writer)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from cockpit.campaign import load_campaign
from cockpit.campaign.model import StopRule
from cockpit.common.errors import InputError
from cockpit.common.metric_names import as_reported, canonical_name, lookup, suggestion
from cockpit.runs.blind import blind_reason, non_finite_losses
from cockpit.runs.metrics.stream import MetricStream
from cockpit.runs.rules import check_points
from tests.helpers.campaigns import FIXED_START, write_campaign


def _jsonl(path: Path, *records: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    return path


def _lightning_csv(path: Path) -> Path:
    """What Lightning's CSVLogger writes for a module logging train_loss and val_loss."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("epoch,step,train_loss,val_loss\n0,0,2.5,\n0,1,2.0,\n0,1,,1.9\n")
    return path


def _tensorboard(folder: Path, scalars: list[tuple[str, float, int]]) -> Path:
    tb = pytest.importorskip("torch.utils.tensorboard")
    writer = tb.SummaryWriter(log_dir=str(folder), flush_secs=3600)
    for tag, value, step in scalars:
        writer.add_scalar(tag, value, step)
    writer.close()
    return folder


def _read(*paths: Path, names: dict[str, str] | None = None) -> tuple[MetricStream, list[Any]]:
    stream = MetricStream(list(paths), names=names)
    points: list[Any] = []
    while batch := stream.poll():
        points.extend(batch)
    return stream, points


def _rule(kind: str, metric: str, **extra: Any) -> StopRule:
    return StopRule(id=f"{kind}-{metric}", kind=kind, metric=metric, **extra)


# ------------------------------------------------------------------ the table
def test_the_table_names_one_metric_for_each_spelling() -> None:
    assert {canonical_name(n) for n in ("loss", "train/loss", "train_loss")} == {"loss"}
    assert {canonical_name(n) for n in ("eval_loss", "eval/loss", "val_loss")} == {"eval_loss"}
    assert canonical_name("train/grad_norm") == "grad_norm"
    assert {canonical_name(n) for n in ("learning_rate", "lr", "train/learning_rate")} \
        == {"learning_rate"}
    assert canonical_name("val/accuracy") == "val/accuracy"  # no alias: itself
    assert lookup({"eval_loss": 0.5}, "val_loss") == 0.5
    assert lookup({"eval_loss": 0.5}, "val/accuracy") is None


def test_a_point_under_an_alias_is_also_under_its_canonical_name(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "r.jsonl", {"step": 1, "train/loss": 0.9, "val_loss": 1.1,
                                         "lr": 0.01, "val/accuracy": 0.5})
    stream, points = _read(path)
    assert dict(points[0].values) == {"train/loss": 0.9, "val_loss": 1.1, "lr": 0.01,
                                      "val/accuracy": 0.5, "loss": 0.9, "eval_loss": 1.1,
                                      "learning_rate": 0.01}
    assert stream.latest["loss"] == 0.9 and stream.latest["train/loss"] == 0.9
    # a source that reports both spellings keeps its own value under each
    _jsonl(path, {"step": 2, "loss": 0.4, "train_loss": 0.7})
    _, more = _read(path)
    assert dict(more[-1].values) == {"loss": 0.4, "train_loss": 0.7}


def test_the_trainers_end_of_training_train_loss_is_not_a_step_loss(tmp_path: Path) -> None:
    out = tmp_path / "hf"
    out.mkdir()
    (out / "trainer_state.json").write_text(json.dumps({"global_step": 8, "max_steps": 8,
        "log_history": [{"step": 4, "loss": 2.0, "grad_norm": 1.5},
                        {"step": 8, "train_loss": 3.5, "train_runtime": 1.0}]}))
    stream, points = _read(out / "trainer_state.json")
    assert "loss" not in points[1].values and points[1].values["train_loss"] == 3.5
    assert stream.latest["loss"] == 2.0  # the last step loss, not the run's mean
    # Lightning's train_loss (CSV) is a step loss: aliased
    _, csv_points = _read(_lightning_csv(tmp_path / "metrics.csv"))
    assert [p.values.get("loss") for p in csv_points] == [2.5, 2.0, None]
    assert csv_points[-1].values["eval_loss"] == 1.9


def test_a_runs_own_mapping_names_the_rest(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "r.jsonl", {"step": 1, "valid/nll": 1.2, "objective": 0.3})
    stream, points = _read(path, names={"valid/nll": "eval_loss", "objective": "loss"})
    assert points[0].values["eval_loss"] == 1.2 and points[0].values["loss"] == 0.3
    fired = check_points(_rule("threshold", "eval_loss", max=1.0), points)
    assert fired is not None and fired.value == 1.2


def test_a_rule_on_eval_loss_sees_lightnings_val_loss_and_the_trainers_eval_loss(
        tmp_path: Path) -> None:
    rule = _rule("threshold", "eval_loss", max=1.5)
    _, lightning = _read(_lightning_csv(tmp_path / "lightning" / "metrics.csv"))
    fired = check_points(rule, lightning)
    assert fired is not None and fired.value == 1.9 and fired.step == 1
    assert "eval_loss = 1.9 above the ceiling 1.5" in fired.reason
    # the Trainer's TensorBoard events (eval/loss, train/loss), by the real writer
    tb = _tensorboard(tmp_path / "hf" / "runs" / "x", [("train/loss", 2.0, 10),
                                                      ("eval/loss", 1.7, 10)])
    stream, hf = _read(tb)
    fired = check_points(rule, hf)
    assert fired is not None and fired.value == pytest.approx(1.7) and fired.step == 10
    assert stream.latest["loss"] == 2.0  # one chart name for both frameworks' loss
    # a rule that names an alias finds the canonical value of another framework too
    assert check_points(_rule("threshold", "val_loss", max=1.5), hf) is not None
    assert check_points(_rule("threshold", "eval_loss", max=5.0), hf) is None


def test_blind_knows_the_aliases(tmp_path: Path) -> None:
    stream, _ = _read(_lightning_csv(tmp_path / "metrics.csv"))
    reported = stream.latest.keys()
    # the canonical name is seen on a run that spells it otherwise: not blind
    assert blind_reason("eval_loss", "succeeded", reported) is None
    assert blind_reason("val/loss", "succeeded", reported) == (
        "val/loss never seen — the run reports epoch, train_loss, val_loss (did you mean "
        "eval_loss, reported as val_loss?)")
    assert suggestion("train/los", ["train/loss", "loss"]) == "loss, reported as train/loss"
    assert suggestion("los", ["loss", "eval_loss"]) == "loss"
    assert as_reported(["loss", "train/loss", "eval_loss", "max_steps"]) == \
        ["eval_loss", "train/loss"]


# ------------------------------------------------------------------ NaN never hidden
def test_a_zero_loss_beside_a_non_finite_grad_norm_fires_a_non_finite_rule(
        tmp_path: Path) -> None:
    # trainer_state.json's log line of a diverged run, default logging_nan_inf_filter
    path = _jsonl(tmp_path / "r.jsonl", {"step": 10, "loss": 2.0, "grad_norm": 1.0},
                  {"step": 20, "loss": 0.0, "grad_norm": "NaN", "learning_rate": 1e-3})
    _, points = _read(path)
    assert points[0].masked == frozenset() and points[1].masked == {"loss"}
    for metric in ("loss", "train/loss"):
        fired = check_points(_rule("non_finite", metric), points)
        assert fired is not None and fired.step == 20, metric
        assert fired.reason == (f"{metric} is 0.0 while grad_norm is non-finite at step 20: "
                                "a NaN loss hidden by the logger's filter (the Trainer's "
                                "logging_nan_inf_filter)")
    assert check_points(_rule("threshold", "loss", max=5.0), points) is None


def test_the_two_halves_may_come_as_two_events_of_one_step(tmp_path: Path) -> None:
    # the Trainer's TensorBoard callback writes each scalar as its own event
    tb = _tensorboard(tmp_path / "runs" / "x", [("train/loss", 1.0, 1),
                                                ("train/grad_norm", 2.0, 1),
                                                ("train/loss", 0.0, 2),
                                                ("train/grad_norm", math.inf, 2)])
    _, points = _read(tb)
    fired = check_points(_rule("non_finite", "loss"), points)
    assert fired is not None and fired.step == 2


@pytest.mark.parametrize("records", [
    [{"step": 5, "loss": 0.0, "grad_norm": 1.0}],  # a zero loss with a finite norm
    [{"step": 5, "loss": 0.0}, {"step": 6, "grad_norm": "nan"}],  # not the same step
    [{"step": 5, "loss": 0.1, "grad_norm": "nan"}],  # the norm alone: not the loss
])
def test_no_hidden_nan_without_both_halves_at_one_step(tmp_path: Path,
                                                       records: list[dict[str, Any]]) -> None:
    _, points = _read(_jsonl(tmp_path / "r.jsonl", *records))
    assert all(not p.masked for p in points)
    assert check_points(_rule("non_finite", "loss"), points) is None


def test_an_ended_runs_evidence_says_a_hidden_nan_and_a_nan_loss_once() -> None:
    assert non_finite_losses({"loss": 0.0, "grad_norm": math.nan}) == [
        "its last loss is 0.0 while its grad_norm is nan: a non-finite loss hidden by the "
        "logger's NaN filter (the Trainer's logging_nan_inf_filter)"]
    assert non_finite_losses({"train/loss": math.nan, "loss": math.nan}) == [
        "its last train/loss is nan (non-finite)"]
    assert non_finite_losses({"loss": 0.0, "grad_norm": 3.0}) == []


# ------------------------------------------------------------------ campaign file
def _with_names(tmp_path: Path, names: Any) -> Path:
    return write_campaign(tmp_path, [{"id": "train", "run": "r1", "duration": "10m",
                                      "resource": "cpu", "command": ["true"]}],
                          runs={"r1": {"metric_names": names}}, start=FIXED_START)


def test_metric_names_in_the_campaign_file(tmp_path: Path) -> None:
    path = _with_names(tmp_path, {"valid/nll": "eval_loss", "objective": "loss"})
    assert load_campaign(path).runs["r1"].metric_names == {"valid/nll": "eval_loss",
                                                          "objective": "loss"}


@pytest.mark.parametrize(("names", "message"), [
    (["valid/nll"], "metric_names must map the run's metric names to canonical ones"),
    ({"valid/nll": 3}, "valid/nll must map to a metric name, not the number 3"),
    ({"valid/nll": "val_loss"}, "val_loss is an alias of eval_loss: map valid/nll to the "
                                "canonical name eval_loss"),
    ({"train_loss": "loss"}, "train_loss is already an alias of loss"),
    ({"nll": "nll"}, "nll maps to itself"),
])
def test_a_bad_metric_names_entry_is_a_located_error(tmp_path: Path, names: Any,
                                                     message: str) -> None:
    path = _with_names(tmp_path, names)
    with pytest.raises(InputError) as caught:
        load_campaign(path)
    text = str(caught.value)
    assert message in text, text
    assert f"{path}:" in text  # FILE:LINE:COL
