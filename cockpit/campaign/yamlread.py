"""Safe, located YAML reading: plain data plus the line:column of every value.

Built on PyYAML's event parser (iterative, so 20,000 levels of nesting cannot blow
the Python stack) rather than ``safe_load``: we construct plain dicts, lists and
scalars ourselves, refuse every explicit tag that would construct an object,
refuse duplicate keys, bound nesting depth and alias expansion (billion laughs),
and remember where each value came from so every error names FILE:LINE:COL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from cockpit.common.errors import InputError, Problem

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 64
MAX_EXPANDED_NODES = 100_000

KeyPath = tuple[Any, ...]

_PLAIN_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:map",
}
_TIMESTAMP = "tag:yaml.org,2002:timestamp"


@dataclass
class Located:
    """Parsed YAML data and the 1-based (line, col) of each value, keyed by its path."""

    data: Any
    source: str
    marks: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)
    key_marks: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)

    def where(self, path: KeyPath, *, key: bool = False) -> tuple[int, int]:
        """The mark of ``path``, or of its nearest located ancestor."""
        table = self.key_marks if key else self.marks
        probe = tuple(path)
        while probe:
            if probe in table:
                return table[probe]
            if probe in self.marks:
                return self.marks[probe]
            probe = probe[:-1]
        return self.marks.get((), (1, 1))

    def problem(self, path: KeyPath, message: str, *, key: bool = False) -> Problem:
        line, col = self.where(path, key=key)
        return Problem(self.source, line, col, message)


def read_text(path: Path) -> str:
    """Read a campaign file as UTF-8, refusing huge, binary or non-UTF-8 input."""
    source = str(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise InputError(Problem(source, 1, 1, "no such file")) from None
    except OSError as exc:
        raise InputError(Problem(source, 1, 1, f"cannot read: {exc.strerror}")) from None
    if path.is_dir():
        raise InputError(Problem(source, 1, 1, "is a folder, not a campaign file"))
    if size > MAX_BYTES:
        raise InputError(
            Problem(source, 1, 1, f"file is {size:,} bytes; campaign files are limited to 1 MiB")
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(Problem(source, 1, 1, f"cannot read: {exc.strerror}")) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        raise InputError(
            Problem(source, line, col, f"not UTF-8 text (byte 0x{raw[exc.start]:02x})")
        ) from None


def parse_yaml(text: str, source: str) -> Located:
    """Parse one YAML document into plain data with marks; InputError when unsafe or broken."""
    if not text.strip():
        raise InputError(Problem(source, 1, 1, "empty campaign file"))
    fast = getattr(yaml, "CSafeLoader", None)  # libyaml: ten times faster on a big plan
    if fast is not None:
        try:
            return _built(text, source, fast)
        except yaml.YAMLError:
            pass  # read again by the Python parser: its messages are the ones we explain
    try:
        return _built(text, source, yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        reason = exc.problem or exc.context or "invalid YAML"
        if "'\\t'" in reason or "\\t" in reason:
            reason += " (tabs cannot indent YAML: use spaces)"
        raise InputError(Problem(source, line, col, f"invalid YAML: {reason}")) from None
    except yaml.YAMLError as exc:
        raise InputError(Problem(source, 1, 1, f"invalid YAML: {exc}")) from None


def _built(text: str, source: str, loader: Any) -> Located:
    builder = _Builder(source)
    for event in yaml.parse(text, Loader=loader):
        builder.feed(event)
    return builder.result()


class _Frame:
    __slots__ = ("container", "path", "pending_key", "anchor", "size", "key_mark")

    def __init__(self, container: Any, path: KeyPath, anchor: str | None) -> None:
        self.container = container
        self.path = path
        self.pending_key: Any = _NO_KEY
        self.anchor = anchor
        self.size = 1
        self.key_mark: tuple[int, int] | None = None


_NO_KEY = object()


def _line_col(event: yaml.Event) -> tuple[int, int]:
    """The 1-based line and column where a parser event starts."""
    mark = event.start_mark
    return (1, 1) if mark is None else (mark.line + 1, mark.column + 1)


class _Builder:
    """Turns a stream of parser events into plain data, without recursion."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.expanded = 0
        self.documents = 0
        self.root: Any = None
        self.has_root = False
        self.marks: dict[KeyPath, tuple[int, int]] = {}
        self.key_marks: dict[KeyPath, tuple[int, int]] = {}
        self._resolver = Resolver()
        self._constructor = SafeConstructor()

    def fail(self, event: yaml.Event, message: str) -> NoReturn:
        line, col = _line_col(event)
        raise InputError(Problem(self.source, line, col, message))

    def result(self) -> Located:
        return Located(self.root, self.source, self.marks, self.key_marks)

    def feed(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                self.fail(event, "more than one YAML document; a campaign file holds one")
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            self._check_tag(event, event.tag, event.implicit)
            if len(self.stack) >= MAX_DEPTH:
                self.fail(event, f"nesting deeper than {MAX_DEPTH} levels")
            is_map = isinstance(event, yaml.MappingStartEvent)
            path = self._child_path(event)
            self._mark(path, event)
            self.stack.append(_Frame({} if is_map else [], path, event.anchor))
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            frame = self.stack.pop()
            if frame.anchor:
                self.anchors[frame.anchor] = (frame.container, frame.size)
            self._place(event, frame.container, frame.size)
        elif isinstance(event, yaml.ScalarEvent):
            value = self._scalar(event)
            if event.anchor:
                self.anchors[event.anchor] = (value, 1)
            path = self._child_path(event)
            if not (self.stack and isinstance(self.stack[-1].container, dict)
                    and self.stack[-1].pending_key is _NO_KEY):
                self._mark(path, event)
            self._place(event, value, 1)
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor is None or event.anchor not in self.anchors:
                self.fail(event, f"unknown alias *{event.anchor}")
            value, size = self.anchors[event.anchor]
            self.expanded += size
            if self.expanded > MAX_EXPANDED_NODES:
                self.fail(event, "aliases expand to too many values (a YAML alias bomb?)")
            self._mark(self._child_path(event), event)
            self._place(event, value, size)

    def _check_tag(self, event: yaml.Event, tag: str | None, implicit: Any) -> None:
        if tag is None or tag in ("!", "?"):
            return
        if tag in _PLAIN_TAGS:
            return
        self.fail(event, f"YAML tag {tag} is not allowed in a campaign file")

    def _scalar(self, event: yaml.ScalarEvent) -> Any:
        if event.tag is not None and event.tag != "!":
            self._check_tag(event, event.tag, event.implicit)
            tag = event.tag
        elif event.implicit[0]:
            # PyYAML's stubs leave Resolver.resolve untyped; it returns the tag text.
            tag = self._resolver.resolve(  # type: ignore[no-untyped-call]
                ScalarNode, event.value, (True, False))
        else:
            tag = "tag:yaml.org,2002:str"
        if tag == _TIMESTAMP:
            # Kept as text: the loader parses times itself and insists on a timezone.
            return event.value
        # The pure-Python SafeLoader's events carry yaml.error.Mark (the C parser's type
        # is the other half of the stubs' union); the marks name the place in errors.
        start = event.start_mark if isinstance(event.start_mark, yaml.error.Mark) else None
        end = event.end_mark if isinstance(event.end_mark, yaml.error.Mark) else None
        node = ScalarNode(tag, event.value, start, end, event.style)
        try:
            return self._constructor.construct_object(node)
        except (ConstructorError, ValueError) as exc:
            self.fail(event, f"bad value {event.value!r}: {exc}")

    def _child_path(self, event: yaml.Event) -> KeyPath:
        if not self.stack:
            return ()
        frame = self.stack[-1]
        if isinstance(frame.container, list):
            return frame.path + (len(frame.container),)
        if frame.pending_key is _NO_KEY:
            return frame.path + ("<key>",)
        return frame.path + (frame.pending_key,)

    def _mark(self, path: KeyPath, event: yaml.Event) -> None:
        self.marks[path] = _line_col(event)

    def _place(self, event: yaml.Event, value: Any, size: int) -> None:
        if not self.stack:
            self.root = value
            self.has_root = True
            return
        frame = self.stack[-1]
        frame.size += size
        if isinstance(frame.container, list):
            frame.container.append(value)
            return
        if frame.pending_key is _NO_KEY:
            if isinstance(value, (dict, list)):
                self.fail(event, "a mapping key must be a plain value")
            if value in frame.container:
                self.fail(event, f"duplicate key {value!r}")
            frame.pending_key = value
            frame.key_mark = _line_col(event)
            self.key_marks[frame.path + (value,)] = frame.key_mark
            self.marks.setdefault(frame.path + (value,), frame.key_mark)
            return
        frame.container[frame.pending_key] = value
        frame.pending_key = _NO_KEY
