"""The real `cockpit` command in a real terminal (tmux): keys, bytes on the wire, hangup.

These drive `python -m cockpit FILE` inside a detached tmux session, as a person on
the rented box would, and read the journal and the pane's text.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers.campaigns import FINITE, step_command, write_campaign
from tests.helpers.process import wait_for
from tests.helpers.ticks import ticks_logged, wait_for_ticks

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
              pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]

# 30 idle ticks (6 s) may redraw the host line (at most every 5 s, ~350 B each) and, when
# a minute turns, the countdown and the timeline's now-marker (measured: 2.2 KB usually,
# 5.8 KB across a minute boundary). A full 120x40 frame is ~15 KB: 30 ticks that redrew
# the screen would write ~450 KB, so this bound still proves nothing is redrawn idly.
IDLE_BYTES_BOUND = 8_000
IDLE_TICKS = 30  # counted in the status log: one line a tick
SETTLED_TICKS = 5  # the first frames are over when this many ticks in a row wrote nothing
SETTLE_AT_MOST = 75  # ticks: the first frames take far fewer


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False).stdout



def journal(path: Path) -> list[dict[str, Any]]:
    file = path.parent / ".cockpit" / "journal.jsonl"
    if not file.exists():
        return []
    return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]


@pytest.fixture
def session() -> Iterator[str]:
    name = f"cockpit-test-{uuid.uuid4().hex[:8]}"
    yield name
    # script(1) outlives a killed session and keeps its pty (and the cockpit inside it)
    # alive: end the pane's processes first, then the session.
    procs: list[psutil.Process] = []
    try:
        pane = int(tmux("list-panes", "-t", name, "-F", "#{pane_pid}").split()[0])
        procs = [psutil.Process(pane), *psutil.Process(pane).children(recursive=True)]
    except (subprocess.CalledProcessError, ValueError, IndexError, psutil.Error):
        pass
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    psutil.wait_procs(procs, timeout=5)
    with contextlib.suppress(subprocess.CalledProcessError):
        tmux("kill-session", "-t", name)


def launch(session: str, path: Path, *extra: str, wrap_log: Path | None = None,
           size: tuple[int, int] = (120, 40)) -> None:
    # A tmux server started from pytest can hold LINES=24 COLUMNS=80 in its global
    # environment; shutil.get_terminal_size (Textual's) prefers those to the pty's size.
    env = f"cd {ROOT} && unset LINES COLUMNS && PYTHONPATH={ROOT} TERM=xterm-256color"
    cmd = f"{sys.executable} -m cockpit {path} --interval 0.2 {' '.join(extra)}"
    if wrap_log is not None:  # script(1) keeps a copy of every byte written to the terminal
        cmd = f"script -q -f -c '{cmd}' {wrap_log}"
    tmux("new-session", "-d", "-s", session, "-x", str(size[0]), "-y", str(size[1]),
         f"{env} {cmd}")


def screen(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


SGR = re.compile(r"\x1b\[[0-9;]*m")


def frame_style(session: str, text: str) -> str | None:
    """The colours of the frame (▊) of the input whose line shows ``text`` (None: not in
    view). A focused input's frame has the focus colour: a field takes typing once its
    frame has it (typed before, the letters would be keys: t changes the theme)."""
    for line in tmux("capture-pane", "-p", "-e", "-t", session).splitlines():
        if text in SGR.sub("", line) and "▊" in line:
            return "".join(SGR.findall(line[:line.index("▊")])[-3:])
    return None


def cockpit_pid(session: str) -> int:
    pane = int(tmux("list-panes", "-t", session, "-F", "#{pane_pid}").split()[0])
    procs = [psutil.Process(pane), *psutil.Process(pane).children(recursive=True)]
    return next(p.pid for p in procs if "cockpit" in " ".join(p.cmdline()))


def plan_only(tmp_path: Path) -> Path:
    return write_campaign(tmp_path, [
        {"id": "prep", "hours": 4, "resource": "human"},
        {"id": "train", "hours": 10, "resource": "gpu", "after": ["prep"], "run": "r1",
         "command": step_command()},
    ])


def test_start_then_stop_with_reason_in_tmux(tmp_path: Path, session: str) -> None:
    path = write_campaign(tmp_path, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": step_command(steps=4000, sleep=0.05)},
    ])
    launch(session, path, "--simulate-gpus", "2")
    try:
        wait_for(lambda: "SIMULATED" in screen(session), what="first frame")
        tmux("send-keys", "-t", session, "s")
        wait_for(lambda: "Start which stage" in screen(session), what="pick list")
        tmux("send-keys", "-t", session, "Enter")
        wait_for(lambda: "Start stage train?" in screen(session), what="confirmation")
        tmux("send-keys", "-t", session, "y")
        wait_for(lambda: any(e["kind"] == "run_started" for e in journal(path)),
                 what="run_started")
        wait_for(lambda: "▶ running" in screen(session), what="running on screen")
        tmux("send-keys", "-t", session, "x")
        wait_for(lambda: "Stop run r1" in screen(session), what="stop dialog")
        tmux("send-keys", "-t", session, "-l", "diverging early")
        tmux("send-keys", "-t", session, "Enter")
        wait_for(lambda: "Stop run r1?" in screen(session), what="stop confirmation")
        tmux("send-keys", "-t", session, "y")
        stop = wait_for(lambda: next((e for e in journal(path)
                                      if e["kind"] == "stop_requested"), None),
                        what="stop_requested")
        assert stop["reason"] == "diverging early" and stop["actor"] == "tui"
        wait_for(lambda: "stop of run r1 requested" in screen(session), what="event shown")
        wait_for(lambda: any(e["kind"] == "stop_done" for e in journal(path)), what="stop_done")
    finally:
        for ev in journal(path):
            if ev["kind"] == "stage_started" and ev.get("pgid"):
                try:
                    os.killpg(ev["pgid"], 9)
                except (ProcessLookupError, PermissionError):
                    pass


def test_idle_ticks_write_few_bytes(tmp_path: Path, session: str) -> None:
    path = plan_only(tmp_path)
    log = tmp_path / "tty.log"
    launch(session, path, wrap_log=log)
    wait_for(lambda: "prep" in screen(session), what="first frame")
    # Let the first frames (and toasts) settle: wait until nothing is written to the
    # terminal over SETTLED_TICKS ticks in a row (each tick logs a status line), or
    # measure anyway after SETTLE_AT_MOST ticks (a face that redraws on every tick never
    # settles: the bound below then says by how much).
    sizes: list[int] = []  # the terminal's bytes at each new tick
    seen = ticks_logged(path)

    def settled() -> bool:
        nonlocal seen
        now = ticks_logged(path)
        if now > seen:
            seen = now
            sizes.append(log.stat().st_size)
        return (len(sizes) > SETTLED_TICKS and len(set(sizes[-SETTLED_TICKS - 1:])) == 1) \
            or len(sizes) >= SETTLE_AT_MOST

    wait_for(settled, timeout=120, what=f"{SETTLED_TICKS} ticks in a row that wrote nothing")
    start, since = log.stat().st_size, ticks_logged(path)
    wait_for_ticks(path, IDLE_TICKS, since=since)
    written = log.stat().st_size - start
    assert written < IDLE_BYTES_BOUND, f"{written} bytes over {IDLE_TICKS} idle ticks"
    print(f"idle: {written} bytes over {IDLE_TICKS} ticks")


def test_killing_the_pane_ends_the_cockpit(tmp_path: Path, session: str) -> None:
    path = plan_only(tmp_path)
    launch(session, path)
    wait_for(lambda: "prep" in screen(session), what="first frame")
    proc = psutil.Process(cockpit_pid(session))
    tmux("kill-pane", "-t", session)
    proc.wait(timeout=60)  # the hang this guards against never ends: 60 s bounds it


def kill_started(path: Path) -> None:
    for ev in journal(path):
        if ev["kind"] == "stage_started" and ev.get("pgid"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(ev["pgid"], 9)


@pytest.mark.parametrize("size", [(80, 24), (60, 20)], ids=["80x24", "60x20"])
def test_running_stage_step_and_loss_without_a_key(tmp_path: Path, session: str,
                                                    size: tuple[int, int]) -> None:
    """Issue 15's done-when: in tmux during a real campaign, at 80x24 and at 60x20, a
    person sees what is running, its step and its loss without pressing a key."""
    path = write_campaign(tmp_path, [
        {"id": "prep", "hours": 1, "resource": "human"},
        {"id": "pilot", "hours": 1, "resource": "human", "after": ["prep"],
         "decision_point": True},
        {"id": "data-check", "hours": 1, "resource": "cpu", "run": "dc",
         "command": step_command(steps=2, sleep=0.01)},
        {"id": "control", "hours": 6, "resource": "gpu", "run": "control", "after": ["pilot"],
         "command": step_command()},
        {"id": "variant-a", "hours": 6, "resource": "gpu", "run": "variant-a",
         "after": ["control"], "category": "useful", "command": step_command()},
        {"id": "report", "hours": 2, "resource": "human", "after": ["variant-a"]},
        {"id": "train", "hours": 2, "resource": "gpu", "run": "r1",
         "command": step_command(steps=100_000, sleep=0.05)},
    ], rules=[FINITE])
    try:
        # Started as a person would from another shell; the cockpit opens on it running.
        subprocess.run([sys.executable, "-m", "cockpit", "start", str(path), "train"],
                       cwd=ROOT, check=True, capture_output=True)
        launch(session, path, "--simulate-gpus", "2", size=size)
        pattern = re.compile(r"▶ train\s+([\d,]+)/100k\s+loss (\d+\.\d+)")

        def seen() -> tuple[int, float] | None:
            m = pattern.search(screen(session))
            return (int(m.group(1).replace(",", "")), float(m.group(2))) if m else None

        step, loss = wait_for(seen, what="the running stage with its step and loss")
        # The window line and the key bar (the footer is composed a moment later).
        wait_for(lambda: "window" in (t := screen(session)) and "Start" in t,
                 what="the window line and the key bar")
        text = screen(session)
        assert len(text.splitlines()) <= size[1]
        assert all(len(line) <= size[0] for line in text.splitlines()), text
        assert loss == pytest.approx(1.0 / step, rel=0.5), (step, loss, text)  # loss = 1/step
        # It follows live: a later frame shows a later step, still without a key.
        later = wait_for(lambda: (s := seen()) is not None and s[0] > step and s,
                         what="a later step")
        assert later[1] <= loss
    finally:
        kill_started(path)


def test_at_80x24_a_person_decides_rejects_and_watches_the_loss(tmp_path: Path,
                                                                 session: str) -> None:
    """Issue 25's whole flow in a real terminal at 80x24: the key bar offers what the
    situation needs first, the decide dialog's note is typed in view, a reject goes
    through its checks, the chart opens on the loss; every step through the keys."""
    path = write_campaign(tmp_path, [
        {"id": "pilot", "hours": 1, "resource": "human", "decision_point": True},
        {"id": "train", "hours": 1, "resource": "cpu", "run": "r1",
         "command": step_command(steps=20, sleep=0.01)},
        {"id": "long", "hours": 1, "resource": "gpu", "run": "r2",
         "command": step_command(steps=4000, sleep=0.05)},
    ], rules=[FINITE])
    run = [sys.executable, "-m", "cockpit"]
    for stage in ("train", "long"):
        subprocess.run([*run, "start", str(path), stage, "--force"], check=True,
                       capture_output=True)
    subprocess.run([*run, "mark", str(path), "pilot", "started"], check=True,
                   capture_output=True)
    subprocess.run([*run, "mark", str(path), "pilot", "done"], check=True, capture_output=True)
    launch(session, path, "--simulate-gpus", "1", size=(80, 24))
    try:
        wait_for(lambda: "q Quit" in screen(session), what="first frame with the key bar")
        bar = wait_for(lambda: next((line for line in screen(session).splitlines()
                                     if "q Quit" in line and "d Decide" in line), None),
                       what="d first in the key bar")
        assert bar.lstrip().startswith("d Decide") and "? Help" in bar
        tmux("send-keys", "-t", session, "d")
        # A person reads the dialog before choosing: drawn down to its last choice.
        wait_for(lambda: "Decision at pilot" in (t := screen(session))
                 and "revise: the question changes" in t, what="decide dialog")
        tmux("send-keys", "-t", session, "Enter")  # continue: the note is next
        # The note's frame in the focus colour: unlike the (unfocused) next field's.
        focused = wait_for(lambda: (style := frame_style(session, "why this decision"))
                           and style != frame_style(session, "e.g. val/accuracy") and style,
                           what="the note field focused")
        tmux("send-keys", "-t", session, "-l", "pilot fits the window")
        wait_for(lambda: "pilot fits the window" in screen(session), what="the note in view")
        tmux("send-keys", "-t", session, "Enter")
        # The second Enter once the first has moved the focus on (a loaded machine may
        # draw late: each key waits for what the one before did).
        wait_for(lambda: frame_style(session, "e.g. val/accuracy") == focused,
                 what="the metric field focused after the note")
        tmux("send-keys", "-t", session, "Enter")
        wait_for(lambda: "Record the decision at pilot?" in screen(session), what="y/n")
        assert "note: pilot fits the window" in screen(session)
        tmux("send-keys", "-t", session, "y")
        wait_for(lambda: any(e["kind"] == "decision" for e in journal(path)), what="decision")
        wait_for(lambda: any(e["kind"] == "run_exited" and e.get("run") == "r1"
                             for e in journal(path)), what="r1 ended")
        wait_for(lambda: "a Accept" in screen(session), what="a verdict offered")
        tmux("send-keys", "-t", session, "r")
        wait_for(lambda: "Reject r1" in screen(session), what="reject dialog after checks")
        wait_for(lambda: frame_style(session, "note: why (required)") == focused,
                 what="the reject note focused")
        tmux("send-keys", "-t", session, "-l", "leak in eval")
        tmux("send-keys", "-t", session, "Enter")
        wait_for(lambda: "Reject the result of r1?" in screen(session), what="reject y/n")
        tmux("send-keys", "-t", session, "y")
        wait_for(lambda: any(e["kind"] == "result_rejected" for e in journal(path)),
                 what="result_rejected")
        tmux("send-keys", "-t", session, "g")
        wait_for(lambda: "loss over steps" in screen(session), what="the chart on the loss")
        tmux("send-keys", "-t", session, "Escape")
        wait_for(lambda: "q Quit" in screen(session), what="back on the dashboard")
    finally:
        for ev in journal(path):
            if ev["kind"] == "stage_started" and ev.get("pgid"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(ev["pgid"], 9)
