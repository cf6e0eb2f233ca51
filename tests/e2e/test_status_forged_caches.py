"""Forged or stale caches never make `cockpit status` lie (issue 43): the state cache
(``.cockpit/cache/state.json``) and a run's metric stream cache, forged (copied from a
journal where the run was accepted, edited with its checksum made to fit, claiming a
journal longer than the real one), stale (the journal or the metrics grew since) or
garbage: `status` (text and --json) says what the journal and the metrics files say,
exactly what it says with no cache at all."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from cockpit.campaign import load_campaign
from cockpit.common.event_kinds import RESULT_ACCEPTED
from cockpit.journal import cache as cache_module
from cockpit.journal.live_fold import FoldedHistory
from cockpit.journal.log import Journal
from cockpit.journal.paths import CampaignFiles
from cockpit.runs.metrics.stream_cache import cache_file
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor, make, report
from tests.helpers.process import run_cockpit

TRAIN = [{"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["train"]}]


SHOWN = ("state", "step", "metrics", "exit_code", "verdict", "verdict_reason", "result")


def status(path: Path) -> tuple[dict[str, Any], str]:
    """What `status --json` says of run r1 (what a cache could change: its state, step,
    metrics, verdict), and the text `status`'s line for r1 (ages left out)."""
    done = run_cockpit("status", str(path), "--json")
    assert done.returncode in (0, 1), done.stderr
    (run,) = [r for r in json.loads(done.stdout)["runs"] if r["id"] == "r1"]
    text = run_cockpit("status", str(path))
    assert text.returncode in (0, 1) and "Traceback" not in text.stderr, text.stderr
    # every duration left out (2d3h, 5h12m, 14m, 40s: the real clock moves between calls)
    lines = [re.sub(r"\b\d+(\.\d+)?\s*(min|d|h|m|s)(\d+(d|h|m|s))*\b( ago)?|stale \S+", "",
                    line)
             for line in text.stdout.splitlines() if "r1" in line]
    return {k: run.get(k) for k in SHOWN}, "\n".join(lines)


def the_truth(path: Path) -> tuple[dict[str, Any], str]:
    """What status says with no cache at all (the caches put back after)."""
    cache = CampaignFiles.beside(path).root / "cache"
    aside = cache.with_name("cache-aside")
    if cache.exists():
        cache.rename(aside)
    try:
        return status(path)
    finally:
        if aside.exists():
            if cache.exists():
                shutil.rmtree(cache)
            aside.rename(cache)


@pytest.fixture(scope="module")
def ended(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """r1 ran 100 steps and ended (not judged); the engine closed, its caches written."""
    tmp_path = tmp_path_factory.mktemp("forged")
    clock, sup = FakeClock(), FakeSupervisor()
    engine, path = make(tmp_path, TRAIN, clock, sup)
    engine.start("train")
    for step in range(1, 101):
        report(path, "r1", clock, step, 1.0 / step)
    clock.advance(1)
    engine.tick()
    sup.finish("train", 0)
    clock.advance(1)
    engine.tick()
    engine.close()
    return path


def _accepted_cache(path: Path, tmp_path: Path) -> bytes:
    """A state cache folded over a copy of the journal in which r1 was accepted."""
    copy = tmp_path / "copy"
    shutil.copytree(path.parent, copy)
    campaign = load_campaign(copy / path.name)
    files = CampaignFiles.of(campaign)
    Journal(files.journal).append(RESULT_ACCEPTED, run="r1", result="r1", reason="forged")
    machine = json.loads(CampaignFiles.beside(path).state_cache.read_bytes())["header"][
        "machine"]
    history = FoldedHistory(campaign, Journal(files.journal, bounded=True), machine,
                            cache_path=files.state_cache)
    history.catch_up()
    assert history.save([])
    return files.state_cache.read_bytes()


def test_a_forged_or_garbage_state_cache_never_shows(ended: Path, tmp_path: Path) -> None:
    files = CampaignFiles.beside(ended)
    cache = files.state_cache
    assert cache.exists()
    good = cache.read_bytes()
    truth = the_truth(ended)
    assert truth[0]["verdict"] is None, truth[0]
    doc = json.loads(good)
    longer = json.loads(good)  # claims more of the journal than there is
    longer["body"]["journal"]["offset"] = doc["body"]["journal"]["offset"] + 4096
    longer["sum"] = cache_module._checksum(longer["body"])
    forgeries = [_accepted_cache(ended, tmp_path), json.dumps(longer).encode(),
                 good[: len(good) // 3], b"\x00garbage" * 100]
    try:
        for forged in forgeries:
            cache.write_bytes(forged)
            assert status(ended) == truth, forged[:80]
    finally:
        cache.write_bytes(good)


def test_a_stale_state_cache_shows_what_the_journal_holds_since(ended: Path) -> None:
    files = CampaignFiles.beside(ended)
    good = files.state_cache.read_bytes()
    journal = files.journal.read_bytes()
    try:
        Journal(files.journal).append(RESULT_ACCEPTED, run="r1", result="r1",
                                      reason="judged after the cache")
        run, text = status(ended)
        assert run["verdict"] == "accepted", run
        assert (run, text) == the_truth(ended)
    finally:
        files.journal.write_bytes(journal)
        files.state_cache.write_bytes(good)


def test_a_forged_or_stale_stream_cache_never_shows(ended: Path) -> None:
    files = CampaignFiles.beside(ended)
    stream = cache_file(files.stream_cache, "r1")
    assert stream.exists()
    good = stream.read_bytes()
    truth = the_truth(ended)
    assert truth[0]["step"] == 100
    first, rest = good.split(b"\n", 1)
    lying = rest.replace(b'{"loss":0.01}]', b'{"loss":0.5}]')
    assert lying != rest

    def signed(body: bytes) -> bytes:  # a forgery: its checksum made to fit
        return hashlib.sha256(body).hexdigest().encode() + b"\n" + body

    longer = re.sub(rb'"offset":\d+', b'"offset":999999', lying, count=1)
    other = re.sub(rb'"before_sha":"[0-9a-f]+"', b'"before_sha":"' + b"0" * 64 + b'"', lying,
                   count=1)
    assert longer != lying and other != lying
    try:
        for forged in (first + b"\n" + lying, signed(longer), signed(other), good[:-7],
                       b"{}" * 50):
            stream.write_bytes(forged)
            assert status(ended) == truth, forged[:80]
        stream.write_bytes(good)  # a valid cache, then the metrics grow: a stale one
        report_file = files.run_report("r1")
        kept = report_file.read_bytes()
        with report_file.open("a") as out:
            out.write(json.dumps({"t": 1.0, "step": 101, "loss": 0.001}) + "\n")
        run, _text = status(ended)
        assert run["step"] == 101, run
        report_file.write_bytes(kept)
    finally:
        stream.write_bytes(good)
