"""One pull of a peer's journal (and its live status line) into the local copy, over SSH.

This module owns ``.cockpit/peers/<N>/``: the copy ``journal.jsonl``, ``status.json``,
``state.json`` (where the copy stands in the peer's journal and how the last pull
ended) and ``pull.lock`` (one pull at a time on this box).

One round trip per pull: a small ``sh`` script on the peer answers with the identity of
its journal (inode, size) and at most one *chunk* of the bytes after the ones held here,
plus the last line of its status log when that changed. When nothing changed, the answer
is a few short lines. What bounds a pull:

- **Chunks of whole lines.** The peer sends at most ``chunk`` bytes (adapted to the link:
  about a third of the time limit's worth at the last measured rate, 64 KiB to 8 MiB);
  only whole lines are kept and the next pull resumes at the byte after the last one
  kept, so a slow link makes progress on every pull.
- **A maximum line size** (:data:`MAX_LINE_BYTES`, 1 MiB with its newline). A longer
  line is skipped on the peer (its length is counted there with ``head -n 1 | wc -c``;
  its bytes never cross the link) and reported once, by offset and size.
- **A bounded answer.** More bytes than the protocol allows end the pull (the ssh
  client's process group is killed); the status line is cut at 64 KiB.
- **Time, on both sides.** The client's group is killed at the limit (``run_ssh``) and
  the peer's command runs under ``timeout``, so a pull that was given up on does not
  live on there.

A journal that shrank, changed inode or whose first line (up to 4 KiB) differs from the
one recorded is read again from byte 0 and replaces the copy. A pull finds the lock held
by another process of this box (a headless and a one-shot command share the copy):
:class:`PullHeld` says so, with that process and what its last pull recorded.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shlex
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from cockpit.campaign.model import Campaign, Machine
from cockpit.common.fsutil import write_atomic
from cockpit.common.printable import printable
from cockpit.fleet.ssh import SshError, remote_limited, run_ssh
from cockpit.journal.paths import CampaignFiles

log = logging.getLogger(__name__)

PULL_TIMEOUT_S = 10.0
HEAD_CHECK = 4096  # bytes of the first line compared to tell the same journal from a new one
MAX_LINE_BYTES = 1024 * 1024  # one journal line, its newline included; longer: skipped
STATUS_LINE_BYTES = 64 * 1024  # the status log's last line, as sent
CHUNK_START = 1024 * 1024
CHUNK_MIN = 64 * 1024
CHUNK_MAX = 8 * 1024 * 1024
SKIPS_PER_PULL = 16  # long lines skipped in one pull (each one is streamed once there)
SKIPS_KEPT = 100  # skipped lines remembered in state.json

# Run by ``sh -s`` on the peer with: folder inode offset head_len head_sha status_sig
# chunk max_line. Reads only. Prints "S <sig>" (+ the status log's last line when its
# sig changed), "J <inode> <size> <base>" (base: the byte the answer starts from, 0 when
# the journal is not the one held), "H <len> <sha>" (its first line's identity) when
# base is 0 or none was held, one "X <offset> <length> <complete>" per line over the
# maximum, then "D <start> <count>" and <count> bytes of the journal from <start>.
REMOTE_SCRIPT = r"""
d=$1 ino=$2 off=$3 hl=$4 hh=$5 ss=$6 ch=$7 ml=$8
cd -- "$d" 2>/dev/null || { echo "E no campaign folder"; exit 0; }
j=@JOURNAL@
s=@STATUS@
si=-
if [ -f "$s" ]; then set -- $(stat -Lc '%i.%s.%Y' "$s"); si=$1; fi
echo "S $si"
if [ "$si" != "$ss" ] && [ "$si" != - ]; then
  printf '%s\n' "$(tail -n 1 "$s" | head -c 65536 | tr -d '\n')"
