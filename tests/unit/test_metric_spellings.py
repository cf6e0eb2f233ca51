"""NaN and infinity in the spellings logs really use, decided and tested.

- Python's and JSON's (``nan``, ``-inf``, ``Infinity``, any case), as numbers or text;
- C's NaN with a payload (``"nan(0x1)"``, ``"-nan(ind)"``) and the sign ``"∞"``;
- ``null`` in a JSON-lines metric file counts as NaN (JSON cannot spell NaN, and pandas
  and JavaScript write it as null), so a ``non_finite`` rule on that metric fires;
- a metric line nested 2,000 levels deep is one garbage line, not a crash.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cockpit.runs.metrics.stream import MetricStream
from tests.helpers.campaigns import FINITE, write_campaign
from tests.helpers.process import run_cockpit


def _values(tmp_path: Path, lines: list[str]) -> list[float]:
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n")
    stream = MetricStream([path])
    return [p.values["loss"] for p in stream.poll() if "loss" in p.values]


@pytest.mark.parametrize("spelling, expected", [
    ('"nan(0x1)"', "nan"), ('"-nan(ind)"', "nan"), ("null", "nan"), ("NaN", "nan"),
    ('"∞"', "inf"), ('"-∞"', "-inf"), ("-Infinity", "-inf"), ('"INF"', "inf"),
    ("nan", "nan"), ("-inf", "-inf"),
])
def test_every_spelling_is_a_non_finite_value(tmp_path: Path, spelling: str,
                                              expected: str) -> None:
    (value,) = _values(tmp_path, [f'{{"step": 1, "loss": {spelling}}}'])
    assert repr(value) == repr(float(expected))


def test_text_that_is_no_number_is_not_a_value(tmp_path: Path) -> None:
    assert _values(tmp_path, ['{"step": 1, "loss": "nan("}', '{"step": 2, "loss": "low"}']) == []


def test_a_deeply_nested_line_is_garbage_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "loss": 0.5}\n' + "[" * 2000 + "]" * 2000 + "\n"
                    '{"step": 2, "loss": 0.25}\n')
    stream = MetricStream([path])
    assert [p.values["loss"] for p in stream.poll()] == [0.5, 0.25]
    assert stream.garbage == 1


def test_a_null_loss_fires_the_finite_loss_rule(tmp_path: Path) -> None:
    script = ("from cockpit import report\nimport json, os, time\n"
              "for step in range(1, 4):\n    report.log(step, loss=1.0 / step)\n"
              "with open(os.environ['COCKPIT_REPORT'], 'a') as f:\n"
              "    f.write(json.dumps({'t': time.time(), 'step': 4, 'loss': None}) + '\\n')\n"
              "time.sleep(30)\n")
    (tmp_path / "nully.py").write_text(script)
    path = write_campaign(tmp_path, stages=[{"id": "train", "duration": "5m", "resource": "cpu",
                                            "run": "train",
                                            "command": [sys.executable, "nully.py"]}],
                          runs={"train": {}}, rules=[FINITE])
    result = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.2",
                         timeout=120)
    events = [json.loads(line) for line in
              (tmp_path / ".cockpit" / "journal.jsonl").read_text().splitlines()]
    fired = [e for e in events if e["kind"] == "rule_fired"]
    assert [(e["rule"], e["step"]) for e in fired] == [("finite-loss", 4)], result.stderr
    assert str(fired[0]["value"]).lower() == "nan"  # the journal writes it as text
