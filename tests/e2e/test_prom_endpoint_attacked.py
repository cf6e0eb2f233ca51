"""The Prometheus endpoint attacked (issue 43): hostile names in every label, a real
`cockpit headless --prom-port 0` held by 200 half-open connections, and requests of
1 MB and 100 MB.

What must hold: the exposition stays valid whatever a name holds (quotes, backslashes,
newlines, escape codes, in every string of the snapshot): Debian's `promtool check
metrics` and prometheus_client's parser accept it, one line per sample, no series
twice; half-open connections never stall the tick (the status log keeps gaining
lines) nor a normal scrape; a huge request is refused bounded (an answer in 4xx or a
closed connection, the cockpit's memory flat) and the endpoint keeps serving; what is
not a plain GET (a POST, a TLS hello) gets a plain 4xx.
"""

from __future__ import annotations

import dataclasses
import re
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cockpit.engine.snapshot import MachineView, Snapshot
from cockpit.fleet.open import open_engine
from cockpit.headless.prom_http import MetricsEndpoint
from cockpit.headless.prometheus import LABEL_LIMIT, render
from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import end, wait_for
from tests.helpers.prometheus import PROMTOOL, missing

EVIL = '"} 1\nfake_metric{x="\\' + "\x1b]52;c;AAAA\x07\u202e\r\\n\\\\\"\x00"
MB = 1024 * 1024


def hostile(value: Any) -> Any:
    """``value`` with every string in it made hostile (the original kept in front, so
    two names stay two)."""
    if isinstance(value, str):
        return value + EVIL
    if isinstance(value, tuple):
        return tuple(hostile(v) for v in value)
    if isinstance(value, list):
        return [hostile(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for field in dataclasses.fields(value):
            old = getattr(value, field.name)
            if field.init and (isinstance(old, (str, tuple, list))
                               or dataclasses.is_dataclass(old)):
                changes[field.name] = hostile(old)
        return dataclasses.replace(value, **changes)
    return value


@pytest.fixture(scope="module")
def snap(tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    folder = tmp_path_factory.mktemp("names")
    path = write_campaign(folder, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=3, sleep=0.0)}], rules=[FINITE])
    engine = open_engine(path, simulate_gpus=2)
    try:
        taken = engine.tick()
    finally:
        engine.close()
    peers = (MachineView(2, "box2", True, 3.0, None, 10),
             MachineView(3, "box3", False, 95.0, "timed out", 10))
    return dataclasses.replace(taken, machines=peers)


def test_names_with_quotes_backslashes_newlines_and_escapes_stay_valid_labels(
        snap: Snapshot) -> None:
    text = render(hostile(snap))
    assert "\x1b" not in text and "\u202e" not in text and "\x00" not in text
    assert "\r" not in text and "fake_metric" not in re.sub(r'"(\\.|[^"\\])*"', "", text)
    # One line per sample: nothing a name held started a line of its own.
    strays = [line for line in text.splitlines()
              if not re.match(r'^(# (HELP|TYPE) cockpit_\w+ |cockpit_\w+\{campaign=")', line)]
    assert strays == []
    parsed = list(text_string_to_metric_families(text))
    series = [(s.name, tuple(sorted(s.labels.items()))) for f in parsed for s in f.samples]
    assert len(series) == len(set(series)) and len(series) > 50
    labelled = [dict(labels) for _, labels in series]
    assert all(len(v) <= LABEL_LIMIT for labels in labelled for v in labels.values())
    # The names are there, shown as text: the run, the stage, the GPUs, the peers.
    runs = {labels["run"] for labels in labelled if "run" in labels}
    assert runs and all(r.startswith('r1"} 1\\x0afake_metric') for r in runs), runs
    assert {labels.get("peer") for labels in labelled if "peer" in labels}
    if missing() is None:
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, text=True,
                              capture_output=True, timeout=60)
        assert lint.returncode == 0, lint.stdout + lint.stderr


# ------------------------------------------------------------------ the live endpoint
@pytest.fixture(scope="module")
def headless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, int]]:
    """A headless cockpit with `--prom-port 0`: (its status log, the port, its pid)."""
    folder = tmp_path_factory.mktemp("endpoint")
    path = write_campaign(folder, [{"id": "prep", "hours": 1, "resource": "human"}])
    with (folder / "headless.out").open("wb") as out, \
            (folder / "headless.err").open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "cockpit", "headless", str(path),
                                 "--interval", "0.2", "--prom-port", "0"],
                                stdout=out, stderr=err)
    try:
        found = wait_for(lambda: re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics",
                                           (folder / "headless.err").read_text()),
                         timeout=90, what="the metrics line")
        port = int(found.group(1))
        wait_for(lambda: scrape(port)[0] == 200, timeout=60, what="a first tick published")
        yield folder / ".cockpit" / "status.jsonl", port, proc.pid
    finally:
        end(proc)
        assert proc.returncode is not None


