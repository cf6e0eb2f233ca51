"""The export carries the flight recording's minute aggregates (issue 27): a campaign
run with simulated GPUs and recorded by its engine exports ``data/telemetry/minutes.csv``
whose rows are the reader's aggregates exactly; verify-export checks every row (a
tampered value, re-hashed so only this check can see it, is named by its line); a
corrupt or missing recording still exports, saying why there are no minutes; the file is
bounded and written and read a row at a time."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
import tracemalloc
from datetime import timedelta
from pathlib import Path

import bagit
import pytest

from cockpit.campaign import load_campaign
from cockpit.campaign.model import Campaign
from cockpit.engine import Engine, default_samplers
from cockpit.export import export_campaign, verify_export
from cockpit.export.hashing import HashCache
from cockpit.export.minutes_csv import (
    HEADER,
    MAX_ROWS,
    MINUTES_PATH,
    MinuteRows,
    minute_of,
    minutes_check,
    scan_minutes,
)
from cockpit.export.minutes_export import add_minutes
from cockpit.export.payload import Payload
from cockpit.journal.paths import CampaignFiles
from cockpit.telemetry.flight import FlightRecorder, RecordingReader
from tests.engine.test_engine_guards import START, FakeClock, FakeSupervisor
from tests.helpers.campaigns import FIXED_START, write_campaign
from tests.helpers.process import run_cockpit

STAGES = [{"id": "wait", "hours": 1, "resource": "human"}]
Row = tuple[str, str, str, float, int, float, float, float]


def recorded_campaign(folder: Path, seconds: int = 200) -> tuple[Campaign, Engine]:
    """A campaign whose engine sampled 2 simulated GPUs each second for ``seconds``
    of (fake) time; the engine still open."""
    campaign = load_campaign(write_campaign(folder, STAGES, start=FIXED_START))
    gpu, host = default_samplers(campaign, 2)
    clock = FakeClock()
    engine = Engine(campaign, gpu_sampler=gpu, host_sampler=host, clock=clock,
                    supervisor=FakeSupervisor())
    for _ in range(seconds):
        engine.tick()
        clock.advance(1)
    return campaign, engine


def aggregates(campaign: Campaign) -> list[Row]:
    with RecordingReader.open(CampaignFiles.of(campaign).recorder) as reader:
        return [(k.source, k.key, k.metric, p.t, p.n, p.lo, p.value, p.hi)
                for k, p in reader.aggregates()]


def csv_rows(path: Path) -> list[Row]:
    with open(path, newline="", encoding="utf-8") as handle:
        lines = list(csv.reader(handle))
    assert ",".join(lines[0]) + "\n" == HEADER
    out: list[Row] = []
    for source, key, metric, minute, n, lo, mean, hi in lines[1:]:
        m = minute_of(minute)
        assert m is not None, minute
        out.append((source, key, metric, m * 60.0, int(n), float(lo), float(mean), float(hi)))
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(campaign, bag, the reader's aggregates at the export), exported by the engine."""
    campaign, engine = recorded_campaign(tmp_path_factory.mktemp("minutes") / "c")
    try:
        engine.export(START + timedelta(seconds=200))  # the engine's own export (the TUI's e)
        expected = aggregates(campaign)
    finally:
        engine.close()
    bag = CampaignFiles.of(campaign).export_root(campaign.id) / campaign.id
    return campaign, bag, expected


@pytest.fixture
def bag(exported, tmp_path: Path) -> Path:
    """A private copy of the exported bag (in the campaign folder, as exported)."""
    _campaign, good, _expected = exported
    copy = good.parent / f"copy-{tmp_path.name}"
    shutil.copytree(good, copy)
    yield copy
    shutil.rmtree(copy, ignore_errors=True)


def manifest_of(bag: Path) -> dict:
    return json.loads((bag / "data" / "manifest.json").read_text())


def test_the_export_holds_the_readers_minute_aggregates_exactly(exported) -> None:
    _campaign, bag, expected = exported
    # 2 GPUs x 7 metrics + host 2 + each disk, for the 3 minutes closed by 200 s.
    assert {r[3] for r in expected} == {START.timestamp() + 60 * i for i in range(3)}
    assert len({r[:3] for r in expected}) >= 16
    assert csv_rows(bag / MINUTES_PATH) == expected  # every float read back exactly
    report = verify_export(bag, reload=False)
    assert report.ok, report.render()
    check = report.check("telemetry minutes")
    assert check.detail.startswith(f"{len(expected)} minute rows of ") and not check.warnings
    entry = manifest_of(bag)["telemetry_minutes"]
    assert entry["path"] == MINUTES_PATH and entry["rows"] == len(expected)
    assert entry["complete"] is True and entry["reason"] is None
    assert entry["first_minute"] == "2026-12-02T10:00:00Z"
    assert entry["last_minute"] == "2026-12-02T10:02:00Z"
    assert f"  {MINUTES_PATH}\n" in (bag / "manifest-sha256.txt").read_text()
    assert MINUTES_PATH in [f["path"] for f in manifest_of(bag)["files"]]
    info = (bag / "bag-info.txt").read_text()
    assert f"Telemetry-Minutes: {len(expected)} rows in {MINUTES_PATH}\n" in info


