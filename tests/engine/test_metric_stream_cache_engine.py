"""The engine and the stream cache (issue 24): the acting engine writes each run's stream
cache at intervals and at close, a restarted engine takes up its streams where they were
(the reader's start offset, not a timing, is asserted), a read-only engine or a one-shot
command never writes one, and ``cockpit status`` on a large live file reads its tail.
"""

from __future__ import annotations

import json
from pathlib import Path

from cockpit.campaign import load_campaign
from cockpit.engine import Engine
from cockpit.journal.paths import CampaignFiles
from cockpit.runs.metrics.stream_cache import ONE_SHOT_TAIL, cache_file
from tests.engine.test_engine_guards import FakeClock, FakeSupervisor, make
from tests.helpers.campaigns import FINITE
from tests.helpers.process import run_cockpit

TRAIN = [{"id": "train", "hours": 1, "resource": "gpu", "run": "r1", "command": ["train"]}]


def lines(clock: FakeClock, first: int, last: int) -> bytes:
    t = clock.now().timestamp()
    return b"".join((json.dumps({"t": t, "step": s, "loss": 1.0 / s}) + "\n").encode()
                    for s in range(first, last + 1))


def append(path: Path, data: bytes) -> None:
    file = CampaignFiles.beside(path).run_report("r1")
    file.parent.mkdir(parents=True, exist_ok=True)
    with file.open("ab") as out:
        out.write(data)


def the_cache(path: Path) -> Path:
    return cache_file(CampaignFiles.beside(path).stream_cache, "r1")


def test_the_engine_writes_the_cache_at_intervals_and_close_and_a_restart_resumes(tmp_path):
    clock, sup = FakeClock(), FakeSupervisor()
    engine, path = make(tmp_path, TRAIN, clock, sup, rules=[FINITE])
    engine.start("train")
    append(path, lines(clock, 1, 100))
    clock.advance(1)
    assert engine.tick().run("r1").step == 100
    assert engine.observer.stream_starts["r1"] == "start"
    assert not the_cache(path).exists()  # moved a little, 1 s ago: not yet
    clock.advance(31)
    engine.tick()  # nothing new in this tick, but moved since the last write
    assert the_cache(path).exists()  # 30 s of engine time and it moved: written
    append(path, lines(clock, 101, 200))
    clock.advance(1)
    engine.tick()
    engine.close()  # and at close
    offset = engine.observer.streams["r1"].readers[0].position

    append(path, lines(clock, 201, 250))
    again = Engine(load_campaign(path), clock=clock, supervisor=sup)
    clock.advance(1)
    snap = again.tick()
    stream = again.observer.streams["r1"]
    assert again.observer.stream_starts["r1"] == "cache"
    assert stream.start_offsets == [offset]  # read only what was new
    assert snap.run("r1").step == 250 and all(r.caught_up for r in stream.readers)
    assert stream.recent[0].step == 1 and len(stream.recent) == 250  # the window came back
    again.close()


def test_a_read_only_engine_reads_the_cache_but_never_writes_one(tmp_path):
    clock, sup = FakeClock(), FakeSupervisor()
    engine, path = make(tmp_path, TRAIN, clock, sup, rules=[FINITE])
    engine.start("train")
    append(path, lines(clock, 1, 50))
    engine.close()
    viewer = Engine(load_campaign(path), clock=clock, supervisor=sup, read_only=True)
    clock.advance(1)
    assert viewer.tick().run("r1").step == 50
    clock.advance(100)
    viewer.tick()
    viewer.close()
    assert not CampaignFiles.beside(path).stream_cache.exists()

    acting = Engine(load_campaign(path), clock=clock, supervisor=sup)
    acting.tick()
    acting.close()
    assert the_cache(path).exists()
    append(path, lines(clock, 51, 60))
    viewer = Engine(load_campaign(path), clock=clock, supervisor=sup, read_only=True)
    assert viewer.tick().run("r1").step == 60
    assert viewer.observer.stream_starts["r1"] == "cache"
    before = the_cache(path).read_bytes()
    viewer.close()
    assert the_cache(path).read_bytes() == before


def test_status_of_a_large_live_file_reads_its_tail_and_writes_nothing(tmp_path):
    clock, sup = FakeClock(), FakeSupervisor()
    engine, path = make(tmp_path, TRAIN, clock, sup, rules=[FINITE])
    engine.start("train")
    engine.close()
    append(path, lines(clock, 1, 40_000))
    assert CampaignFiles.beside(path).run_report("r1").stat().st_size > 4 * ONE_SHOT_TAIL
    done = run_cockpit("status", str(path), "--json")
    assert done.returncode in (0, 1), done.stderr
    (run,) = [r for r in json.loads(done.stdout)["runs"] if r["id"] == "r1"]
    assert run["step"] == 40_000
    assert not CampaignFiles.beside(path).stream_cache.exists()
