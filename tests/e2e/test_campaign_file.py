"""The campaign file: the broken corpus gives exit 2 and a located message, never a traceback."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.helpers.process import SAMPLES, run_cockpit

BROKEN = Path(__file__).resolve().parents[1] / "data" / "broken"
LOCATED = re.compile(r"^(?P<file>[^\n:]+):(?P<line>\d+):(?P<col>\d+): (?P<msg>.+)$")

# file -> (line, text the message must contain)
EXPECTED = {
    "malformed.yaml": (3, "invalid YAML"),
    "tab_indented.yaml": (3, "tabs cannot indent"),
    "unknown_key.yaml": (8, "did you mean 'resource'"),
    "duplicate_stage.yaml": (8, "duplicate stage id 'a'"),
    "cycle.yaml": (11, "cycle in after"),
    "after_unknown.yaml": (8, "after names no stage: 'nosuch'"),
    "unknown_resource.yaml": (8, "unknown resource 'tpu'"),
    "unknown_offer.yaml": (3, "unknown offer 'a100-3d'"),
    "zero_duration.yaml": (7, "positive"),
    "negative_duration.yaml": (7, "positive"),
    "garbage_duration.yaml": (7, "not a duration"),
    "start_without_tz.yaml": (4, "no timezone"),
    "not_utf8.yaml": (2, "not UTF-8"),
    "empty.yaml": (1, "empty campaign file"),
    "yaml_tag.yaml": (7, "not allowed"),
    "alias_bomb.yaml": (None, "alias bomb"),
    "top_level_list.yaml": (1, "must be a mapping"),
    "gpu_index_out_of_range.yaml": (8, "gpu:0..gpu:0"),
    "machine_beyond_count.yaml": (9, "machine 3 but the package count is 2"),
    "empty_stages.yaml": (5, "must not be empty"),
    # Parsed and never read before issue 22: removed, a file using it is told so.
    "verify_within.yaml": (9, "verify_within is no longer a setting"),
    # The alerts section (issue 26): a kind it does not know, minutes that are no wait.
    "alerts_unknown_kind.yaml": (9, "unknown alert kind 'rule_fird' in alerts.send (did you "
                                    "mean 'rule_fired'?"),
    "alerts_bad_minutes.yaml": (8, "alerts.pending_after_minutes must be a positive"),
    # The underfed rule kind (issue 27): a utilization beyond 100 %, a for that is no
    # duration, a rule without its for.
    "underfed_util_above_100.yaml": (10, "util_below is a GPU utilization in percent"),
    "underfed_bad_for.yaml": (11, "for: not a duration"),
    "underfed_missing_for.yaml": (8, "an underfed rule needs for"),
}


def generated(tmp_path: Path) -> dict[str, tuple[Path, int | None, str]]:
    big = tmp_path / "over_1mib.yaml"
    big.write_text("campaign: big\n# " + "x" * (1024 * 1024) + "\n")
    deep = tmp_path / "deep_nesting.yaml"
    deep.write_text("campaign: deep\nstages: " + "[" * 20000 + "]" * 20000 + "\n")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    return {
        "over_1mib": (big, 1, "limited to 1 MiB"),
        "deep_nesting": (deep, 2, "nesting deeper"),
        "binary": (binary, None, "not UTF-8"),
    }


def assert_located(result, path: Path, line: int | None, text: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines, "no message"
    for message in lines:
        match = LOCATED.match(message)
        assert match, f"not FILE:LINE:COL: {message!r}"
        assert match["file"] == str(path)
    if line is not None:
        assert any(int(LOCATED.match(m)["line"]) == line for m in lines), lines
    assert text in result.stderr, result.stderr


def test_the_corpus_is_complete():
    assert sorted(p.name for p in BROKEN.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("command", ["check", "plan"])
def test_broken_file_exit_2_with_located_message(name: str, command: str) -> None:
    line, text = EXPECTED[name]
    path = BROKEN / name
    assert_located(run_cockpit(command, str(path)), path, line, text)


def test_yaml_tag_never_runs_code(tmp_path: Path) -> None:
    marker = Path("/tmp/cockpit-pwned")
    marker.unlink(missing_ok=True)
    run_cockpit("check", str(BROKEN / "yaml_tag.yaml"))
    assert not marker.exists()


@pytest.mark.parametrize("which", ["over_1mib", "deep_nesting", "binary"])
def test_generated_broken_files(tmp_path: Path, which: str) -> None:
    path, line, text = generated(tmp_path)[which]
    assert_located(run_cockpit("check", str(path)), path, line, text)


def test_missing_file_and_folder(tmp_path: Path) -> None:
    assert_located(run_cockpit("plan", str(tmp_path / "nope.yaml")), tmp_path / "nope.yaml", 1,
                   "no such file")
    assert_located(run_cockpit("plan", str(tmp_path)), tmp_path, 1, "is a folder")


def test_all_problems_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text("campaign: Bad Id\npackage:\n  offer: rtx4090-3d\n  start: 2026-12-02\n"
                    "stages:\n  - id: a\n    hours: x\n    category: vital\n")
    result = run_cockpit("check", str(path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert [LOCATED.match(x)["line"] for x in lines] == ["1", "4", "7", "8"]


def test_check_ok_and_domain_warnings(tmp_path: Path) -> None:
    good = run_cockpit("check", str(SAMPLES / "illustrative.yaml"))
    assert good.returncode == 0 and good.stdout.strip() == "ok"
    assert "warning" not in good.stderr
    path = tmp_path / "bare.yaml"
    path.write_text(
        "campaign: bare\npackage:\n  offer: rtx4090-3d\n  start: 2026-12-02T08:00:00Z\n"
        "stages:\n  - id: pilot\n    hours: 2\n    resource: gpu\n"
        "  - id: try-a\n    hours: 2\n    resource: gpu\n    category: exploratory\n"
        "  - id: try-b\n    hours: 2\n    resource: gpu\n    category: exploratory\n")
    result = run_cockpit("check", str(path))
    assert result.returncode == 0 and result.stdout.strip() == "ok"
    for text in ("no stage is a control", "no stage is a data check",
                 "no stage is a resume check", "no decision point after the pilot",
                 "2 exploratory stages"):
        assert text in result.stderr


def test_plan_json_figures_and_options() -> None:
    result = run_cockpit("plan", str(SAMPLES / "illustrative.yaml"), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["reserved_hours"] == 48 and data["unused_hours"] == 24
    assert data["exceeds_by_hours"] == 0 and data["fits"] is True
    assert data["cost"] == {"amount": "47.14", "currency": "USD"}
    assert data["stages"][0] == {"id": "prep", "start_hours": 0.0, "end_hours": 4.0,
                                 "hours": 4.0, "resource": "human", "category": "essential",
                                 "machine": 1, "decision_point": False}
    over = json.loads(run_cockpit("plan", str(SAMPLES / "illustrative.yaml"), "--json",
                                  "--overrun", "30h").stdout)
    assert over["reserved_hours"] == 78 and over["exceeds_by_hours"] == 6
    offer = next(o for o in over["options"] if o["kind"] == "offer")
    # Before the window: the 7-day package replaces the 3-day one, 110 - 47.14 = 62.86 more.
    assert {k: offer[k] for k in ("fits", "reserved_hours", "offer", "cost", "adds")} == {
        "fits": True, "reserved_hours": 78.0, "offer": "rtx4090-7d",
        "cost": {"amount": "110", "currency": "USD"},
        "adds": {"amount": "62.86", "currency": "USD"}}
    assert over["no_option_reason"] is None


def test_plan_json_puts_warnings_inside_the_object(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("campaign: w\npackage:\n  offer: rtx4090-3d\n  start: 2026-12-02T08:00:00Z\n"
                    "stages:\n  - id: a\n    hours: 100\n")
    result = run_cockpit("plan", str(path), "--json")
    data = json.loads(result.stdout)  # exactly one JSON object on stdout
    assert data["warnings"] and data["fits"] is False and data["exceeds_by_hours"] == 28


def test_bad_overrun_argument_is_one_line_exit_2() -> None:
    result = run_cockpit("plan", str(SAMPLES / "illustrative.yaml"), "--overrun", "lots")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--overrun" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_readers_write_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    shutil.copy(SAMPLES / "illustrative.yaml", folder / "campaign.yaml")
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    for args in (["check"], ["plan"], ["plan", "--json"]):
        assert run_cockpit(*args, str(folder / "campaign.yaml")).returncode == 0
    after = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    assert before == after


def test_offer_overrides_and_unknown_price(tmp_path: Path) -> None:
    path = tmp_path / "b200.yaml"
    path.write_text("campaign: b\npackage:\n  offer: b200-3d\n  start: 2026-12-02T08:00:00Z\n"
                    "stages:\n  - id: a\n    hours: 1\n    resource: gpu:1\n")
    data = json.loads(run_cockpit("plan", str(path), "--json").stdout)
    assert data["cost"] is None and "unknown" in data["cost_note"]
    path.write_text(path.read_text() + "offers:\n  - id: b200-3d\n    price: 512.50\n")
    data = json.loads(run_cockpit("plan", str(path), "--json").stdout)
    assert data["cost"] == {"amount": "512.50", "currency": "USD"}


def test_python_m_and_console_script_agree() -> None:
    import subprocess
    script = shutil.which("cockpit")
    assert script, "console script not installed"
    out = subprocess.run([script, "plan", str(SAMPLES / "illustrative.yaml"), "--json"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == json.loads(run_cockpit("plan", str(SAMPLES / "illustrative.yaml"),
                                                     "--json").stdout)


@pytest.mark.parametrize("stage, message", [
    ('{id: a, duration: 200000000d, resource: cpu}', "duration '200000000d' is too long"),
    ('{id: a, hours: 1000000000.0, resource: cpu}', "hours 1000000000.0 h is too long"),
])
def test_absurd_durations_are_refused_at_check_with_the_bound(tmp_path, stage, message):
    """`duration: 200000000d` passed check and crashed status with OverflowError."""
    path = tmp_path / "c.yaml"
    path.write_text('campaign: x\nquestion: "q?"\n'
                    "package: {offer: rtx4090-3d, start: 2026-12-02T08:00:00Z}\n"
                    f"stages:\n  - {stage}\n")
    for command in ("check", "plan", "status"):
        result = run_cockpit(command, str(path))
        assert result.returncode == 2, (command, result.stderr)
        assert f"{path}:5:" in result.stderr and message in result.stderr
        assert "at most 300 days" in result.stderr and "Traceback" not in result.stderr


ADAPTER = """campaign: adapter-pin
package: {{offer: rtx4090-3d, start: 2026-12-02T08:00:00Z}}
stages:
  - {{id: tune, hours: 2, resource: gpu, run: tune}}
runs:
  tune:
    kind: adapter
    base_model: org/base-7b
    base_revision: {rev}
"""


@pytest.mark.parametrize("rev", ["main", "master", "v1.0", '"0123abc"', "HEAD"])
def test_check_refuses_a_moving_base_revision_for_an_adapter(tmp_path: Path, rev: str) -> None:
    """D23: an adapter's base model is pinned to an exact commit; a branch, a tag or a
    short id moves (or may), so `check` says where and how to pin it, exit 2."""
    path = tmp_path / "campaign.yaml"
    path.write_text(ADAPTER.format(rev=rev))
    result = run_cockpit("check", str(path))
    assert_located(result, path, 9, f"base_revision {rev.strip(chr(34))!r} is not an "
                                    "exact revision")
    assert ":9:20: " in result.stderr  # at the value
    assert "full 40-character commit id" in result.stderr
    assert "git ls-remote https://huggingface.co/org/base-7b" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_check_accepts_a_base_revision_pinned_to_a_commit(tmp_path: Path) -> None:
    path = tmp_path / "campaign.yaml"
    path.write_text(ADAPTER.format(rev="0123456789abcdef0123456789ABCDEF01234567"))
    result = run_cockpit("check", str(path))
    assert result.returncode == 0, result.stderr
