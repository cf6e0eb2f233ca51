"""A real HTTP server on 127.0.0.1 that takes what apprise sends (a generic JSON webhook,
``json://``, and an ntfy publish endpoint, ``ntfy://``): each request kept with its
path, headers and body. ``status`` makes it answer an error (a target that is down).

``hold`` pauses the next request until ``release`` is set (issue 43: a cockpit killed
at a known step of a delivery): ``"before_read"`` holds it before its bytes are read,
and then drops it unread (the service never took it); ``"after_read"`` keeps it, then
holds the answer (the service took it, the sender does not know yet). ``arrived`` is
set when a held request is there."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class AlertServer:
    requests: list[Received] = field(default_factory=list)
    status: int = 200
    hold: str | None = None  # "before_read" / "after_read": the next request waits
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None

    def held(self) -> str | None:
        """The hold for a request now (taken: only one request is held)."""
        hold, self.hold = self.hold, None
        if hold is not None:
            self.arrived.set()
        return hold

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def __enter__(self) -> AlertServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                hold = owner.held()
                if hold == "before_read":
                    owner.release.wait(60)  # a bound, not a pace: the test releases it
                    self.close_connection = True
                    return  # dropped unread: the service never took it
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                owner.requests.append(Received(self.path, dict(self.headers.items()), body))
                if hold == "after_read":
                    owner.release.wait(60)
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"id": "x"}')

            do_PUT = do_POST

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self.release.set()  # a held request ends: the server can shut down
        self._server.shutdown()
        self._server.server_close()
