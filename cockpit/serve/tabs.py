"""A served cockpit's tabs, on the server's side: how many may be open at once, what a
client may send one, and the end of a tab's cockpit when its client goes away.

Each websocket runs one ``cockpit tui`` (textual-serve's :class:`AppService`). Here, not
in textual-serve: a cap (``--max-tabs``: the next tab is told why and no process
starts); the client's messages read as untrusted input (only the page's own kinds —
keys, a resize, focus, a ping — each checked and bounded: a resize is clamped to
:data:`MAX_COLUMNS` x :data:`MAX_ROWS` cells, bad JSON or an unknown kind is dropped,
never the end of the server); and a tab whose client went away asked to quit, then killed after
:data:`QUIT_GRACE_S` if it does not. A tab whose *server* dies ends on its own
(:mod:`cockpit.serve.tab_driver`: its input closes).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiohttp import web
    from textual_serve.app_service import AppService

DEFAULT_MAX_TABS = 8
# A terminal's sides, in cells: a 4K screen in a small font is about 480 x 135.
MAX_COLUMNS, MAX_ROWS = 500, 200
STDIN_LIMIT = 64 * 1024  # characters of one message of keys (a paste of a page)
MESSAGE_LIMIT = 1024 * 1024  # bytes of one websocket message (aiohttp's own limit)
QUIT_GRACE_S = 10.0  # a tab's cockpit asked to quit is killed after this
TRY_LATER = 1013  # the websocket close code "try again later"

log = logging.getLogger("textual-serve")


def side(value: object, default: int, most: int) -> int:
    """A terminal side from a client: an integer within 1..``most`` (else ``default``
    when it is not a number at all)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            return default
    if not isinstance(value, int):
        return default
    return max(1, min(most, value))


def checked(text: str) -> tuple[str, Any] | None:
    """A client's message as the tab may be given it: ``("stdin", str)``,
    ``("resize", (width, height))``, ``("ping", data)``, ``("focus"|"blur", None)``;
    None for anything else (dropped)."""
    try:
        envelope = json.loads(text)
    except ValueError:
        return None
    if not isinstance(envelope, list) or not envelope or not isinstance(envelope[0], str):
        return None
    kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
    if kind == "stdin" and isinstance(data, str) and len(data) <= STDIN_LIMIT:
        return kind, data
    if kind == "resize" and isinstance(data, dict):
        width, height = data.get("width"), data.get("height")
        if isinstance(width, int) and isinstance(height, int) and not (
                isinstance(width, bool) or isinstance(height, bool)):
            return kind, (side(width, 80, MAX_COLUMNS), side(height, 24, MAX_ROWS))
        return None
    if kind == "ping" and (data is None or isinstance(data, (str, int, float))):
        return kind, data
    if kind in ("focus", "blur"):
        return kind, None
    return None


def refusal(limit: int) -> str:
    return (f"cockpit serve: {limit} tab(s) already open, the most this server allows "
            f"(--max-tabs {limit}); close one, then reload this page\r\n")


class Tabs:
    """The open tabs of one server (its event loop's: no lock needed)."""

    def __init__(self, command: str, limit: int, downloads: Any) -> None:
        self.command = command
        self.limit = limit
        self.open = 0
        self.downloads = downloads

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        """One websocket: refused past the cap, else one tab's cockpit for its life."""
        from aiohttp import web

        websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=MESSAGE_LIMIT)
        await websocket.prepare(request)
        if self.open >= self.limit:
            await websocket.send_bytes(refusal(self.limit).encode())
            await websocket.close(code=TRY_LATER, message=b"too many tabs")
            return websocket
        self.open += 1
        try:
            await self._run(websocket, side(request.query.get("width", "80"), 80, MAX_COLUMNS),
                            side(request.query.get("height", "24"), 24, MAX_ROWS))
        finally:
            self.open -= 1
        return websocket

    async def _run(self, websocket: web.WebSocketResponse, width: int, height: int) -> None:
        from textual_serve.app_service import AppService

        async def close() -> None:
            await websocket.close()

        service = AppService(self.command, write_bytes=websocket.send_bytes,
                             write_str=websocket.send_str, close=close,
                             download_manager=self.downloads)
        try:
            await service.start(width, height)
            try:
                await self._pump(websocket, service)
            finally:
                await _stop(service)
        except asyncio.CancelledError:
            await _stop(service)
            await websocket.close()
        except Exception as error:  # noqa: BLE001  (one tab's error, never the server's)
            log.warning("a tab ended: %s", error)
            await _stop(service)

    async def _pump(self, websocket: web.WebSocketResponse, service: AppService) -> None:
        from aiohttp import WSMsgType

        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            found = checked(message.data)
            if found is None:
                continue
            kind, data = found
            if kind == "stdin":
                await service.send_bytes(data.encode("utf-8", "replace"))
            elif kind == "resize":
                await service.set_terminal_size(*data)
            elif kind == "ping":
                await websocket.send_json(["pong", data])
            elif kind == "focus":
                await service.focus()
            else:
                await service.blur()


async def _stop(service: AppService) -> None:
    """Ask the tab's cockpit to quit (the engine closes as with ``q``); kill it if it has
    not within :data:`QUIT_GRACE_S`. Safe to call twice."""
    process = service._process  # textual-serve keeps it there; nothing else ends it
    if process is None or process.returncode is not None:
        return
    try:
        await asyncio.wait_for(asyncio.shield(service.stop()), QUIT_GRACE_S)
    except (asyncio.TimeoutError, OSError, RuntimeError):
        pass
    if process.returncode is None:
        try:
            await asyncio.wait_for(process.wait(), QUIT_GRACE_S)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
