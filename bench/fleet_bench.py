"""The fleet tick over 2 and 8 peers on loopback against the local tick, and the bytes a
pull of an idle peer costs. Not a test: prints numbers for the README.

One real sshd on 127.0.0.1 (keys in a temporary folder, as tests/test_fleet.py; needs
root and openssh-server). Each peer is a campaign folder with a journal of
``--events`` events; machine 1 (the local one) ticks its engine with the peers pulled
in the background (the tick reads the local copies only), measured against the same
engine's tick without peers in the same run. A pull of an idle peer (nothing new) is
one SSH round trip over the shared ControlMaster connection: its time and the bytes it
received are printed too (the status log line is counted apart: a live headless
changes it every tick).

    python bench/fleet_bench.py
    python bench/fleet_bench.py --ticks 400 --events 2000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.campaigns import step_command, write_campaign  # noqa: E402
from tests.sshd import Keys, Sshd, skip_reason  # noqa: E402


def campaign(folder: Path, machines: dict[str, dict[str, object]], count: int) -> Path:
    stages = [{"id": f"s{n}", "hours": 1, "resource": "gpu:0", "category": "essential",
               "run": f"s{n}", "machine": n, "command": step_command(1, 0.0)}
              for n in range(1, count + 1)]
    return write_campaign(folder, stages, extra={
        "package": {"offer": "rtx4090-3d", "start": "2026-12-02T08:00:00Z", "count": count},
        "machines": machines})


def fill(file: Path, n: int) -> None:
    from cockpit.journal import Journal

    journal = Journal(file.parent / ".cockpit" / "journal.jsonl")
    for i in range(n):
        journal.append("note", stage="s1", text=f"note {i} " + "x" * 60)


def median_tick(engine: object, ticks: int) -> float:
    times = []
    for _ in range(ticks):
        t0 = time.perf_counter()
        engine.tick()  # type: ignore[attr-defined]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(peers: int, keys: Keys, server: Sshd, root: Path, args: argparse.Namespace) -> None:
    from cockpit.campaign import load_campaign
    from cockpit.engine import Engine
    from cockpit.fleet.peers import PeerCache, PeerSet

    count = peers + 1
    folders = [root / f"p{peers}-m{n}" for n in range(1, count + 1)]
    machines = {str(n): {"ssh": "127.0.0.1", "port": server.port, "path": str(folders[n - 1]),
                         "ssh_config": str(keys.config)} for n in range(1, count + 1)}
    files = [campaign(f, machines, count) for f in folders]
    for f in files:
        fill(f, args.events)
    c = load_campaign(files[0])
    local = Engine(c, machine=1)  # the same campaign, no peers: the baseline
    base = median_tick(local, args.ticks)
    local.close()
    peer_set = PeerSet(c, 1, interval=0.5)
    t0 = time.perf_counter()
    peer_set.pull_now(timeout=30)
    first = time.perf_counter() - t0
    fleet = Engine(c, machine=1, peers=peer_set)
    fleet.tick()
    peer_set.start()
    tick = median_tick(fleet, args.ticks)
    fleet.close()
    time.sleep(1.0)  # the background pulls have stopped (they hold the copy's lock)
    cache = PeerCache(c, c.machines[2])
    cache.pull()
    rtts, sizes = [], []
    while len(rtts) < args.pulls:
        t0 = time.perf_counter()
        result = cache.pull()
        if result is None:  # a last background pull still held the copy
            time.sleep(0.2)
            continue
        rtts.append(time.perf_counter() - t0)
        sizes.append(result.received)
    print(json.dumps({
        "peers": peers, "journal_events_per_peer": args.events,
        "local_tick_median_ms": round(base * 1e3, 3),
        "fleet_tick_median_ms": round(tick * 1e3, 3),
        "ratio": round(tick / base, 2),
        "first_pull_all_peers_s": round(first, 3),
        "idle_pull_round_trip_ms": round(statistics.median(rtts) * 1e3, 2),
        "idle_pull_bytes": statistics.median(sizes) if sizes else None,
    }))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=200)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--pulls", type=int, default=20)
    args = parser.parse_args()
    why = skip_reason()
    if why:
        print(f"fleet_bench: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        keys = Keys(root / "keys")
        server = Sshd(keys, "bench")
        server.start()
        try:
            for peers in (2, 8):
                run(peers, keys, server, root, args)
        finally:
            server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
