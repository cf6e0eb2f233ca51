"""cockpit.resume: a resumed run in a new process matches an uninterrupted one bit for bit."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="cockpit.resume needs torch")

from cockpit import report, resume  # noqa: E402

pytestmark = pytest.mark.slow

# A tiny loop where every RNG matters: torch (minibatch sampling, dropout),
# numpy (input noise), python random (loss weighting); Adam state, a scheduler
# and a GradScaler make optimizer/scheduler/scaler state matter too.
TRAIN_SCRIPT = textwrap.dedent(
    """
    import json, random, sys
    import numpy as np
    import torch
    from cockpit import resume

    torch.set_num_threads(1)
    mode, ckpt, n_first, n_more = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


    def fresh():
        torch.manual_seed(0); np.random.seed(0); random.seed(0)
        data_x = torch.randn(256, 8)
        data_y = (data_x.sum(dim=1, keepdim=True) > 0).float()
        model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                                    torch.nn.Dropout(0.3), torch.nn.Linear(32, 1))
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.7)
        scaler = torch.amp.GradScaler("cpu")
        # Move every RNG away from its seed so "not restoring" cannot match by luck.
        torch.rand(7); np.random.rand(7); random.random()
        return data_x, data_y, model, opt, sched, scaler


    def train(parts, start, steps, save_at=None):
        data_x, data_y, model, opt, sched, scaler = parts
        losses = []
        for step in range(start, start + steps):
            if step == save_at:  # saving must not disturb the run it is taken from
                resume.save_state(ckpt, model=model, optimizer=opt, scheduler=sched,
                                  scaler=scaler, step=step, epoch=0,
                                  data_position={"seen": step * 16})
            idx = torch.randint(0, data_x.shape[0], (16,))
            x = data_x[idx] + torch.from_numpy(np.random.normal(0, 0.1, (16, 8))).float()
            weight = 0.5 + random.random()
            loss = weight * torch.nn.functional.binary_cross_entropy_with_logits(
                model(x), data_y[idx])
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sched.step()
            losses.append(loss.item())
        return losses


    def resumed(restore_rng):
        parts = fresh()
        _, _, model, opt, sched, scaler = parts
        info = resume.load_state(ckpt, model=model, optimizer=opt, scheduler=sched,
                                 scaler=scaler, restore_rng=restore_rng)
        assert info.data_position == {"seen": info.step * 16}, info.data_position
        return train(parts, info.step, n_more)


    if mode == "full":
        out = {"full": train(fresh(), 0, n_first + n_more, save_at=n_first)}
    else:
        out = {"resumed": resumed(True), "no_rng": resumed(False)}
    print(json.dumps(out))
    """
)


def _run(script: Path, *args: str) -> dict[str, list[float]]:
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COCKPIT_REPORT": ""},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


N, M = 7, 6


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[float]]:
    folder = tmp_path_factory.mktemp("resume")
    script = folder / "train.py"
    script.write_text(TRAIN_SCRIPT)
    ckpt = folder / "state.pt"
    # Two processes: the uninterrupted run (saving at step N on the way), then a
    # new process that resumes from that file (and, as a control, without RNG).
    out = _run(script, "full", str(ckpt), str(N), str(M))
    out.update(_run(script, "resume", str(ckpt), str(N), str(M)))
    return out


def test_resume_in_new_process_matches_uninterrupted_bit_for_bit(runs):
    # Floats compared exactly: the same ops in the same order on CPU.
    assert len(runs["full"]) == N + M
    assert runs["resumed"] == runs["full"][N:]


def test_negative_control_without_rng_restore_differs(runs):
    assert runs["no_rng"] != runs["full"][N:]


def _tiny():
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    return model, opt


def test_saved_file_loads_with_weights_only_and_has_every_part(tmp_path):
    model, opt = _tiny()
    path = resume.save_state(
        tmp_path / "s.pt", model=model, optimizer=opt, step=5, epoch=1,
        data_position={"epoch": 1, "batch": [3, 4]}, extra={"note": "x"},
    )
    state = torch.load(path, map_location="cpu", weights_only=True)
    assert state["format"] == resume.FORMAT
    assert state["progress"] == {"step": 5, "epoch": 1}
    assert set(state["rng"]) >= {"python", "numpy", "torch"}
    assert state["optimizer"]["state"]
    assert [p.name for p in tmp_path.iterdir()] == ["s.pt"]  # no temp file left


def test_save_reports_started_and_written(tmp_path):
    log = tmp_path / "report.jsonl"
    report.open_report(log)
    try:
        model, opt = _tiny()
        resume.save_state(tmp_path / "c.pt", model=model, optimizer=opt, step=12)
    finally:
        report.open_report(None)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in events] == ["checkpoint_started", "checkpoint_written"]
    assert events[1]["step"] == 12 and events[1]["seconds"] >= 0
    assert events[1]["path"].endswith("c.pt")


def test_full_disk_raises_clear_oserror_and_leaves_nothing(tmp_path, monkeypatch):
    model, opt = _tiny()
    final = tmp_path / "ckpt.pt"
    resume.save_state(final, model=model, optimizer=opt, step=1)
    before = final.read_bytes()

    def full_disk_save(obj, stream, *args, **kwargs):
        stream.write(b"PK\x03\x04partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk_save)
    with pytest.raises(OSError) as caught:
        resume.save_state(final, model=model, optimizer=opt, step=2)
    assert caught.value.errno == errno.ENOSPC
    assert "no space left" in str(caught.value)
    assert final.read_bytes() == before  # the previous checkpoint is intact
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temp file behind


def test_unsafe_extra_is_refused_at_save_time(tmp_path):
    model, opt = _tiny()
    with pytest.raises(TypeError, match="weights_only"):
        resume.save_state(tmp_path / "x.pt", model=model, step=1, extra={"f": object()})
    assert not (tmp_path / "x.pt").exists()


def test_load_refuses_missing_optimizer_and_foreign_files(tmp_path):
    model, opt = _tiny()
    resume.save_state(tmp_path / "w.pt", model=model, step=3)
    with pytest.raises(ValueError, match="no optimizer"):
        resume.load_state(tmp_path / "w.pt", model=model, optimizer=opt)
    info = resume.load_state(tmp_path / "w.pt", model=model)
    assert info.step == 3 and info.rng_restored
    torch.save({"model": model.state_dict()}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a cockpit.resume"):
        resume.load_state(tmp_path / "other.pt", model=model)
