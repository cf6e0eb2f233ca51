"""Peer pulls that finish (issue 21), against a real sshd on 127.0.0.1.

A 16 MB journal over a link throttled to 1 MB/s (a ProxyCommand relay) is pulled to
completion in chunks of whole lines; a 200 MB journal line is skipped on the peer,
warned once, and the pulling process stays small; a peer that accepts SSH but never
answers is shown unreachable and leaves no remote process behind its timed-out pulls;
a pull held by another process of this box is reported as held, never as a success.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from cockpit.fleet.pull import CHUNK_MAX
from tests.helpers.campaigns import recent_start, step_command, write_campaign
from tests.helpers.process import wait_for
from tests.helpers.sshd import Keys, Sshd, skip_reason

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


# One window for every machine's copy of the file, relative to now (the real clock).
START = recent_start()


def _campaign(folder: Path, machines: dict[str, Any]) -> Path:
    stages = [{"id": f"s{n}", "hours": 1, "resource": "gpu:0", "category": "essential",
               "run": f"s{n}", "machine": n, "command": step_command(1, 0.0)}
              for n in (1, 2)]
    return write_campaign(folder, stages, extra={
        "package": {"offer": "rtx4090-3d", "start": START, "count": 2},
        "machines": machines})


class Fleet:
    """One sshd; machine 1 and 2 are two folders behind it; ``laptop`` a third copy."""

    def __init__(self, root: Path, server: Sshd, keys: Keys,
                 ssh_config: dict[int, Path] | None = None) -> None:
        self.root = root
        self.folders = {1: root / "m1", 2: root / "m2", 0: root / "laptop"}
        configs = ssh_config or {}
        machines = {str(n): {"ssh": "127.0.0.1", "port": server.port,
                             "path": str(self.folders[n]),
                             "ssh_config": str(configs.get(n, keys.config)),
                             "cockpit": f"{PY} -m cockpit"} for n in (1, 2)}
        self.files = {n: _campaign(f, machines) for n, f in self.folders.items()}
        self.env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def source(self, machine: int) -> Path:
        path = self.folders[machine] / ".cockpit" / "journal.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def copy(self, on: int, of: int) -> Path:
        return self.folders[on] / ".cockpit" / "peers" / str(of) / "journal.jsonl"

    def link(self, on: int = 1, of: int = 2) -> Any:
        from cockpit.campaign import load_campaign
        from cockpit.fleet.peers import PeerCache, PeerLink

        campaign = load_campaign(self.files[on])
        return PeerLink(PeerCache(campaign, campaign.machines[of]), 0.3)


def _start(keys: Keys, name: str, extra: str = "") -> Sshd:
    server = Sshd(keys, name)
    if extra:
        with open(server.config, "a") as f:
            f.write(extra)
    try:
        server.start()
    except (RuntimeError, OSError) as exc:
        server.kill()
        pytest.skip(f"sshd cannot be started here: {exc}")
    return server


def _close(keys: Keys, server: Sshd, configs: list[Path]) -> None:
    for config in configs:
        subprocess.run(["ssh", "-F", str(config), "-p", str(server.port), "-O", "exit",
                        "127.0.0.1"], capture_output=True, check=False, timeout=10)
    server.kill()


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    why = skip_reason()
    if why:
        pytest.skip(why)
    return Keys(tmp_path / "keys")


def note_line(seq: int, text: str) -> bytes:
    return (json.dumps({"seq": seq, "t": f"2026-12-02T09:{seq // 60 % 60:02d}:"
                        f"{seq % 60:02d}.000000Z", "kind": "note", "stage": "s2",
                        "text": text}) + "\n").encode()


@pytest.mark.slow
def test_a_16mb_journal_over_a_1mb_per_s_link_is_pulled_to_completion(
        tmp_path: Path, keys: Keys) -> None:
    server = _start(keys, "slow")
    slow = keys.folder / "ssh_config_slow"
    slow.write_text(keys.config.read_text() + f"  ProxyCommand {PY} "
                    f"{ROOT / 'tests' / 'helpers' / 'throttle_relay.py'} %h %p 1000000\n")
    fleet = Fleet(tmp_path, server, keys, {2: slow})
    try:
        source = fleet.source(2)
        with open(source, "wb") as f:
            seq = 0
            while f.tell() < 16 * MIB:
                seq += 1
                f.write(note_line(seq, f"line {seq} " + "x" * 180))
        size = source.stat().st_size
        link = fleet.link()
        copy = fleet.copy(1, 2)
        progress: list[int] = []
        for _ in range(15):  # 16 MB at 1 MB/s: two pulls of 10 s at the least
            link.pull_now(timeout=10)
            held = copy.stat().st_size if copy.exists() else 0
            progress.append(held)
            if held == size:
                break
        assert progress and progress[-1] == size, \
            f"held {progress} of {size} bytes after {len(progress)} pulls ({link.error})"
        assert copy.read_bytes() == source.read_bytes()
        # Every pull that was not the last one moved forward (chunks, resumed).
        assert all(b > a for a, b in zip([0, *progress], progress, strict=False))
        # The link really was slow: one 10 s pull could not take it all, and the chunks
        # were sized to its rate (a fast link's reach the maximum).
        assert len(progress) >= 2, progress
        assert link.cache.chunk < CHUNK_MAX, link.cache.chunk
        # Every event of the copy is there (older ones read again from the copy when
        # asked for: memory holds the newest parsed and each line's place).
        events = link.events()
        assert len(events) == seq
        assert events[0]["text"].startswith("line 1 ") and events[-1]["seq"] == seq
        assert not link.problems()
        assert link.reachable is True
    finally:
        _close(keys, server, [slow])


# Peak RSS from VmHWM: ru_maxrss would count the forking pytest process (Linux keeps the
# high-water mark across exec), VmHWM is this process image's own.
RSS_PROBE = r"""
import json, logging, sys
def peak_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
from cockpit.campaign import load_campaign
from cockpit.fleet.peers import PeerSet
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger().addHandler(Keep())
campaign = load_campaign(sys.argv[1])
peers = PeerSet(campaign, 1)
before = peak_kib()
peers.pull_now(timeout=30)
peers.pull_now(timeout=30)  # nothing new: no second warning
link = peers.links[2]
events = link.events()
print(json.dumps({
    "rss_before_kib": before,
    "rss_kib": peak_kib(),
    "texts": [e.get("text") for e in events][:10], "count": len(events),
    "warnings": [r for r in records if "byte" in r],
    "reachable": link.reachable, "error": link.error}))