fi
ci=0 cs=0
if [ -f "$j" ]; then set -- $(stat -Lc '%i %s' "$j"); ci=$1 cs=$2; fi
start=0
if [ "$ci" = "$ino" ] && [ "$off" -gt 0 ] && [ "$cs" -ge "$off" ]; then
  if [ "$hl" -eq 0 ] || [ "$(head -c "$hl" "$j" | sha256sum | cut -c1-64)" = "$hh" ]; then
    start=$off
  fi
fi
echo "J $ci $cs $start"
if [ "$start" -eq 0 ] || [ "$hl" -eq 0 ]; then
  n=$(( $(head -c 4096 "$j" 2>/dev/null | head -n 1 | wc -c) ))
  e=$(head -c "$n" "$j" 2>/dev/null | tail -c 1 | od -An -tx1 | tr -d ' \n')
  if [ "$n" -gt 0 ] && { [ "$n" -eq 4096 ] || [ "$e" = 0a ]; }; then
    echo "H $n $(head -c "$n" "$j" | sha256sum | cut -c1-64)"
  fi
fi
k=0 n=0 go=1
while [ "$cs" -gt "$start" ]; do
  m=$((cs - start)); [ "$m" -gt "$ml" ] && m=$((ml + 1))
  n=$(( $(tail -c +$((start + 1)) "$j" | head -c "$m" | head -n 1 | wc -c) ))
  [ "$n" -le "$ml" ] && break
  n=$(( $(tail -c +$((start + 1)) "$j" | head -c $((cs - start)) | head -n 1 | wc -c) ))
  e=$(tail -c +$((start + n)) "$j" | head -c 1 | od -An -tx1 | tr -d ' \n')
  if [ "$e" != 0a ]; then echo "X $start $n 0"; go=0; break; fi
  echo "X $start $n 1"
  start=$((start + n)) n=0 k=$((k + 1))
  if [ "$k" -ge 16 ]; then go=0; break; fi  # SKIPS_PER_PULL
done
c=0
if [ "$go" = 1 ] && [ "$cs" -gt "$start" ]; then
  c=$((cs - start)); [ "$c" -gt "$ch" ] && c=$ch; [ "$n" -gt "$c" ] && c=$n
