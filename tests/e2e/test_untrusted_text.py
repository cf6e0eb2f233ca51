"""Text from a run never drives the terminal (issue 21): every face, with real processes.

A training script prints every escape class (OSC 52 clipboard, OSC 0 title, ``ESC[2J``,
cursor moves, C1 CSI, U+202E, BEL, CR) to stdout and stderr, reports a metric named with
them, and writes a checkpoint whose file name holds them; a person (or a forger) uses
the same text as a note, a stop reason and a cost label. Each face is read as bytes:
the raw sequences must be absent and their visible form (``\\x1b]52;…``) present, so the
text did reach the face, shown, not obeyed. Markup (``[b]MK[/b]``) reads as itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.e2e.test_fleet import fleet  # noqa: F401 - the two real sshd on loopback (fixture)
from tests.helpers.campaigns import write_campaign
from tests.helpers.process import wait_for

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable

# One of each escape class; the payloads are unique words so a hit is ours, not Textual's.
OSC52 = "\x1b]52;c;UFdORUQ=\x07"  # base64 "PWNED" into the clipboard
OSC0 = "\x1b]0;PWNED-TITLE\x07"  # the window title
CLEAR = "\x1b[2J"
MOVE = "\x1b[5A\x1b[7C"  # cursor up 5, right 7
C1 = "\x9b31m"  # C1 CSI (8-bit)
RLO = "\u202e"  # right-to-left override
HOSTILE = f"{OSC52}{OSC0}{CLEAR}{MOVE}{C1}{RLO}bell\x07cr\revil"

# Raw forms that must never reach a terminal, a log meant for one, or REPORT.md.
RAW = {
    "OSC 52": b"\x1b]52;",
    "OSC 0": b"\x1b]0;PWNED",
    "cursor move": b"\x1b[5A\x1b[7C",
    "C1 CSI": "\x9b".encode(),
    "U+202E": RLO.encode(),
}
SHOWN = b"\\x1b]52;c;UFdORUQ="  # the visible form: proof the text reached the face

SCRIPT = textwrap.dedent(f"""
    import os, sys, time
    from cockpit import report
    HOSTILE = {HOSTILE!r}
    steps, sleep = int(sys.argv[1]), float(sys.argv[2])
    os.makedirs("ckpt/r1", exist_ok=True)
    with open("ckpt/r1/step_1-" + HOSTILE + ".pt", "wb") as handle:
        handle.write(b"not a checkpoint")  # its failed reload names the file
    for step in range(1, steps + 1):
        sys.stdout.buffer.write(f"out {{step}} {{HOSTILE}}\\n".encode())
        sys.stdout.flush()
        sys.stderr.buffer.write(f"err {{step}} {{HOSTILE}}\\n".encode())
        sys.stderr.flush()
        report.log(step, loss=1.0 / step, **{{"[b]MK[/b]": 2.0, HOSTILE: 1.0}})
        time.sleep(sleep)
