"""`cockpit serve` attacked without a browser (issue 43): a real server on a loopback
port, real tab processes, and a websocket client on a raw socket that sends what it
chooses (tests/helpers/websocket.py).

What must hold: every route and the websocket refuse a missing or wrong token, and a
websocket from another site's page, without starting a process; a read-only tab writes
no journal line whatever the client sends (keys that act, the command palette, a paste,
a resize of any size); tabs are capped, the next one refused with a reason and no
process; a tab's cockpit ends when its client goes away and when `serve` is killed -9.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.helpers.campaigns import step_command, write_campaign
from tests.helpers.process import end, run_cockpit, wait_for
from tests.helpers.websocket import RawSocket, handshake

pytest.importorskip("textual_serve")


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    port: int
    token: str

    def tabs(self) -> list[psutil.Process]:
        """The tabs' cockpits: every process under the server running `cockpit tui`."""
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return []
        out = []
        for child in children:
            try:
                if "tui" in child.cmdline():
                    out.append(child)
            except psutil.Error:
                continue
        return out

    def open_tab(self, *, origin: str | None = None, size: str = "width=140&height=45"
                 ) -> RawSocket:
        headers = {"Origin": origin or f"http://127.0.0.1:{self.port}"}
        sock, status, rest = handshake(self.port, f"/ws?token={self.token}&{size}", headers)
        assert status == 101, (status, rest)
        return RawSocket(sock, rest)


@contextmanager
def serve(path: Path, *extra: str) -> Iterator[Served]:
    """`cockpit serve` on a free loopback port, its output in a file (never a pipe
    nobody reads); ended by its pid, and any tab left behind killed by its pid."""
    out = path.parent / "serve.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "cockpit", "serve", str(path),
                                 "--port", "0", "--simulate-gpus", "1", *extra],
                                stdout=sink, stderr=subprocess.STDOUT)
    leftovers: list[psutil.Process] = []
    try:
        found = wait_for(lambda: proc.poll() is None and re.search(
            r"then open:\s+http://127\.0\.0\.1:(\d+)/\?token=(\S+)", out.read_text()) or (
            proc.poll() is not None and out.read_text() + " (serve ended)"),
            timeout=120, what="the URL serve prints")
        assert not isinstance(found, str), found
        served = Served(proc, int(found[1]), found[2])
        leftovers = served.tabs()
        yield served
        leftovers += served.tabs()
    finally:
        end(proc, grace=20)
        for tab in leftovers:
            try:
                tab.kill()
            except psutil.Error:
                pass


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def journal_bytes(path: Path) -> bytes:
    return (path.parent / ".cockpit" / "journal.jsonl").read_bytes()


def wait_for_text(tab: RawSocket, *words: str, timeout: float = 90) -> str:
    return str(wait_for(lambda: all(w in (t := tab.text()) for w in words) and t,
                        timeout=timeout, what=f"the tab to draw {words}: "
                                              f"{tab.text()[-1500:]!r}"))


def wait_for_frames(tab: RawSocket, more: int, timeout: float = 60) -> None:
    """``more`` frames after those received so far: the tab drew again (its ticks)."""
    start = len(tab.frames)
    wait_for(lambda: len(tab.frames) >= start + more, timeout=timeout,
             what=f"{more} more frames from the tab")