def scrape(port: int) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",  # noqa: S310
                                    timeout=20) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def ticks(status_log: Path) -> int:
    return len(status_log.read_bytes().splitlines()) if status_log.exists() else 0


def test_half_open_connections_stall_neither_the_tick_nor_a_scrape(
        headless: tuple[Path, int, int]) -> None:
    status_log, port, pid = headless
    held: list[socket.socket] = []
    threads = psutil.Process(pid).num_threads()
    try:
        for i in range(200):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:  # half a request: a request line and a header, no blank line
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            held.append(sock)
        before = ticks(status_log)
        wait_for(lambda: ticks(status_log) >= before + 5, timeout=60,
                 what="five ticks while 200 connections are held open")
        status, body = scrape(port)
        assert status == 200 and b"cockpit_snapshot_timestamp_seconds" in body
        # Each held connection costs a socket, not a thread of its own.
        assert psutil.Process(pid).num_threads() <= threads + 2
    finally:
        for sock in held:
            sock.close()
    after = ticks(status_log)
    wait_for(lambda: ticks(status_log) > after, timeout=60, what="a tick after")


def _push(port: int, head: bytes, body_bytes: int) -> tuple[bytes, str]:
    """Send ``head`` then ``body_bytes`` of filler; (what the endpoint answered, how the
    sending ended: "sent", "closed", or "timeout")."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    answer = bytearray()

    def read() -> None:
        try:
            while chunk := sock.recv(65536):
                answer.extend(chunk)
        except OSError:
            return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    how = "sent"
    try:
        sock.sendall(head)
        chunk = b"a" * MB
        for _ in range(body_bytes // MB):
            sock.sendall(chunk)
    except (BrokenPipeError, ConnectionResetError):
        how = "closed"
    except TimeoutError:
        how = "timeout"
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    reader.join(30)
    sock.close()
    return bytes(answer), how


def test_a_huge_request_is_refused_bounded_and_the_endpoint_keeps_serving(
        headless: tuple[Path, int, int]) -> None:
    _, port, pid = headless
    proc = psutil.Process(pid)
    rss = proc.memory_info().rss
    attacks = {  # what is sent, then how many bytes of filler, and the answer wanted
        "a 1 MB request line": (b"GET /" + b"a" * MB + b" HTTP/1.1\r\n\r\n", 0, b"414"),
        "a 100 MB header": (b"GET /metrics HTTP/1.1\r\nX-Big: ", 100 * MB, b"431"),
        "100 MB of headers": (b"GET /metrics HTTP/1.1\r\n" + b"X-A: b\r\n" * (MB // 8),
                              99 * MB, b"431"),
        "a 100 MB body": (b"GET /metrics HTTP/1.1\r\nContent-Length: 104857600\r\n\r\n",
                          100 * MB, b"200"),  # answered, the body never read
    }
    for what, (head, size, wanted) in attacks.items():
        answer, how = _push(port, head, size)
        assert how != "timeout", what
        status = answer.split(b" ", 2)[1] if answer.startswith(b"HTTP/") else b""
        # The answer, or (the connection closed before it was read) nothing at all.
        assert status == wanted or (how == "closed" and not answer), (what, how, answer[:200])
        assert proc.memory_info().rss < rss + 64 * MB, what  # nothing of it was kept
        code, body = scrape(port)
        assert code == 200 and b"cockpit_" in body, what


def test_what_is_not_a_plain_get_gets_a_plain_refusal() -> None:
    endpoint = MetricsEndpoint("127.0.0.1", 0)
    endpoint.publish("cockpit_x 1.0\n")
    try:
        sent = {
            b"POST /metrics HTTP/1.1\r\n\r\n": b"405",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n": b"400",  # TLS hello
            b"GET metrics HTTP/1.1\r\n\r\n": b"400",
            b"GET /metrics?x=1 HTTP/1.0\n\n": b"200",  # bare newlines
            b"GET /../journal.jsonl HTTP/1.1\r\n\r\n": b"404",
        }
        for request, wanted in sent.items():
            answer, _ = _push(endpoint.port, request, 0)
            assert answer.split(b" ", 2)[1] == wanted, (request, answer[:100])
        head, _ = _push(endpoint.port, b"HEAD /metrics HTTP/1.1\r\n\r\n", 0)
        assert head.startswith(b"HTTP/1.1 200") and head.endswith(b"\r\n\r\n")
        assert b"Content-Length: 14\r\n" in head and b"cockpit_x" not in head
    finally:
        endpoint.close()
