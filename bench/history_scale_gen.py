"""The history-scale bench's generator (bench/history_scale_bench.py, issue 24): realistic
synthetic campaign journals written with ``Journal.append``'s serialisation, for one
machine or for a fleet (machine 1's journal plus the pulled copies of machines 2 and 3,
each of the same shape, whose stages belong to their machine so every event folds).
"""

from __future__ import annotations

import heapq
import json
import sys
import textwrap
from collections.abc import Generator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO

HISTORY_STAGES = 40
GPUS = 8
LIVE_RUNS = 3
HEAD_EVENTS = 3  # plan_recorded, environment_recorded, rules_recorded
FAILED_EVERY, FAILED_AT = 4, 1  # stage i has a failed first attempt when i % 4 == 1
STOPPED_EVERY, STOPPED_AT = 5, 3  # stage i is stopped by a rule when i % 5 == 3
# One cycle of a running stage's body: checkpoint verifications (started + verified),
# GPU warnings, notes, other costs, a host warning.
BODY_CYCLE = ("verify_started", "checkpoint_verified") * 4 + ("warning",) * 6 + \
    ("note",) * 3 + ("cost",) * 2 + ("host_warning",)
REPORT_LINES = 100  # metric lines in each history run's report file (cockpit.report)

LIVE_SCRIPT = textwrap.dedent("""
    import time
    from cockpit import report
    step = 0
    while True:
        step += 1
        report.log(step, loss=1.0 / step, **{"val/accuracy": 0.5 + 0.5 * step / (step + 100)})
        report.progress(step, 172800)  # 12 hours at 4 steps/s
        time.sleep(0.25)
""")


# ----------------------------------------------------------------------------- campaign
def stage_id(i: int, machine: int = 1) -> str:
    """History stage i of a machine: h07 on machine 1 (the one machine of a plain
    campaign), m2h07 on machine 2."""
    return f"h{i:02d}" if machine == 1 else f"m{machine}h{i:02d}"


def live_id(i: int) -> str:
    return f"live-{i}"


def campaign_doc(start: datetime, stages: int = HISTORY_STAGES, gpus: int = GPUS,
                 live: int = LIVE_RUNS, machines: int = 1) -> dict[str, Any]:
    """The campaign: ``stages`` history stages per machine and ``live`` live stages (on
    machine 1). With ``machines`` > 1, a ``machines:`` section (never reached over SSH:
    the bench reads the peers' copies) and each stage's ``machine``."""
    doc_stages: list[dict[str, Any]] = [
        {"id": stage_id(i, m), "hours": 130, "resource": f"gpu:{i % gpus}",
         "run": stage_id(i, m), "command": [sys.executable, "-c", "pass"]}
        for m in range(1, machines + 1) for i in range(stages)]
    doc_stages += [
        {"id": live_id(i), "hours": 12, "resource": f"gpu:{(gpus - 1 - i) % gpus}",
         "run": live_id(i), "command": [sys.executable, "live.py"]} for i in range(live)]
    package: dict[str, Any] = {"offer": "bench-8x-30d",
                               "start": start.strftime("%Y-%m-%dT%H:%M:%SZ")}
    doc: dict[str, Any] = {
        "campaign": "history-scale", "question": "does the cockpit keep up with a long history?",
        "offers": [{"id": "bench-8x-30d", "gpu": "H100", "gpus": gpus, "days": 30,
                    "price": "24000"}],
        "package": package,
        "stages": doc_stages,
        "stop_rules": [{"id": "finite-loss", "kind": "non_finite", "metric": "loss"}],
        "settings": {"stop_grace": "2s"},
    }
    if machines > 1:
        package["count"] = machines
        doc["machines"] = {str(m): {"ssh": f"bench@machine-{m}.invalid",
                                    "path": "/nonexistent/campaign"}
                           for m in range(1, machines + 1)}
        for stage in doc_stages:
            stage["machine"] = 1 if stage["id"].startswith(("h", "live-")) \
                else int(stage["id"][1:].split("h", 1)[0])
    return doc


