"""The fleet tick over 2 and 8 peers on loopback against the local tick, and the bytes a
pull of an idle peer costs. Not a test: prints numbers for the README.

One real sshd on 127.0.0.1 (keys in a temporary folder, as tests/e2e/test_fleet.py; needs
root and openssh-server). Each peer is a campaign folder with a journal of
``--events`` events; machine 1 (the local one) ticks its engine with the peers pulled
in the background (the tick reads the local copies only), measured against the same
engine's tick without peers in the same run. A pull of an idle peer (nothing new) is
one SSH round trip over the shared ControlMaster connection: its time and the bytes it
received are printed too (the status log line is counted apart: a live headless
changes it every tick).

Then one peer whose journal holds a 200 MB line (issue 21): the engine ticks while the
background pull skips that line on the peer, against the same engine with an ordinary
peer in the same run; the longest tick and the process's peak RSS (VmHWM: this case
runs first, so the peak is its own) are printed.

    python bench/fleet_bench.py
    python bench/fleet_bench.py --ticks 400 --events 2000
    python bench/fleet_bench.py --big-line-mb 200 --only-big-line
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

from tests.helpers.campaigns import step_command, write_campaign  # noqa: E402
from tests.helpers.sshd import Keys, Sshd, skip_reason  # noqa: E402


def campaign(folder: Path, machines: dict[str, dict[str, object]], count: int) -> Path:
    stages = [{"id": f"s{n}", "hours": 1, "resource": "gpu:0", "category": "essential",
               "run": f"s{n}", "machine": n, "command": step_command(1, 0.0)}
              for n in range(1, count + 1)]
    return write_campaign(folder, stages, extra={
        "package": {"offer": "rtx4090-3d", "start": "2026-12-02T08:00:00Z", "count": count},
        "machines": machines})


def fill(file: Path, n: int) -> None:
    from cockpit.journal.log import Journal

    journal = Journal(file.parent / ".cockpit" / "journal.jsonl")
    for i in range(n):
        journal.append("note", stage="s1", text=f"note {i} " + "x" * 60)


def add_long_line(file: Path, megabytes: int, seq: int) -> int:
    """A note of ``megabytes`` MiB appended to the journal (written in 1 MiB blocks),
    then one ordinary note after it; returns the long line's size."""
    path = file.parent / ".cockpit" / "journal.jsonl"
    with open(path, "ab") as f:
        start = f.tell()
        f.write(b'{"seq": %d, "t": "2026-12-02T09:00:00.000000Z", "kind": "note", '
                b'"stage": "s2", "text": "' % seq)
        block = b"y" * (1024 * 1024)
        for _ in range(megabytes):
            f.write(block)
        f.write(b'"}\n')
        size = f.tell() - start
        f.write(b'{"seq": %d, "t": "2026-12-02T09:00:01.000000Z", "kind": "note", '
                b'"stage": "s2", "text": "after the long line"}\n' % (seq + 1))
    return size


def ticks_while_pulling(engine: object, peer_set: object, source: Path, ticks: int
                        ) -> tuple[list[float], float]:
    """Tick times from the start of the background pulls until the copy holds the whole
    peer journal (and ``ticks`` more); the seconds until it did."""
    from cockpit.fleet.peers import PeerSet

    assert isinstance(peer_set, PeerSet)
    link = peer_set.links[2]
    target = source.stat().st_size
    times: list[float] = []
    t0 = time.monotonic()
    peer_set.start()
    caught_up: float | None = None
    while caught_up is None or len(times) < ticks:
        start = time.perf_counter()
        engine.tick()  # type: ignore[attr-defined]
        times.append(time.perf_counter() - start)
        if caught_up is None and link.cache.load_state().offset == target:
            caught_up = time.monotonic() - t0
        if time.monotonic() - t0 > 120:
            raise SystemExit("fleet_bench: the peer was not pulled within 120 s")
        time.sleep(0.005)
    return times, caught_up


def big_line(keys: Keys, server: Sshd, root: Path, args: argparse.Namespace) -> None:
    from cockpit.campaign import load_campaign
    from cockpit.engine import Engine
    from cockpit.fleet.peers import PeerSet

    out: dict[str, object] = {"case": "peer journal with a long line",
                              "long_line_mb": args.big_line_mb}
    for label in ("ordinary", "long_line"):
        folders = [root / f"big-{label}-m{n}" for n in (1, 2)]
        machines = {str(n): {"ssh": "127.0.0.1", "port": server.port,
                             "path": str(folders[n - 1]), "ssh_config": str(keys.config)}
                    for n in (1, 2)}
        files = [campaign(f, machines, 2) for f in folders]
        fill(files[1], args.events)
        if label == "long_line":
            out["long_line_bytes"] = add_long_line(files[1], args.big_line_mb, args.events + 1)
        else:
            add_long_line(files[1], 0, args.events + 1)  # the same shape, an ordinary line
        source = files[1].parent / ".cockpit" / "journal.jsonl"
        c = load_campaign(files[0])
        peer_set = PeerSet(c, 1, interval=0.5)
        engine = Engine(c, machine=1, peers=peer_set)
        engine.tick()
        times, caught_up = ticks_while_pulling(engine, peer_set, source, args.ticks)
        engine.close()
        time.sleep(1.0)
        events = peer_set.links[2].events()
        assert events and events[-1].get("text") == "after the long line", "not pulled"
        out[f"{label}_tick_median_ms"] = round(statistics.median(times) * 1e3, 3)
        out[f"{label}_tick_max_ms"] = round(max(times) * 1e3, 3)
        out[f"{label}_pulled_in_s"] = round(caught_up, 2)
        out[f"{label}_ticks"] = len(times)
    out["max_tick_ratio"] = round(float(out["long_line_tick_max_ms"])  # type: ignore[arg-type]
                                  / float(out["ordinary_tick_max_ms"]), 2)  # type: ignore[arg-type]
    with open("/proc/self/status") as status:  # VmHWM: this process image's peak RSS
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    out["peak_rss_mib"] = round(peak / 1024, 1)
    print(json.dumps(out))


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
    from cockpit.fleet.peers import PeerCache, PeerSet, PullHeld

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
    rtts, sizes = [], []
    first_done = False
    while len(rtts) < args.pulls:
        t0 = time.perf_counter()
        try:
            result = cache.pull()
        except PullHeld:  # a last background pull still held the copy
            time.sleep(0.2)
            continue
        if not first_done:  # the first one may still bring the status line
            first_done = True
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
    parser.add_argument("--big-line-mb", type=int, default=200)
    parser.add_argument("--only-big-line", action="store_true")
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
            big_line(keys, server, root, args)  # first: the peak RSS is its own
            if not args.only_big_line:
                for peers in (2, 8):
                    run(peers, keys, server, root, args)
        finally:
            server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
