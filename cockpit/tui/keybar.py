"""The key bar: the keys for the situation first, `?` and `q` always, the rest as they fit.

Replaces Textual's footer on the main screen (issue 25: at 80 columns the footer cut
off note, cost, export, `?` and `q`). :func:`key_bar_text` is the pure layout: the keys
a need of the snapshot calls for (a pending decision: d; a run awaiting its verdict: a
and r) come first and marked; then the keys that apply now, then the greyed ones, in
the bindings' order while they fit; `? help` and `q quit` are always drawn last, and
the keys that did not fit are counted (`+4 ?`: the help lists every key, and the
command palette runs any). A greyed key still runs: its action says why it does
nothing now.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events
from textual.widget import Widget

from cockpit.engine.snapshot import Snapshot

ALWAYS = ("help", "quit_cockpit")  # drawn at any width
NEED_KEYS = {"decide": ("decide",), "verdict": ("accept", "reject"), "export": ("export",)}


@dataclass(frozen=True)
class BarKey:
    key: str  # as displayed (a remapped key shows its new name)
    label: str
    action: str
    enabled: bool
    urgent: bool = False


def urgent_actions(snap: Snapshot | None) -> set[str]:
    """The actions the snapshot's needs call for (``Snapshot.needs_person``)."""
    if snap is None:
        return set()
    return {a for need in snap.needs_person() for a in NEED_KEYS.get(need.kind, ())}


def ordered(keys: Iterable[BarKey]) -> list[BarKey]:
    """Urgent first, then the keys that apply now, then greyed ones (stable)."""
    return sorted(keys, key=lambda k: 0 if k.urgent else 1 if k.enabled else 2)


def key_bar_text(keys: Sequence[BarKey], width: int) -> tuple[Text, list[tuple[int, int, str]]]:
    """The bar's line at ``width`` and where each key sits (start, end, action)."""
    always = [k for k in keys if k.action in ALWAYS]
    rest = ordered(k for k in keys if k.action not in ALWAYS)
    tail_len = sum(len(_piece(k)) for k in always)
    room = max(0, width - tail_len)
    shown: list[BarKey] = []
    used = 0
    for i, k in enumerate(rest):
        left_after = len(rest) - i - 1
        fold = len(f" +{left_after} ? ") if left_after else 0
        if used + len(_piece(k)) + fold > room:
            break
        shown.append(k)
        used += len(_piece(k))
    folded = len(rest) - len(shown)
    text, spans = Text(no_wrap=True, overflow="crop"), []
    for k in shown:
        spans.append(_append(text, k))
    if folded and used + len(f" +{folded} ? ") <= room:  # else `?` alone says it
        text.append(f" +{folded} ? ", style="dim")
    pad = width - text.cell_len - tail_len
    if pad > 0:
        text.append(" " * pad)
    for k in always:
        spans.append(_append(text, k))
    return text, spans


def _piece(k: BarKey) -> str:
    return f" {k.key} {k.label} "


def _append(text: Text, k: BarKey) -> tuple[int, int, str]:
    start = text.cell_len
    if k.urgent:
        key_style, label_style = "bold reverse", "bold"
    elif k.enabled:
        key_style, label_style = "bold", ""
    else:
        key_style, label_style = "dim", "dim"
    text.append(" ")
    text.append(k.key, style=key_style)
    text.append(f" {k.label} ", style=label_style)
    return start, text.cell_len, k.action


class KeyBar(Widget):
    """One line at the bottom of the main screen (see the module text)."""

    DEFAULT_CSS = "KeyBar { dock: bottom; height: 1; background: $panel; }"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._spans: list[tuple[int, int, str]] = []
        self._owners: dict[str, Any] = {}  # action -> the node whose binding it is

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, _screen: Any) -> None:
        self.refresh()

    def keys(self) -> list[BarKey]:
        screen = self.screen
        urgent = urgent_actions(getattr(screen, "snapshot", None))
        available = getattr(screen, "key_available", lambda action: True)
        seen: set[str] = set()
        keys = []
        for _node, binding, enabled, _tip in screen.active_bindings.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            self._owners[binding.action] = _node
            keys.append(BarKey(self.app.get_key_display(binding), binding.description,
                               binding.action, enabled and available(binding.action),
                               binding.action in urgent))
        return keys

    def render(self) -> Text:
        text, self._spans = key_bar_text(self.keys(), self.size.width)
        return text

    async def on_click(self, event: events.Click) -> None:
        for start, end, action in self._spans:
            if start <= event.x < end:
                await self.app.run_action(action, self._owners.get(action, self.screen))
                return
