"""Modal screens: confirmation, pick lists, forms, the decision, help and the timeline.

Every dialog cancels on Esc and never confirms by it; focus starts on the safe
choice (No, or the first input). The dialogs only collect answers: the app calls
the engine with them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Input, Label, OptionList, SelectionList, Static
from textual.widgets.option_list import Option


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
        with Vertical(classes="dialog-box"):
            yield Label(self._title, classes="dialog-title")
            yield Static(self._body, id="confirm-body", classes="dialog-body")
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

    def __init__(self, title: str, items: Sequence[tuple[str, str]]) -> None:
        super().__init__(classes="dialog")
        self._title, self._items = title, list(items)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(self._title, classes="dialog-title")
            yield OptionList(*[Option(label, id=key) for key, label in self._items],
                             id="pick-list")
            yield Label("Enter picks · Esc cancels", classes="dialog-hint")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = 0
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
        with Vertical(classes="dialog-box"):
            yield Label(self._title, classes="dialog-title")
            if self._body:
                yield Static(self._body, classes="dialog-body")
            for name, label, default in self._fields:
                yield Label(label, classes="field-label")
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
            self.query_one("#form-error", Static).update(Text(problem))
            return
        self.dismiss(values)

    def action_cancel(self) -> None:
        self.dismiss(None)


class DecideScreen(ModalScreen[dict[str, Any] | None]):
    """The decision at a decision point: continue / limit (with drops) / revise + note."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="decide-cancel")]

    def __init__(self, stage: str, droppable: Sequence[str]) -> None:
        super().__init__(classes="dialog")
        self._stage, self._droppable = stage, list(droppable)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(f"Decision at {self._stage} (D4)", classes="dialog-title")
            yield OptionList(Option("continue: run the plan as it is", id="continue"),
                             Option("limit: drop optional stages", id="limit"),
                             Option("revise: the question changes, nothing more starts",
                                    id="revise"), id="decide-outcome")
            yield Label("stages to drop (space toggles; only with limit)",
                        classes="field-label")
            yield SelectionList[str](*[(s, s) for s in self._droppable], id="decide-drops")
            yield Label("note: why (required)", classes="field-label")
            yield Input(id="decide-note", placeholder="why this decision")
            yield Static("", id="form-error", classes="dialog-error")
            yield Label("Enter in the note continues · Tab moves · Esc cancels",
                        classes="dialog-hint")

    def on_mount(self) -> None:
        outcome = self.query_one("#decide-outcome", OptionList)
        outcome.highlighted = 0
        outcome.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id == "limit":
            drops = self.query_one("#decide-drops", SelectionList)
            drops.highlighted = 0
            drops.focus()
        else:
            self.query_one("#decide-note").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        outcome_list = self.query_one("#decide-outcome", OptionList)
        index = outcome_list.highlighted or 0
        outcome = ("continue", "limit", "revise")[index]
        drops = list(self.query_one("#decide-drops", SelectionList).selected)
        note = event.value.strip()
        error = None
        if not note:
            error = "a note is required: say why (D4)"
        elif outcome == "limit" and not drops:
            error = "limit: pick at least one stage to drop"
        if error:
            self.query_one("#form-error", Static).update(error)
            return
        self.dismiss({"outcome": outcome, "drops": drops if outcome == "limit" else [],
                      "note": note})

    def action_cancel(self) -> None:
        self.dismiss(None)


class InfoScreen(ModalScreen[None]):
    """Read-only text (help, overrun options); any of Esc / q / ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark,o", "close", "Close", id="info-close")]

    def __init__(self, title: str, body: Text | str) -> None:
        super().__init__(classes="dialog")
        self._title, self._body = title, body

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box -wide"):
            yield Label(self._title, classes="dialog-title")
            with VerticalScroll(classes="info-scroll"):
                yield Static(self._body, id="info-body")
            yield Label("Esc closes", classes="dialog-hint")

    def action_close(self) -> None:
        self.dismiss(None)


class TimelineScreen(Screen[None]):
    """The whole rental window full-screen, with each stage's planned and real times."""

    BINDINGS = [Binding("escape,T,w,q", "close", "Back", id="timeline-close")]

    def compose(self) -> ComposeResult:
        from cockpit.tui.panels import Timeline

        yield Label("Timeline of the rental window — Esc / T goes back", classes="dialog-title")
        with VerticalScroll():
            yield Timeline(id="timeline-full")

    def action_close(self) -> None:
        self.dismiss(None)