""")


def hostile_campaign(folder: Path, steps: int = 4000, sleep: float = 0.1) -> Path:
    path = write_campaign(folder, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": [PY, "hostile.py", str(steps), str(sleep)]},
    ], {"r1": {"checkpoints": "ckpt/r1"}})
    (folder / "hostile.py").write_text(SCRIPT)
    return path


def assert_clean(data: bytes, where: str, shown: bytes | None = SHOWN,
                 controls: bool = True) -> None:
    """No raw escape of any class; with ``controls``, no C0 byte but newline and tab."""
    for name, raw in RAW.items():
        assert raw not in data, f"{where}: raw {name} reached it"
    if controls:
        bad = sorted({b for b in data if b < 0x20 and b not in (0x0A, 0x09)} | (
            {0x7F} if 0x7F in data else set()))
        assert not bad, f"{where}: control bytes {[hex(b) for b in bad]}"
    if shown is not None:
        assert shown in data, f"{where}: the hostile text is not shown at all"


def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "COCKPIT_SIMULATE_GPUS"}
    env["COCKPIT_SIMULATE_GPUS"] = "1"
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([PY, "-m", "cockpit", *args], capture_output=True, env=env,
                          timeout=120, check=False)



def journal_kinds(path: Path) -> list[str]:
    import json

    file = path.parent / ".cockpit" / "journal.jsonl"
    if not file.exists():
        return []
    return [json.loads(line)["kind"] for line in file.read_text().splitlines() if line]


def kill_runs(path: Path) -> None:
    import json

    file = path.parent / ".cockpit" / "journal.jsonl"
    if not file.exists():
        return
    for line in file.read_text().splitlines():
        ev = json.loads(line)
        if ev.get("kind") == "stage_started" and ev.get("pgid"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(ev["pgid"], 9)


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, bool]]:
    """One hostile campaign played once; each face's bytes, and whether the hostile
    text must be shown there (every face here names it)."""
    tmp_path = tmp_path_factory.mktemp("hostile")
    path = hostile_campaign(tmp_path / "c", steps=4000, sleep=0.05)
    log = tmp_path / "events.log"
    out = tmp_path / "headless.out"
    env = {**os.environ, "COCKPIT_SIMULATE_GPUS": "1", "PYTHONPATH": str(ROOT)}
    with open(out, "wb") as sink:
        headless = subprocess.Popen([PY, "-m", "cockpit", "headless", str(path), "--interval",
                                     "0.2", "--log", str(log)], stdout=sink,
                                    stderr=subprocess.STDOUT, env=env)
    try:
        start = cli("start", str(path), "train")
        wait_for(lambda: "checkpoint_verified" in journal_kinds(path), 60,
                 "the hostile checkpoint's verification")
        note = cli("note", str(path), "train", HOSTILE)
        cost = cli("cost", str(path), HOSTILE, "12.50")
        status = cli("status", str(path))  # while it runs: the metric names are shown
        stop = cli("stop", str(path), "r1", "--reason", HOSTILE)
        wait_for(lambda: b"stop of run r1 requested" in out.read_bytes(), 30, "headless line")
        wait_for(lambda: b"note on train" in out.read_bytes(), 30, "headless note")
    finally:
        headless.terminate()
        headless.wait(timeout=20)
        kill_runs(path)
    for result in (start, note, cost, stop):
        assert result.returncode == 0, result.stderr

    export = cli("export", str(path), "--no-reload")
    reports = list((tmp_path / "c").rglob("REPORT.md"))
    assert reports, export.stdout + export.stderr
    # verify-export: a bag and a tar holding a file whose name is hostile.
    bag = next(p.parent for p in (tmp_path / "c").rglob("bagit.txt"))
    (bag / "data" / f"x-{HOSTILE}.txt").write_text("planted")
    verify = cli("verify-export", str(bag), "--no-reload")
    assert verify.returncode != 0
    tar = tmp_path / "bag.tar"
    with tarfile.open(tar, "w") as handle:
        handle.add(bag, arcname=bag.name)
    digest = hashlib.sha256(tar.read_bytes()).hexdigest()
    tar.with_name("bag.tar.sha256").write_text(f"{digest}  bag.tar\n")
    verify_tar = cli("verify-export", str(tar), "--no-reload")
    assert verify_tar.returncode != 0
    return {
        "echo of note": (note.stdout, True), "echo of cost": (cost.stdout, True),
        "echo of stop": (stop.stdout, True), "status": (status.stdout, True),
        "status after the stop": (cli("status", str(path)).stdout, True),
        "budget": (cli("budget", str(path)).stdout, True),
        "headless stdout": (out.read_bytes(), True), "headless --log": (log.read_bytes(), True),
        "REPORT.md": (b"".join(r.read_bytes() for r in reports), True),
        "verify-export DIR": (verify.stdout + verify.stderr, True),
        "verify-export TAR": (verify_tar.stdout + verify_tar.stderr, True),
    }


FACES = ("echo of note", "echo of cost", "echo of stop", "status", "status after the stop",
         "budget", "headless stdout", "headless --log", "REPORT.md",
         "verify-export DIR", "verify-export TAR")


@pytest.mark.slow  # one hostile campaign played through every face (~20 s of CPU)
@pytest.mark.parametrize("face", FACES)
def test_face_shows_hostile_text_escaped(faces: dict[str, tuple[bytes, bool]],
                                         face: str) -> None:
    data, named = faces[face]
    assert_clean(data, face, shown=SHOWN if named else None)


def test_every_event_kind_line_is_printable() -> None:
    """describe_event, the one place events become sentences: every field of every kind."""
    from cockpit.engine import EVENT_KINDS, describe_event

    for kind in [*EVENT_KINDS, "unknown-kind"]:
        ev = {"seq": 1, "t": "2026-12-02T08:00:00Z", "kind": kind, HOSTILE: HOSTILE}
        ev.update({f: HOSTILE for f in (EVENT_KINDS[kind].fields if kind in EVENT_KINDS
                                        else ())})
        ev.update({"drops": [HOSTILE]} if kind == "decision" else {})
        line = describe_event(ev).encode()
        assert_clean(line, f"describe_event({kind})", shown=None)


# ---------------------------------------------------------------------- the TUI in tmux
def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True,
                          check=False).stdout


@pytest.fixture
def session() -> Iterator[str]:
    name = f"cockpit-text-{uuid.uuid4().hex[:8]}"
    yield name
    procs: list[psutil.Process] = []
    try:
        pane = int(tmux("list-panes", "-t", name, "-F", "#{pane_pid}").split()[0])
        procs = [psutil.Process(pane), *psutil.Process(pane).children(recursive=True)]
    except (ValueError, IndexError, psutil.Error):
        pass
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    psutil.wait_procs(procs, timeout=5)
    tmux("kill-session", "-t", name)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_tui_main_screen_log_view_and_events_in_tmux(tmp_path: Path, session: str) -> None:
    path = hostile_campaign(tmp_path / "c", steps=4000, sleep=0.1)
    wire = tmp_path / "wire.bin"
    env = f"cd {ROOT} && unset LINES COLUMNS && PYTHONPATH={ROOT} TERM=xterm-256color"
    # A shell first: pipe-pane is attached before the cockpit writes its first byte.
    tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "50", "sh")
    tmux("set-option", "-t", session, "set-clipboard", "on")
    tmux("pipe-pane", "-o", "-t", session, f"cat >> {wire}")
    tmux("send-keys", "-t", session, "-l",
         f"{env} exec {PY} -m cockpit {path} --interval 0.2 --simulate-gpus 1\n")

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", session)

    def screen_with(word: str) -> str | None:
        text = screen()
        return text if word in text else None

    def changed(was: str) -> str | None:
        text = screen()
        return text if text != was else None

    try:
        wait_for(lambda: "SIMULATED" in screen(), 30, "first frame")
        assert cli("start", str(path), "train").returncode == 0
        wait_for(lambda: "checkpoint_verified" in journal_kinds(path), 60, "verification")
        wait_for(lambda: screen_with("step/s"), 30, "the run's throughput on screen")
        main = wait_for(lambda: screen_with("[b]MK[/b]"), 30,
                        "the metric named [b]MK[/b] on the main screen")
        tmux("send-keys", "-t", session, "l")
        logs = wait_for(lambda: screen_with("evil"), 30, "the run's output in the log view")
        shown = logs
        for _ in range(3):  # a few refreshes of the log view (the run prints on)
            shown = wait_for(lambda was=shown: changed(was), 30, "a refresh of the log view")
        tmux("send-keys", "-t", session, "Escape")
        wait_for(lambda: "SIMULATED" in screen(), 60, "back on the main screen")
        assert cli("note", str(path), "train", HOSTILE).returncode == 0
        assert cli("stop", str(path), "r1", "--reason", HOSTILE).returncode == 0
        wait_for(lambda: "stop of run r1 requested" in screen(), 30, "the events panel")
        # Frames after it: the run's end, drawn once the stop is done.
        wait_for(lambda: "run r1 stopped" in screen(), 60, "the stop done on screen")
        title = tmux("display-message", "-p", "-t", session, "#{pane_title}")
        buffers = tmux("list-buffers")
    finally:
        kill_runs(path)
    data = wire.read_bytes()
    assert_clean(data, "the bytes tmux received", shown=None, controls=False)
    assert b"\\x1b]52;c;UFdORUQ=" in data
    assert "PWNED" not in title, title
    assert "UFdORUQ" not in buffers and "PWNED" not in buffers, buffers
    assert "[b]MK[/b]" in main, main  # markup in a name reads as itself
    assert "\\x1b]0;PWNED-TITLE" in logs, logs  # the run's escapes are shown, not obeyed


# ---------------------------------------------------------------------- the log view's bounds
def test_log_view_flood_is_bounded(tmp_path: Path) -> None:
    """8 lines of 1 MB a second for 3 s with `l` open, then 100k short lines: each refresh
    reads a bounded amount and writes bounded lines, the pane keeps a bounded number of
    characters, and the run's escapes are shown, not kept raw."""
    asyncio.run(_flood(tmp_path))


