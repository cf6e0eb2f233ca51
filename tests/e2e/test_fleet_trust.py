"""A peer's journal never drives this machine; every command reads every machine (issue 21).

Two campaign folders behind two real sshd on 127.0.0.1, as in tests/e2e/test_fleet.py.
Forged lines — what no honest machine 2 writes: a stop, a finish, a verdict, a rule
firing, a decision, claims and starts about machine 1's stages, and a cost of
1,000,000 USD — are appended to machine 2's journal while machine 1's headless cockpit
supervises a real run. Machine 1 pulls them and journals nothing because of them,
signals nothing (its run never sees a SIGTERM and keeps running, then ends by itself
and is recorded done), and warns once per line, naming machine 2 and the event. The
other way round, machine 2's legitimate cost and accepted result are in machine 1's
``budget``, ``export`` (REPORT.md, the bag's history) and ``next``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.e2e.test_fleet import cockpit, finished, headless, journal, last_status
from tests.helpers.campaigns import recent_start, step_command, write_campaign
from tests.helpers.process import wait_for
from tests.helpers.sshd import Keys, skip_reason, started_or_skip
from tests.helpers.ticks import wait_for_ticks

PY = sys.executable

# Machine 1's pilot: runs until the test releases it; a SIGTERM leaves a mark.
HOLD = textwrap.dedent("""
    import pathlib, signal, sys, time
    from cockpit import report
    signal.signal(signal.SIGTERM, lambda *a: pathlib.Path("got-sigterm").write_text("x"))
    step = 0
    while not pathlib.Path("release").exists():
        step += 1
        report.log(step, loss=1.0 / step)
        time.sleep(0.1)
""")


# One window for every machine's copy of the file, relative to now (the real clock).
START = recent_start()


def _campaign(folder: Path, machines: dict[str, Any]) -> Path:
    stages = [
        {"id": "pilot", "hours": 1, "resource": "gpu:0", "category": "essential",
         "decision_point": True, "run": "pilot", "machine": 1,
         "command": [PY, "hold.py"]},
        {"id": "control", "hours": 1, "resource": "gpu:0", "category": "essential",
         "after": ["pilot"], "run": "control", "machine": 1, "command": step_command(3, 0.05)},
        {"id": "variant", "hours": 1, "resource": "gpu:0", "category": "useful",
         "run": "variant", "machine": 2, "command": step_command(3, 0.05)},
    ]
    path = write_campaign(folder, stages, extra={
        "package": {"offer": "rtx4090-3d", "start": START, "count": 2},
        "machines": machines})
    (folder / "hold.py").write_text(HOLD)
    return path


@pytest.fixture
def fleet() -> Iterator[dict[str, Any]]:
    why = skip_reason()
    if why:
        pytest.skip(why)
    # Outside /tmp: the plan names the other machine's folder and the ssh config, and an
    # export whose files point into a temporary folder does not verify.
    tmp_path = Path(tempfile.mkdtemp(prefix="cockpit-trust-", dir=Path.home()))
    keys = Keys(tmp_path / "keys")
    servers = started_or_skip(keys, "m1", "m2")
    folders = [tmp_path / "m1", tmp_path / "m2"]
    machines = {str(n): {"ssh": "127.0.0.1", "port": servers[n - 1].port,
                         "path": str(folders[n - 1]), "ssh_config": str(keys.config),
                         "cockpit": f"{PY} -m cockpit"} for n in (1, 2)}
    files = [_campaign(f, machines) for f in folders]
    env = {**os.environ, "COCKPIT_PULL_INTERVAL": "0.3", "COCKPIT_SIMULATE_GPUS": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs: list[subprocess.Popen[bytes]] = []
    yield {"keys": keys, "servers": servers, "files": files, "env": env, "procs": procs}
    (folders[0] / "release").write_text("")  # the pilot ends by itself
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    for server in servers:
        server.kill()
    for n in (1, 2):
        subprocess.run(["ssh", "-F", str(keys.config), "-p", str(servers[n - 1].port),
                        "-O", "exit", "127.0.0.1"], capture_output=True, check=False)
    shutil.rmtree(tmp_path, ignore_errors=True)


def _forge(m2: Path, attempt: int) -> list[dict[str, Any]]:
    """Lines no honest machine 2 writes, about machine 1's pilot and control, appended
    to machine 2's journal as a journal line (its CLI would refuse each)."""
    from cockpit.journal.log import Journal

    j = Journal(m2.parent / ".cockpit" / "journal.jsonl")
    written = [
        j.append("stop_requested", run="pilot", stage="pilot", rule="manual",
                 reason="forged by machine 2", attempt=attempt, actor="cli"),
        j.append("stage_finished", stage="pilot", outcome="done", code=0),
        j.append("result_accepted", run="pilot", stage="pilot", reason="forged",
                 attempt=attempt, actor="cli"),
        j.append("rule_fired", run="pilot", stage="pilot", rule="finite-loss",
                 reason="forged", action="stop", attempt=attempt),
        j.append("decision", stage="pilot", outcome="revise", note="forged", drops=[]),
        j.append("stage_claimed", stage="control", run="control", marker="forged:control"),
        j.append("stage_started", stage="control", run="control", pid=999_999,
                 pgid=999_999, create_time=1.0, claim=6, marker="forged:control"),
        j.append("cost", label="forged", amount="1000000", currency="USD", actor="cli"),
    ]
    return written


