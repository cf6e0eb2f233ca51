"""Where a run's metric stream stood, saved beside the journal, so a restart reads only
what is new; and a one-shot start at a file's tail.

A stream cache (one JSON file per run, under ``.cockpit/cache/streams/``: see
:class:`cockpit.journal.paths.CampaignFiles`) holds, for each of the stream's files,
the reader's offset and counts, and for the stream its latest values and steps, its
bounded recent points and its last events (checkpoint reports). It is derived and never
trusted: it is used only when every file it names is still the same file (device and
inode), at least as long as the offset, with the same first line (a SHA-256 of it) and
the same bytes just before the offset (a SHA-256 of up to 4 KiB), and when every field
has the type it should; anything else (a file rewritten, truncated or replaced, a torn
or corrupted cache, another version, another run's) means the cache is ignored and the
file read from its start, as without a cache. JSON only (every input is hostile), at
most :data:`MAX_CACHE_BYTES`, its first line the SHA-256 of the rest (a torn or altered
file is noticed); written atomically (a temporary file, then ``os.replace``).

Only line formats (JSON lines, CSV) are cached: a stream with another reader (Trainer
state, TensorBoard) is read as before.

:func:`open_stream` is how a new stream starts: from its cache when valid (a one-shot
reader only when the cache is near the end); else a one-shot reader starts each large
file at its last :data:`ONE_SHOT_TAIL` bytes (its latest values and recent points come
from there: a metric last logged before them is not shown; the rest is never read:
``skipped`` says how much, garbage there is not counted and later garbage has no line
number), and a watching engine reads from the
start, its snapshot seeded from the tail (:func:`~cockpit.runs.metrics.tail.seed_from_tail`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from cockpit.common.fsutil import write_atomic
from cockpit.common.safe_json import loads_bounded
from cockpit.runs.attempts import older_than
from cockpit.runs.metrics.readers import CsvMetricsReader, _LineReader
from cockpit.runs.metrics.stream import MetricPoint, MetricStream
from cockpit.runs.metrics.tail import seed_from_tail
from cockpit.runs.metrics.values import new_point

KIND = "cockpit-metric-stream-cache"
VERSION = 1
MAX_CACHE_BYTES = 8 * 1024 * 1024
BEFORE_CHECK = 4096  # bytes before the offset whose hash must match
# A one-shot reads a large file's last 256 KiB (~3,000 lines of cockpit.report: the
# recent points keep 1,000), or the rest after a cache at most that far behind.
ONE_SHOT_TAIL = 256 * 1024


class Mismatch(ValueError):
    """The cache does not describe the stream's files as they are now."""


# ----------------------------------------------------------------------------- names
def cache_file(folder: Path, run_id: str) -> Path:
    """The cache of ``run_id``'s stream in ``folder`` (a readable name plus a hash: any
    run id gives one safe file name)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)[:64]
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return folder / f"{safe}.{digest}.json"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- saving
def stream_doc(stream: MetricStream) -> dict[str, Any] | None:
    """What the cache of ``stream`` holds now (None: a format that is not cached)."""
    readers: list[dict[str, Any] | None] = []
    for reader in stream.readers:
        if not isinstance(reader, _LineReader):
            return None
        readers.append(_reader_doc(reader))
    return {
        "kind": KIND, "version": VERSION, "paths": [str(p) for p in stream.paths],
        "since": stream.since,  # the attempt it was read for: another one reads anew
        "readers": readers, "latest": dict(stream.latest), "latest_step": stream.latest_step,
        "value_steps": dict(stream._value_steps),
        "recent": [[p.step, p.t, dict(p.values)] for p in stream.recent],
        "events": list(stream.reported),
    }


def _reader_doc(reader: _LineReader) -> dict[str, Any] | None:
    """A reader's state, with the hashes that key it (None: nothing read yet)."""
    if reader._file_id is None or reader._offset == 0:
        return None
    try:
        with open(reader.path, "rb") as handle:
            st = os.fstat(handle.fileno())
            if (st.st_dev, st.st_ino) != reader._file_id or st.st_size < reader._offset:
                return None  # replaced since the last poll: the next poll reads it again
            before = _read_at(handle, max(0, reader._offset - BEFORE_CHECK), reader._offset)
    except OSError:
        return None
    return {
        "dev": reader._file_id[0], "ino": reader._file_id[1], "offset": reader._offset,
        "line_no": reader._line_no, "lines_known": reader._lines_known,
        "skipped": reader.skipped, "discarding": reader._discarding,
        "head_len": len(reader._head), "head_sha": _sha(reader._head),
        "before_len": len(before), "before_sha": _sha(before),
        "delivered": reader._delivered, "first_sig": reader._first_sig,
        "skip": reader._skip, "skip_first_sig": reader._skip_first_sig,
        "garbage": reader.garbage, "last_garbage_line": reader.last_garbage_line,
        "last_garbage": reader.last_garbage, "resets": reader.resets,
        "last_record_at": reader.last_record_at,
        "header": reader.header if isinstance(reader, CsvMetricsReader) else None,
    }