def _edit_line(bag: Path, number: int, column: int, value: str) -> None:
    path = bag / MINUTES_PATH
    lines = path.read_text().splitlines(keepends=True)
    fields = lines[number - 1].rstrip("\n").split(",")
    fields[column] = value
    lines[number - 1] = ",".join(fields) + "\n"
    path.write_text("".join(lines))
    bagit.Bag(str(bag)).save(manifests=True)  # re-hashed: only the row check can tell


def test_a_tampered_value_fails_verify_export_naming_its_line(bag: Path) -> None:
    i = _gpu_line(bag)
    line = (bag / MINUTES_PATH).read_text().splitlines()[i - 1].split(",")
    _edit_line(bag, i, 6, repr(float(line[7]) + 1.0))  # the mean above the max
    report = verify_export(bag, reload=False)
    assert [c.name for c in report.checks if not c.ok] == ["telemetry minutes"], \
        report.render()
    done = run_cockpit("verify-export", str(bag), "--no-reload")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{MINUTES_PATH} line {i}: mean " in done.stdout
    assert "is outside [min " in done.stdout


def _gpu_line(bag: Path) -> int:
    """The number of a line of GPU 0's utilization that two more of it follow."""
    lines = (bag / MINUTES_PATH).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.startswith("gpu,0,util,"))


@pytest.mark.parametrize(("change", "words"), [
    (lambda lines, i: ["source,key,metric,minute,n,min,mean,max\n", *lines[1:]],
     "line 1: the header is not exactly"),
    (lambda lines, i: [*lines[:i], lines[i - 1], *lines[i:]], "line {i+1}: minute "),
    (lambda lines, i: [*lines[:i - 1], lines[i], lines[i - 1], *lines[i + 1:]],
     "line {i+1}: minute "),
    (lambda lines, i: [*lines, lines[i - 1]], "appears again after another series began"),
    (lambda lines, i: [*lines, lines[-1].rstrip("\n")], "does not end with a line break"),
    (lambda lines, i: [*lines, "gpu,0,util\n"], "3 fields, not 8"),
    (lambda lines, i: [*lines[:i - 1], '"gpu"' + lines[i - 1][3:], *lines[i:]],
     "line {i}: not written as the export writes a row"),
])
def test_each_broken_rule_is_named_with_its_line(bag: Path, change, words: str) -> None:
    path = bag / MINUTES_PATH
    i = _gpu_line(bag)
    path.write_text("".join(change(path.read_text().splitlines(keepends=True), i)))
    bagit.Bag(str(bag)).save(manifests=True)
    report = verify_export(bag, reload=False)
    failures = report.check("telemetry minutes").failures
    assert [c.name for c in report.checks if not c.ok] == ["telemetry minutes"], \
        report.render()
    words = words.replace("{i+1}", str(i + 1)).replace("{i}", str(i))
    assert any(words in f for f in failures), failures


@pytest.mark.parametrize(("column", "value", "words"), [
    (4, "0", "n '0' is not a positive integer"), (4, "1.5", "n '1.5' is not a positive"),
    (1, "x", "GPU key 'x' is not a GPU index"), (0, "fan", "source 'fan' is not gpu"),
    (2, "fan", "metric 'fan' is not a gpu metric"),
    (3, "2026-12-02T10:00:30Z", "minute_utc '2026-12-02T10:00:30Z' is not a minute"),
    (3, "2026-02-30T10:00:00Z", "minute_utc '2026-02-30T10:00:00Z' is not a minute"),
])
def test_each_broken_field_is_named_with_its_line(bag: Path, column: int, value: str,
                                                  words: str) -> None:
    i = _gpu_line(bag)
    _edit_line(bag, i, column, value)
    report = verify_export(bag, reload=False)
    assert [c.name for c in report.checks if not c.ok] == ["telemetry minutes"], \
        report.render()
    assert report.check("telemetry minutes").failures[0] == f"{MINUTES_PATH} line {i}: {words}" \
        or words in report.check("telemetry minutes").failures[0]


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "0.10", "1_0.0"])
def test_a_number_not_written_as_a_finite_repr_is_refused(bag: Path, value: str) -> None:
    i = _gpu_line(bag)
    _edit_line(bag, i, 5, value)  # min
    failures = verify_export(bag, reload=False).check("telemetry minutes").failures
    assert failures and failures[0].startswith(f"{MINUTES_PATH} line {i}: min "), failures


