"""Pulling the other machines' journals (and their live status line) read-only over SSH.

One round trip per pull: a small ``sh`` script on the peer answers with the identity
of its journal (inode, size) and only the bytes after the ones held here, plus the
last line of its status log when that changed. When nothing changed, the answer is
two short lines. A journal that shrank, changed inode or whose first line differs
from the one held is sent again from byte 0 and replaces the copy (the reader sees
a new file and re-reads it). The copy lives in ``.cockpit/peers/<N>/journal.jsonl``
and is read by the same damage-tolerant :class:`~cockpit.journal.Journal` reader as
the own journal; every event read from it is tagged ``machine: N``.

Pulls run in a background thread per peer, with backoff while a peer is unreachable:
the tick only reads the local copies and never waits for the network.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import heapq
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cockpit.campaign.model import Campaign, Machine
from cockpit.errors import ActionRefused
from cockpit.fleet.ssh import SshError, run_ssh
from cockpit.journal import Journal, JournalProblem
from cockpit.safe_json import loads_bounded

PULL_TIMEOUT_S = 10.0
HEAD_CHECK = 4096  # bytes of the first line compared to tell the same journal from a new one
MAX_BACKOFF_S = 30.0
DEFAULT_INTERVAL_S = 2.0

# Run by ``sh -s`` on the peer with: folder inode offset head_len head_sha status_sig.
# Reads only; prints "S <sig>" (+ the status log's last line when its sig changed), then
# "J <inode> <size> <start>" and the journal's bytes from <start> to <size>.
REMOTE_SCRIPT = r"""
d=$1 ino=$2 off=$3 hl=$4 hh=$5 ss=$6
cd -- "$d" 2>/dev/null || { echo "E no campaign folder $d"; exit 0; }
j=.cockpit/journal.jsonl
s=.cockpit/status.jsonl
si=-
if [ -f "$s" ]; then set -- $(stat -Lc '%i.%s.%Y' "$s"); si=$1; fi
echo "S $si"
if [ "$si" != "$ss" ] && [ "$si" != - ]; then printf '%s\n' "$(tail -n 1 "$s")"; fi
ci=0 cs=0
if [ -f "$j" ]; then set -- $(stat -Lc '%i %s' "$j"); ci=$1 cs=$2; fi
start=0
if [ "$ci" = "$ino" ] && [ "$off" -gt 0 ] && [ "$cs" -ge "$off" ]; then
  if [ "$(head -c "$hl" "$j" | sha256sum | cut -c1-64)" = "$hh" ]; then start=$off; fi
