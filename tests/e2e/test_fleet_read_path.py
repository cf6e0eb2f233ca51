"""One read path for every command (issue 23): on a campaign with ``machines:``,
``budget`` and ``status`` read the same history — this machine's journal and the peers'
pulled copies, merged and filtered by ownership — so they agree on the accepted results
and the costs, the peer's included; ``--machine`` is passed as a value and
COCKPIT_MACHINE is its default at the command line.

Machine 2's journal is written by its own cockpit (headless, accept, cost) in its own
folder; machine 1 holds it as a pulled copy under ``.cockpit/peers/2/`` (the layout a
pull leaves). Machine 2 is unreachable from machine 1 (a closed port on 127.0.0.1, an
empty ssh config), so each one-shot pull fails at once and the copy is what is read.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.campaigns import recent_start, step_command, write_campaign
from tests.helpers.process import run_cockpit, wait_for


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# One window for every machine's copy of the file, relative to now (the real clock).
START = recent_start()


def _campaign(folder: Path, machines: dict[str, Any]) -> Path:
    stages = [
        {"id": "control", "hours": 1, "resource": "gpu:0", "category": "essential",
         "run": "control", "machine": 1, "command": step_command(3, 0.05)},
        {"id": "variant", "hours": 1, "resource": "gpu:0", "category": "useful",
         "run": "variant", "machine": 2, "command": step_command(3, 0.05)},
    ]
    return write_campaign(folder, stages, extra={
        "package": {"offer": "rtx4090-3d", "start": START, "count": 2},
        "machines": machines})


def _journal(file: Path) -> list[dict[str, Any]]:
    path = file.parent / ".cockpit" / "journal.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _finished(file: Path, stage: str) -> bool:
    return any(e["kind"] == "stage_finished" and e.get("stage") == stage
               for e in _journal(file))


def _two_machines(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "ssh_config"
    config.write_text("")  # not the user's: nothing but the closed port below
    port = _closed_port()
    folders = [tmp_path / "m1", tmp_path / "m2"]
    machines = {str(n): {"ssh": "127.0.0.1", "port": port, "path": str(folders[n - 1]),
                         "ssh_config": str(config)} for n in (1, 2)}
    m1, m2 = (_campaign(f, machines) for f in folders)
    return m1, m2


def _run_variant_on_machine_2(m2: Path) -> None:
    """Machine 2's own cockpit runs its stage, then its person accepts it and records a
    cost through the CLI."""
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "headless", str(m2),
                             "--machine", "2", "--auto", "--interval", "0.3"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: _finished(m2, "variant"), timeout=120, what="the variant's end")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    accepted = run_cockpit("accept", str(m2), "variant", "--machine", "2", "--note", "good")
    assert accepted.returncode == 0, accepted.stderr
    cost = run_cockpit("cost", str(m2), "storage", "3.50", "--machine", "2")
    assert cost.returncode == 0, cost.stderr
    # Machine 2 never ran machine 1's stage.
    assert not any(e.get("stage") == "control" for e in _journal(m2)
                   if e["kind"] == "stage_started")


def _money(data: dict[str, Any]) -> dict[str, Any]:
    return {key: data[key] for key in ("accepted", "accepted_results", "other_costs",
                                       "other_costs_total", "cost_incurred",
                                       "share_per_accepted")}


def test_budget_and_status_read_the_peers_copy_alike(tmp_path: Path) -> None:
    m1, m2 = _two_machines(tmp_path)
    _run_variant_on_machine_2(m2)
    own = run_cockpit("cost", str(m1), "fees", "1.25", "--machine", "1")
    assert own.returncode == 0, own.stderr
    # Machine 1 holds machine 2's journal as a pull leaves it.
    copy = m1.parent / ".cockpit" / "peers" / "2" / "journal.jsonl"
    copy.parent.mkdir(parents=True, exist_ok=True)  # the cost command tried a pull
    shutil.copyfile(m2.parent / ".cockpit" / "journal.jsonl", copy)

    money = run_cockpit("budget", str(m1), "--machine", "1", "--json")
    assert money.returncode == 0, money.stderr
    budget = json.loads(money.stdout)
    shown = run_cockpit("status", str(m1), "--machine", "1", "--json")
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)

    # The peer's accepted result and cost, and this machine's cost, in both.
    assert budget["accepted_results"] == ["variant"]
    assert sorted((c["label"], c["amount"]) for c in budget["other_costs"]) == \
        [("fees", "1.25"), ("storage", "3.50")]
    assert _money(status["budget"]) == _money(budget)
    assert {s["id"]: s["state"] for s in status["stages"]}["variant"] == "done"

    # COCKPIT_MACHINE is the default of --machine, read at the command line: the same.
    by_env = run_cockpit("budget", str(m1), "--json", env={"COCKPIT_MACHINE": "1"})
    assert by_env.returncode == 0, by_env.stderr
    assert _money(json.loads(by_env.stdout)) == _money(budget)
    bad = run_cockpit("budget", str(m1), "--json", env={"COCKPIT_MACHINE": "zero"})
    assert bad.returncode == 2 and "COCKPIT_MACHINE='zero'" in bad.stderr
    assert "Traceback" not in bad.stderr