def test_the_row_count_is_the_one_the_manifest_declares(bag: Path) -> None:
    path = bag / MINUTES_PATH
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))  # a whole row gone: the file is still well formed
    bagit.Bag(str(bag)).save(manifests=True)
    failures = verify_export(bag, reload=False).check("telemetry minutes").failures
    assert failures == (f"{MINUTES_PATH} holds {len(lines) - 2} rows; data/manifest.json "
                        f"declares {len(lines) - 1}",)
    path.unlink()
    bagit.Bag(str(bag)).save(manifests=True)
    failures = verify_export(bag, reload=False).check("telemetry minutes").failures
    assert failures == (f"{MINUTES_PATH}, declared in data/manifest.json, is not a file of "
                        "the bag",)


def _export(campaign: Campaign):
    result = export_campaign(campaign, now=START + timedelta(hours=1), verify_reload=False,
                             tar=False, journal=False)
    return result, manifest_of(result.bag_dir)["telemetry_minutes"]


def test_a_corrupt_recording_still_exports_and_says_why(tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path / "c", STAGES, start=FIXED_START))
    result, entry = _export(campaign)  # never sampled: no recording at all
    assert result.verified, result.verify.render()
    assert not (result.bag_dir / MINUTES_PATH).exists()
    assert entry["path"] is None and "telemetry was never sampled" in entry["reason"]
    store = CampaignFiles.of(campaign).recorder
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_bytes(b"not a database, " * 1000)
    result, entry = _export(campaign)
    assert result.verified, result.verify.render()
    assert not (result.bag_dir / MINUTES_PATH).exists()
    assert entry["path"] is None and entry["complete"] is False
    assert entry["reason"].startswith("the flight recording cannot be read: "
                                      ".cockpit/recorder.sqlite: ")
    assert str(tmp_path) not in entry["reason"]
    assert f"telemetry minutes: {entry['reason']}" in result.warnings
    info = (result.bag_dir / "bag-info.txt").read_text()
    assert "Telemetry-Minutes: none: the flight recording cannot be read" in info
    check = result.verify.check("telemetry minutes")
    assert check.ok and check.detail == "not in this export"
    assert check.warnings == (f"no telemetry minutes in this export: {entry['reason']}",)
    # Declared absent, yet a file planted there: named.
    (result.bag_dir / MINUTES_PATH).parent.mkdir(parents=True)
    (result.bag_dir / MINUTES_PATH).write_text(HEADER)
    bagit.Bag(str(result.bag_dir)).save(manifests=True)
    assert not minutes_check(result.bag_dir, manifest_of(result.bag_dir)).ok


def test_hostile_rows_in_the_recording_are_left_out_and_counted(tmp_path: Path) -> None:
    campaign, engine = recorded_campaign(tmp_path / "c", seconds=130)
    engine.close()
    store = CampaignFiles.of(campaign).recorder
    db = sqlite3.connect(store)
    with db:  # what a process writing into the store could leave: min above max, a NaN
        db.execute("UPDATE minute SET lo = hi + 5 WHERE series = 1 AND m = "
                   "(SELECT MIN(m) FROM minute WHERE series = 1)")
        db.execute("UPDATE minute SET mean = 'NaN' WHERE series = 2")
        db.execute("INSERT INTO series(source, key, metric) VALUES ('gpu', '0', 'fan')")
        db.execute("INSERT INTO minute VALUES (last_insert_rowid(), 29705000, 1, 1, 1, 1)")
        # A watched disk outside the campaign, in /tmp: a fact, not a path results need.
        db.execute("INSERT INTO series(source, key, metric) VALUES ('disk', '/tmp/x', 'free')")
        db.execute("INSERT INTO minute VALUES (last_insert_rowid(), 29705000, 1, 1, 1, 1)")
    db.close()
    result, entry = _export(campaign)
    assert result.verified, result.verify.render()
    assert entry["skipped_rows"] == 2 and entry["complete"] is False
    assert "metric 'fan' is not a gpu metric" in entry["reason"] \
        or "is above max" in entry["reason"]
    kept = csv_rows(result.bag_dir / MINUTES_PATH)
    assert len(kept) == entry["rows"] == len(aggregates(campaign)) - 2
    assert all(r[2] != "fan" and r[5] <= r[7] for r in kept)
    assert ("disk", "/tmp/x", "free", 29705000 * 60.0, 1, 1.0, 1.0, 1.0) in kept
    warning = result.verify.check("telemetry minutes").warnings
    assert warning and "does not hold every minute of the recording" in warning[0]


