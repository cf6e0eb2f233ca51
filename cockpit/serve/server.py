"""`cockpit serve`: the same TUI in a browser, through textual-serve.

Each browser tab that connects runs its own ``cockpit tui FILE`` (textual-serve's model:
one process per connection, its screen sent over a websocket), so a tab is one more
cockpit beside the tmux one: the same engine, claims under the journal lock, no double
action. With ``--read-only`` the tab's cockpit is ``cockpit tui FILE --read-only``: no
key that writes, and its engine refuses every action. What guards the door is in
:mod:`cockpit.serve.access`, what guards the tabs in :mod:`cockpit.serve.tabs`; this
module wires them into textual-serve's aiohttp server.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import logging
import shlex
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cockpit.common.errors import InputError
from cockpit.common.net import is_loopback
from cockpit.serve.access import (
    LOOPBACK,
    cookie_name,
    new_token,
    reach,
    safe_host,
    same_origin,
    token_matches,
)
from cockpit.serve.tabs import DEFAULT_MAX_TABS, Tabs

if TYPE_CHECKING:
    from cockpit.campaign import Campaign

MISSING = ("cockpit serve: the browser face needs textual-serve, an optional extra: "
           "pip install 'cockpit[serve]' (or: pip install textual-serve)")
TAB_DRIVER = "cockpit.serve.tab_driver:TabDriver"
REFUSED = ("cockpit serve: this address needs the token `cockpit serve` printed "
           "(open the URL it printed, with ?token=...)\n")


def face_command(args: argparse.Namespace, file: Path) -> str:
    """The shell command each connection runs (textual-serve runs it through a shell:
    every word quoted, the campaign's path included)."""
    words = [sys.executable, "-m", "cockpit", "tui", str(file),
             "--interval", f"{float(args.interval):g}"]
    if args.read_only:
        words.append("--read-only")
    if args.theme:
        words += ["--theme", args.theme]
    if args.simulate_gpus is not None:
        words += ["--simulate-gpus", str(args.simulate_gpus)]
    if getattr(args, "machine", None) is not None:
        words += ["--machine", str(args.machine)]
    # Each tab says it is a served tab: "conducted by serve, pid …" on the other faces;
    # its driver ends it when the server is gone (cockpit.serve.tab_driver).
    return f"COCKPIT_FACE=serve TEXTUAL_DRIVER={TAB_DRIVER} " + shlex.join(words)


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound now: a port in use is said before anything starts,
    and port 0 gets a free one the printed URL can name."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise InputError(f"cockpit serve: cannot listen on {host}:{port}: "
                         f"{exc.strerror or exc}") from None
    sock.listen(64)
    sock.setblocking(False)
    return sock


def run_serve(args: argparse.Namespace) -> int:
    try:
        import textual_serve.server  # noqa: F401  (only: is the extra installed?)
        from aiohttp import web
    except ImportError:
        print(MISSING, file=sys.stderr)
        return 2

    from cockpit.campaign import load_campaign

    campaign = load_campaign(args.file)  # bad input says so here, not in each tab
    host = args.host
    if not is_loopback(host) and not args.allow_remote:
        raise InputError(f"cockpit serve: --host {host} is not this machine's loopback: "
                         "anyone who reaches it could stop runs; add --allow-remote to "
                         "mean it (an SSH tunnel to 127.0.0.1 is the safe way)")
    sock = listen(host, args.port)
    server = build_server(args, campaign, port=sock.getsockname()[1], token=new_token())
    server.initialize_logging()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, server.request_exit)
    try:
        web.run_app(server._make_app(), sock=sock, handle_signals=False, loop=loop,
                    access_log=None, print=lambda *_: None)
    finally:
        sock.close()
    return 0


def build_server(args: argparse.Namespace, campaign: Campaign, *, port: int,
                 token: str) -> Any:
    """textual-serve's server for this campaign, behind the token and the Origin check,
    printing where to go once it listens."""
    import aiohttp_jinja2
    from aiohttp import web
    from textual_serve.server import Server

    from cockpit.export.bagit_files import fetch_target

    command = face_command(args, Path(campaign.path).resolve())
    title = f"cockpit · {campaign.id}" + (" (read-only)" if args.read_only else "")
    target = fetch_target(campaign.settings)
    lines = reach(args.host, port, token, ssh_user=target.user, ssh_host=target.host,
                  ssh_port=target.port)
    cookie = cookie_name(port)
    Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        by_query = token_matches(request.query.get("token"), token)
        if not by_query and not token_matches(request.cookies.get(cookie), token):
            return web.Response(status=403, text=REFUSED)
        if request.path == "/ws" and not same_origin(request.headers.get("Origin"),
                                                     request.host):
            return web.Response(status=403, text="cockpit serve: not from this page\n")
        response = await handler(request)
        if by_query and not response.prepared:
            response.set_cookie(cookie, token, httponly=True, samesite="Strict", path="/")
        return response

    class CockpitServer(Server):
        """textual-serve's server behind the token, with the page's URLs taken from
        the address the browser used (a tunnel's local port may differ), its tabs
        capped and their messages checked (:mod:`cockpit.serve.tabs`)."""

        tabs: Tabs

        def initialize_logging(self) -> None:
            # Its own errors only: an access log would write every URL, token included.
            logging.getLogger("textual-serve").setLevel(logging.WARNING)

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(guard)
            return app

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            return await self.tabs.handle(request)  # capped, its messages checked

        async def on_startup(self, app: web.Application) -> None:
            mode = "read-only: no key writes" if args.read_only else "every key, as in tmux"
            print(f"cockpit serve: {campaign.id} in a browser ({mode}); Ctrl+C stops it")
            if lines.warning:
                print(f"WARNING: {lines.warning}")
            if lines.tunnel:
                print(f"on your laptop:  {lines.tunnel}")
            print(f"then open:       {lines.url}")
            print("the token is printed only here; every tab needs it", flush=True)

        @aiohttp_jinja2.template("app_index.html")
        async def handle_index(self, request: web.Request) -> dict[str, Any]:
            seen = safe_host(request.host) or f"{LOOPBACK}:{port}"
            return {
                "font_size": _font_size(request.query.get("fontsize")),
                "app_websocket_url": f"ws://{seen}/ws",
                "config": {"static": {"url": f"http://{seen}/static/"}},
                "application": {"name": html.escape(title)},
            }

    server = CockpitServer(command, host=args.host, port=port, title=title)
    server.tabs = Tabs(command, getattr(args, "max_tabs", DEFAULT_MAX_TABS),
                       server.download_manager)
    return server


def _font_size(text: str | None) -> int:
    try:
        size = int(text or "16")
    except ValueError:
        return 16
    return size if 6 <= size <= 48 else 16