async def _flood(tmp_path: Path) -> None:
    from textual.app import App
    from textual.widgets import RichLog

    from cockpit.tui import full_screens as screens

    out, err = tmp_path / "train.1.out", tmp_path / "train.1.err"
    out.write_bytes(b"")
    err.write_bytes(b"")

    class Host(App[None]):
        pass

    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screens.LogScreen("r1", "train", out, err)
        await app.push_screen(screen)
        await pilot.pause()
        counted: list[tuple[int, int]] = []  # (bytes taken, lines given) per refresh below
        # The screen's own 1 s timer refreshes too when a busy box makes a pause last
        # longer than that (a parallel run): those refreshes are kept apart.
        timer: list[tuple[int, int]] = []
        ours = False
        follower = screen.followers[0]
        read = follower.read

        def measured() -> list[str]:
            before = follower.offset or 0
            lines = read()
            (counted if ours else timer).append(((follower.offset or 0) - before, len(lines)))
            return lines

        def follow() -> None:
            nonlocal ours
            ours = True
            try:
                screen.follow()
            finally:
                ours = False

        follower.read = measured  # type: ignore[method-assign]
        for second in range(3):
            with open(out, "ab") as handle:
                for i in range(8):
                    handle.write(f"{second}.{i} ".encode() + OSC0.encode() + b"x" * 1_000_000
                                 + b"\n")
            follow()
            await pilot.pause()
        with open(out, "ab") as handle:  # then a flood of short lines: 1.4 MB, 100k lines
            handle.write(f"{CLEAR}short\n".encode() * 100_000)
        follow()
        await pilot.pause()
        with open(out, "ab") as handle:
            handle.write(f"last {OSC52}{RLO}\r\n".encode())
        follow()
        await pilot.pause()
        log = screen.query_one("#log-out", RichLog)
        texts = [strip.text for strip in log.lines]
    kept = sum(len(text) for text in texts)
    # 24 MB written: at most a few hundred KB read per refresh, 2,000 characters a line.
    assert kept < 200_000, f"{kept} characters kept"
    # Each refresh gives at most REFRESH_LINES lines (+2 notes of what was skipped); how
    # fast a refresh is, is measured in bench/log_view_bench.py, not here.
    assert len(counted) == 5 and counted[0][0] > screens.READ_BYTES, counted  # skipped, said
    assert all(lines <= screens.REFRESH_LINES + 2 for _, lines in counted + timer), counted
    # every write was taken by the refresh right after it: the timer's found nothing new
    assert all(taken == 0 for taken, _ in timer), timer
    assert texts[-1].startswith("last \\x1b]52;c;UFdORUQ=\\x07\\u202e"), texts[-1][:80]
    assert not any("\x1b" in text or RLO in text for text in texts)


