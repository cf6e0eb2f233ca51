"""One conductor per campaign (issue 39), with real processes as the README lays them out:
`cockpit headless FILE --auto` and screens (`cockpit tui FILE`, one of them as a served
tab says it: COCKPIT_FACE=serve) in one tmux server, on one campaign folder.

The first face to open conducts (the lease ``.cockpit/conductor-1.lock``, described in
``conductor-1.json``); the others view. A stop rule fires once, an alert goes out once,
an edit of the campaign file is journaled once and a bad one refused by every face;
when the conductor ends (``q``, SIGTERM, SIGKILL) a viewer takes over and the flight
recording goes on, whole; with nobody left, ``status --line`` says NOT CONDUCTED.

Every wait is for an event (a journal line, a line a face printed, a pane's text, a
file); every process a test starts is ended by it, and its tmux server killed.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from cockpit.telemetry.flight.store import BATCH_S
from tests.helpers.alert_server import AlertServer
from tests.helpers.campaigns import FINITE, write_campaign
from tests.helpers.process import ROOT, end, run_cockpit, wait_for
from tests.helpers.ticks import wait_for_ticks

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
              pytest.mark.slow]

INTERVAL = 0.5  # every face's tick (seconds)
DEADLINE = 90.0  # the longest any one event is waited for (a loaded box is slow)

# The longest silence in the flight recording across a takeover, in recorded seconds.
# A face that ends cleanly (`q`, headless's SIGTERM) flushes its writer's batch on close
# and gives the lease back last; the taker takes it at its next tick and records in that
# tick: two ticks (the leaver's last, the taker's first), each rounded down to its whole
# second (+1), and 2 s for the leaver's own exit on a loaded box.
CLEAN_GAP_S = 2 * INTERVAL + 1 + 2
# A face that dies without closing (SIGKILL; a screen's SIGTERM, which Textual leaves at
# the default action) loses what its writer still batched: up to BATCH_S seconds of
# samples and the second whose tick would have handed them off.
KILLED_GAP_S = CLEAN_GAP_S + BATCH_S + 1

# A run that reports a finite loss until the test creates the file named by its
# argument, then NaN: the stop rule fires while every face is open, not before.
NAN_ON_GO = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from cockpit import report
    go = Path(sys.argv[1])
    for step in range(1, 100_000):
        report.log(step, loss=float("nan") if go.exists() else 1.0 / step)
        report.progress(step, 100_000)
        time.sleep(0.1)
""")


# ---------------------------------------------------------------------- the campaign's files
def journal(folder: Path) -> list[dict[str, Any]]:
    file = folder / ".cockpit" / "journal.jsonl"
    if not file.exists():
        return []
    return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]


def of_kind(folder: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in journal(folder) if e["kind"] == kind]


