"""What a viewer costs against the conductor (issue 39), in the same run (a script, not
a test).

  python bench/viewer_bench.py [--seconds 60] [--rounds 2] [--no-headless]

One campaign, 3 live runs reporting a loss every 0.5 s (tui_bench's setup, started by a
bench engine that then closes: the runs outlive it), 8 simulated GPUs:

1. TUI A (``cockpit tui FILE --simulate-gpus 8``) in its own tmux session at 120x40: it
   takes the lease and conducts (the window panel's border says ``you conduct``); then
   TUI B, the same command in a second session: a viewer (``viewer · conducted by tui
   PID``). Both are checked from ``tmux capture-pane`` before anything is measured, and
   again after (B must not have taken over).
2. For reference: the same pair headless (``cockpit headless FILE --simulate-gpus 8``),
   the conductor first; who conducts is checked against the lease's info file.

Each process's CPU % of one core (its own user + system time over the wall time, runs
excluded: the bench engine started them; the one tmux server that draws both sessions
is printed apart) is measured over ``--seconds``, both of
a pair in the same window, ``--rounds`` times; the table gives the mean of the rounds
and each round, and the ratio viewer / conductor.

The tmux server is a private one (``-L``, no config): the user's sessions are untouched.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cockpit.campaign import load_campaign  # noqa: E402
from cockpit.common.lease import lease_paths, probe, read_info  # noqa: E402
from cockpit.engine import Engine, default_samplers  # noqa: E402
from tests.helpers.campaigns import step_command, write_campaign  # noqa: E402

SIZE = (120, 40)
CONDUCTS = "you conduct"
VIEWS = "viewer · conducted by"


def start_runs(folder: Path) -> tuple[Path, list[int]]:
    """The campaign with its 3 runs started (side by side on the CPU, as tui_bench)."""
    stages = [{"id": f"s{i}", "hours": 1, "resource": "cpu", "run": f"r{i}",
               "command": step_command(steps=100000, sleep=0.5)} for i in range(3)]
    path = write_campaign(folder, stages)
    camp = load_campaign(path)
    gpu, host = default_samplers(camp, 8)
    engine = Engine(camp, gpu_sampler=gpu, host_sampler=host, actor="bench")
    for i in range(3):
        engine.start(f"s{i}", force=i > 0)
    groups: list[int] = []
    for ev in engine.journal.events():
        pgid = ev.get("pgid")
        if ev["kind"] == "stage_started" and isinstance(pgid, int):
            groups.append(pgid)
    engine.close()  # no lease: it conducted alone and gives nothing back; runs go on
    return path, groups


def kill_runs(groups: list[int]) -> None:
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def measure(procs: dict[str, psutil.Process], seconds: float) -> dict[str, float]:
    """CPU % of one core of each process over the same ``seconds``."""
    c0 = {name: cpu_seconds(p) for name, p in procs.items()}
    t0 = time.perf_counter()
    time.sleep(seconds)
    wall = time.perf_counter() - t0
    return {name: (cpu_seconds(p) - c0[name]) / wall * 100 for name, p in procs.items()}


class Tmux:
    """A private tmux server (its own socket, no config) for the bench's sessions."""

    def __init__(self, name: str) -> None:
        self.base = ["tmux", "-L", name, "-f", "/dev/null", "-u"]

    def __call__(self, *args: str) -> str:
        return subprocess.run([*self.base, *args], capture_output=True, text=True,
                              check=True).stdout

    def start(self, session: str, argv: list[str], env: dict[str, str]) -> psutil.Process:
        """A session at 120x40 running ``argv`` (exec'd: the pane's process is it)."""
        command = " ".join(["exec", *map(shlex.quote, argv)])
        env_args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
        self("new-session", "-d", "-s", session, "-x", str(SIZE[0]), "-y", str(SIZE[1]),
             *env_args, command)
        pid = int(self("display-message", "-p", "-t", session, "#{pane_pid}").strip())
        return psutil.Process(pid)

    def screen(self, session: str) -> str:
        return self("capture-pane", "-p", "-t", session)

    def kill(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True)


