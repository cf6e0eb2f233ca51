"""The person's flows on the main screen: pick → form → confirm → act, each one linear.

Every flow is a ``@work`` coroutine that reads top to bottom: it awaits each dialog
with ``push_screen_wait`` and stops at the first cancel (Esc, n, an empty pick).
Nothing is written before an explicit y; the act itself runs in the app's action
worker (:meth:`CockpitApp.act`), which shows what was written or why it was refused.
One flow at a time: a key pressed again while its dialog opens starts nothing.
What a person may do now comes from the Snapshot (:mod:`cockpit.tui.offers`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol, cast

from textual import work
from textual.worker import Worker

from cockpit.engine import Engine
from cockpit.engine.snapshot import ExportAction
from cockpit.tui import offers
from cockpit.tui.decision import decision_context
from cockpit.tui.dialogs import (
    ConfirmScreen,
    DecideScreen,
    FormScreen,
    PickScreen,
    WaitScreen,
)
from cockpit.tui.full_screens import LogScreen, SnapshotScreen

CANCEL = "n / Esc cancels"


class Cockpit(Protocol):
    """What the flows use of the app (:class:`cockpit.tui.app.CockpitApp`)."""

    engine: Engine
    lock: threading.Lock

    def act(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run an engine action in the action worker; show what it wrote or why not."""

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """A literal notification."""