fi
echo "J $ci $cs $start"
if [ "$cs" -gt "$start" ]; then tail -c +$((start + 1)) "$j" | head -c $((cs - start)); fi
"""


def remote_pull_command(args: Sequence[str]) -> str:
    import shlex

    return "sh -c " + shlex.quote(REMOTE_SCRIPT) + " cockpit-pull " + \
        " ".join(shlex.quote(a) for a in args)


@dataclass
class PullResult:
    received: int  # bytes of the answer (stdout)
    appended: int  # journal bytes added to the copy
    reread: bool  # the copy was replaced (the peer's journal shrank or changed)
    status_changed: bool


@dataclass
class PeerState:
    """What this side knows of one peer (kept beside the copy in ``state.json``)."""

    inode: int = 0
    offset: int = 0  # journal bytes held (the copy's size)
    head_len: int = 0
    head_sha: str = ""
    status_sig: str = ""


class PeerCache:
    """The local copy of one peer's journal and status line, and the pull that feeds it.

    Two cockpits on this box (a headless and a one-shot command) share the copy: a pull
    holds ``pull.lock``; a second one finds it busy and skips."""

    def __init__(self, campaign: Campaign, machine: Machine) -> None:
        self.machine = machine
        self.folder = campaign.state_dir / "peers" / str(machine.number)
        self.journal_path = self.folder / "journal.jsonl"
        self.status_path = self.folder / "status.json"
        self.state_path = self.folder / "state.json"
        self.reader = Journal(self.journal_path)

    def load_state(self) -> PeerState:
        try:
            raw = json.loads(self.state_path.read_text(encoding="utf-8"))
            held = self.journal_path.stat().st_size
        except (OSError, ValueError):
            return PeerState()
        if not isinstance(raw, dict):
            return PeerState()
        state = PeerState(**{k: raw[k] for k in ("inode", "offset", "head_len", "head_sha",
                                                  "status_sig")
                             if k in raw and isinstance(raw[k], type(getattr(PeerState(), k)))})
        if state.offset != held:
            return PeerState(status_sig=state.status_sig)  # the copy and its record disagree
        return state

    def _save_state(self, state: PeerState) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state.__dict__), encoding="utf-8")
        os.replace(tmp, self.state_path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[bool]:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / "pull.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def pull(self, timeout: float = PULL_TIMEOUT_S) -> PullResult | None:
        """One round trip; None when another pull on this box holds the copy."""
        with self._locked() as mine:
            if not mine:
                return None
            state = self.load_state()
            args = [self.machine.path, str(state.inode), str(state.offset),
                    str(state.head_len), state.head_sha or "-", state.status_sig or "none"]
            answer = run_ssh(self.machine, remote_pull_command(args), timeout=timeout)
            return self._apply(state, answer.stdout)

    def _apply(self, state: PeerState, out: bytes) -> PullResult:
        def line() -> bytes:
            nonlocal out
            head, sep, rest = out.partition(b"\n")
            if not sep:
                raise SshError(f"machine {self.machine.number}: a truncated answer")
            out = rest
            return head

        received = len(out)
        first = line()
        if first.startswith(b"E "):
            raise SshError(f"machine {self.machine.number}: {first[2:].decode('utf-8', 'replace')}")
        if not first.startswith(b"S "):
            raise SshError(f"machine {self.machine.number}: not a cockpit pull answer "
                           "(is `sh` the login shell's sh?)")
        sig = first[2:].decode("ascii", "replace")
        status_changed = False
        if sig != "-" and sig != state.status_sig:
            status = line()
            status_changed = True
            tmp = self.status_path.with_suffix(".tmp")
            tmp.write_bytes(status + b"\n")
            os.replace(tmp, self.status_path)
        state.status_sig = sig
        words = line().split()
        if len(words) != 4 or words[0] != b"J":
            raise SshError(f"machine {self.machine.number}: not a cockpit pull answer")
        inode, _size, start = (int(w) for w in words[1:])
        data = out
        reread = start == 0 and (state.offset > 0 or state.inode not in (0, inode))
        if start == 0:
            tmp = self.journal_path.with_suffix(".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, self.journal_path)
            state = PeerState(inode=inode, offset=len(data), status_sig=sig)
        elif data:
            with open(self.journal_path, "ab") as f:
                f.write(data)
            state.offset += len(data)
        if not state.head_len and state.offset:
            with open(self.journal_path, "rb") as held:
                head = held.read(HEAD_CHECK)
            cut = head.find(b"\n")
            if cut >= 0:
                head = head[:cut + 1]
                state.head_len, state.head_sha = len(head), hashlib.sha256(head).hexdigest()
        state.inode = inode
        self._save_state(state)
        return PullResult(received, len(data), reread, status_changed)

    def status_line(self) -> dict[str, Any] | None:
        """The peer's last headless status line (its GPUs, its window), as pulled."""
        try:
            raw = self.status_path.read_text(encoding="utf-8")
            value = loads_bounded(raw)
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None


@dataclass
class PeerView:
    """One peer as a face shows it."""

    machine: int
    ssh: str
    reachable: bool | None  # None: not tried yet
    last_ok: float | None  # wall time of the last good pull
    error: str | None
    held_bytes: int
    status: Mapping[str, Any] | None = None
    pulls: int = 0
    received: int = 0

    def age_s(self, now: float) -> float | None:
        return None if self.last_ok is None else max(0.0, now - self.last_ok)


