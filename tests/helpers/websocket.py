"""A websocket client written on a raw socket, for attacking `cockpit serve`: the test
chooses every header (the Origin, the cookie, none) and every message (key bytes, a
paste, a resize of any size), not only what the page's JavaScript would send.

RFC 6455 as far as a test needs it: the handshake, masked client frames, unmasked server
frames read by a thread (which answers the server's pings, so its heartbeat keeps the
socket open), a close frame.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import struct
import threading
from typing import Any

ANSI = re.compile(r"\x1b(\[[0-9;?$<>=]*[A-Za-z~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|.)")
TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA


def handshake(port: int, path: str, headers: dict[str, str] | None = None,
              timeout: float = 30.0) -> tuple[socket.socket, int, bytes]:
    """Connect and ask to upgrade ``path``: (the socket, the HTTP status, the rest of
    the answer read so far: the refusal's body, or the first frames)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket",
             "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    return sock, status, rest


class RawSocket:
    """An open websocket to a served cockpit; ``frames`` is what the server sent."""

    def __init__(self, sock: socket.socket, first: bytes) -> None:
        self.sock = sock
        self.frames: list[bytes] = []
        self.close_code: int | None = None
        self.closed = threading.Event()
        self._buffer = first
        self._lock = threading.Lock()
        sock.settimeout(None)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ sending
    def send_frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        size = len(payload)
        if size < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
        elif size < 65536:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        with self._lock:
            self.sock.sendall(head + mask + masked)

    def send_json(self, message: Any) -> None:
        self.send_frame(TEXT, json.dumps(message).encode())

    def keys(self, text: str) -> None:
        """What a terminal would send for ``text`` (a key, a paste, an escape)."""
        self.send_json(["stdin", text])

    def close(self) -> None:
        try:
            self.send_frame(CLOSE, struct.pack("!H", 1000))
        except OSError:
            pass
        self.closed.wait(10)
        self.sock.close()

    # ------------------------------------------------------------------ receiving
    def text(self) -> str:
        """What the cockpit drew, less the escape sequences."""
        return ANSI.sub("", b"".join(self.frames).decode("utf-8", "replace"))

    def _exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self._buffer += chunk
        out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out

    def _read(self) -> None:
        try:
            while True:
                first, second = self._exactly(2)
                size = second & 0x7F
                if size == 126:
                    (size,) = struct.unpack("!H", self._exactly(2))
                elif size == 127:
                    (size,) = struct.unpack("!Q", self._exactly(8))
                payload = self._exactly(size)
                opcode = first & 0x0F
                if opcode == PING:
                    self.send_frame(PONG, payload)
                elif opcode == CLOSE:
                    self.close_code = struct.unpack("!H", payload[:2])[0] if payload else 1005
                    return
                elif opcode in (TEXT, BINARY, 0x0):
                    self.frames.append(payload)
        except (EOFError, OSError):
            return
        finally:
            self.closed.set()
