"""Addresses a face listens on: whether one is this machine's loopback only."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """``host`` (a name, or an IPv4/IPv6 address, bracketed or not) reaches only this
    machine: ``localhost`` or a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