def conductor_info(folder: Path) -> dict[str, Any] | None:
    """``conductor-1.json`` as it stands (None: not written yet)."""
    try:
        data = json.loads((folder / ".cockpit" / "conductor-1.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def conducting_pid(folder: Path) -> int | None:
    """The pid the info file names as conducting now (None: nobody, or it ended)."""
    info = conductor_info(folder)
    return info["pid"] if info is not None and info.get("ended") is None else None


def status_log(folder: Path) -> list[dict[str, Any]]:
    file = folder / ".cockpit" / "status.jsonl"
    if not file.exists():
        return []
    lines = []
    for line in file.read_text().splitlines():
        with contextlib.suppress(ValueError):  # a line being written
            lines.append(json.loads(line))
    return lines


def recorded_seconds(store: Path) -> list[int]:
    """The seconds the flight recorder committed for GPU 0, read-only (a writer may be
    at work: WAL readers do not block it)."""
    if not store.exists():
        return []
    db = sqlite3.connect(f"{store.as_uri()}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT t FROM gpu_raw WHERE gpu = 0 ORDER BY t").fetchall()
    except sqlite3.Error:  # the schema is being created
        return []
    finally:
        db.close()
    return [int(t) for (t,) in rows]


def integrity(store: Path) -> str:
    db = sqlite3.connect(f"{store.as_uri()}?mode=ro", uri=True)
    try:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        db.close()


def nan_campaign(folder: Path) -> Path:
    """One run on the (simulated) GPU that goes NaN when ``folder/go`` appears; the
    finite-loss stop rule watches it."""
    path = write_campaign(folder, [
        {"id": "train", "hours": 1, "resource": "gpu", "run": "r1",
         "command": [sys.executable, "nan_on_go.py", str(folder / "go")]},
    ], rules=[FINITE])
    (folder / "nan_on_go.py").write_text(NAN_ON_GO)
    return path


def idle_campaign(folder: Path) -> Path:
    return write_campaign(folder, [{"id": "wait", "hours": 1, "resource": "human"},
                                   {"id": "write-up", "hours": 2, "resource": "human",
                                    "after": ["wait"]}])


# ---------------------------------------------------------------------- the faces
@dataclass
class Headless:
    """``cockpit headless`` started by the test, its output read line by line."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def said(self, text: str, after: int = 0) -> bool:
        return any(text in line for line in self.lines[after:])

    def wait_said(self, text: str, after: int = 0) -> None:
        wait_for(lambda: self.said(text, after), timeout=DEADLINE,
                 what=f"headless to print {text!r}")


@dataclass
class Screen:
    """``cockpit tui`` in a tmux session of the test's own server."""

    name: str
    pid: int
    size: tuple[int, int]


class Faces:
    """Every face of one campaign that a test starts: headless ones as child processes,
    screens in one tmux server of its own (``tmux -L``). :meth:`close` ends them all by
    pid, the runs the campaign started, and the tmux server."""

    def __init__(self, folder: Path, path: Path, alerts: str | None = None) -> None:
        self.folder = folder
        self.path = path
        self.socket = f"cockpit-conductor-{uuid.uuid4().hex[:8]}"
        self.alerts = ["--alerts", alerts] if alerts else []
        self.headless: list[Headless] = []
        self.screens: dict[str, Screen] = {}
        self.socket_path: str | None = None
        # No alerts file of the person running the tests, no GPUs from the environment.
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("COCKPIT_SIMULATE_GPUS", "LINES", "COLUMNS")}
        self.env["COCKPIT_ALERTS"] = str(folder / "no-alerts.yaml")
        self.env["PYTHONPATH"] = str(ROOT)

    def __enter__(self) -> Faces:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:
            self.dump()
        self.close()

    # ------------------------------------------------------------------ starting
    def start_headless(self, *extra: str) -> Headless:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cockpit", "headless", str(self.path), "--simulate-gpus",
             "1", "--interval", str(INTERVAL), *self.alerts, *extra],
            cwd=self.folder, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        face = Headless(proc)
        self.headless.append(face)
        threading.Thread(target=face.read, daemon=True).start()
        return face

    def start_screen(self, name: str, size: tuple[int, int], serve: bool = False) -> Screen:
        """``cockpit tui FILE`` in a new session ``name`` of ``size`` (columns, rows);
        ``serve``: as a served browser tab runs it. ``exec``: the pane's process is the
        cockpit itself."""
        env = ["env", "-u", "LINES", "-u", "COLUMNS", "TERM=xterm-256color",
               *(["COCKPIT_FACE=serve"] if serve else [])]
        argv = [*env, sys.executable, "-m", "cockpit", "tui", str(self.path),
                "--simulate-gpus", "1", "--interval", str(INTERVAL), *self.alerts]
        command = f"cd {self.folder} && exec " + " ".join(_quote(a) for a in argv)
        # The server (started by the first session) passes its environment on.
        self.tmux("new-session", "-d", "-s", name, "-x", str(size[0]), "-y", str(size[1]),
                  command)
        pid = int(self.tmux("list-panes", "-t", name, "-F", "#{pane_pid}").split()[0])
        if self.socket_path is None:
            self.socket_path = self.tmux("display-message", "-p", "#{socket_path}").strip()
        screen = self.screens[name] = Screen(name, pid, size)
        return screen

    # ------------------------------------------------------------------ reading, keys
    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, check=False, env=self.env, timeout=30).stdout

    def screen(self, name: str) -> str:
        return self.tmux("capture-pane", "-p", "-t", name)

    def wait_screen(self, name: str, text: str | Callable[[str], bool]) -> str:
        def seen() -> str | None:
            shown = self.screen(name)
            ok = text(shown) if callable(text) else text in shown
            return shown if ok else None

        return str(wait_for(seen, timeout=DEADLINE, what=f"{text!r} on screen {name}"))

    def keys(self, name: str, *keys: str) -> None:
        self.tmux("send-keys", "-t", name, *keys)

    def pids(self) -> dict[int, str]:
        """The faces alive now: pid -> ``headless`` or the screen's session name."""
        alive = {h.pid: "headless" for h in self.headless if h.proc.poll() is None}
        for screen in self.screens.values():
            if _alive(screen.pid):
                alive[screen.pid] = screen.name
        return alive

    # ------------------------------------------------------------------ ending
    def end_screen(self, screen: Screen, how: str) -> None:
        """``quit``: the person's ``q``; ``SIGTERM`` / ``SIGKILL``: by pid. Waits until
        the process is gone."""
        if how == "quit":
            self.keys(screen.name, "q")
        else:
            os.kill(screen.pid, getattr(signal, how))
        wait_for(lambda: not _alive(screen.pid), timeout=DEADLINE,
                 what=f"screen {screen.name} to end ({how})")

    def end_all_cleanly(self) -> None:
        """``q`` in every screen still open, SIGTERM to every headless: each closes."""
        for screen in self.screens.values():
            if _alive(screen.pid):
                self.end_screen(screen, "quit")
        for face in self.headless:
            if face.proc.poll() is None:
                face.proc.send_signal(signal.SIGTERM)
                assert face.proc.wait(timeout=DEADLINE) == 0

    def dump(self) -> None:
        """What each face showed (pytest prints it when a test fails)."""
        for face in self.headless:
            print(f"--- headless {face.pid} (rc {face.proc.poll()})")
            print("\n".join(face.lines[-60:]))
        for screen in self.screens.values():
            print(f"--- screen {screen.name} pid {screen.pid}")
            print(self.screen(screen.name))
        print("--- conductor-1.json", conductor_info(self.folder))
        print("--- journal kinds", [e["kind"] for e in journal(self.folder)])

    def close(self) -> None:
        for face in self.headless:
            end(face.proc)
        procs = []
        for screen in self.screens.values():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(screen.pid)
                proc.terminate()
                procs.append(proc)
        _, alive = psutil.wait_procs(procs, timeout=15)
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(alive, timeout=15)
        self.tmux("kill-server")
        if self.socket_path is not None:  # a server whose last session ended leaves it
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)
        for ev in journal(self.folder):  # the runs the campaign started
            if ev["kind"] == "stage_started" and ev.get("pgid"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(ev["pgid"], signal.SIGKILL)


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def three_faces(faces: Faces) -> tuple[Headless, Screen, Screen]:
    """headless --auto first (it conducts), then a screen at 80x24 and a served tab's
    screen at 120x40: each a viewer, as it says on its stages panel's border."""
    head = faces.start_headless("--auto")
    head.wait_said("conducting")
    wait_for(lambda: conducting_pid(faces.folder) == head.pid, timeout=DEADLINE,
             what="conductor-1.json naming headless")
    small = faces.start_screen("small", (80, 24))
    large = faces.start_screen("large", (120, 40), serve=True)
    for name in ("small", "large"):
        faces.wait_screen(name, f"viewer · conducted by headless {head.pid}")
    return head, small, large


# ---------------------------------------------------------------------- 1 and 5: one NaN
@dataclass
class NanOutcome:
    folder: Path
    head: Headless
    info: dict[str, Any]
    screens: dict[str, str]
    received: list[dict[str, Any]]


@pytest.fixture(scope="module")
def nan_with_three_faces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NanOutcome]:
    """Three faces on one campaign, every one of them given the same alert target (a
    local receiver); the run goes NaN once all three are open. Held until the stop is
    done, its alerts are sent, and every face has shown the fired rule."""
    folder = tmp_path_factory.mktemp("nan")
    path = nan_campaign(folder)
    with AlertServer() as server, \
            Faces(folder, path, alerts=f"json://127.0.0.1:{server.port}/hook") as faces:
        head, small, large = three_faces(faces)
        wait_for(lambda: of_kind(folder, "run_started"), timeout=DEADLINE,
                 what="headless --auto to start the run")
        (folder / "go").touch()  # the loss goes NaN now, every face watching
        wait_for(lambda: of_kind(folder, "stop_done"), timeout=DEADLINE, what="stop_done")
        head.wait_said("rule finite-loss fired on run r1")
        # Each viewer folded the firing into its screen (the now panel at 80x24, the
        # rules panel at 120x40).
        faces.wait_screen("small", "✗ fired finite-loss on r1")
        faces.wait_screen("large", "✗ fired (last) r1")
        # Each alert journaled as sent has reached the receiver (the sender journals
        # after the target took it).
        wait_for(lambda: (sent := of_kind(folder, "alert_sent"))
                 and len(server.requests) >= len({e["alert"] for e in sent}),
                 timeout=DEADLINE, what="the alerts sent and received")
        # Every face has ticked a few more times since: a second firing, stop or send
        # would have happened by now.
        wait_for_ticks(path, 4)
        info = conductor_info(folder)
        assert info is not None
        outcome = NanOutcome(folder, head, info,
                             {name: faces.screen(name) for name in faces.screens},
                             [r.json() for r in server.requests])
    yield outcome


