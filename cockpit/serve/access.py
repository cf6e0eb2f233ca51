"""Who may reach a served cockpit, and what `cockpit serve` prints: pure functions.

The cockpit's keys stop runs and write the journal, so the browser face is closed by
default: bound to the loopback address (a laptop reaches it through ``ssh -L``), and
every request carries the session's token, once in the URL, then in a cookie the first
page sets (HttpOnly, SameSite=Strict: a page of another site cannot send it). Tokens
are compared in constant time. A websocket must come from the page's own origin (a
page of another site open in the same browser cannot drive the cockpit).
"""

from __future__ import annotations

import hmac
import re
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from cockpit.common.net import is_loopback

TOKEN_BYTES = 24  # 192 bits, URL-safe text of 32 characters
COOKIE_PREFIX = "cockpit_token_"
LOOPBACK = "127.0.0.1"
# What a Host header may hold to be written back into the page (the websocket's URL):
# a name or an IPv4/IPv6 address and a port, nothing a page could be made to run.
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$")


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def cookie_name(port: int) -> str:
    """One cookie per port: two cockpits served on one host keep their own tokens
    (cookies do not tell ports apart)."""
    return f"{COOKIE_PREFIX}{port}"


def token_matches(given: str | None, token: str) -> bool:
    """``given`` is the session's token (constant time; None and "" never match)."""
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def safe_host(host: str | None) -> str | None:
    """The Host header when it is only a name or address and a port, else None."""
    if host and len(host) <= 255 and _HOST.match(host):
        return host
    return None


def same_origin(origin: str | None, host: str | None) -> bool:
    """A browser's websocket ``Origin`` names the page's own host (a client that sends
    no Origin is not a browser page: the token alone decides)."""
    if origin is None:
        return True
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(host) and parts.netloc == host


@dataclass(frozen=True)
class Reach:
    """The lines `cockpit serve` prints: where the browser goes, and how a laptop gets
    there."""

    url: str  # with the token: printed once
    tunnel: str | None  # the ssh -L line (None when bound beyond the loopback)
    warning: str | None  # bound beyond the loopback: said loudly


def reach(host: str, port: int, token: str, *, ssh_user: str, ssh_host: str,
          ssh_port: int | None) -> Reach:
    where = f"[{host}]" if ":" in host and not host.startswith("[") else host
    url = f"http://{where}:{port}/?token={token}"
    if is_loopback(host):
        # ssh takes an IPv6 address bare after user@ (brackets are for ssh:// URLs)
        port_flag = f"-p {ssh_port} " if ssh_port else ""
        tunnel = f"ssh -N -L {port}:127.0.0.1:{port} {port_flag}{ssh_user}@{ssh_host.strip('[]')}"
        return Reach(url, tunnel, None)
    return Reach(url, None, (
        f"served on {host}, not only this machine's loopback: anyone who reaches "
        f"{host}:{port} and holds the token can stop runs and write the journal; the "
        "traffic is plain HTTP (an SSH tunnel to 127.0.0.1 is the safe way)"))