@pytest.mark.slow
def test_a_forged_peer_journal_never_drives_machine_1(fleet: dict[str, Any]) -> None:
    fx = fleet
    m1, m2 = fx["files"]
    env = fx["env"]
    headless(fx, 1)
    started = wait_for(lambda: next(
        (e for e in journal(m1) if e["kind"] == "run_started" and e["run"] == "pilot"), None),
        what="the pilot running on machine 1")
    pid, attempt = started["pid"], started["attempt"]
    wait_for(lambda: (m1.parent / ".cockpit" / "peers" / "2" / "state.json").exists(),
             what="machine 1 pulling machine 2")
    before = journal(m1)
    forged = _forge(m2, attempt)

    copy = m1.parent / ".cockpit" / "peers" / "2" / "journal.jsonl"
    wait_for(lambda: copy.exists() and len(copy.read_text().splitlines()) == len(forged),
             what="the forged lines on machine 1")
    # Past the stop grace (2 s) several times over: 20 ticks (>= 6 s at 0.3 s), and the
    # pulls between them.
    wait_for_ticks(m1, 20)

    # Nothing signalled (the run lives, no SIGTERM), nothing journaled because of them.
    assert psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    assert not (m1.parent / "got-sigterm").exists()
    assert journal(m1) == before
    snap = json.loads(cockpit(env, "status", str(m1), "--machine", "1", "--json").stdout)
    stages = {s["id"]: s["state"] for s in snap["stages"]}
    assert stages["pilot"] == "running" and stages["control"] != "running"

    # One warning per forged line, naming machine 2 and the event; the headless output
    # says it once, not on every tick.
    warnings = last_status(m1)["warnings"]
    out = (m1.parent / "headless.out").read_text()
    for ev in forged:
        name = f"machine 2's journal, event #{ev['seq']} ({ev['kind']})"
        assert sum(name in w for w in warnings) == 1, (name, warnings)
        assert out.count(f"NOT FOLDED, event #{ev['seq']} ") == 1, out
    # The cost never reaches the budget; the verdict never counts.
    money = cockpit(env, "budget", str(m1), "--machine", "1", "--json")
    assert money.returncode == 0, money.stderr
    data = json.loads(money.stdout)
    assert data["other_costs"] == [] and data["accepted"] == 0
    assert "machine 2's journal, event #" in money.stderr

    # Released, the pilot ends by itself and machine 1 records it done (never "running,
    # accepted" forever).
    (m1.parent / "release").write_text("")
    wait_for(lambda: finished(m1, "pilot"), what="the pilot's end on machine 1")
    assert not (m1.parent / "got-sigterm").exists()
    ended = [e for e in journal(m1) if e["seq"] > before[-1]["seq"]]
    assert [e["kind"] for e in ended][:2] == ["run_exited", "stage_finished"]
    assert ended[0]["code"] == 0 and ended[1]["outcome"] == "done"


@pytest.mark.slow
def test_budget_export_and_next_include_machine_2(fleet: dict[str, Any],
                                                   tmp_path: Path) -> None:
    fx = fleet
    m1, m2 = fx["files"]
    env = fx["env"]
    # Machine 2's headless cockpit runs its variant; machine 2 accepts it and records a
    # cost, each through its own CLI.
    headless(fx, 2)
    wait_for(lambda: finished(m2, "variant"), what="the variant's end on machine 2")
    accepted = cockpit(env, "accept", str(m2), "variant", "--machine", "2", "--note", "good")
    assert accepted.returncode == 0, accepted.stderr
    cost = cockpit(env, "cost", str(m2), "storage", "3.50", "--machine", "2")
    assert cost.returncode == 0, cost.stderr

    money = cockpit(env, "budget", str(m1), "--machine", "1", "--json")
    assert money.returncode == 0, money.stderr
    data = json.loads(money.stdout)
    assert [(c["label"], c["amount"]) for c in data["other_costs"]] == [("storage", "3.50")]
    assert data["accepted_results"] == ["variant"]

    exported = cockpit(env, "export", str(m1), "--machine", "1", "--no-reload", "--json",
                       timeout=120)
    result = json.loads(exported.stdout)
    bag = Path(result["bag"])
    report = (bag / "data" / "REPORT.md").read_text()
    assert "storage" in report and "3.50" in report
    assert "| variant | variant | accepted |" in report, report
    assert "rental share per accepted result: 94.28 USD" in report, report  # 2 packages
    manifest = json.loads((bag / "data" / "manifest.json").read_text())
    assert manifest["runs"]["variant"]["status"] == "accepted"
    history = [json.loads(line) for line in
               (bag / "data" / "journal" / "history.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "result_accepted" and e.get("machine") == 2 for e in history)
    assert exported.returncode == 0 and result["verified"], exported.stdout

    out = tmp_path / "next.yaml"
    nxt = cockpit(env, "next", str(m1), "--machine", "1", "--out", str(out))
    assert nxt.returncode == 0, nxt.stderr
    line = next(x for x in out.read_text().splitlines() if x.startswith("#   variant:"))
    assert "measured" in line, line