def test_the_first_face_conducts_and_the_others_view(nan_with_three_faces: NanOutcome
                                                     ) -> None:
    out = nan_with_three_faces
    assert out.head.said("conducting: the guards, alerts, recording and status log")
    assert not out.head.said("viewer:")
    assert (out.info["face"], out.info["pid"], out.info["ended"]) == ("headless",
                                                                      out.head.pid, None)
    assert out.info["auto"] is True
    # Each screen, a viewer, says who conducts (the served tab's too).
    for shown in out.screens.values():
        assert f"viewer · conducted by headless {out.head.pid}" in shown, shown
    assert "you conduct" not in out.screens["large"] + out.screens["small"]
    events = journal(out.folder)
    fired = [e for e in events if e["kind"] == "rule_fired" and e.get("run") == "r1"]
    stops = [e for e in events if e["kind"] == "stop_requested" and e.get("run") == "r1"]
    assert len(fired) == 1 and len(stops) == 1, [e["kind"] for e in events]
    assert fired[0]["rule"] == "finite-loss" and stops[0]["rule"] == "finite-loss"
    # Only the conductor acts: every line the faces journaled by themselves is its own.
    assert {e.get("actor") for e in events if e.get("actor")} == {"headless"}
    assert len(of_kind(out.folder, "run_started")) == 1  # nobody started the run twice


