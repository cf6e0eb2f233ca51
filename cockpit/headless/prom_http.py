"""``headless --prom-port P``: the tick's Prometheus text over HTTP, for a Prometheus
server to scrape.

The text is rendered once a tick (:func:`cockpit.headless.prometheus.render`, the same
as the textfile) and published here; a scrape only sends the latest bytes, so its cost
does not depend on the campaign, and a scrape never waits for a tick. Until the first
tick it answers 503. Only ``GET /metrics`` (and ``/`` pointing there); no request is
logged; a connection that sends nothing is dropped after :data:`REQUEST_TIMEOUT_S`.
Bound to 127.0.0.1 unless told otherwise (the figures are read-only, but they name the
campaign, its stages and runs).
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cockpit.common.errors import InputError
from cockpit.headless.prometheus import CONTENT_TYPE

REQUEST_TIMEOUT_S = 10.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    published: bytes | None = None

    def __init__(self, address: tuple[str, int], family: socket.AddressFamily) -> None:
        self.address_family = family
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = REQUEST_TIMEOUT_S
    server_version = "cockpit"
    sys_version = ""

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body = self.server.published
            if body is None:
                self._reply(503, b"no tick yet\n", "text/plain; charset=utf-8")
            else:
                self._reply(200, body, CONTENT_TYPE)
        elif path == "/":
            self._reply(200, b"cockpit: the metrics are at /metrics\n",
                        "text/plain; charset=utf-8")
        else:
            self._reply(404, b"not found\n", "text/plain; charset=utf-8")

    def _reply(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Silent: a scrape every 15 s would fill the headless output."""


class MetricsEndpoint:
    """A listening ``/metrics`` on its own daemon thread; :meth:`publish` each tick."""

    def __init__(self, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            self._server = _Server((host.strip("[]"), port), family)
        except OSError as exc:
            raise InputError(f"cockpit headless: --prom-port {port}: cannot listen on "
                             f"{host}:{port}: {exc.strerror or exc}") from None
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="cockpit-prom-http", daemon=True)
        self._thread.start()

    def publish(self, text: str) -> None:
        self._server.published = text.encode("utf-8")  # one reference swap: atomic

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