fi
echo "D $start $c"
if [ "$c" -gt 0 ]; then tail -c +$((start + 1)) "$j" | head -c "$c"; fi
""".replace("@JOURNAL@", str(CampaignFiles.relative().journal)).replace(
    "@STATUS@", str(CampaignFiles.relative().status_log))  # the peer's, from its folder


def remote_pull_command(args: list[str], timeout: float = PULL_TIMEOUT_S) -> str:
    """The command line for the peer: the script under ``timeout`` (1 s under ours)."""
    command = "exec sh -c " + shlex.quote(REMOTE_SCRIPT) + " cockpit-pull " + \
        " ".join(shlex.quote(a) for a in args)
    return remote_limited(command, timeout - 1)


class PullHeld(Exception):
    """Another process of this box holds the copy (its pull is running)."""

    def __init__(self, holder: str) -> None:
        super().__init__(f"pull held by another process on this box ({holder})")
        self.holder = holder


@dataclass
class PullResult:
    received: int  # bytes of the answer (stdout)
    appended: int  # journal bytes added to the copy
    reread: bool  # the copy was replaced (the peer's journal shrank or changed)
    status_changed: bool
    more: bool = False  # the peer holds more whole lines: pull again now
    skipped: list[tuple[int, int]] = field(default_factory=list)  # (offset, bytes) skipped


@dataclass
class PeerState:
    """What this side knows of one peer (kept beside the copy in ``state.json``)."""

    inode: int = 0
    offset: int = 0  # bytes of the peer's journal consumed (kept or skipped)
    held: int = 0  # bytes of the copy (the offset less the lines skipped)
    head_len: int = 0
    head_sha: str = ""
    status_sig: str = ""
    # How the last pull ended, whoever on this box made it (wall times, seconds).
    last_ok: float = 0.0
    last_try: float = 0.0
    last_error: str = ""
    skipped: list[list[int]] = field(default_factory=list)  # [offset, length], newest last
    long_at: int = -1  # an over-long line still being written there (warned once)


def _state_from(raw: dict[str, Any]) -> PeerState:
    blank = PeerState()
    kept: dict[str, Any] = {}
    for f in fields(PeerState):
        value = raw.get(f.name)
        if isinstance(value, type(getattr(blank, f.name))) and not isinstance(value, bool):
            kept[f.name] = value
        elif f.name in ("last_ok", "last_try") and isinstance(value, int) \
                and not isinstance(value, bool):
            kept[f.name] = float(value)
    if "held" not in raw and "offset" in kept:  # a state.json from before skipped lines
        kept["held"] = kept["offset"]
    kept["skipped"] = [s for s in kept.get("skipped", [])
                       if isinstance(s, list) and len(s) == 2
                       and all(isinstance(v, int) for v in s)][-SKIPS_KEPT:]
    return PeerState(**kept)


class PeerCache:
    """The local copy of one peer's journal and status line, and the pull that feeds it.

    Two cockpits on this box (a headless and a one-shot command) share the copy: a pull
    holds ``pull.lock``; a second one finds it busy and raises :class:`PullHeld`."""

    def __init__(self, campaign: Campaign, machine: Machine) -> None:
        self.machine = machine
        files = CampaignFiles.of(campaign).peer(machine.number)
        self.folder = files.folder
        self.journal_path = files.journal
        self.status_path = files.status
        self.state_path = files.state
        self.lock_path = files.lock
        self.chunk = CHUNK_START  # adapted to the link by each full chunk's rate

    def load_state(self) -> PeerState:
        try:
            raw = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return PeerState()
        if not isinstance(raw, dict):
            return PeerState()
        state = _state_from(raw)
        try:
            size = self.journal_path.stat().st_size
        except OSError:
            size = -1
        if state.held != size:  # the copy and its record disagree: start again
            return PeerState(status_sig=state.status_sig, last_ok=state.last_ok,
                             last_try=state.last_try, last_error=state.last_error)
        return state

    def _save_state(self, state: PeerState) -> None:
        write_atomic(self.state_path, json.dumps(state.__dict__))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                     0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise PullHeld(self._holder(fd)) from None
            # Who holds it and since when, for the process that finds it busy.
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {time.time():.3f}\n".encode(), 0)
            yield
        finally:
            os.close(fd)

    @staticmethod
    def _holder(fd: int) -> str:
        words = os.pread(fd, 64, 0).split()
        try:
            pid, since = int(words[0]), float(words[1])
        except (IndexError, ValueError):
            return "unknown process"
        return f"pid {pid}, pulling for {max(0.0, time.time() - since):.0f} s"

    def pull(self, timeout: float = PULL_TIMEOUT_S) -> PullResult:
        """One round trip. PullHeld when another pull on this box holds the copy,
        SshError when the peer does not answer (recorded in ``state.json`` either way
        but held)."""
        with self._locked():
            state = self.load_state()
            state.last_try = time.time()
            args = [self.machine.path, str(state.inode), str(state.offset),
                    str(state.head_len), state.head_sha or "-", state.status_sig or "none",
                    str(self.chunk), str(MAX_LINE_BYTES)]
            limit = max(self.chunk, MAX_LINE_BYTES) + STATUS_LINE_BYTES + 64 * 1024
            started = time.monotonic()
            try:
                answer = run_ssh(self.machine, remote_pull_command(args, timeout),
                                 timeout=timeout, max_stdout=limit)
                if answer.code in (124, 137):  # `timeout` there ended the command
                    raise SshError(f"machine {self.machine.number} ({self.machine.ssh}): no "
                                   f"answer within {timeout - 1:g} s (stopped there)")
                try:
                    result = self._apply(state, answer.stdout)
                except ValueError:  # a number that is not one: not our script's answer
                    raise SshError(f"machine {self.machine.number}: not a cockpit pull "
                                   "answer") from None
            except SshError as exc:
                if "no answer within" in str(exc):  # a slower link: smaller chunks
                    self.chunk = max(CHUNK_MIN, self.chunk // 4)
                state.last_error = str(exc)
                self._save_state(state)
                raise
            if result.more:  # a full chunk: its rate sizes the next one
                rate = result.received / max(1e-3, time.monotonic() - started)
                self.chunk = int(min(CHUNK_MAX, max(CHUNK_MIN, rate * timeout * 0.3)))
            return result

    def _apply(self, state: PeerState, out: bytes) -> PullResult:
        number = self.machine.number
        received = len(out)

        def line() -> bytes:
            nonlocal out
            head, sep, rest = out.partition(b"\n")
            if not sep:
                raise SshError(f"machine {number}: a truncated answer")
            out = rest
            return head

        first = line()
        if first.startswith(b"E "):
            raise SshError(f"machine {number}: {printable(first[2:].decode('utf-8', 'replace'))}")
        if not first.startswith(b"S "):
            raise SshError(f"machine {number}: not a cockpit pull answer "
                           "(is `sh` the login shell's sh?)")
        sig = first[2:].decode("ascii", "replace")
        status_changed = False
        if sig != "-" and sig != state.status_sig:
            status = line()
            status_changed = True
            write_atomic(self.status_path, status + b"\n")
        words = line().split()
        if len(words) != 4 or words[0] != b"J":
            raise SshError(f"machine {number}: not a cockpit pull answer")
        inode, size, base = (int(w) for w in words[1:])
        head, skips, (start, count) = _answer_header(line, number)
        if len(out) != count:  # the peer's command was cut short (its time limit)
            raise SshError(f"machine {number}: a truncated answer ({len(out)} of {count} "
                           "bytes)")
        end = out.rfind(b"\n")
        data = out[:end + 1]  # whole lines only; the rest comes again next pull
        reread = base == 0 and (state.offset > 0 or state.inode not in (0, inode))
        if base == 0:
            write_atomic(self.journal_path, data)
            state = PeerState(status_sig=state.status_sig, last_ok=state.last_ok,
                              last_try=state.last_try, held=len(data))
        elif data:
            with open(self.journal_path, "ab") as f:
                f.write(data)
            state.held += len(data)
        if head is not None:
            state.head_len, state.head_sha = head
        skipped = []
        for offset, length, complete in skips:
            if complete:
                skipped.append((offset, length))
                state.skipped = [*state.skipped, [offset, length]][-SKIPS_KEPT:]
                log.warning("machine %d: journal line at byte %d is %d bytes, over the %d "
                            "byte maximum: skipped", number, offset, length, MAX_LINE_BYTES)
            elif state.long_at != offset:
                state.long_at = offset
                log.warning("machine %d: journal line at byte %d is being written and is "
                            "already over the %d byte maximum: it will be skipped", number,
                            offset, MAX_LINE_BYTES)
        state.offset = start + len(data)
        state.inode = inode
        state.status_sig = sig
        state.last_ok, state.last_error = time.time(), ""
        self._save_state(state)
        more = (start + count < size and count > 0) or len(skips) >= SKIPS_PER_PULL
        return PullResult(received, len(data), reread, status_changed, more, skipped)


def _answer_header(line: Callable[[], bytes], number: int
                   ) -> tuple[tuple[int, str] | None, list[tuple[int, int, bool]],
                              tuple[int, int]]:
    """The pull answer's H (head), X (skipped lines) and D (data start, length) lines."""
    head: tuple[int, str] | None = None
    skips: list[tuple[int, int, bool]] = []
    while True:
        words = line().split()
        if len(words) == 3 and words[0] == b"H":
            head = (int(words[1]), words[2].decode("ascii", "replace"))
        elif len(words) == 4 and words[0] == b"X":
            skips.append((int(words[1]), int(words[2]), words[3] == b"1"))
        elif len(words) == 3 and words[0] == b"D":
            return head, skips, (int(words[1]), int(words[2]))
        else:
            raise SshError(f"machine {number}: not a cockpit pull answer")