def test_alerts_go_out_once_with_three_faces_open(nan_with_three_faces: NanOutcome) -> None:
    out = nan_with_three_faces
    sent = of_kind(out.folder, "alert_sent")
    keys = [e["alert"] for e in sent]
    assert any(":rule_fired:" in key for key in keys), keys
    assert len(keys) == len(set(keys)), keys  # each key journaled sent once
    # One target: each key is one message, and the receiver got exactly those.
    assert len(out.received) == len(keys), (keys, out.received)
    firsts = [r["message"].splitlines()[0] for r in out.received]
    assert sorted(firsts) == sorted(e["what"] for e in sent)
    assert len(set(firsts)) == len(firsts), firsts  # no alert reached it twice
    assert sum("rule finite-loss fired on" in f for f in firsts) == 1, firsts


# ---------------------------------------------------------------------- 2: kill orders
def _ended_by(faces: Faces, pid: int, how: str) -> bool:
    """End the face ``pid`` the way ``how`` says; True when it closed (flushed)."""
    head = next((h for h in faces.headless if h.pid == pid), None)
    if head is not None:
        if how == "quit":
            how = "SIGTERM"  # headless's quit
        head.proc.send_signal(getattr(signal, how))
        head.proc.wait(timeout=DEADLINE)
        return how == "SIGTERM"
    screen = next(s for s in faces.screens.values() if s.pid == pid)
    faces.end_screen(screen, how)
    return how == "quit"