# ------------------------------------------------------------------------------ tests
def test_no_route_and_no_websocket_without_the_token_or_from_another_site(
        tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [{"id": "prep", "hours": 1, "resource": "human"}])
    with serve(path) as served:
        base = f"http://127.0.0.1:{served.port}"
        wrong = "x" * len(served.token)
        for route in ("/", "/static/js/textual.js", "/download/anykey", "/no/such/route",
                      "/ws"):
            for query in ("", "?token=", f"?token={wrong}", f"?token={served.token[:-1]}"):
                status, body = get(f"{base}{route}{query}")
                assert status == 403 and "token" in body, (route, query, status)
            cookie = {"Cookie": f"cockpit_token_{served.port}={wrong}"}
            assert get(f"{base}{route}", cookie)[0] == 403, route
        own = {"Origin": f"http://127.0.0.1:{served.port}"}
        # The websocket itself: upgraded only with the token, and only for this page.
        for path_q, headers in (
                ("/ws", own), (f"/ws?token={wrong}", own),
                (f"/ws?token={served.token}", {"Origin": "http://evil.example"}),
                (f"/ws?token={served.token}", {"Origin": "null"}),
                (f"/ws?token={served.token}",
                 {"Origin": f"http://127.0.0.1:{served.port + 1}"}),
                ("/ws", {**own, "Cookie": f"cockpit_token_{served.port}={wrong}"})):
            sock, status, rest = handshake(served.port, path_q, headers)
            sock.close()
            assert status == 403, (path_q, headers, status, rest)
        assert served.tabs() == []  # no refused websocket started a cockpit
        listening = [c.laddr for c in psutil.Process(served.proc.pid).net_connections("inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening and all(a.ip == "127.0.0.1" for a in listening), listening
    beyond = run_cockpit("serve", str(path), "--host", "0.0.0.0", "--port", "0")
    assert beyond.returncode == 2 and "--allow-remote" in beyond.stderr
    no_tabs = run_cockpit("serve", str(path), "--max-tabs", "0", "--port", "0")
    assert no_tabs.returncode == 2 and "between 1 and 256" in no_tabs.stderr
    assert "Traceback" not in no_tabs.stderr


def test_tabs_are_capped_and_end_with_their_client_and_with_a_killed_server(
        tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [{"id": "prep", "hours": 1, "resource": "human"}])
    with serve(path, "--read-only", "--max-tabs", "1") as served:
        first = served.open_tab()
        wait_for_text(first, "prep")
        [tab] = served.tabs()
        # The cap: the next tab is refused with the reason, and no cockpit is started.
        second = served.open_tab()
        assert second.closed.wait(30) and second.close_code == 1013, second.close_code
        assert "--max-tabs 1" in second.text(), second.text()
        assert [t.pid for t in served.tabs()] == [tab.pid]
        # The client goes away: its tab's cockpit ends.
        first.close()
        wait_for(lambda: not tab.is_running() or tab.status() == psutil.STATUS_ZOMBIE,
                 timeout=60, what="the tab's cockpit to end with its client")
        # A tab is open again (the cap counts live tabs); then serve is killed -9.
        third = served.open_tab()
        wait_for_text(third, "prep")
        left = served.tabs()
        assert left
        os.kill(served.proc.pid, signal.SIGKILL)
        served.proc.wait(timeout=30)
        wait_for(lambda: not any(t.is_running() and t.status() != psutil.STATUS_ZOMBIE
                                 for t in left), timeout=60,
                 what="the tabs' cockpits to end with the killed server")
        third.sock.close()


def test_a_read_only_tab_writes_nothing_whatever_the_client_sends(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 2, "resource": "gpu", "run": "r1",
         "command": step_command(steps=3000, sleep=0.1)},
        {"id": "later", "hours": 1, "resource": "gpu", "run": "r2", "after": ["train"],
         "command": step_command(steps=3, sleep=0.1)}])
    assert run_cockpit("start", str(path), "train").returncode == 0
    try:
        with serve(path, "--read-only") as served:
            tab = served.open_tab()
            wait_for_text(tab, "running", "train", "Help")
            before = journal_bytes(path)
            # The command palette, opened on the main screen: what it lists, and a
            # command typed into it, Enter at once, then yes.
            tab.keys("\x10")
            wait_for_text(tab, "Screenshot")
            palette = tab.text()
            assert not re.search(r"(Stop|Start|Accept|Reject|Export|Note|Decide|Mark|Cost|"
                                 r"Verify) \(\w\)", palette), palette[-3000:]
            tab.keys("Stop")
            tab.keys("\r")
            tab.keys("y")
            tab.keys("\x1b")
            # Every key that acts, each confirmed as if a person said yes.
            for key in "sxadmnervcl":
                tab.keys(key)
                tab.keys("\r")
                tab.keys("y")
                tab.keys("\x1b")
            # A paste of a command, and of the keys that act.
            tab.keys("\x1b[200~cockpit stop r1 --reason pasted\rsxy\x1b[201~")
            # Resizes no terminal has, and messages the page never sends.
            tab.send_json(["resize", {"width": 10**9, "height": 10**9}])
            tab.send_json(["resize", {"width": -5, "height": "x"}])
            tab.send_json(["stdin", 12345])
            tab.send_json(["no-such-message", {}])
            tab.send_json({"not": "a list"})
            tab.send_json(["ping", "still there?"])
            wait_for(lambda: any(b'"pong"' in f for f in tab.frames), timeout=60,
                     what="the server's answer after the crafted messages")
            tab.send_json(["resize", {"width": 120, "height": 40}])
            wait_for_frames(tab, 8)  # ticks went by after every attempt
            assert tab.close_code is None  # the tab is still there
            assert journal_bytes(path) == before
            kinds = [json.loads(line)["kind"] for line in before.decode().splitlines()]
            assert "stop_requested" not in kinds
            status = json.loads(run_cockpit("status", str(path), "--json").stdout)
            assert {r["id"]: r["state"] for r in status["runs"]}["r1"] == "running"
            [proc] = served.tabs()
            assert proc.memory_info().rss < 1_000_000_000  # no screen of 10^18 cells
            tab.close()
        # Nothing the client sent crashed the tab (a fast Enter in the palette did).
        printed = (path.parent / "serve.out").read_text()
        assert "Traceback" not in printed and "Error" not in printed, printed[-3000:]
    finally:
        run_cockpit("stop", str(path), "r1", "--reason", "test over")