def wait_for(tmux: Tmux, session: str, words: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux.screen(session)
        if words in screen:
            return screen
        time.sleep(0.5)
    raise SystemExit(f"{session}: {words!r} not on screen after {timeout:.0f} s:\n{screen}")


def tag_line(screen: str, words: str) -> str:
    return next((line.strip() for line in screen.splitlines() if words in line), "")


def stop(proc: psutil.Process | subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL after 10 s: only the processes this bench started."""
    if proc is None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    except (psutil.NoSuchProcess, ProcessLookupError):
        pass
    except (psutil.TimeoutExpired, subprocess.TimeoutExpired):
        proc.kill()


def tui_pair(path: Path, args: argparse.Namespace) -> tuple[list[dict[str, float]], str]:
    tmux = Tmux(f"cockpit-viewer-bench-{os.getpid()}")
    env = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "xterm-256color",
           "COLORTERM": "truecolor"}
    argv = [sys.executable, "-m", "cockpit", "tui", str(path), "--simulate-gpus", "8"]
    conductor = viewer = None
    try:
        conductor = tmux.start("conductor", argv, env)
        first = wait_for(tmux, "conductor", CONDUCTS)
        viewer = tmux.start("viewer", argv, env)
        second = wait_for(tmux, "viewer", VIEWS)
        if VIEWS not in second or f"{VIEWS} tui {conductor.pid}" not in second:
            raise SystemExit(f"viewer: not conducted by tui {conductor.pid}:\n{second}")
        said = (f"A: {tag_line(first, CONDUCTS)!r}\n"
                f"  B: {tag_line(second, VIEWS)!r}")
        time.sleep(5)  # both past start-up: the steady state
        server = conductor.parent()  # the private tmux server: both sessions' terminal
        procs = {"conductor": conductor, "viewer": viewer}
        if server is not None and "tmux" in server.name():
            procs["tmux server"] = server
        rounds = [measure(procs, args.seconds) for _ in range(args.rounds)]
        # Still so after: A conducts, B views (nobody took over meanwhile).
        if CONDUCTS not in tmux.screen("conductor") or VIEWS not in tmux.screen("viewer"):
            raise SystemExit("the roles changed while measuring")
        return rounds, said
    finally:
        stop(viewer)  # the viewer first: it would take the lease the conductor gives back
        stop(conductor)
        tmux.kill()


def headless_pair(path: Path, folder: Path,
                  args: argparse.Namespace) -> tuple[list[dict[str, float]], str]:
    argv = [sys.executable, "-m", "cockpit", "headless", str(path), "--simulate-gpus", "8"]
    state = str(folder / ".cockpit")
    conductor = viewer = None
    try:
        with open(folder / "headless-a.out", "wb") as a_out:
            conductor = subprocess.Popen(argv, stdout=a_out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            conducted, info = probe(state, 1)
            if conducted and info is not None and info.pid == conductor.pid \
                    and info.ended is None:
                break
            if time.monotonic() > deadline or conductor.poll() is not None:
                raise SystemExit(f"headless A does not conduct: {info}")
            time.sleep(0.2)
        with open(folder / "headless-b.out", "wb") as b_out:
            viewer = subprocess.Popen(argv, stdout=b_out, stderr=subprocess.STDOUT)
        time.sleep(5)
        said_b = (folder / "headless-b.out").read_text(errors="replace")
        info = read_info(lease_paths(state, 1)[1])
        if viewer.poll() is not None or info is None or info.pid != conductor.pid \
                or "viewer" not in said_b:
            raise SystemExit(f"headless B is not a viewer of A ({info}):\n{said_b}")
        procs = {"conductor": psutil.Process(conductor.pid),
                 "viewer": psutil.Process(viewer.pid)}
        rounds = [measure(procs, args.seconds) for _ in range(args.rounds)]
        info = read_info(lease_paths(state, 1)[1])
        if info is None or info.pid != conductor.pid:
            raise SystemExit(f"the roles changed while measuring: {info}")
        said = "B: " + repr(next((ln.strip() for ln in said_b.splitlines()
                                  if "viewer" in ln), ""))
        return rounds, said
    finally:
        stop(viewer)
        stop(conductor)


def report(title: str, rounds: list[dict[str, float]], said: str) -> None:
    a = statistics.mean(r["conductor"] for r in rounds)
    b = statistics.mean(r["viewer"] for r in rounds)
    each = " / ".join(f"{r['conductor']:.1f}, {r['viewer']:.1f}" for r in rounds)
    print(f"{title}: conductor {a:.1f}% · viewer {b:.1f}% of one core "
          f"-> viewer/conductor {b / a if a else float('inf'):.2f} "
          f"(rounds, conductor, viewer: {each})")
    if all("tmux server" in r for r in rounds):
        server = " / ".join(f"{r['tmux server']:.1f}" for r in rounds)
        print(f"  the tmux server drawing both sessions (not counted above): {server}%")
    print(f"  {said}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-headless", action="store_true",
                        help="only the TUI pair")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is needed (each TUI runs in its own tmux session)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path, groups = start_runs(folder)
        try:
            tui, tui_said = tui_pair(path, args)
            head = headless_pair(path, folder, args) if not args.no_headless else None
        finally:
            kill_runs(groups)
    print(f"CPU % of one core, {args.rounds} rounds of {args.seconds:.0f} s, both of a "
          f"pair measured in the same window; 8 simulated GPUs, 3 live runs, "
          f"{psutil.cpu_count()} cores")
    report(f"TUI {SIZE[0]}x{SIZE[1]} (tmux)", tui, tui_said)
    if head is not None:
        report("headless (reference)", *head)
    return 0


if __name__ == "__main__":
    sys.exit(main())