def _gap_around(seconds: list[int], at: float) -> int:
    """The largest step between consecutive recorded seconds near ``at`` (a takeover's
    time: its first sample may round down a second before it)."""
    steps = [b - a for a, b in itertools.pairwise(seconds) if b >= at - 2 and a <= at + 2]
    assert steps, f"no samples around {at}: {seconds[:3]}…{seconds[-3:]}"
    return max(steps)


@pytest.mark.parametrize(("first", "ends"), [
    ("headless", ("SIGKILL", "quit")),
    ("small", ("quit", "SIGTERM")),
], ids=["headless-first-kill9-then-q", "screen-first-q-then-term"])
def test_kill_orders_take_over_and_the_recording_stays_whole(
        tmp_path: Path, first: str, ends: tuple[str, str]) -> None:
    """Three faces; the one that conducts is ended (``how`` in turn), a remaining one
    takes over each time and says so; the recording is whole and goes on."""
    path = idle_campaign(tmp_path)
    store = tmp_path / ".cockpit" / "recorder.sqlite"
    takeovers: list[tuple[float, bool, str, str]] = []  # (since, flushed, how, taker)

    def committed_after(since: float) -> bool:
        return any(t >= since + 1 for t in recorded_seconds(store))

    def another_conducts(old: int) -> int | None:
        pid = conducting_pid(tmp_path)
        return pid if pid is not None and pid != old else None

    with Faces(tmp_path, path) as faces:
        starts: dict[str, Callable[[], int]] = {
            "headless": lambda: faces.start_headless("--auto").pid,
            "small": lambda: faces.start_screen("small", (80, 24)).pid,
            "large": lambda: faces.start_screen("large", (120, 40), serve=True).pid}
        first_pid = starts[first]()
        wait_for(lambda: conducting_pid(tmp_path) == first_pid, timeout=DEADLINE,
                 what=f"{first} to conduct")
        for name in [n for n in starts if n != first]:
            starts[name]()
        # The others are viewers: each has come up and said who conducts.
        if first != "headless":
            faces.headless[0].wait_said("viewer: conducted by tui")
        for name in [n for n in ("small", "large") if n != first]:
            faces.wait_screen(name, "viewer · conducted by")
        for how in ends:
            info = conductor_info(tmp_path)
            assert info is not None and info["ended"] is None
            old, since = int(info["pid"]), float(info["since"])
            # The conductor has committed samples of its own before it ends, and ticked
            # on a few times since: it ends in the middle of its writer's next batch.
            wait_for(functools.partial(committed_after, since), timeout=DEADLINE,
                     what="the conductor's first committed batch")
            wait_for_ticks(path, 4)
            said_before = len(faces.headless[0].lines)
            flushed = _ended_by(faces, old, how)
            taker = int(wait_for(functools.partial(another_conducts, old),
                                 timeout=DEADLINE, what=f"a takeover after {how}"))
            taker_name = faces.pids().get(taker)
            assert taker_name is not None, f"{taker} conducts but is none of the faces"
            # The taker says so itself.
            if taker_name == "headless":
                faces.headless[0].wait_said("conducting:", after=said_before)
            else:
                faces.wait_screen(taker_name, "you conduct")
            left = info  # what the face that ended had said
            info = conductor_info(tmp_path)
            assert info is not None
            if left["auto"]:  # a taker carries the --auto conductor's way on
                assert info["auto"] is True, (left, info)
            takeovers.append((float(info["since"]), flushed, how, taker_name))
        # The last taker records a few ticks, then every face closes: its close writes
        # the batch that waits.
        wait_for_ticks(path, 4)
        faces.end_all_cleanly()
    assert integrity(store) == "ok"
    assert not list(store.parent.glob("recorder.sqlite.unreadable-*"))
    seconds = recorded_seconds(store)
    for since, flushed, how, taker_name in takeovers:
        assert any(t < since - 1 for t in seconds), f"nothing recorded before {how}"
        assert any(t > since + 1 for t in seconds), f"nothing recorded after {how}"
        bound = CLEAN_GAP_S if flushed else KILLED_GAP_S
        gap = _gap_around(seconds, since)
        print(f"takeover by {taker_name} after {how}: gap {gap} s (bound {bound:g})")
        assert gap <= bound, f"{gap} s unrecorded across the takeover after {how}"


