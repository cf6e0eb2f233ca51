"""`cockpit serve` (issue 28) with a real server, real tab processes and a real browser:
Debian's Chromium, driven headless by Playwright, opens the served cockpit during a
campaign whose stage really runs; without the token nothing answers; a read-only tab
writes nothing when `x` is pressed; the server listens on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers.campaigns import step_command, write_campaign
from tests.helpers.process import end, run_cockpit

pytest.importorskip("textual_serve")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
POLL_MS = 100  # how often a tab looks again (its events arrive while it waits)
# As the machine's notes say: without the background-networking flags Chromium keeps
# trying to reach Google's hosts through a closed network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
ANSI = re.compile(r"\x1b(\[[0-9;?$]*[A-Za-z]|\][^\x07]*\x07)")


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    port: int
    token: str
    printed: str


@contextmanager
def serve(path: Path, *extra: str) -> Iterator[Served]:
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "serve", str(path), "--port", "0",
                             "--simulate-gpus", "2", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    printed = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            printed.append(line)
            found = re.search(r"then open:\s+(http://127\.0\.0\.1:(\d+)/\?token=(\S+))", line)
            if found:
                yield Served(proc, found[1], int(found[2]), found[3], "".join(printed))
                break
        else:
            raise AssertionError(f"serve printed no URL: {''.join(printed)}"
                                 f"{proc.stderr.read() if proc.stderr else ''}")
    finally:
        tree = [proc.pid]
        try:
            tree += [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        except psutil.Error:
            pass
        end(proc, grace=20)
        for pid in tree[1:]:  # the tabs' cockpits, should any outlive the server
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def running_campaign(tmp_path: Path) -> Path:
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 2, "resource": "gpu", "run": "r1",
         "command": step_command(steps=3000, sleep=0.1)}])
    started = run_cockpit("start", str(path), "train")
    assert started.returncode == 0, started.stderr
    return path


def stop_all(path: Path) -> None:
    run_cockpit("stop", str(path), "r1", "--reason", "test over")


def journal_bytes(path: Path) -> bytes:
    return (path.parent / ".cockpit" / "journal.jsonl").read_bytes()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, Any]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode(), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One browser for the module (each test opens its own tabs in it)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("no Chromium (.ci/run installs Debian's chromium)")
    with sync_api.sync_playwright() as play:
        browser = play.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class Tab:
    """A browser tab on the served cockpit, keeping what its websocket received."""

    def __init__(self, chromium: Any, url: str) -> None:
        self.page = chromium.new_page(viewport={"width": 1400, "height": 900})
        self.frames: list[bytes] = []
        self.page.on("websocket", lambda ws: ws.on("framereceived", self._keep))
        self.page.goto(url)

    def _keep(self, frame: str | bytes) -> None:
        self.frames.append(frame if isinstance(frame, bytes) else frame.encode())

    def text(self) -> str:
        """What the browser was sent to draw, less the escape sequences."""
        return ANSI.sub("", b"".join(self.frames).decode("utf-8", "replace"))

    def wait_for_text(self, *words: str, timeout_ms: int = 60_000) -> str:
        return str(self.poll(lambda: all(w in (text := self.text()) for w in words) and text,
                             f"the browser never got {words}", timeout_ms))

    def wait_for_frames(self, more: int, timeout_ms: int = 60_000) -> None:
        """``more`` frames after the ones received so far: the served cockpit drew again
        (its ticks), whatever it drew."""
        start = len(self.frames)
        self.poll(lambda: len(self.frames) >= start + more, f"{more} more frames", timeout_ms)

    def poll(self, predicate: Any, what: str, timeout_ms: int) -> Any:
        """Playwright's events arrive only while the page waits: the tab's poll helper."""
        for _ in range(timeout_ms // POLL_MS):
            value = predicate()
            if value:
                return value
            self.page.wait_for_timeout(POLL_MS)
        raise AssertionError(f"{what}: {self.text()[-3000:]!r}")


QUARTER = {"x": 0, "y": 0, "width": 700, "height": 450}


def png_dimensions(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header (its IHDR chunk, always the first)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def png_size_and_colours(data: bytes) -> tuple[int, int, int]:
    """Width, height and the number of distinct pixel colours of an 8-bit RGB(A) PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, [], b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6)
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    colours: set[bytes] = set()
    previous = bytearray(stride)
    for row in range(height):  # undo the PNG filters, one row at a time
        at = row * (stride + 1)
        kind, line = raw[at], bytearray(raw[at + 1:at + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + best) & 0xFF
        if row % 8 == 0:
            colours.update(bytes(line[i:i + 3]) for i in range(0, stride, channels * 4))
        previous = line
    return width, height, len(colours)


# ------------------------------------------------------------------------------ tests
def test_the_browser_shows_the_running_campaign_and_a_screenshot_is_kept(
        tmp_path: Path, chromium: Any) -> None:
    path = running_campaign(tmp_path)
    try:
        with serve(path) as served:
            assert "ssh -N -L" in served.printed and f"{served.port}:127.0.0.1:" in served.printed
            tab = Tab(chromium, served.url)
            text = tab.wait_for_text("window ", "▶ running", "train", "SIMULATED")
            assert re.search(r"window \d\d-\d\d \d\d:\d\d → ", text), text[-2000:]
            shot = tmp_path / "served.png"

            def drawn() -> tuple[int, int, int] | None:
                """The frame drawn, not only sent: a screenshot of a dashboard, not of a
                blank page (its colours, counted in the top-left quarter, where the
                window and the stages are drawn: decoding the whole PNG in Python took
                seconds of CPU a poll)."""
                tab.page.screenshot(path=str(shot), clip=QUARTER)
                got = png_size_and_colours(shot.read_bytes())
                return got if got[2] >= 8 else None

            width, height, colours = tab.poll(drawn, "a drawn dashboard", 60_000)
            assert (width, height) == (QUARTER["width"], QUARTER["height"])
            assert colours >= 8, colours  # a drawn dashboard, not a blank page
            tab.page.screenshot(path=str(shot))  # the whole page is kept for a person
            assert png_dimensions(shot.read_bytes()) == (1400, 900)
    finally:
        stop_all(path)


def test_without_the_token_nothing_answers_and_only_the_loopback_listens(
        tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [{"id": "prep", "hours": 1, "resource": "human"}])
    with serve(path) as served:
        base = f"http://127.0.0.1:{served.port}"
        for url in (f"{base}/", f"{base}/?token=wrong", f"{base}/static/js/textual.js",
                    f"{base}/ws", f"{base}/?token="):
            status, body, _ = get(url)
            assert status == 403, (url, status)
            assert "token" in body
        status, body, headers = get(served.url)
        assert status == 200 and "ws://127.0.0.1:" in body
        cookie = headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        # The cookie alone opens the page's other files (what the browser sends next).
        pair = cookie.split(";", 1)[0]
        assert get(f"{base}/static/js/textual.js", {"Cookie": pair})[0] == 200
        assert get(f"{base}/static/js/textual.js", {"Cookie": pair[:-1]})[0] == 403
        # A page of another site, in a browser holding the cookie, cannot open the socket.
        status, _, _ = get(f"{base}/ws", {"Cookie": pair, "Origin": "http://evil.example",
                                          "Connection": "Upgrade", "Upgrade": "websocket",
                                          "Sec-WebSocket-Version": "13",
                                          "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
        assert status == 403
        listening = [c.laddr for c in psutil.Process(served.proc.pid).net_connections("inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening and all(addr.ip == "127.0.0.1" for addr in listening), listening


def test_a_read_only_tab_writes_nothing_when_x_is_pressed(tmp_path: Path,
                                                          chromium: Any) -> None:
    path = running_campaign(tmp_path)
    try:
        with serve(path, "--read-only") as served:
            assert "read-only" in served.printed
            tab = Tab(chromium, served.url)
            tab.wait_for_text("▶ running", "train", "? Help")
            before = journal_bytes(path)
            tab.page.locator("#terminal").click()
            for key in ("x", "Enter", "y", "x"):
                tab.page.keyboard.press(key)
                tab.wait_for_frames(1)  # the tab took the key and drew again
            tab.wait_for_frames(6)  # ticks went by after the keys: nothing was written
            assert journal_bytes(path) == before
            events = [json.loads(line)["kind"] for line in before.decode().splitlines()]
            assert "stop_requested" not in events
            assert "x Stop" not in tab.text()  # the key is gone from the key bar
            status = json.loads(run_cockpit("status", str(path), "--json").stdout)
            assert {r["id"]: r["state"] for r in status["runs"]}["r1"] == "running"
    finally:
        stop_all(path)


def test_serving_beyond_the_loopback_needs_an_explicit_flag(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [{"id": "prep", "hours": 1, "resource": "human"}])
    result = run_cockpit("serve", str(path), "--host", "0.0.0.0", "--port", "0")
    assert result.returncode == 2
    assert "--allow-remote" in result.stderr and "Traceback" not in result.stderr
    bad = run_cockpit("serve", str(path), "--port", "99999")
    assert bad.returncode == 2 and "65535" in bad.stderr


def test_without_the_serve_extra_the_command_says_what_to_install(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, [{"id": "prep", "hours": 1, "resource": "human"}])
    hide = ("import sys; sys.modules['textual_serve'] = None; "
            "sys.modules['textual_serve.server'] = None; from cockpit.cli import main; "
            f"sys.exit(main(['serve', {str(path)!r}, '--port', '0']))")
    result = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2, result.stderr
    assert "pip install 'cockpit[serve]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_two_tabs_starting_the_same_stage_start_it_once(tmp_path: Path,
                                                        chromium: Any) -> None:
    """Two browser tabs are two cockpits: both reach "Start stage train?", both say y;
    the claim under the journal lock lets one launch through and refuses the other."""
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 2, "resource": "gpu", "run": "r1",
         "command": step_command(steps=3000, sleep=0.1)}])
    try:
        with serve(path) as served:
            tabs = [Tab(chromium, served.url), Tab(chromium, served.url)]
            for tab in tabs:
                tab.wait_for_text("train", "? Help")
                tab.page.locator("#terminal").click()
                tab.page.keyboard.press("s")
                tab.wait_for_text("Start which stage?")
                tab.page.keyboard.press("Enter")
                tab.wait_for_text("Start stage train?")
            for tab in tabs:  # both confirm: one claim wins, the other is refused
                tab.page.keyboard.press("y")
            for tab in tabs:  # each tab's engine sees the one run
                tab.wait_for_text("▶ running")
        events = [json.loads(line) for line in journal_bytes(path).decode().splitlines()]
        started = [e for e in events if e["kind"] == "stage_started"]
        assert [e["stage"] for e in started] == ["train"], started
        kinds = [e["kind"] for e in events]
        assert kinds.count("stage_claimed") == 1 and kinds.count("run_started") == 1, kinds
        status = json.loads(run_cockpit("status", str(path), "--json").stdout)
        assert {r["id"]: r["state"] for r in status["runs"]}["r1"] == "running"
    finally:
        stop_all(path)
