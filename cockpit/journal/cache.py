"""The state cache: a derived, rebuildable copy of a folded history, beside the journal.

``.cockpit/cache/state.json`` holds what folding the journal up to a byte offset left
(the incremental fold's drafts, the journal reader's position, its recent window and
keys) so that an open loads it and folds only the tail. The journal stays the one
source of truth: the cache is *never trusted*. It is used only when all of these
match, else it is ignored and rebuilt by folding from the start:

- its format, its version and the package's version;
- the campaign file it was folded over (its sha256) and the reading machine;
- the journal's prefix it covers: the file is at least that long, and a key of the
  prefix (its length, its first line, 16 blocks sampled across it and the bytes just
  before the offset, hashed) is the same. An in-place edit of the same length between
  the samples is not noticed, as the running cockpit does not notice one either: the
  journal is append-only, and a replaced, truncated or rewritten one changes the key;
- each peer's copy still holds the events the cache folded (their count and a hash of
  the last one).

A damaged or edited file fails its checksum (a sha256 of the body); a forged one that
fits it still has every decoded value checked for its shape, and any value a reader
cannot take (a bad number, a nesting too deep) makes the cache unused, never an error.

The file is JSON (no pickle: a cache is read like any other input), at most
:data:`MAX_CACHE_BYTES`, written atomically (a temporary file, fsync, rename): a kill
during the write leaves the old cache or the new one, both valid for their prefix.
The values are tagged so that nothing in a journal's own text can pass for a tag: every
dict, tuple, time, decimal and state value is ``{"$": tag, "v": ...}``.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from cockpit import __version__
from cockpit.common.fsutil import write_atomic
from cockpit.common.units import Money
from cockpit.journal.state import (
    Attempt,
    CostEntry,
    Decision,
    Dropped,
    FiredRule,
    StopInfo,
)

log = logging.getLogger(__name__)

FORMAT = "cockpit-state-cache"
CACHE_VERSION = 2  # +1 whenever the fold or this layout changes meaning
MAX_CACHE_BYTES = 64 * 1024 * 1024
_SAMPLES, _BLOCK = 16, 4096
_CLASSES: dict[str, type] = {c.__name__: c for c in (
    StopInfo, Attempt, FiredRule, Decision, CostEntry, Dropped, Money)}


class CacheMismatch(Exception):
    """The cache does not fit the journal (or cannot be read): fold from the start."""


# ---------------------------------------------------------------------- values
def encode(value: Any) -> Any:
    """A fold value as tagged JSON (see the module text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, tuple):
        return {"$": "tuple", "v": [encode(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"$": "set", "v": [encode(v) for v in sorted(value, key=repr)]}
    if isinstance(value, Mapping):
        return {"$": "dict", "v": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, datetime):
        return {"$": "time", "v": value.isoformat()}
    if isinstance(value, Decimal):
        return {"$": "decimal", "v": str(value)}
    name = type(value).__name__
    if dataclasses.is_dataclass(value) and _CLASSES.get(name) is type(value):
        return {"$": name, "v": {f.name: encode(getattr(value, f.name))
                                 for f in dataclasses.fields(value)}}
    raise TypeError(f"the state cache cannot hold a {name}")


def decode(value: Any) -> Any:
    """The inverse of :func:`encode`; anything else raises :class:`CacheMismatch`."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict) or set(value) != {"$", "v"}:
        raise CacheMismatch("not a value the cache writes")
    tag, v = value["$"], value["v"]
    if tag == "tuple":
        return tuple(decode(x) for x in v)
    if tag == "set":
        return {decode(x) for x in v}
    if tag == "dict":
        return {decode(k): decode(x) for k, x in v}
    if tag == "time":
        return datetime.fromisoformat(v)
    if tag == "decimal":
        return Decimal(v)
    if tag == "json":
        return v  # a journal event as read: JSON through and through, nothing tagged
    cls = _CLASSES.get(tag) if isinstance(tag, str) else None
    if cls is None or not isinstance(v, dict):
        raise CacheMismatch(f"unknown tag {tag!r}")
    return cls(**{str(k): decode(x) for k, x in v.items()})


def raw(events: Mapping[str, list[Any]]) -> dict[str, Any]:
    """Journal events per key (a run's verifications) as they were read: plain JSON,
    stored as is (no tag inside them is ever read as one)."""
    return {"$": "dict", "v": [[k, [{"$": "json", "v": ev} for ev in evs]]
                               for k, evs in events.items()]}


def pack_bytes(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unpack_bytes(text: Any) -> bytes:
    if not isinstance(text, str):
        raise CacheMismatch("bytes expected")
    return base64.b64decode(text.encode("ascii"), validate=True)


def event_digest(event: Mapping[str, Any]) -> str:
    """A peer's event, hashed (the cache names the last one it folded of each peer)."""
    return hashlib.sha256(json.dumps(event, sort_keys=True, default=str,
                                     ensure_ascii=True).encode()).hexdigest()


# ---------------------------------------------------------------------- the prefix
def prefix_key(path: Path, offset: int) -> str:
    """The key of a journal's first ``offset`` bytes (see the module text)."""
    h = hashlib.sha256(str(offset).encode())
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise CacheMismatch(f"cannot read the journal ({exc.strerror})") from None
    try:
        if os.fstat(fd).st_size < offset:
            raise CacheMismatch("the journal is shorter than the prefix the cache covers")
        starts = {0, max(0, offset - _BLOCK)}
        starts.update(offset * i // _SAMPLES for i in range(1, _SAMPLES))
        for start in sorted(starts):
            h.update(os.pread(fd, min(_BLOCK, max(0, offset - start)), start))
    finally:
        os.close(fd)
    return h.hexdigest()


# ---------------------------------------------------------------------- the file
def header(campaign_sha: str, machine: int | None) -> dict[str, Any]:
    """What a cache must say about itself to be considered at all."""
    return {"format": FORMAT, "version": CACHE_VERSION, "cockpit": __version__,
            "campaign": campaign_sha, "machine": machine}


def load(path: Path, campaign_sha: str, machine: int | None) -> dict[str, Any]:
    """The cache's body when its header fits; else :class:`CacheMismatch` (a missing
    file too: nothing to use)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CACHE_BYTES + 1)
    except FileNotFoundError:
        raise CacheMismatch("no cache yet") from None
    except OSError as exc:
        raise CacheMismatch(f"cannot read it ({exc.strerror})") from None
    if len(raw) > MAX_CACHE_BYTES:
        raise CacheMismatch(f"over {MAX_CACHE_BYTES} bytes")
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CacheMismatch("not JSON") from None
    if not isinstance(doc, dict) or doc.get("header") != header(campaign_sha, machine):
        raise CacheMismatch("written for another campaign, machine or version")
    body = doc.get("body")
    if not isinstance(body, dict):
        raise CacheMismatch("no body")
    if doc.get("sum") != _checksum(body):
        raise CacheMismatch("its checksum does not match (a damaged or edited file)")
    return body


def _checksum(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, ensure_ascii=False, separators=(",", ":"))
                          .encode("utf-8")).hexdigest()


def save(path: Path, campaign_sha: str, machine: int | None, body: dict[str, Any]) -> None:
    """Write the cache atomically (a failure is logged: the cache is only a shortcut)."""
    try:
        data = json.dumps({"header": header(campaign_sha, machine), "sum": _checksum(body),
                           "body": body},
                          ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if len(data) > MAX_CACHE_BYTES:
            log.warning("state cache not written: %d bytes is over the limit", len(data))
            return
        write_atomic(path, data, durable=True)
    except (OSError, TypeError, ValueError) as exc:
        log.warning("state cache %s not written: %s", path, exc)