def synthetic_recording(path: Path, series: int, minutes: int) -> int:
    """A store the recorder created, its minute table filled directly (72 h at a
    time): ``series`` series of ``minutes`` minutes each; the rows written."""
    FlightRecorder(path).open().close()
    first = int(START.timestamp()) // 60
    db = sqlite3.connect(path)
    with db:
        names = [("gpu", str(g), m) for g in range(8) for m in
                 ("util", "mem_used", "power", "temp", "sm_clock", "mem_clock", "throttled")]
        names += [("host", "", "cpu_percent"), ("host", "", "mem_used")]
        names += [("disk", f"/data/disk {i}, \"quoted\"", "free") for i in range(64)]
        for i, name in enumerate(names[:series]):
            db.execute("INSERT INTO series VALUES (?,?,?,?)", (i + 1, *name))
            db.executemany("INSERT INTO minute VALUES (?,?,?,?,?,?)", (
                (i + 1, first + m, 60, 0.1 * m, 0.1 * m + 1 / 3, 0.1 * m + 1.0)
                for m in range(minutes)))
    db.close()
    return series * minutes


def _payload(folder: Path, campaign: Campaign) -> Payload:
    return Payload(folder / "bag", campaign, [], HashCache(folder / "cache.json"), link=False)


def test_72_hours_of_8_gpus_fit_and_read_back_exactly(tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path / "c", STAGES, start=FIXED_START))
    rows = synthetic_recording(CampaignFiles.of(campaign).recorder, 72, 72 * 60)
    assert rows == 311_040 < MAX_ROWS
    payload = _payload(tmp_path, campaign)
    warnings: list[str] = []
    out = add_minutes(payload, campaign, warnings)
    assert out.complete and out.rows == rows and out.series == 72 and not warnings
    assert out.last_minute == "2026-12-05T09:59:00Z"
    check = minutes_check(payload.bag, {"telemetry_minutes": out.as_json()})
    assert check.ok and not check.warnings, check
    # Every row reads back as the reader gives it (a disk's path with a comma and
    # quotes included: quoted).
    assert csv_rows(payload.bag / MINUTES_PATH) == aggregates(campaign)


def test_the_minutes_are_written_and_checked_a_row_at_a_time(tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path / "c", STAGES, start=FIXED_START))
    rows = synthetic_recording(CampaignFiles.of(campaign).recorder, 72, 12 * 60)
    payload = _payload(tmp_path, campaign)
    tracemalloc.start()
    try:
        out = add_minutes(payload, campaign, [])
        written_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        counted = MinuteRows()
        failures = scan_minutes(payload.bag / MINUTES_PATH, counted)
        read_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.rows == counted.rows == rows and not failures
    size = (payload.bag / MINUTES_PATH).stat().st_size
    # The rows in a list would take more than the file (4 MB); a row at a time, little.
    assert size > 3 * 2**20
    assert written_peak < 2**20 and read_peak < 2**20, (written_peak, read_peak)


def test_rows_past_the_bound_are_not_exported_and_a_longer_file_fails(tmp_path: Path) -> None:
    campaign = load_campaign(write_campaign(tmp_path / "c", STAGES, start=FIXED_START))
    rows = synthetic_recording(CampaignFiles.of(campaign).recorder, 3, 10)
    payload = _payload(tmp_path, campaign)
    warnings: list[str] = []
    out = add_minutes(payload, campaign, warnings, max_rows=rows - 4)
    assert out.rows == rows - 4 and not out.complete
    assert out.reason == f"more than {rows - 4} minute rows: the first {rows - 4} are exported"
    assert warnings == [f"telemetry minutes: {out.reason}"]
    manifest = {"telemetry_minutes": out.as_json()}
    check = minutes_check(payload.bag, manifest, max_rows=rows - 4)
    assert check.ok and "does not hold every minute" in check.warnings[0]
    check = minutes_check(payload.bag, manifest, max_rows=rows - 5)
    assert check.failures == (f"{MINUTES_PATH} line {rows - 3}: more than {rows - 5} rows "
                              "(the format's bound)",)