# ---------------------------------------------------------------------- cockpit fleet
def test_fleet_shows_a_peers_hostile_note_escaped(fleet: dict[str, Any]) -> None:  # noqa: F811
    """A note in machine 2's journal, read on the laptop over SSH: `cockpit fleet`'s
    headless lines, its status line and the echo of a fleet action run over SSH."""
    _m1, m2, laptop = fleet["files"]
    env = fleet["env"]
    out = laptop.parent / "fleet.out"
    with open(out, "wb") as sink:
        proc = subprocess.Popen([PY, "-m", "cockpit", "fleet", str(laptop), "--headless",
                                 "--interval", "0.3"], env=env, stdout=sink,
                                stderr=subprocess.STDOUT)
    fleet["procs"].append(proc)
    wait_for(lambda: (laptop.parent / ".cockpit" / "peers" / "2" / "state.json").exists(), 60,
             "the laptop's first pull of machine 2")
    direct = subprocess.run([PY, "-m", "cockpit", "note", str(m2), "variant", HOSTILE,
                             "--machine", "2"], env=env, capture_output=True, timeout=60,
                            check=False)
    assert direct.returncode == 0, direct.stderr
    remote = subprocess.run([PY, "-m", "cockpit", "fleet", str(laptop), "note", "variant",
                             HOSTILE], env=env, capture_output=True, timeout=120, check=False)
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert_clean(remote.stdout, "the echo of `cockpit fleet FILE note`")
    wait_for(lambda: out.read_bytes().count(b"note on variant") >= 2, 60,
             "both notes on the laptop's headless output")
    line = subprocess.run([PY, "-m", "cockpit", "fleet", str(laptop), "--line"], env=env,
                          capture_output=True, timeout=120, check=False)
    proc.terminate()
    proc.wait(timeout=20)
    assert_clean(out.read_bytes(), "`cockpit fleet --headless` on the laptop")
    assert_clean(line.stdout, "`cockpit fleet --line`", shown=None)


