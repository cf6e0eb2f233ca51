"""Where alerts go: targets read from a file outside the campaign (its URLs hold
tokens), ``$COCKPIT_ALERTS`` else ``$XDG_CONFIG_HOME/cockpit/alerts.yaml``, plus URLs
given on the command line (``--alerts URL``)::

    # ~/.config/cockpit/alerts.yaml
    targets:
      - label: phone
        url: ntfy://ntfy.sh/my-secret-topic
        levels: [warn, critical]      # default: every level
      - url: json://hooks.example.org/cockpit

A target is named everywhere by its label and its scheme (``phone (ntfy)``), never by
its URL.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.campaign.yamlread import Located, parse_yaml, read_text
from cockpit.common.config import config_file
from cockpit.common.errors import InputError, Problem

LEVELS = ("info", "warn", "critical")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]{0,30})://\S+$")


@dataclass(frozen=True)
class Target:
    """One place alerts go. ``url`` holds its token: never shown, never journaled."""

    label: str
    url: str = field(repr=False)
    levels: frozenset[str] = frozenset(LEVELS)

    @property
    def scheme(self) -> str:
        return self.url.split("://", 1)[0].lower()

    @property
    def shown(self) -> str:
        """How screens, logs and the journal name it: ``phone (ntfy)``."""
        return f"{self.label} ({self.scheme})"

    def takes(self, level: str) -> bool:
        return level in self.levels


def alerts_path() -> Path:
    return config_file("COCKPIT_ALERTS", "alerts.yaml")


def load_targets(path: Path | None = None, urls: Sequence[str] = ()) -> list[Target]:
    """The targets of the alerts file (none when it does not exist) and of ``urls``
    (``--alerts URL``, labelled ``cli-1``, ``cli-2``…). InputError, located, when the
    file or a URL is malformed."""
    path = path or alerts_path()
    targets: list[Target] = []
    if path.exists():
        loc = parse_yaml(read_text(path), str(path))
        targets += _file_targets(loc)
    for number, url in enumerate(urls, 1):
        if not _SCHEME.match(url):
            raise InputError(f"--alerts: not an apprise URL (scheme://…): {_masked(url)}")
        targets.append(Target(f"cli-{number}", url))
    labels = [t.label for t in targets]
    if len(set(labels)) != len(labels):
        twice = sorted({x for x in labels if labels.count(x) > 1})
        raise InputError(Problem(str(path), 1, 1, f"alert target labels must differ: "
                                 f"{', '.join(twice)}"))
    return targets


def _file_targets(loc: Located) -> list[Target]:
    data = loc.data
    if not isinstance(data, dict) or not isinstance(data.get("targets"), list):
        raise InputError(loc.problem((), "an alerts file holds `targets:`, a list of "
                                         "{label, url, levels}"))
    problems: list[Problem] = []
    targets: list[Target] = []
    for i, item in enumerate(data["targets"]):
        where: tuple[Any, ...] = ("targets", i)
        if isinstance(item, str):
            item = {"url": item}
        if not isinstance(item, dict):
            problems.append(loc.problem(where, "a target is {label, url, levels} or a URL"))
            continue
        unknown = sorted(set(item) - {"label", "url", "levels"})
        if unknown:
            problems.append(loc.problem((*where, unknown[0]), f"unknown field "
                                        f"{unknown[0]!r} (known: label, url, levels)",
                                        key=True))
        url = item.get("url")
        if not isinstance(url, str) or not _SCHEME.match(url):
            problems.append(loc.problem((*where, "url"), "url: an apprise URL "
                                        "(scheme://…), e.g. ntfy://ntfy.sh/topic"))
            continue
        label = item.get("label", f"target-{i + 1}")
        if not isinstance(label, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", label):
            problems.append(loc.problem((*where, "label"), "label: 1-40 letters, digits, "
                                        "'.', '_' or '-'"))
            continue
        levels = item.get("levels", list(LEVELS))
        if not isinstance(levels, list) or not levels or \
                any(lv not in LEVELS for lv in levels):
            problems.append(loc.problem((*where, "levels"), f"levels: a list of "
                                        f"{', '.join(LEVELS)}"))
            continue
        targets.append(Target(label, url, frozenset(levels)))
    if problems:
        raise InputError(problems)
    return targets


def _masked(url: str) -> str:
    """A URL as a message may show it: its scheme, the rest hidden (it may hold a token)."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    return f"{scheme[:20]}://…" if scheme else "(hidden)"