# ---------------------------------------------------------------------- 3: edits
def test_an_edit_is_journaled_once_and_a_bad_edit_is_refused_everywhere(
        tmp_path: Path) -> None:
    path = nan_campaign(tmp_path)  # its run keeps a finite loss: nothing fires
    with Faces(tmp_path, path) as faces:
        head, small, large = three_faces(faces)
        # The plan is decided (journaled) when the first run starts: an edit after it
        # is a change of plan.
        wait_for(lambda: of_kind(tmp_path, "run_started"), timeout=DEADLINE,
                 what="the run started")
        assert len(of_kind(tmp_path, "plan_recorded")) == 1
        doc = json.loads(path.read_text())
        doc["stages"][0]["hours"] = 7  # train: 1 h -> 7 h
        path.write_text(json.dumps(doc, indent=2))
        changed = wait_for(lambda: of_kind(tmp_path, "plan_changed"), timeout=DEADLINE,
                           what="plan_changed")
        head.wait_said("campaign file reloaded")
        for name in ("small", "large"):
            faces.wait_screen(name, "campaign file reloaded")
        wait_for_ticks(path, 4)
        assert len(of_kind(tmp_path, "plan_changed")) == 1, changed
        assert sum("campaign file reloaded" in line for line in head.lines) == 1
        assert conducting_pid(tmp_path) == head.pid  # the reload kept the conductor

        # A bad edit: a value that does not load. The plan in force stays.
        text = path.read_text()
        assert text.count('"hours": 7') == 1
        path.write_text(text.replace('"hours": 7', '"hours": "lots"'))
        bad_line = path.read_text().splitlines().index(
            next(line for line in path.read_text().splitlines() if '"lots"' in line)) + 1
        located = re.compile(rf"campaign\.yaml:{bad_line}:\d+")

        def refused_in_log() -> str | None:
            lines = status_log(tmp_path)
            warnings = lines[-1].get("warnings", []) if lines else []
            return next((w for w in warnings if "edit refused" in w), None)

        warning = wait_for(refused_in_log, timeout=DEADLINE,
                           what="the refusal in the conductor's status log")
        assert located.search(warning) and "the plan in force is unchanged" in warning
        # Each screen says it in its warnings line, located by the file's own name
        # (it fits at 80 columns); headless prints it once, conductor or viewer.
        for name in ("small", "large"):
            faces.wait_screen(name, "campaign file edit refused: campaign.yaml:")
        assert wait_for(lambda: [line for line in head.lines if "edit refused" in line],
                        timeout=DEADLINE, what="headless saying the refusal")
        wait_for_ticks(path, 4)
        assert len(of_kind(tmp_path, "plan_changed")) == 1
        assert sum("campaign file reloaded" in line for line in head.lines) == 1
        assert all(face.proc.poll() is None for face in faces.headless)
        assert set(faces.pids()) == {head.pid, small.pid, large.pid}