def write_campaign(folder: Path, start: datetime, stages: int = HISTORY_STAGES,
                   gpus: int = GPUS, live: int = LIVE_RUNS, machines: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "live.py").write_text(LIVE_SCRIPT)
    path = folder / "campaign.yaml"
    # JSON is YAML: no dependency on a YAML writer's style.
    path.write_text(json.dumps(campaign_doc(start, stages, gpus, live, machines), indent=2))
    return path


# ----------------------------------------------------------------------------- writer
def journal_line(seq: int, when: datetime, kind: str, fields: dict[str, Any]) -> bytes:
    """One journal line exactly as ``Journal._append_locked`` serialises it."""
    from cockpit.journal.format import format_time

    event = {"seq": seq, "t": format_time(when), "kind": kind, **fields}
    return (json.dumps(event, default=str, ensure_ascii=False) + "\n").encode("utf-8")


class LineWriter:
    """The journal view the project's record functions write through (``has_kind`` and
    ``append``), writing lines to a file: no lock, no fsync, no read-back."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.seq = 0
        self.kinds: set[str] = set()  # what record_environment looks at

    def has_kind(self, kind: str) -> bool:
        return kind in self.kinds

    def append(self, kind: str, now: datetime | None = None, **fields: Any) -> dict[str, Any]:
        assert now is not None
        self.seq += 1
        self.kinds.add(kind)
        self.handle.write(journal_line(self.seq, now, kind, fields))
        return {"seq": self.seq, "kind": kind, **fields}


# One stage's history: a coroutine that yields (when, kind, fields) and is sent the seq
# its event was written under (a start names its claim, a run's events its attempt).
StageGen = Generator[tuple[datetime, str, dict[str, Any]], int, None]


@dataclass(frozen=True)
class StagePlan:
    index: int
    gpu: int
    begin: datetime
    end: datetime
    body: int  # events between the starts and the end, over all attempts
    failed_first: bool
    stopped: bool
    report_dir: str = ".cockpit"
    machine: int = 1

    @property
    def fixed(self) -> int:
        return fixed_events(self.failed_first, self.stopped)


def fixed_events(failed_first: bool, stopped: bool) -> int:
    """Events of a stage besides its body: per attempt claim, start, run start; a failed
    attempt's exit and finish; the last attempt's end (stopped: rule fired, stop request,
    exit, stop done, finish; else exit, finish, verdict)."""
    return 3 * (2 if failed_first else 1) + (2 if failed_first else 0) + (5 if stopped else 3)


def stage_history(plan: StagePlan) -> StageGen:
    sid = stage_id(plan.index, plan.machine)
    total = plan.fixed + plan.body
    step_t = (plan.end - plan.begin) / (total + 1)
    count = 0
    pid = 10_000 + plan.index * 10
    params = f"{plan.index:02d}" * 32

    def at() -> datetime:
        nonlocal count
        count += 1
        return plan.begin + step_t * count

    attempts = 2 if plan.failed_first else 1
    first_body = plan.body // 4 if plan.failed_first else 0
    bodies = [first_body, plan.body - first_body] if plan.failed_first else [plan.body]
    step = 0
    for attempt_no, body in zip(range(attempts), bodies, strict=True):
        last = attempt_no == attempts - 1
        pid += 1
        marker = f"history-scale:{sid}:{attempt_no}"
        claim = yield at(), "stage_claimed", {
            "stage": sid, "run": sid, "marker": marker, "params_hash": params,
            "forced": False, "auto": True, "actor": "cockpit", "owner_pid": 4242,
            "owner_start": 1733130000.5, "out": f".cockpit/launch/{sid}-{attempt_no}.out"}
        started_at = plan.begin + step_t * count
        attempt = yield at(), "stage_started", {
            "stage": sid, "run": sid, "pid": pid, "pgid": pid, "create_time": 1733130100.25,
            "command": ["python", "train.py", "--config", f"configs/{sid}.yaml"],
            "exit_file": f".cockpit/launch/{sid}-{attempt_no}.exit",
            "stdout": f".cockpit/launch/{sid}-{attempt_no}.out",
            "stderr": f".cockpit/launch/{sid}-{attempt_no}.err", "gpus": [plan.gpu],
            "forced": False, "auto": True, "actor": "cockpit", "claim": claim,
            "marker": marker}
        yield at(), "run_started", {
            "run": sid, "stage": sid, "pid": pid, "pgid": pid, "create_time": 1733130100.25,
            "command": ["python", "train.py", "--config", f"configs/{sid}.yaml"],
            "params_hash": params, "attempt": attempt, "gpus": [plan.gpu],
            "exit_file": f".cockpit/launch/{sid}-{attempt_no}.exit",
            "report": f"{plan.report_dir}/runs/{sid}/report.jsonl", "marker": marker}
        for k in range(body):
            kind = BODY_CYCLE[k % len(BODY_CYCLE)]
            when = at()
            step += 250 if kind == "verify_started" else 0
            ckpt = f"ckpt/{sid}/step-{step:08d}.pt"
            if kind == "verify_started":
                fields: dict[str, Any] = {
                    "key": f"verify:{sid}:{attempt}:{ckpt}", "run": sid, "path": ckpt,
                    "attempt": attempt, "owner_pid": 4242, "owner_start": 1733130000.5,
                    "limit_s": 600.0, "retry": 0}
            elif kind == "checkpoint_verified":
                fields = {"run": sid, "attempt": attempt, "auto": True, "actor": "cockpit",
                          "path": ckpt, "ok": True, "layout": "torch.save",
                          "missing": [], "warnings": [], "error": None,
                          "load_seconds": 1.25, "step": step,
                          "summary": "state_dict: 312 tensors, 1.3 GB; optimizer; step"}
            elif kind == "warning":
                gpu_event = ("thermal_slowdown", "xid", "ecc_corrected")[k % 3]
                fields = {"message": f"GPU {plan.gpu}: {gpu_event.replace('_', ' ')} "
                                     f"(event {k}) while {sid} trains",
                          "source": "gpu", "key": f"gpu:{gpu_event}:{plan.gpu}:{k}:{sid}",
                          "gpu": plan.gpu, "event": gpu_event}
            elif kind == "note":
                lr = 1e-4 * (1 + k % 7)
                fields = {"stage": sid, "actor": "operator",
                          "text": f"loss at step {step} looks on track; lr {lr:.1e}"}
            elif kind == "cost":
                fields = {"label": f"storage for {sid} checkpoints ({k})", "amount": "0.35",
                          "currency": "USD", "actor": "operator"}
            else:  # host_warning: the machine's own warnings
                fields = {"message": f"disk {80 + k % 15}% full (checkpoints of {sid})",
                          "source": "host", "key": f"host:disk:{sid}:{k}"}
                kind = "warning"
            yield when, kind, fields
        elapsed = (plan.begin + step_t * count - started_at).total_seconds()
        if not last:
            yield at(), "run_exited", {"run": sid, "stage": sid, "code": 1,
                                       "attempt": attempt, "signal": None,
                                       "elapsed_s": elapsed}
            yield at(), "stage_finished", {
                "stage": sid, "outcome": "failed", "code": 1, "elapsed_s": elapsed,
                "reason": "exit code 1: CUDA error: an illegal memory access was encountered"}
        elif plan.stopped:
            yield at(), "rule_fired", {
                "run": sid, "stage": sid, "rule": "finite-loss", "reason": "loss is NaN",
                "value": "NaN", "threshold": "finite", "step": step, "action": "stop",
                "attempt": attempt, "actor": "cockpit"}
            yield at(), "stop_requested", {
                "run": sid, "stage": sid, "rule": "finite-loss", "reason": "loss is NaN",
                "value": "NaN", "step": step, "attempt": attempt, "actor": "cockpit"}
            yield at(), "run_exited", {"run": sid, "stage": sid, "code": -15,
                                       "attempt": attempt, "signal": 15, "elapsed_s": elapsed}
            yield at(), "stop_done", {"run": sid, "stage": sid, "attempt": attempt,
                                      "rule": "finite-loss"}
            yield at(), "stage_finished", {"stage": sid, "outcome": "stopped", "code": -15,
                                           "reason": None, "elapsed_s": elapsed}
        else:
            yield at(), "run_exited", {"run": sid, "stage": sid, "code": 0,
                                       "attempt": attempt, "signal": None,
                                       "elapsed_s": elapsed}
            yield at(), "stage_finished", {"stage": sid, "outcome": "done", "code": 0,
                                           "reason": None, "elapsed_s": elapsed}
            yield at(), "result_accepted", {
                "run": sid, "stage": sid, "result": f"runs/{sid}/result.json",
                "reason": "acceptance checks pass", "checks": ["checkpoint reloads"],
                "attempt": attempt, "actor": "cockpit", "override": False}


def stage_plans(events: int, begin: datetime, end: datetime, stages: int = HISTORY_STAGES,
                gpus: int = GPUS) -> list[StagePlan]:
    """The stages' shapes for a journal of exactly ``events`` events: stage i runs on GPU
    i % gpus, the GPU's stages one after the other over [begin, end)."""
    failed = [i % FAILED_EVERY == FAILED_AT for i in range(stages)]
    stopped = [i % STOPPED_EVERY == STOPPED_AT for i in range(stages)]
    fixed = sum(fixed_events(failed[i], stopped[i]) for i in range(stages))
    body = events - HEAD_EVENTS - fixed
    if body < 0:
        raise ValueError(f"{events} events is too few for {stages} stages "
                         f"(at least {HEAD_EVENTS + fixed})")
    per_gpu = -(-stages // gpus)
    slot = (end - begin) / per_gpu
    return [StagePlan(i, i % gpus, begin + slot * (i // gpus),
                      begin + slot * (i // gpus + 1) - timedelta(minutes=5),
                      body // stages + (1 if i < body % stages else 0), failed[i], stopped[i])
            for i in range(stages)]


def write_reports(campaign_path: Path, stages: int) -> None:
    """Each history run's metric lines, written by ``cockpit.report`` itself (a run's
    values live in its file, not in the journal)."""
    from cockpit import report
    from cockpit.campaign import load_campaign
    from cockpit.journal.paths import CampaignFiles

    files = CampaignFiles.of(load_campaign(campaign_path))
    try:
        for i in range(stages):
            path = files.run_report(stage_id(i))
            path.parent.mkdir(parents=True, exist_ok=True)
            report.open_report(path)
            for step in range(1, REPORT_LINES + 1):
                report.log(step * 250, loss=2.0 / (1 + step), **{"val/accuracy": 0.9})
    finally:
        report.open_report(None)


def write_history(campaign_path: Path, events: int, begin: datetime, end: datetime,
                  stages: int = HISTORY_STAGES, gpus: int = GPUS, machine: int = 1) -> Path:
    """Write the journal of ``machine``: the head records (by the project's own record
    functions), then the history of every stage of that machine merged in time order.
    Machine 1's is the campaign's own journal; another machine's is its pulled copy
    (``.cockpit/peers/<N>/journal.jsonl``, the bytes its own journal holds: the pull
    copies whole lines), its runs' report files named where that machine keeps them.
    Returns its path."""
    from cockpit.campaign import load_campaign
    from cockpit.campaign.model import STATE_DIR
    from cockpit.engine.journal_actions import record_plan
    from cockpit.journal.paths import CampaignFiles
    from cockpit.runs.env_record import record_environment
    from cockpit.runs.rules import rules_hash

    campaign = load_campaign(campaign_path)
    files = CampaignFiles.of(campaign)
    path = files.journal if machine == 1 else files.peer(machine).journal
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb", buffering=1 << 20) as handle:
        out = LineWriter(handle)
        record_plan(out, campaign, SimpleNamespace(plan_hash=None), begin)  # type: ignore[arg-type]
        record_environment(out, begin)  # type: ignore[arg-type]
        out.append("rules_recorded", now=begin, sha256=rules_hash(campaign.stop_rules))
        if out.seq != HEAD_EVENTS:
            raise RuntimeError(f"the head wrote {out.seq} events, not {HEAD_EVENTS}")
        report_dir = str(path.parent) if machine == 1 else \
            f"{campaign.machines[machine].path}/{STATE_DIR}"
        gens = [stage_history(replace(plan, report_dir=report_dir, machine=machine))
                for plan in stage_plans(events, begin, end, stages, gpus)]
        heap: list[tuple[datetime, int, str, dict[str, Any]]] = []
        for i, gen in enumerate(gens):
            when, kind, fields = next(gen)
            heap.append((when, i, kind, fields))
        heapq.heapify(heap)
        while heap:
            when, i, kind, fields = heap[0]
            out.append(kind, now=when, **fields)
            try:
                nxt = gens[i].send(out.seq)
            except StopIteration:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (nxt[0], i, nxt[1], nxt[2]))
        if out.seq != events:
            raise RuntimeError(f"wrote {out.seq} events, not {events}")
    return path


def generate(folder: Path, events: int, now: datetime | None = None,
             stages: int = HISTORY_STAGES, gpus: int = GPUS, live: int = LIVE_RUNS,
             check: bool = True) -> Path:
    """A campaign folder whose journal holds ``events`` events of history, ending two
    hours before ``now`` (its package began 29 days before). Returns the campaign file."""
    from cockpit.journal.log import Journal

    now = now or datetime.now(timezone.utc)
    start = (now - timedelta(days=29)).replace(microsecond=0)
    path = write_campaign(folder, start, stages, gpus, live)
    journal = write_history(path, events, start + timedelta(minutes=30),
                            now - timedelta(hours=2), stages, gpus)
    write_reports(path, stages)
    if check:
        problems = Journal(journal).problems()
        if problems:
            raise RuntimeError(f"the generated journal has {len(problems)} problems, the "
                               f"first: line {problems[0].line}: {problems[0].message}")
    return path


def generate_fleet(folder: Path, events: int, now: datetime | None = None,
                   stages: int = HISTORY_STAGES, gpus: int = GPUS, live: int = LIVE_RUNS,
                   machines: int = 3, check: bool = True) -> Path:
    """A campaign on ``machines`` machines: machine 1 (this one) with ``events`` events in
    its own journal (and its runs' report files, the live stages), and for each other
    machine a pulled copy of ``events`` events about that machine's own stages (so they
    fold: nothing a peer may not write). Returns the campaign file."""
    from cockpit.campaign import load_campaign
    from cockpit.journal.log import Journal
    from cockpit.journal.paths import CampaignFiles

    now = now or datetime.now(timezone.utc)
    start = (now - timedelta(days=29)).replace(microsecond=0)
    path = write_campaign(folder, start, stages, gpus, live, machines)
    journals = [write_history(path, events, start + timedelta(minutes=30 + m),
                              now - timedelta(hours=2, minutes=m), stages, gpus, machine=m)
                for m in range(1, machines + 1)]
    write_reports(path, stages)
    files = CampaignFiles.of(load_campaign(path))
    assert journals[0] == files.journal and journals[1] == files.peer(2).journal
    if check:
        for journal in journals:
            problems = Journal(journal).problems()
            if problems:
                raise RuntimeError(f"{journal} has {len(problems)} problems, the first: "
                                   f"line {problems[0].line}: {problems[0].message}")
    return path