# ---------------------------------------------------------------------- the TUI's last net
def test_a_raw_escape_left_in_a_widget_is_never_drawn(tmp_path: Path) -> None:
    """A face that forgot :mod:`cockpit.common.printable` (a Text holding a raw ESC, BEL and
    U+202E) still draws none of them: the app's line filter removes what a terminal
    would obey, and the columns stay where they were."""
    asyncio.run(_net(tmp_path))


async def _net(tmp_path: Path) -> None:
    from rich.text import Text
    from textual.geometry import Region
    from textual.widgets import Static

    from cockpit.campaign import load_campaign
    from cockpit.engine import Engine
    from cockpit.tui.app import CockpitApp
    from cockpit.tui.dialogs import InfoScreen
    from tests.helpers.process import pilot_until

    path = write_campaign(tmp_path, [{"id": "prep", "hours": 1, "resource": "human"}])
    app = CockpitApp(Engine(load_campaign(path), actor="tui"), interval=0.5)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot_until(pilot, lambda: app.snapshot is not None, what="the first tick")
        await app.push_screen(InfoScreen("net", Text(f"left{OSC0}{RLO}right|")))
        body = await pilot_until(pilot, lambda: isinstance(app.screen, InfoScreen) and (
            b := app.screen.query_one("#info-body", Static)).outer_size.width and b,
            what="the dialog's body laid out")
        # render_lines: what the compositor sends, the app's line filters applied.
        strips = body.render_lines(Region(0, 0, body.outer_size.width, body.outer_size.height))
        drawn = "".join(strip.text for strip in strips)
    assert "left]0;PWNED-TITLEright|" in drawn, drawn  # only what a terminal obeys is gone
    assert "\x1b" not in drawn and "\x07" not in drawn and RLO not in drawn