# ---------------------------------------------------------------------- 4: nobody
def test_nobody_conducting_is_said_by_status_line(tmp_path: Path) -> None:
    path = idle_campaign(tmp_path)

    def line() -> str:
        result = run_cockpit("status", str(path), "--line")
        assert result.returncode == 0, result.stderr
        return result.stdout

    with Faces(tmp_path, path) as faces:
        head = faces.start_headless()
        wait_for(lambda: status_log(tmp_path), timeout=DEADLINE, what="a status line")
        assert "NOT CONDUCTED" not in line()
        small = faces.start_screen("small", (80, 24))
        faces.wait_screen("small", "q Quit")
        head.proc.send_signal(signal.SIGTERM)
        assert head.proc.wait(timeout=DEADLINE) == 0
        wait_for(lambda: conducting_pid(tmp_path) == small.pid, timeout=DEADLINE,
                 what="the screen to take over")
        wait_for_ticks(path, 2)  # the screen writes the status log now
        assert "NOT CONDUCTED" not in line()
        faces.end_screen(small, "quit")
        said = line()
    assert "NOT CONDUCTED since " in said and "no cockpit runs the guards" in said, said
    info = conductor_info(tmp_path)
    assert info is not None and info["pid"] == small.pid and info["ended"] is not None


# ---------------------------------------------------------------------- 6: the README's order
def test_the_screen_first_and_headless_auto_second_starts_stages(tmp_path: Path) -> None:
    """The README's tmux layout: the screen opens first (it conducts, without --auto),
    then `headless --auto` (a viewer). The viewer's --auto is said to the conductor: the
    ready stage starts, once, by the screen's engine; when headless leaves, nothing more
    starts by itself."""
    path = write_campaign(tmp_path, [
        {"id": "prep", "hours": 1, "resource": "cpu",
         "command": [sys.executable, "-c", "print('prepared')"]},
        {"id": "wait", "hours": 1, "resource": "human", "after": ["prep"]},
        {"id": "last", "hours": 1, "resource": "cpu", "after": ["wait"],
         "command": [sys.executable, "-c", "print('last')"]}])
    with Faces(tmp_path, path) as faces:
        screen = faces.start_screen("small", (80, 24))
        faces.wait_screen("small", "you conduct")
        wait_for_ticks(path, 3)
        assert not of_kind(tmp_path, "stage_started")  # no --auto anywhere yet
        head = faces.start_headless("--auto")
        head.wait_said(f"viewer: conducted by tui, pid {screen.pid}")
        started = wait_for(lambda: of_kind(tmp_path, "stage_started"), timeout=DEADLINE,
                           what="prep started by the conductor for the --auto viewer")
        assert [(e["stage"], e.get("auto"), e.get("actor")) for e in started] == [
            ("prep", True, "tui")]
        wait_for(lambda: of_kind(tmp_path, "stage_finished"), timeout=DEADLINE,
                 what="prep to finish")
        head.proc.send_signal(signal.SIGTERM)
        assert head.proc.wait(timeout=DEADLINE) == 0
        assert run_cockpit("mark", str(path), "wait", "done").returncode == 0
        wait_for_ticks(path, 6)  # the conductor saw `wait` done, with no --auto face left
        # `last` is ready now, and nobody asks for --auto any more: it waits.
        assert "last" not in [e["stage"] for e in of_kind(tmp_path, "stage_started")]
        faces.wait_screen("small", "you conduct")
