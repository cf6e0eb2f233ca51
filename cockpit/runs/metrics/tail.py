"""The last values of a run's metrics, read from the end of its files.

A verdict (acceptance, conclusion, export) needs each metric's *last* value and the
last step, whatever the file's size: a 20 MB metric file once got a run accepted on
a value from its middle, because the one-shot read stopped at 16 MiB. JSON-lines files
are read backwards, chunk by chunk, until every wanted metric has been seen (or the
run's current attempt began); other formats are read whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cockpit.common.metric_names import MetricNames
from cockpit.runs.attempts import older_than
from cockpit.runs.metrics.readers import _READ_LIMIT
from cockpit.runs.metrics.stream import JsonlMetricsReader, MetricPoint, MetricStream

_CHUNK = 1 << 20
_JSONL = frozenset({".jsonl", ".ndjson"})


@dataclass
class LastValues:
    values: dict[str, float] = field(default_factory=dict)
    last_step: int | None = None


def last_values(paths: Sequence[Path], wanted: Iterable[str] | None = None,
                since: float | None = None,
                metric_names: Mapping[str, str] | None = None) -> LastValues:
    """Each metric's last value in ``paths`` (later files win), and the last step.

    ``wanted`` names the metrics that matter: JSON-lines files are then read from the
    end only as far as needed. ``None`` means every metric, which needs whole files.
    Points older than ``since`` (epoch seconds: an earlier attempt) are ignored. Values
    are also under their canonical names (``metric_names``: the run's own mapping), so
    a wanted alias is found under its canonical name.
    """
    table = MetricNames(metric_names)
    names = None if wanted is None else {table.canonical(n) for n in wanted}
    result = LastValues()
    for path in paths:
        if names is not None and path.suffix.lower() in _JSONL:
            found = _jsonl_tail(path, names, since, names=table)
        else:
            found = _whole(path, since, metric_names)
        result.values.update(found.values)
        if found.last_step is not None:
            result.last_step = found.last_step
    return result


def _whole(path: Path, since: float | None,
           metric_names: Mapping[str, str] | None = None) -> LastValues:
    found = LastValues()
    try:
        # since: a file not modified since the attempt began is an earlier attempt's
        stream = MetricStream([path], names=metric_names, since=since)
    except ValueError:
        return found
    while points := stream.poll():  # each poll reads a bounded slice: go to the end
        for point in points:
            _take(found, point, since, overwrite=True)
    return found


def _take(found: LastValues, point: MetricPoint, since: float | None, overwrite: bool) -> bool:
    """Record a point; False when it belongs to an earlier attempt."""
    if since is not None and point.t is not None and point.t < since:
        return False
    for name, value in point.values.items():
        if overwrite or name not in found.values:
            found.values[name] = value
    if point.step is not None and (overwrite or found.last_step is None):
        found.last_step = point.step
    return True


def _jsonl_tail(path: Path, wanted: set[str], since: float | None,
                max_bytes: int | None = None, every_name: bool = False,
                names: MetricNames | None = None) -> LastValues:
    """Newest-first read from the end until every wanted metric and the step are known
    (or, ``every_name``, until ``max_bytes`` are read: every metric seen there)."""
    found = LastValues()
    parser = JsonlMetricsReader(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError:
        return found
    with handle:
        end = os.fstat(handle.fileno()).st_size
        stop = 0 if max_bytes is None else max(0, end - max_bytes)
        carry = b""
        while end > stop:
            start = max(stop, end - _CHUNK)
            handle.seek(start)
            data = handle.read(end - start) + carry
            end = start
            lines = data.split(b"\n")
            carry = lines.pop(0) if start > 0 else b""  # maybe a line cut by the chunk
            for raw in reversed(lines):
                if not _newest_first(found, parser, raw, since, names):
                    return found
                if not every_name and wanted <= found.values.keys() \
                        and found.last_step is not None:
                    return found
        if carry and stop == 0:
            _newest_first(found, parser, carry, since, names)
    return found


def _newest_first(found: LastValues, parser: JsonlMetricsReader, raw: bytes,
                  since: float | None, names: MetricNames | None = None) -> bool:
    """Take one line read backwards; False once the lines are older than ``since``."""
    try:
        item = parser._parse(0, raw)
    except ValueError:
        return True  # a garbage line (or a torn last one): skipped, as the readers do
    if not isinstance(item, MetricPoint):
        return True  # an event, or an empty line
    if names is not None:
        item = MetricPoint(item.step, names.expand(item.values), item.t)
    return _take(found, item, since, overwrite=False)


def seed_from_tail(stream: MetricStream, since: float | None = None,
                   min_size: int = _READ_LIMIT, tail_bytes: int = _CHUNK) -> None:
    """Give a new stream its latest values and step from the end of each JSON-lines file
    too big for its first poll (``min_size``: what one poll reads), reading only the last
    ``tail_bytes``: ``status`` on a 20 MB file shows the real last step at once."""
    for reader in stream.readers:
        path = reader.path
        if path.suffix.lower() not in _JSONL:
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        size = st.st_size
        if older_than(st.st_mtime, reader.since):
            continue  # an earlier attempt's file: its first poll starts at its end
        if size - (reader.position or 0) <= min_size:
            continue  # the first poll reads what is left whole (a restored stream: the rest)
        found = _jsonl_tail(path, set(), since, max_bytes=tail_bytes, every_name=True)
        stream.seed(path, size, found.values, found.last_step)
