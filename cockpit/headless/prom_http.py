"""``headless --prom-port P``: the tick's Prometheus text over HTTP, for a Prometheus
server to scrape.

The text is rendered once a tick (:func:`cockpit.headless.prometheus.render`, the same
as the textfile) and published here; a scrape only sends the latest bytes, so its cost
does not depend on the campaign, and a scrape never waits for a tick. Until the first
tick it answers 503. Only ``GET /metrics`` (and ``/`` pointing there); no request is
logged. Bound to 127.0.0.1 unless told otherwise (the figures are read-only, but they
name the campaign, its stages and runs).

One thread serves every connection through a selector, so a connection costs a
socket, never a thread: many half-open connections (a port scan, a slow client, an
attack) stall neither the tick nor a normal scrape. What a client may cost is bounded:
at most :data:`MAX_CONNECTIONS` open (past it the oldest still sending its request is
dropped), :data:`REQUEST_TIMEOUT_S` from connect to the last byte of the answer, a
request head of :data:`MAX_REQUEST_BYTES` (past it: 431, or 414 for a request line that
long, and the connection closed); a body is never read.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from dataclasses import dataclass, field

from cockpit.common.errors import InputError
from cockpit.headless.prometheus import CONTENT_TYPE

REQUEST_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64
MAX_REQUEST_BYTES = 16 * 1024
TEXT = "text/plain; charset=utf-8"
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           414: "URI Too Long", 431: "Request Header Fields Too Large",
           503: "Service Unavailable"}


@dataclass
class _Connection:
    sock: socket.socket
    deadline: float
    received: bytearray = field(default_factory=bytearray)
    answer: bytes | None = None  # once set: the request is read, the answer being sent


def answer(head: bytes, published: bytes | None) -> bytes:
    """The whole HTTP answer to a request's head (its request line first)."""
    words = head.split(b"\n", 1)[0].strip().split()
    if len(words) not in (2, 3) or not words[1].startswith(b"/"):
        return _reply(400, b"bad request\n", TEXT)
    method, path = words[0], words[1].split(b"?", 1)[0]
    if method not in (b"GET", b"HEAD"):
        return _reply(405, b"only GET\n", TEXT)
    if path == b"/metrics":
        reply = (_reply(503, b"no tick yet\n", TEXT) if published is None
                 else _reply(200, published, CONTENT_TYPE))
    elif path == b"/":
        reply = _reply(200, b"cockpit: the metrics are at /metrics\n", TEXT)
    else:
        reply = _reply(404, b"not found\n", TEXT)
    return reply.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n" if method == b"HEAD" else reply


def too_long(received: bytes) -> bytes:
    """The answer to a request head past :data:`MAX_REQUEST_BYTES`."""
    if b"\n" not in received:
        return _reply(414, b"request line too long\n", TEXT)
    return _reply(431, b"request head too long\n", TEXT)


def _reply(code: int, body: bytes, content_type: str) -> bytes:
    head = (f"HTTP/1.1 {code} {REASONS[code]}\r\nServer: cockpit\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n")
    return head.encode("ascii") + body


class MetricsEndpoint:
    """A listening ``/metrics`` on its own daemon thread; :meth:`publish` each tick."""

    def __init__(self, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host.strip("[]"), port))
            listener.listen(128)
        except OSError as exc:
            listener.close()
            raise InputError(f"cockpit headless: --prom-port {port}: cannot listen on "
                             f"{host}:{port}: {exc.strerror or exc}") from None
        listener.setblocking(False)
        self.port: int = listener.getsockname()[1]
        self.published: bytes | None = None
        self._listener = listener
        self._wake_read, self._wake = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(listener, selectors.EVENT_READ)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._open: dict[socket.socket, _Connection] = {}  # oldest first
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name="cockpit-prom-http",
                                        daemon=True)
        self._thread.start()

    def publish(self, text: str) -> None:
        self.published = text.encode("utf-8")  # one reference swap: atomic

    def close(self) -> None:
        self._closing = True
        try:
            self._wake.send(b"x")
        except OSError:
            pass
        self._thread.join(timeout=5)
        for conn in list(self._open.values()):
            self._drop(conn)
        self._selector.close()
        for sock in (self._listener, self._wake_read, self._wake):
            sock.close()

    # ------------------------------------------------------------------ the thread
    def _serve(self) -> None:
        while not self._closing:
            for key, mask in self._selector.select(timeout=1.0):
                if key.fileobj is self._listener:
                    self._accept()
                elif isinstance(key.data, _Connection):
                    try:
                        if mask & selectors.EVENT_WRITE:
                            self._send(key.data)
                        else:
                            self._receive(key.data)
                    except (OSError, ValueError):  # that connection's end, not the thread's
                        self._drop(key.data)
            now = time.monotonic()
            for conn in [c for c in self._open.values() if c.deadline <= now]:
                self._drop(conn)

    def _accept(self) -> None:
        for _ in range(MAX_CONNECTIONS):  # what is waiting, within one turn's share
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors: the oldest goes, or a pause
                if self._open:
                    self._drop(next(iter(self._open.values())))
                else:
                    time.sleep(0.05)  # (never a busy loop on a listener it cannot take)
                return
            self._make_room()
            sock.setblocking(False)
            conn = _Connection(sock, time.monotonic() + REQUEST_TIMEOUT_S)
            self._open[sock] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)

    def _make_room(self) -> None:
        """At the cap, the oldest connection still sending its request is dropped."""
        if len(self._open) < MAX_CONNECTIONS:
            return
        waiting = [c for c in self._open.values() if c.answer is None]
        self._drop((waiting or list(self._open.values()))[0])

    def _receive(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        conn.received += data
        ends = conn.received.find(b"\r\n\r\n"), conn.received.find(b"\n\n")
        if max(ends) >= 0:
            conn.answer = answer(bytes(conn.received), self.published)
        elif len(conn.received) > MAX_REQUEST_BYTES:
            conn.answer = too_long(bytes(conn.received[:MAX_REQUEST_BYTES]))
        else:
            return
        conn.received = bytearray()  # nothing more is read: a body is never kept
        self._selector.modify(conn.sock, selectors.EVENT_WRITE, conn)

    def _send(self, conn: _Connection) -> None:
        assert conn.answer is not None
        try:
            sent = conn.sock.send(conn.answer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        conn.answer = conn.answer[sent:]
        if not conn.answer:
            self._drop(conn)

    def _drop(self, conn: _Connection) -> None:
        self._open.pop(conn.sock, None)
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