"""


@pytest.mark.slow
def test_a_200mb_line_is_skipped_on_the_peer_warned_once_memory_bounded(
        tmp_path: Path, keys: Keys) -> None:
    server = _start(keys, "big")
    fleet = Fleet(tmp_path, server, keys)
    try:
        source = fleet.source(2)
        with open(source, "wb") as f:
            for seq in (1, 2, 3):
                f.write(note_line(seq, f"before {seq}"))
            long_at = f.tell()
            f.write(b'{"seq": 4, "t": "2026-12-02T09:00:04.000000Z", "kind": "note", '
                    b'"stage": "s2", "text": "')
            block = b"y" * MIB
            for _ in range(200):
                f.write(block)
            f.write(b'"}\n')
            long_len = f.tell() - long_at
            for seq in (5, 6):
                f.write(note_line(seq, f"after {seq}"))
        probe = subprocess.run([PY, "-c", RSS_PROBE, str(fleet.files[1])], env=fleet.env,
                               capture_output=True, timeout=120, check=False)
        assert len(probe.stdout) < 100_000  # the line is nowhere in the output
        assert probe.returncode == 0, probe.stderr[-2000:]
        out = json.loads(probe.stdout)
        assert out["reachable"] is True, out["error"]
        assert out["texts"] == ["before 1", "before 2", "before 3", "after 5", "after 6"]
        assert len(out["warnings"]) == 1, out["warnings"]
        assert "over the 1048576 byte maximum" in out["warnings"][0]
        assert out["rss_kib"] < 100 * 1024, out  # below 100 MB, with the interpreter
        copy = fleet.copy(1, 2)
        assert copy.stat().st_size < 1000  # the line never reached the copy
        state = json.loads((copy.parent / "state.json").read_text())
        assert state["offset"] == source.stat().st_size
        assert state["skipped"] == [[long_at, long_len]]
    finally:
        _close(keys, server, [keys.config])


def _stuck(marker: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if any(str(marker) in part for part in proc.info["cmdline"] or ()):
            found.append(proc)
    return found


@pytest.mark.slow
def test_a_peer_that_never_answers_is_unreachable_and_leaves_nothing_running(
        tmp_path: Path, keys: Keys) -> None:
    # The peer accepts SSH, runs the command and never answers: a `stat` there that
    # hangs (a dead disk, a hung NFS), put first on PATH by the server's ForceCommand.
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "stat").write_text("#!/bin/sh\nsleep 300\n")
    (fake / "stat").chmod(0o755)
    wrap = tmp_path / "wrap.sh"
    wrap.write_text(f'#!/bin/sh\nPATH={fake}:$PATH\nexport PATH\n'
                    'exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n')
    wrap.chmod(0o755)
    server = _start(keys, "hang", f"ForceCommand {wrap}\n")
    fleet = Fleet(tmp_path, server, keys)
    try:
        fleet.source(2).write_bytes(note_line(1, "never sent"))
        link = fleet.link()
        for _ in range(4):  # each pull ends (ours: 3.5 s; how soon: bench/, not here)
            link.pull_now(timeout=3.5)
            assert link.reachable is False and link.last_ok is None
        view = link.view()
        assert view.reachable is False and view.age_s(time.time()) is None
        assert "no answer within" in (view.error or "")
        # The peer's own limit (1 s under ours, then SIGKILL 2 s later) ends them; one
        # never signalled sleeps for 300 s.
        wait_for(lambda: not _stuck(fake), timeout=60,
                 what="the remote processes ended by the peer's own limit")
    finally:
        for proc in _stuck(fake):
            proc.kill()
        _close(keys, server, [keys.config])


def test_a_pull_held_by_another_process_is_reported_as_held(tmp_path: Path,
                                                            keys: Keys) -> None:
    server = _start(keys, "held")
    fleet = Fleet(tmp_path, server, keys)
    try:
        fleet.source(2).write_bytes(note_line(1, "on machine 2"))
        lock = fleet.folders[0] / ".cockpit" / "peers" / "2" / "pull.lock"
        lock.parent.mkdir(parents=True)
        holder = subprocess.Popen(
            [PY, "-c", "import fcntl, os, sys, time\n"
             f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
             "fcntl.flock(fd, fcntl.LOCK_EX)\n"
             "print('held', flush=True)\ntime.sleep(60)\n"],
            stdout=subprocess.PIPE)
        try:
            assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
            shown = subprocess.run([PY, "-m", "cockpit", "fleet", str(fleet.files[0]),
                                    "--json"], env=fleet.env, capture_output=True,
                                   text=True, timeout=60, check=False)
        finally:
            holder.kill()
            holder.wait()
        assert shown.returncode == 0, shown.stderr
        machines = {m["machine"]: m for m in json.loads(shown.stdout)["machines"]}
        assert machines[1]["reachable"] is True  # the other peer, pulled as usual
        held = machines[2]
        assert held["reachable"] is not True and held["data_age_s"] is None, held
        assert "held" in (held["error"] or "") and "another process" in held["error"]
    finally:
        _close(keys, server, [keys.config])


def test_a_journal_line_over_the_maximum_in_a_copy_is_never_held(tmp_path: Path) -> None:
    """The history reader (no sshd): a hand-edited copy with a 3 MiB line is read in
    bounded chunks; the line is skipped with one problem, the others are events."""
    from cockpit.fleet.history import PeerHistory

    path = tmp_path / "journal.jsonl"
    with open(path, "wb") as f:
        f.write(note_line(1, "one"))
        f.write(b'{"kind": "note", "text": "' + b"z" * (3 * MIB) + b'"}\n')
        f.write(note_line(3, "three"))
    history = PeerHistory(path, 2)
    history.refresh()
    assert [e["text"] for e in history.events()] == ["one", "three"]
    assert all(e["machine"] == 2 for e in history.events())
    assert [p.line for p in history.problems()] == [2]
    assert "skipped" in history.problems()[0].message


@pytest.mark.slow
def test_a_connection_that_never_answers_leaves_no_proxy_behind(tmp_path: Path) -> None:
    """The client side (no sshd): a ProxyCommand that connects to nothing and never
    speaks, and ignores SIGHUP (as everything started under nohup does: ssh's own
    SIGHUP to its proxy then does nothing). Each timed-out pull ends the ssh client's
    whole group, its proxy included, whether our time limit or ssh's ConnectTimeout
    (3 s here, under our 3.5) ends it first."""
    from cockpit.campaign import load_campaign
    from cockpit.fleet.peers import PeerCache, PeerLink

    marker = tmp_path / "never-answers"
    config = tmp_path / "ssh_config"
    config.write_text(f"Host *\n  ProxyCommand {PY} -c 'import signal, time; "
                      "signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(300)' "
                      f"{marker}\n  UserKnownHostsFile /dev/null\n"
                      "  StrictHostKeyChecking yes\n")
    machines = {str(n): {"ssh": "127.0.0.1", "path": str(tmp_path / f"m{n}"),
                         "ssh_config": str(config)} for n in (1, 2)}
    campaign = load_campaign(_campaign(tmp_path / "m1", machines))
    link = PeerLink(PeerCache(campaign, campaign.machines[2]), 0.3)
    try:
        for _ in range(3):
            link.pull_now(timeout=3.5)
            assert link.reachable is False and link.last_ok is None
        # ssh's own ConnectTimeout or ours, whichever comes first on this machine.
        assert "no connection within" in (link.error or "") or "timed out" in link.error
        # The group is signalled at the timeout; a busy box takes a moment to reap it.
        # A proxy that was never signalled sleeps for 300 s.
        wait_for(lambda: not _stuck(marker), timeout=60, what="the ProxyCommands to end")
    finally:
        for proc in _stuck(marker):
            proc.kill()
