"""Two machines, one campaign: two folders on this host behind two real sshd (D12).

Machine 1 runs the pilot and the control, machine 2 the variant after machine 1's
decision; each cockpit launches only its own stages and pulls the other's journal
over SSH; `cockpit fleet` shows and steers both; a machine whose sshd dies is shown
unreachable while the other keeps working, and the pull resumes from the byte held.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.campaigns import recent_start, step_command, write_campaign
from tests.helpers.process import wait_for
from tests.helpers.sshd import Keys, skip_reason, started_or_skip
from tests.helpers.ticks import wait_for_ticks

PY = sys.executable


# One window for every machine's copy of the file, relative to now (the real clock).
START = recent_start()


def _campaign(folder: Path, machines: dict[str, Any]) -> Path:
    stages = [
        {"id": "pilot", "hours": 1, "resource": "gpu:0", "category": "essential",
         "decision_point": True, "run": "pilot", "machine": 1, "command": step_command(3, 0.05)},
        {"id": "control", "hours": 1, "resource": "gpu:0", "category": "essential",
         "after": ["pilot"], "run": "control", "machine": 1, "command": step_command(3, 0.05)},
        {"id": "variant", "hours": 1, "resource": "gpu:0", "category": "useful",
         "after": ["pilot"], "run": "variant", "machine": 2, "command": step_command(3, 0.05)},
    ]
    return write_campaign(folder, stages, extra={
        "package": {"offer": "rtx4090-3d", "start": START, "count": 2},
        "machines": machines})


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[dict[str, Any]]:
    why = skip_reason()
    if why:
        pytest.skip(why)
    keys = Keys(tmp_path / "keys")
    servers = started_or_skip(keys, "m1", "m2")
    folders = [tmp_path / "m1", tmp_path / "m2", tmp_path / "laptop"]
    machines = {str(n): {"ssh": "127.0.0.1", "port": servers[n - 1].port,
                         "path": str(folders[n - 1]), "ssh_config": str(keys.config),
                         "cockpit": f"{PY} -m cockpit"} for n in (1, 2)}
    files = [_campaign(f, machines) for f in folders]  # the same file, copied to each
    assert len({f.read_text() for f in files}) == 1
    env = {**os.environ, "COCKPIT_PULL_INTERVAL": "0.3", "COCKPIT_SIMULATE_GPUS": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs: list[subprocess.Popen[bytes]] = []
    yield {"keys": keys, "servers": servers, "files": files, "env": env, "procs": procs}
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    for server in servers:
        server.kill()
    for n in (1, 2):  # the shared connections end with their servers; nothing else left
        subprocess.run(["ssh", "-F", str(keys.config), "-p", str(servers[n - 1].port),
                        "-O", "exit", "127.0.0.1"], capture_output=True, check=False)
    shutil.rmtree(tmp_path / "keys", ignore_errors=True)


def cockpit(env: dict[str, str], *args: str,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([PY, "-m", "cockpit", *args], env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"cockpit {' '.join(args)}: no answer in {timeout} s; "
                             f"stdout {exc.stdout!r}, stderr {exc.stderr!r}") from None


def headless(fx: dict[str, Any], machine: int) -> subprocess.Popen[bytes]:
    file = fx["files"][machine - 1]
    log = open(file.parent / "headless.out", "wb")  # noqa: SIM115 - closed by the process end
    proc = subprocess.Popen([PY, "-m", "cockpit", "headless", str(file), "--machine",
                             str(machine), "--auto", "--interval", "0.3"],
                            env=fx["env"], stdout=log, stderr=subprocess.STDOUT)
    fx["procs"].append(proc)
    return proc


def journal(file: Path) -> list[dict[str, Any]]:
    path = file.parent / ".cockpit" / "journal.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def finished(file: Path, stage: str) -> bool:
    return any(e["kind"] == "stage_finished" and e.get("stage") == stage
               for e in journal(file))


def last_status(file: Path) -> dict[str, Any]:
    lines = (file.parent / ".cockpit" / "status.jsonl").read_text().splitlines()
    return dict(json.loads(lines[-1]))


@pytest.mark.slow  # two machines over sshd
def test_two_machines_one_campaign(fleet: dict[str, Any]) -> None:
    fx = fleet
    m1, m2, laptop = fx["files"]
    env = fx["env"]
    assert cockpit(env, "check", str(m1)).returncode == 0
    # A cockpit refuses another machine's stage, with the reason.
    refused = cockpit(env, "start", str(m1), "variant", "--machine", "1", "--force")
    assert refused.returncode == 1
    assert "runs on machine 2" in refused.stderr

    headless(fx, 1)
    headless(fx, 2)
    wait_for(lambda: finished(m1, "pilot"), what="the pilot on machine 1")
    # Machine 2 has pulled the pilot's end and ticked on it since.
    pulled = m2.parent / ".cockpit" / "peers" / "1" / "journal.jsonl"
    wait_for(lambda: pulled.exists() and any(
        e["kind"] == "stage_finished" and e.get("stage") == "pilot"
        for e in map(json.loads, pulled.read_text().splitlines())), timeout=60,
        what="machine 1's pilot end pulled by machine 2")
    wait_for_ticks(m2, 5)
    # The variant waits for machine 1's decision, on machine 2.
    assert not any(e.get("stage") == "variant" for e in journal(m2))
    # The decision from the laptop: run on machine 1 by its own cockpit over SSH.
    decided = cockpit(env, "fleet", str(laptop), "decide", "continue", "--stage", "pilot",
                      "--note", "pilot fits")
    assert decided.returncode == 0, decided.stderr
    assert "machine 1: journal #" in decided.stdout
    assert any(e["kind"] == "decision" for e in journal(m1))
    assert not (laptop.parent / ".cockpit" / "journal.jsonl").exists()

    wait_for(lambda: finished(m2, "variant"), what="the variant on machine 2")
    wait_for(lambda: finished(m1, "control"), what="the control on machine 1")
    # Each machine launched only its own stages.
    assert {e["stage"] for e in journal(m1) if e["kind"] == "stage_started"} == \
        {"pilot", "control"}
    assert {e["stage"] for e in journal(m2) if e["kind"] == "stage_started"} == {"variant"}
    # The variant started after the decision (time order across the two journals).
    decision_t = next(e["t"] for e in journal(m1) if e["kind"] == "decision")
    variant_t = next(e["t"] for e in journal(m2) if e["kind"] == "stage_started")
    assert variant_t > decision_t

    # The fleet view from the laptop: every stage of both machines, both reachable.
    shown = cockpit(env, "fleet", str(laptop), "--json")
    assert shown.returncode == 0, shown.stderr
    snap = json.loads(shown.stdout)
    states = {s["id"]: s["state"] for s in snap["stages"]}
    assert states == {"pilot": "done", "control": "done", "variant": "done"}
    assert [m["machine"] for m in snap["machines"]] == [1, 2]
    assert all(m["reachable"] for m in snap["machines"])
    assert all(m["gpus"] for m in snap["machines"])  # live GPUs of each, by machine
    line = cockpit(env, "fleet", str(laptop), "--line")
    assert line.returncode == 0 and line.stdout.strip()

    # Machine 2's sshd dies: machine 1 shows it unreachable within seconds, keeps working.
    copy = m1.parent / ".cockpit" / "peers" / "2" / "journal.jsonl"
    held = copy.stat()
    fx["servers"][1].kill()
    wait_for(lambda: any(
        "machine 2" in w and "UNREACHABLE" in w for w in last_status(m1)["warnings"]),
        timeout=60, what="machine 2 unreachable on machine 1")
    wait_for_ticks(m1, 3)  # still ticking
    noted = cockpit(env, "note", str(m2), "variant", "written while unreachable",
                    "--machine", "2")
    assert noted.returncode == 0, noted.stderr

    # Back: the pull resumes from the byte it held (same copy, appended, not re-read).
    fx["servers"][1].start()
    source = m2.parent / ".cockpit" / "journal.jsonl"
    wait_for(lambda: copy.stat().st_size == source.stat().st_size > held.st_size,
             timeout=60, what="machine 2's new bytes on machine 1")
    after = copy.stat()
    assert after.st_ino == held.st_ino  # appended to, never replaced
    assert copy.read_bytes() == source.read_bytes()
    state = json.loads((copy.parent / "state.json").read_text())
    assert state["offset"] == after.st_size > held.st_size
    wait_for(lambda: not any("UNREACHABLE" in w for w in last_status(m1)["warnings"]),
             timeout=60, what="machine 2 reachable again")


def test_a_peer_journal_that_changed_is_read_again(fleet: dict[str, Any]) -> None:
    from cockpit.campaign import load_campaign
    from cockpit.fleet.peers import PeerCache

    m1, m2, _ = fleet["files"]
    env = fleet["env"]
    assert cockpit(env, "note", str(m2), "variant", "first", "--machine", "2").returncode == 0
    campaign = load_campaign(m1)
    cache = PeerCache(campaign, campaign.machines[2])
    first = cache.pull()
    assert first is not None and first.appended > 0 and not first.reread
    idle = cache.pull()
    assert idle is not None and idle.appended == 0 and idle.received < 200
    # The peer's journal replaced by another one (same size or not): read from byte 0.
    own = m2.parent / ".cockpit" / "journal.jsonl"
    text = own.read_text().replace("first", "other")
    tmp = own.with_suffix(".new")
    tmp.write_text(text)
    os.replace(tmp, own)
    again = cache.pull()
    assert again is not None and again.reread
    assert cache.journal_path.read_text() == text


def test_check_machines_against_stages_and_count(tmp_path: Path) -> None:
    """`cockpit check` (no sshd needed): a stage on a machine without an entry, and
    entries that are not the package's machines 1..count, are located errors."""
    from tests.helpers.process import run_cockpit

    one = {"1": {"ssh": "host-a", "path": "/c"}}
    path = _campaign(tmp_path / "a", one)  # the variant runs on machine 2: no entry
    result = run_cockpit("check", str(path))
    assert result.returncode == 2
    assert "stage 'variant' runs on machine 2, which has no entry under machines:" \
        in result.stderr
    assert "machines lists 1 but the package count is 2" in result.stderr
    both = {**one, "2": {"ssh": "host-b", "path": "/c", "port": 2222,
                         "ssh_config": "~/.ssh/campaign.conf"}}
    ok = run_cockpit("check", str(_campaign(tmp_path / "b", both)))
    assert ok.returncode == 0, ok.stderr
    bad = run_cockpit("check", str(_campaign(tmp_path / "c", {
        **both, "2": {"ssh": "-oProxyCommand=x", "path": "/c"}})))
    assert bad.returncode == 2 and "may not start with '-'" in bad.stderr
