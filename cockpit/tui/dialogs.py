"""Modal screens: confirmation, pick lists, forms, the decision, help and options.

Every dialog cancels on Esc and never confirms by it; focus starts on the safe
choice (No, or the first input). The dialogs only collect answers: the screen's
flows (:mod:`cockpit.tui.flows`) await them and call the engine. Every title, body
and item is shown literally (made printable, never parsed as markup): they name runs,
notes and reasons.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from cockpit.tui.untrusted import literal, literal_block


class ConfirmScreen(ModalScreen[bool]):
    """y / n; Esc is n; the No button holds the focus."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no"),
    ]

    def __init__(self, title: str, body: str) -> None:
        super().__init__(classes="dialog")
        self._title, self._body = title, body

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box"):
            yield Label(literal(self._title), classes="dialog-title")
            yield Static(literal_block(self._body), id="confirm-body", classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button("No (n)", id="no", variant="primary")
                yield Button("Yes (y)", id="yes", variant="error")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class PickScreen(ModalScreen[str | None]):
    """Pick one item from a list; Enter picks, Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="pick-cancel")]

    def __init__(self, title: str, items: Sequence[tuple[str, str]],
                 selected: str | None = None) -> None:
        super().__init__(classes="dialog")
        self._title, self._items = title, list(items)
        self._selected = selected  # highlighted first (the run under the cursor)

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box"):
            yield Label(literal(self._title), classes="dialog-title")
            yield OptionList(*[Option(literal(label), id=key) for key, label in self._items],
                             id="pick-list")
            yield Label("Enter picks · Esc cancels", classes="dialog-hint")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        keys = [key for key, _ in self._items]
        options.highlighted = keys.index(self._selected) if self._selected in keys else 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class FormScreen(ModalScreen[dict[str, str] | None]):
    """A few text fields; Enter moves on and, on the last field, submits.

    ``check`` returns an error text (shown in the dialog) or None when the answers
    can go on to the confirmation.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="form-cancel")]

    def __init__(self, title: str, fields: Sequence[tuple[str, str, str]],
                 check: Callable[[dict[str, str]], str | None] | None = None,
                 body: str = "") -> None:
        super().__init__(classes="dialog")
        self._title, self._fields, self._check, self._body = title, list(fields), check, body

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box"):
            yield Label(literal(self._title), classes="dialog-title")
            if self._body:
                yield Static(literal_block(self._body), classes="dialog-body")
            for name, label, default in self._fields:
                yield Label(literal(label), classes="field-label")
                yield Input(value=default, id=f"field-{name}", placeholder=label)
            yield Static("", id="form-error", classes="dialog-error")
            yield Label("Enter: next / continue · Esc cancels", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query(Input).first().focus()

    def values(self) -> dict[str, str]:
        return {name: self.query_one(f"#field-{name}", Input).value
                for name, _label, _default in self._fields}

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        inputs = list(self.query(Input))
        index = inputs.index(event.input)
        if index + 1 < len(inputs):
            inputs[index + 1].focus()
            return
        values = self.values()
        problem = self._check(values) if self._check else None
        if problem:
            self.query_one("#form-error", Static).update(literal_block(problem))
            return
        self.dismiss(values)

    def action_cancel(self) -> None:
        self.dismiss(None)


class DropList(OptionList):
    """Stages to drop, toggled with space; each line says its state in text ("[x]" or
    "[ ]"), so it reads the same in 16 colours or none."""

    BINDINGS = [Binding("space", "toggle_drop", "Toggle", id="drop-toggle")]

    def __init__(self, items: Sequence[str], **kwargs: Any) -> None:
        self._items = list(items)
        self.selected: list[str] = []
        super().__init__(*[Option(self._prompt(i), id=i) for i in self._items], **kwargs)

    def _prompt(self, item: str) -> Text:
        return literal(f"[{'x' if item in self.selected else ' '}] {item}")

    def action_toggle_drop(self) -> None:
        index = self.highlighted
        if index is None or not self._items:
            return
        item = self._items[index]
        if item in self.selected:
            self.selected.remove(item)
        else:
            self.selected = [i for i in self._items if i in self.selected or i == item]
        self.replace_option_prompt_at_index(index, self._prompt(item))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_toggle_drop()


class DecideScreen(ModalScreen[dict[str, Any] | None]):
    """The decision at a decision point: what it rests on first (the pilot's metrics
    against the thresholds, its measured vs planned time, the forecast with that ratio),
    then continue / limit (with drops) / revise, a note, and which result would have
    changed the choice (recorded in the note)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="decide-cancel")]

    def __init__(self, stage: str, droppable: Sequence[str], context: Text | str = "") -> None:
        super().__init__(classes="dialog")
        self._stage, self._droppable, self._why = stage, list(droppable), context

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box -wide"):
            yield Label(literal(f"Decision at {self._stage} (D4)"), classes="dialog-title")
            if self._why:
                with VerticalScroll(id="decide-context-box"):
                    yield Static(literal_block(self._why), id="decide-context")
            yield OptionList(Option("continue: run the plan as it is", id="continue"),
                             Option("limit: drop optional stages", id="limit"),
                             Option("revise: the question changes, nothing more starts",
                                    id="revise"), id="decide-outcome")
            yield Label(literal("stages to drop (space toggles [x]; only with limit)"),
                        classes="field-label")
            yield DropList(self._droppable, id="decide-drops")
            yield Label("note: why (required)", classes="field-label")
            yield Input(id="decide-note", placeholder="why this decision")
            yield Label("which result would have changed this choice? (kept in the note)",
                        classes="field-label")
            yield Input(id="decide-change", placeholder="e.g. val/accuracy below 0.85")
            yield Static("", id="form-error", classes="dialog-error")
            yield Label("Enter moves on; Enter on the last field continues · Tab moves · "
                        "Esc cancels", classes="dialog-hint")

    def on_mount(self) -> None:
        outcome = self.query_one("#decide-outcome", OptionList)
        outcome.highlighted = 0
        outcome.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option_list.id != "decide-outcome":
            return
        if event.option.id == "limit":
            drops = self.query_one("#decide-drops", DropList)
            drops.highlighted = 0
            drops.focus()
        else:
            self.query_one("#decide-note").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "decide-note":
            self.query_one("#decide-change").focus()
            return
        outcome_list = self.query_one("#decide-outcome", OptionList)
        index = outcome_list.highlighted or 0
        outcome = ("continue", "limit", "revise")[index]
        drops = list(self.query_one("#decide-drops", DropList).selected)
        note = self.query_one("#decide-note", Input).value.strip()
        change = self.query_one("#decide-change", Input).value.strip()
        error = None
        if not note:
            error = "a note is required: say why (D4)"
        elif outcome == "limit" and not drops:
            error = "limit: pick at least one stage to drop"
        if error:
            self.query_one("#form-error", Static).update(error)
            self.query_one("#decide-note").focus()
            return
        if change:
            note = f"{note} (would have changed the choice: {change})"
        self.dismiss({"outcome": outcome, "drops": drops if outcome == "limit" else [],
                      "note": note})

    def action_cancel(self) -> None:
        self.dismiss(None)


class WaitScreen(ModalScreen[None]):
    """Work under way, at once: what it is and for how long (the seconds count up);
    Esc stops waiting (the work ends on its own in the background; nothing is written).
    The dashboard keeps updating behind it."""

    BINDINGS = [Binding("escape", "cancel", "Stop waiting", id="wait-cancel")]

    def __init__(self, title: str, what: str) -> None:
        super().__init__(classes="dialog")
        self._title, self._what = title, what
        self._started = time.monotonic()

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box"):
            yield Label(literal(self._title), classes="dialog-title")
            yield Static("", id="wait-body", classes="dialog-body")
            yield Label("Esc stops waiting (nothing is written)", classes="dialog-hint")

    def on_mount(self) -> None:
        self._show()
        self.set_interval(0.5, self._show)

    def _show(self) -> None:
        elapsed = time.monotonic() - self._started
        self.query_one("#wait-body", Static).update(literal(f"{self._what}… {elapsed:.0f} s"))

    def action_cancel(self) -> None:
        self.dismiss(None)


class InfoScreen(ModalScreen[None]):
    """Read-only text (help, overrun options); any of Esc / q / ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark,o", "close", "Close", id="info-close")]

    def __init__(self, title: str, body: Text | str) -> None:
        super().__init__(classes="dialog")
        self._title, self._body = title, body

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box -wide"):
            yield Label(literal(self._title), classes="dialog-title")
            with VerticalScroll(classes="info-scroll"):
                yield Static(literal_block(self._body), id="info-body")
            yield Label("Esc closes", classes="dialog-hint")

    def action_close(self) -> None:
        self.dismiss(None)