class FlowScreen(SnapshotScreen):
    """The flows of the main screen; :class:`CockpitScreen` binds keys to them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._flow: Worker[None] | None = None

    @property
    def cockpit(self) -> Cockpit:
        return cast(Cockpit, self.app)

    def selected_run(self, candidates: list[str], focused: bool = True) -> str | None:
        """The run the person points at (the main screen's runs table): none here."""
        return None

    # ---------------------------------------------------------------- the steps
    def begin(self, flow: Callable[[], Worker[None]]) -> None:
        """Start ``flow`` unless one is under way (a key pressed twice opens one dialog)."""
        if self._flow is None or self._flow.is_finished:
            self._flow = flow()

    async def confirm(self, title: str, body: str) -> bool:
        """y/n before anything is written; only an explicit y goes on."""
        yes: bool = await self.app.push_screen_wait(ConfirmScreen(title, body))
        return yes

    async def pick(self, title: str, items: list[tuple[str, str]],
                   selected: str | None = None) -> str | None:
        return await self.app.push_screen_wait(PickScreen(title, items, selected)) or None

    async def one_run(self, title: str, candidates: list[str]) -> str | None:
        """The run to act on: the one under the runs table's cursor when the table has
        the focus, the only candidate, else a list with the cursor's run highlighted."""
        chosen = self.selected_run(candidates)
        if chosen is not None or len(candidates) == 1:
            return chosen or candidates[0]
        return await self.pick(title, [(r, r) for r in candidates],
                               self.selected_run(candidates, focused=False))

    async def checks(self, run_id: str) -> str | None:
        """The run's acceptance checks, evaluated off the loop (a reload check restores
        the checkpoint in a fresh process: seconds, or minutes), shown as under way at
        once; None when the person stops waiting (Esc)."""
        waiting = WaitScreen(f"Checking {run_id}",
                             "its acceptance checks (a reload check restores the checkpoint "
                             "in a fresh process)")
        stopped = asyncio.Event()
        self.app.push_screen(waiting, callback=lambda _result: stopped.set())
        work = asyncio.ensure_future(asyncio.to_thread(_acceptance_checks, self.cockpit, run_id))
        wait = asyncio.ensure_future(stopped.wait())
        await asyncio.wait({work, wait}, return_when=asyncio.FIRST_COMPLETED)
        if not work.done():
            return None  # the person stopped waiting; the check ends on its own
        wait.cancel()
        if waiting.is_current:
            waiting.dismiss(None)
        return work.result()

    # ---------------------------------------------------------------- s x v
    @work(group="flow")
    async def start_flow(self, ready: list[tuple[str, str]]) -> None:
        stage_id = await self.pick("Start which stage?", ready)
        if stage_id is None:
            return
        stage = self.cockpit.engine.campaign.stage(stage_id)
        command = stage.command if isinstance(stage.command, str) else " ".join(
            stage.command or ())
        view = self.snapshot.stage(stage_id) if self.snapshot is not None else None
        again = view is not None and view.state in ("failed", "stopped")
        verb, kept = ("Restart", f"it {view.state}; its earlier attempts, their output and "
                      "verdicts stay in the journal\n") if again and view else ("Start", "")
        if await self.confirm(f"{verb} stage {stage_id}?",
                              f"{kept}runs: {command}\non: {stage.resource_label} · "
                              f"{stage.category}\n\ny starts it · {CANCEL}"):
            self.cockpit.act("start", self.cockpit.engine.start, stage_id)

    @work(group="flow")
    async def stop_flow(self, runs: list[str]) -> None:
        run_id = await self.one_run("Stop which run?", runs)
        if run_id is None:
            return
        values = await self.app.push_screen_wait(FormScreen(
            f"Stop run {run_id}", [("reason", "reason (kept with the run, D15)", "")],
            check=lambda v: None if v["reason"].strip() else "a reason is required (D15)"))
        if not values:
            return
        reason = values["reason"].strip()
        grace = self.cockpit.engine.campaign.settings.stop_grace_s
        if await self.confirm(f"Stop run {run_id}?",
                              f"reason: {reason}\nSIGTERM now, SIGKILL after {grace:g} s; the "
                              "run keeps its id and the reason (D15).\n\ny stops it · "
                              f"{CANCEL}"):
            self.cockpit.act("stop", self.cockpit.engine.stop, run_id, reason)

    @work(group="flow")
    async def verify_flow(self, runs: list[str]) -> None:
        run_id = await self.one_run("Verify which run's checkpoint?", runs)
        if run_id is not None and await self.confirm(
                f"Verify the latest checkpoint of {run_id}?",
                f"reloads it in a new process and journals the result (D17).\n\n"
                f"y verifies · {CANCEL}"):
            self.cockpit.act("verify", self.cockpit.engine.verify, run_id)

    # ---------------------------------------------------------------- d m n c
    @work(group="flow")
    async def decide_flow(self, pending: list[str], droppable: list[str]) -> None:
        stage_id = pending[0] if len(pending) == 1 else await self.pick(
            "Decide at which stage?", [(p, p) for p in pending])
        if stage_id is None or self.snapshot is None:
            return
        engine = self.cockpit.engine
        answer = await self.app.push_screen_wait(DecideScreen(
            stage_id, droppable, decision_context(self.snapshot, stage_id, engine.campaign)))
        if not answer:
            return
        drops = answer["drops"]
        body = (f"outcome: {answer['outcome']}" + (f"\ndrop: {', '.join(drops)}" if drops else "")
                + f"\nnote: {answer['note']}\n\ny records it · {CANCEL}")
        if await self.confirm(f"Record the decision at {stage_id}?", body):
            self.cockpit.act("decide", engine.decide, answer["outcome"], stage=stage_id,
                             drops=drops, note=answer["note"])

    @work(group="flow")
    async def mark_flow(self, markable: dict[str, tuple[str, ...]]) -> None:
        stage_id = await self.pick("Mark which manual stage?",
                                   [(s, f"{s}  ({', '.join(w)})") for s, w in markable.items()])
        if stage_id is None:
            return
        what = await self.pick(f"Mark {stage_id} as", [(w, w) for w in markable[stage_id]])
        if what is not None and await self.confirm(f"Mark {stage_id} {what}?",
                                                   f"y records it · {CANCEL}"):
            self.cockpit.act("mark", self.cockpit.engine.mark, stage_id, what)

    @work(group="flow")
    async def note_flow(self, order: list[str]) -> None:
        stage_id = await self.pick("Note on which stage?", [(s, s) for s in order])
        if stage_id is None:
            return
        values = await self.app.push_screen_wait(FormScreen(
            f"Note on {stage_id} (D24)", [("text", "note", "")],
            check=lambda v: None if v["text"].strip() else "the note is empty"))
        if not values:
            return
        text = values["text"].strip()
        if await self.confirm(f"Add this note to {stage_id}?",
                              f"{text}\n\ny records it · {CANCEL}"):
            self.cockpit.act("note", self.cockpit.engine.note, stage_id, text)

    @work(group="flow")
    async def cost_flow(self) -> None:
        values = await self.app.push_screen_wait(FormScreen("Another cost (D20)", [
            ("label", "what it was for", ""), ("amount", "amount (e.g. 12.50)", ""),
            ("currency", "currency", "USD")], check=_check_cost))
        if not values:
            return
        label, amount = values["label"].strip(), values["amount"].strip()
        currency = values["currency"].strip().upper()
        if await self.confirm("Record this cost?",
                              f"{label}: {amount} {currency}\nkept apart from the rental "
                              f"price (D20)\n\ny records it · {CANCEL}"):
            self.cockpit.act("cost", self.cockpit.engine.cost, label, amount, currency)

    # ---------------------------------------------------------------- e a r l
    @work(group="flow")
    async def export_flow(self, action: ExportAction) -> None:
        engine = self.cockpit.engine
        if action.kind == "start_stage" and action.stage is not None:
            waits = " (it waits for earlier stages: started anyway)" if action.force else ""
            if await self.confirm(f"Start the export stage {action.stage}?",
                                  "runs its command; the stage is done when the export is "
                                  f"written{waits}.\n\ny starts it · {CANCEL}"):
                self.cockpit.act("export", engine.start, action.stage, force=action.force)
        elif action.kind == "export_and_mark" and action.stage is not None:
            if await self.confirm("Export the result bundle now?",
                                  "writes and verifies the export, then marks stage "
                                  f"{action.stage} done.\n\ny exports · {CANCEL}"):
                self.cockpit.act("export", _export_and_mark, engine, action.stage)
        elif await self.confirm("Export the result bundle now?", f"y exports · {CANCEL}"):
            self.cockpit.act("export", engine.export)

    @work(group="flow")
    async def accept_flow(self, runs: list[str]) -> None:
        run_id = await self.one_run("Accept which run?", runs)
        if run_id is None:
            return
        checks = await self.checks(run_id)
        if checks is None:
            return
        values = await self.app.push_screen_wait(FormScreen(
            f"Accept {run_id}",
            [("note", "note (why; if its checks fail, a note makes an override)", "")],
            body=checks))
        if values is None:
            return
        note = values["note"].strip()
        if await self.confirm(f"Accept the result of {run_id}?",
                              f"{checks}\nnote: {note or '(none)'}\n\ny records it · {CANCEL}"):
            # The CLI's rule: failing checks are accepted only as a recorded override,
            # and only with a note saying why.
            self.cockpit.act("accept", self.cockpit.engine.accept, run_id, note or None,
                             override=bool(note))

    @work(group="flow")
    async def reject_flow(self, runs: list[str]) -> None:
        run_id = await self.one_run("Reject which run?", runs)
        if run_id is None:
            return
        checks = await self.checks(run_id)
        if checks is None:
            return
        values = await self.app.push_screen_wait(FormScreen(
            f"Reject {run_id}", [("note", "note: why (required)", "")], body=checks,
            check=lambda v: None if v["note"].strip() else "say why it is rejected"))
        if not values:
            return
        note = values["note"].strip()
        if await self.confirm(f"Reject the result of {run_id}?",
                              f"{checks}\nnote: {note}\n\ny records it · {CANCEL}"):
            self.cockpit.act("reject", self.cockpit.engine.reject, run_id, note)

    @work(group="flow")
    async def log_flow(self, stages: dict[str, str], running: str | None = None) -> None:
        """A run's output: the runs table's cursor row when the table has the focus,
        else a list with the running run highlighted (its output is the one growing)."""
        candidates = list(stages)
        run_id = self.selected_run(candidates)
        if run_id is None and len(candidates) == 1:
            run_id = candidates[0]
        elif run_id is None:
            run_id = await self.pick("Whose output?", [(r, r) for r in candidates],
                                     running or self.selected_run(candidates, focused=False))
        if run_id is None:
            return
        stage = stages[run_id]
        snap = self.snapshot
        out, err = offers.run_logs(snap, run_id) if snap is not None else (None, None)
        await self.app.push_screen(LogScreen(run_id, stage, out, err))


def _acceptance_checks(app: Any, run_id: str) -> str:
    """The run's acceptance checks as the a / r dialogs show them, evaluated by the
    engine under its lock (off the loop: a check may read files)."""
    try:
        with app.lock:
            ok, reasons = app.engine.check_acceptance(run_id)
    except Exception as exc:  # noqa: BLE001 - shown, never raised
        return f"acceptance checks could not run: {exc}"
    text = "\n".join(f"  {'✓' if ok else '·'} {why}" for why in reasons)
    return f"acceptance checks: {'✓ all pass' if ok else '✗ not all pass'}\n" + text


def _export_and_mark(engine: Any, stage_id: str) -> list[Any]:
    """Export, then mark the manual export stage done with the bundle's path."""
    done = engine.export()
    marked = engine.mark(stage_id, "done", note=f"exported with e: {done.get('path') or 'bag'}")
    return [done, *marked]


def _check_cost(v: dict[str, str]) -> str | None:
    if not v["label"].strip():
        return "the label is empty"
    try:
        Decimal(v["amount"].strip())
    except InvalidOperation:
        return f"{v['amount']!r} is not an amount"
    return None if v["currency"].strip() else "the currency is empty"