def _read_at(handle: Any, start: int, end: int) -> bytes:
    handle.seek(start)
    data: bytes = handle.read(end - start)
    return data


def save(stream: MetricStream, path: Path) -> bool:
    """Write the cache of ``stream`` at ``path`` atomically; False when it is not cached
    (another format) or cannot be written (the cache is optional: nothing is raised)."""
    doc = stream_doc(stream)
    if doc is None:
        return False
    body = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    data = _sha(body).encode("ascii") + b"\n" + body  # a torn or altered body is noticed
    if len(data) > MAX_CACHE_BYTES:
        return False
    try:
        write_atomic(path, data)
    except OSError:
        return False
    return True


# ----------------------------------------------------------------------------- loading
def load(path: Path) -> dict[str, Any] | None:
    """The cache document at ``path``, or None (absent, too big, not JSON, another kind
    or version). Its fields are checked when it is applied."""
    try:
        with open(path, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            data = handle.read(MAX_CACHE_BYTES + 1)
        digest, _, body = data.partition(b"\n")
        if len(data) > MAX_CACHE_BYTES or digest != _sha(body).encode("ascii"):
            return None
        doc = loads_bounded(body.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("kind") != KIND or doc.get("version") != VERSION:
        return None
    return doc


def restore(stream: MetricStream, doc: dict[str, Any]) -> bool:
    """Put ``stream`` (new, not polled) where the cache says; False (the stream left as
    it was) when the cache does not match its files as they are now."""
    try:
        if doc.get("paths") != [str(p) for p in stream.paths]:
            raise Mismatch("another stream's cache")
        if doc.get("since") != stream.since:
            raise Mismatch("another attempt's cache")
        readers = _list(doc.get("readers"))
        if len(readers) != len(stream.readers):
            raise Mismatch("another number of files")
        apply = [_reader_check(reader, entry) for reader, entry in zip(stream.readers, readers,
                                                                        strict=True)]
        state = _stream_state(doc, stream.recent.maxlen)
    except (Mismatch, OSError, KeyError, TypeError, ValueError, OverflowError):
        return False
    for reader, fields in zip(stream.readers, apply, strict=True):
        if fields is not None:
            for name, value in fields.items():
                setattr(reader, name, value)
    latest, latest_step, value_steps, recent, events = state
    stream.latest.update(latest)
    stream.latest_step = latest_step
    stream._value_steps.update(value_steps)
    stream.recent.extend(recent)
    stream.reported.extend(events)
    stream._events.extend(events)  # the checkpoint reports, for the scanner
    return True


def _reader_check(reader: Any, entry: Any) -> dict[str, Any] | None:
    """The reader attributes the cache entry gives, after checking it against the file."""
    if entry is None:
        return None
    if not isinstance(reader, _LineReader) or reader.position != 0:
        raise Mismatch("not a fresh line reader")
    e = _dict(entry)
    offset, head_len, before_len = _int(e["offset"]), _int(e["head_len"]), _int(e["before_len"])
    if offset <= 0 or head_len > offset or before_len > min(offset, BEFORE_CHECK):
        raise Mismatch("offsets out of range")
    with open(reader.path, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (e["dev"], e["ino"]):
            raise Mismatch("another file")
        if st.st_size < offset:
            raise Mismatch("truncated")
        head = _read_at(handle, 0, head_len)
        before = _read_at(handle, offset - before_len, offset)
    if _sha(head) != e["head_sha"] or _sha(before) != e["before_sha"]:
        raise Mismatch("rewritten")
    fields: dict[str, Any] = {
        "_file_id": (st.st_dev, st.st_ino), "_stat_sig": None, "_offset": offset,
        "_line_no": _int(e["line_no"]), "_lines_known": _bool(e["lines_known"]),
        "skipped": _int(e["skipped"]), "_discarding": _bool(e["discarding"]),
        "_head": head, "_tail": before[-64:], "_delivered": _int(e["delivered"]),
        "_first_sig": _opt_str(e["first_sig"]), "_skip": _int(e["skip"]),
        "_skip_first_sig": _opt_str(e["skip_first_sig"]), "garbage": _int(e["garbage"]),
        "last_garbage_line": _opt_int(e["last_garbage_line"]),
        "last_garbage": _opt_str(e["last_garbage"]), "resets": _int(e["resets"]),
        "last_record_at": _opt_float(e["last_record_at"]), "exists": True,
    }
    header = e["header"]
    if isinstance(reader, CsvMetricsReader):
        fields["header"] = None if header is None else [_str(h) for h in _list(header)]
    elif header is not None:
        raise Mismatch("a header for a format without one")
    return fields


_State = tuple[dict[str, float], int | None, dict[str, int | None], list[MetricPoint],
               list[dict[str, Any]]]


def _stream_state(doc: dict[str, Any], maxlen: int | None) -> _State:
    latest = {_str(k): _float(v) for k, v in _dict(doc["latest"]).items()}
    value_steps = {_str(k): _opt_int(v) for k, v in _dict(doc["value_steps"]).items()}
    recent_doc = _list(doc["recent"])
    if maxlen is not None and len(recent_doc) > maxlen:
        raise Mismatch("more recent points than the stream keeps")
    recent = []
    for item in recent_doc:
        step, moment, values = _list(item)
        recent.append(new_point(_opt_int(step), {_str(k): _float(v)
                                                 for k, v in _dict(values).items()},
                                _opt_float(moment)))
    events = [_dict(ev) for ev in _list(doc["events"])]
    if len(events) > 256 or any(not isinstance(ev.get("event"), str) for ev in events):
        raise Mismatch("bad events")
    return latest, _opt_int(doc["latest_step"]), value_steps, recent, events


def _dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Mismatch("not an object")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise Mismatch("not a list")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise Mismatch("not a string")
    return value


def _opt_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Mismatch("not a boolean")
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Mismatch("not a count")
    return value


def _opt_int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise Mismatch("not an integer")
    return value


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Mismatch("not a number")
    return float(value)


def _opt_float(value: Any) -> float | None:
    if value is None:
        return None
    number = _float(value)
    if not math.isfinite(number):
        raise Mismatch("not a finite time")
    return number


# ----------------------------------------------------------------------------- starting
def start_at_tail(reader: _LineReader, tail_bytes: int = ONE_SHOT_TAIL) -> bool:
    """Start a fresh line reader at the first line that begins in the last ``tail_bytes``
    of its file (False: the file is small, absent or not a plain file; read it whole).
    The format still learns the first line (a CSV header)."""
    if reader.position != 0 or reader._file_id is not None:
        return False
    try:
        with open(reader.path, "rb") as handle:
            st = os.fstat(handle.fileno())
            if stat.S_ISREG(st.st_mode) and older_than(st.st_mtime, reader.since):
                reader.start_at_end(handle, st)  # an earlier attempt's: none of it
                return True
            if not stat.S_ISREG(st.st_mode) or st.st_size <= tail_bytes:
                return False
            head = reader._first_line(handle.read(reader._head_check))
            start = st.st_size - tail_bytes
            data = _read_at(handle, start - 1, st.st_size)
    except OSError:
        return False
    newline = data.find(b"\n")
    if newline < 0:
        return False  # no line starts there: read it from the start
    offset = start + newline
    reader._reset_format()
    if head:
        with contextlib.suppress(ValueError):
            reader._parse(1, head[:-1])  # a CSV header; a JSON line is just parsed
    reader._file_id, reader._stat_sig = (st.st_dev, st.st_ino), None
    reader._offset, reader._head = offset, head
    reader._tail = data[max(0, newline + 1 - 64): newline + 1]
    reader._line_no, reader._lines_known, reader.skipped = 0, False, offset
    return True


def open_stream(stream: MetricStream, cache: Path | None, *, one_shot: bool,
                since: float | None = None) -> str:
    """Start a new stream: ``"cache"`` (restored; a one-shot only from a cache near the
    end), ``"tail"`` (a one-shot: large files from their tail) or ``"start"`` (from the
    beginning). Then the snapshot's latest values are seeded from what a first poll
    would not reach."""
    how = "start"
    doc = load(cache) if cache is not None else None
    if doc is not None and (not one_shot or _near_end(doc, stream)) and restore(stream, doc):
        how = "cache"
    elif one_shot:
        started = [start_at_tail(r) for r in stream.readers if isinstance(r, _LineReader)]
        how = "tail" if any(started) else "start"
    seed_from_tail(stream, since=since)
    return how


def _near_end(doc: dict[str, Any], stream: MetricStream) -> bool:
    """Whether every file of the stream has at most :data:`ONE_SHOT_TAIL` bytes beyond
    the cache's offset (else a one-shot reads the tail: cheaper than the rest)."""
    paths, readers = [str(p) for p in stream.paths], doc.get("readers")
    if doc.get("paths") != paths or not isinstance(readers, list):
        return False
    for path, entry in zip(paths, readers, strict=False):
        offset = entry.get("offset") if isinstance(entry, dict) else 0  # None: unread
        try:
            size = os.stat(path).st_size
        except OSError:
            continue  # absent: nothing to read either way
        if not isinstance(offset, int) or size - offset > ONE_SHOT_TAIL:
            return False
    return True