@dataclass
class PeerLink:
    """A peer's cache plus its pull loop (a daemon thread) and what it last learned."""

    cache: PeerCache
    interval: float
    reachable: bool | None = None
    last_ok: float | None = None
    error: str | None = None
    pulls: int = 0
    received: int = 0
    rereads: int = 0
    backoff: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _tagged: list[dict[str, Any]] = field(default_factory=list)
    _first: object = None

    def pull_now(self, timeout: float = PULL_TIMEOUT_S) -> None:
        try:
            result = self.cache.pull(timeout)
        except (SshError, OSError) as exc:
            self.reachable, self.error = False, str(exc)
            # Doubling, up to 15 intervals (30 s at the default 2 s), never past 30 s.
            cap = min(MAX_BACKOFF_S, self.interval * 15)
            self.backoff = min(cap, max(self.interval, self.backoff * 2 or 1.0))
            return
        self.reachable, self.error, self.backoff = True, None, 0.0
        self.last_ok = time.time()
        if result is not None:
            self.pulls += 1
            self.received += result.received
            self.rereads += int(result.reread)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, daemon=True,
                                            name=f"cockpit-peer-{self.cache.machine.number}")
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.pull_now()
            self._stop.wait(self.interval + self.backoff)

    def stop(self) -> None:
        self._stop.set()

    def events(self) -> list[dict[str, Any]]:
        """The copy's events, each tagged with the peer's machine (tags kept between
        calls; a re-read copy is tagged again)."""
        events = self.cache.reader.events()
        number = self.cache.machine.number
        if len(events) < len(self._tagged) or (events and events[0] is not self._first):
            self._tagged = []
        self._first = events[0] if events else None
        for ev in events[len(self._tagged):]:
            self._tagged.append({**ev, "machine": number})
        return self._tagged

    def problems(self) -> list[JournalProblem]:
        return self.cache.reader.problems()

    def view(self) -> PeerView:
        held = 0
        with contextlib.suppress(OSError):
            held = self.cache.journal_path.stat().st_size
        return PeerView(self.cache.machine.number, self.cache.machine.ssh, self.reachable,
                        self.last_ok, self.error, held, self.cache.status_line(),
                        self.pulls, self.received)


class PeerSet:
    """Every other machine of the campaign (all of them for ``cockpit fleet``)."""

    def __init__(self, campaign: Campaign, own: int | None, interval: float | None = None
                 ) -> None:
        if interval is None:
            interval = pull_interval_from_env()
        self.links = {n: PeerLink(PeerCache(campaign, m), interval)
                      for n, m in sorted(campaign.machines.items()) if n != own}

    def start(self) -> None:
        for link in self.links.values():
            link.start()

    def pull_now(self, timeout: float = PULL_TIMEOUT_S) -> None:
        """Pull every peer once, in parallel, within ``timeout`` (one-shot commands)."""
        threads = [threading.Thread(target=link.pull_now, args=(timeout,), daemon=True)
                   for link in self.links.values()]
        for t in threads:
            t.start()
        deadline = time.monotonic() + timeout + 1.0
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        for link in self.links.values():
            link.stop()

    def events(self) -> list[list[dict[str, Any]]]:
        return [link.events() for link in self.links.values()]

    def version(self) -> tuple[int, ...]:
        return tuple(len(link.events()) for link in self.links.values())

    def views(self) -> tuple[PeerView, ...]:
        return tuple(link.view() for link in self.links.values())


def pull_interval_from_env() -> float:
    """Seconds between two pulls of a peer: COCKPIT_PULL_INTERVAL, default 2."""
    try:
        value = float(os.environ.get("COCKPIT_PULL_INTERVAL", "") or DEFAULT_INTERVAL_S)
    except ValueError:
        return DEFAULT_INTERVAL_S
    return min(max(value, 0.1), 300.0)


def merge_events(own: list[dict[str, Any]], peers: Sequence[list[dict[str, Any]]],
                 own_machine: int = 0) -> list[dict[str, Any]]:
    """One history: events ordered by time, then machine (the own events are untagged:
    they count as ``own_machine``); each journal keeps its own order."""
    if not any(peers):
        return own
    return list(heapq.merge(own, *peers, key=lambda ev: (
        str(ev.get("t")), _machine_of(ev, own_machine))))


def _machine_of(event: Mapping[str, Any], own_machine: int) -> int:
    """The machine an event came from (events of one's own journal carry none)."""
    value = event.get("machine", own_machine)
    return value if isinstance(value, int) and not isinstance(value, bool) else own_machine


class NullJournal:
    """`cockpit fleet` has no journal of its own: nothing to read, nothing written."""

    def events(self) -> list[dict[str, Any]]:
        return []

    def problems(self) -> list[JournalProblem]:
        return []

    def append(self, kind: str, now: Any = None, **fields: Any) -> dict[str, Any]:
        raise ActionRefused("cockpit fleet writes no journal: actions run on the machine "
                            "that owns the stage")

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        raise ActionRefused("cockpit fleet writes no journal: actions run on the machine "
                            "that owns the stage")
