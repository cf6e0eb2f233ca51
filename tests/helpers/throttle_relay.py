"""An ssh ``ProxyCommand`` that relays to HOST:PORT and throttles what comes back to
RATE bytes/s (a slow link for the fleet tests): ``python throttle_relay.py HOST PORT RATE``.

stdin goes to the server as it comes; the server's bytes reach stdout at most RATE per
second, in 16 KiB steps (a token bucket with a 16 KiB burst).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time


def main() -> int:
    host, port, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    conn = socket.create_connection((host, port))

    def upstream() -> None:
        while True:
            data = os.read(0, 65536)
            if not data:
                conn.shutdown(socket.SHUT_WR)
                return
            conn.sendall(data)

    threading.Thread(target=upstream, daemon=True).start()
    step = 16 * 1024
    due = time.monotonic()  # when the bytes sent so far may have left, at RATE
    while True:
        data = conn.recv(step)
        if not data:
            return 0
        view = memoryview(data)
        while view:
            written = os.write(1, view)
            view = view[written:]
        # An idle link earns at most one step of credit (no burst after a pause).
        due = max(due, time.monotonic() - step / rate) + len(data) / rate
        ahead = due - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)


if __name__ == "__main__":
    sys.exit(main())
