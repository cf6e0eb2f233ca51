"""Checkpoint verification: layouts, requirements per kind, broken files, fresh process."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from cockpit.runs.checkpoints.reload_check import (
    VerifyReport,
    exit_code,
    run_verify_command,
    verify_checkpoint,
)
from cockpit.runs.checkpoints.reload_worker import (
    HF_RNG_WARNING,
    LIGHTNING_RNG_WARNING,
    UNSAFE_WORDS,
    inspect_checkpoint,
)

torch = pytest.importorskip("torch", reason="checkpoint verification tests save with torch")


def write_safetensors(path: Path, tensors: dict[str, int] | None = None) -> Path:
    """A minimal valid safetensors file: name -> number of float32 values."""
    tensors = tensors or {"w": 4}
    header, offset = {}, 0
    for name, count in tensors.items():
        header[name] = {"dtype": "F32", "shape": [count], "data_offsets": [offset,
                                                                           offset + 4 * count]}
        offset += 4 * count
    raw = json.dumps(header).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
    return path


def _model_opt(steps: int = 1):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters())
    for _ in range(steps):
        model(torch.ones(1, 3)).sum().backward()
        opt.step()
    return model, opt


class Evil:
    """A pickle that runs code on load: it would create the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


# ------------------------------------------------------------- layouts, in-process


def test_pytorch_tutorial_dict_is_a_train_checkpoint(tmp_path):
    model, opt = _model_opt()
    torch.save({"epoch": 3, "model_state_dict": model.state_dict(),
                "optimizer_state_dict": opt.state_dict(), "loss": 0.4}, tmp_path / "t.pt")
    r = inspect_checkpoint(tmp_path / "t.pt", "train")
    assert r["ok"] and r["layout"] == "torch-dict" and r["error"] is None
    assert r["present"]["model"] and r["present"]["optimizer"] and r["present"]["progress"]
    assert "scheduler state not saved" in r["warnings"]
    assert "python RNG state not saved" in r["warnings"]


def test_variant_keys_and_nested_rng(tmp_path):
    model, opt = _model_opt()
    sched = torch.optim.lr_scheduler.StepLR(opt, 1)
    torch.save({"net": model.state_dict(), "optim": opt.state_dict(), "global_step": 40,
                "lr_scheduler": sched.state_dict(), "grad_scaler": {"scale": 1.0},
                "rng": {"torch": torch.get_rng_state(), "cuda": [torch.get_rng_state()],
                        "python": [1, 2], "numpy": [3]},
                "sampler": {"index": 5}}, tmp_path / "v.pt")
    r = inspect_checkpoint(tmp_path / "v.pt", "train")
    assert r["ok"] and r["step"] == 40 and r["warnings"] == []
    assert all(r["present"].values())


def test_weights_only_file_cannot_restart_training_but_serves_inference(tmp_path):
    model, _ = _model_opt()
    torch.save(model.state_dict(), tmp_path / "w.pt")
    train = inspect_checkpoint(tmp_path / "w.pt", "train")
    assert not train["ok"] and train["layout"] == "torch-state-dict"
    assert train["missing_required"] == ["optimizer state", "progress (step/epoch)"]
    assert inspect_checkpoint(tmp_path / "w.pt", "inference")["ok"]


def test_missing_optimizer_state_is_named(tmp_path):
    model, _ = _model_opt()
    torch.save({"model": model.state_dict(), "step": 9}, tmp_path / "m.pt")
    r = inspect_checkpoint(tmp_path / "m.pt", "train")
    assert not r["ok"] and r["missing_required"] == ["optimizer state"]
    assert VerifyReport.from_dict(r).summary().startswith("cannot restart: m.pt")


def test_cockpit_resume_layout(tmp_path):
    from cockpit import resume

    model, opt = _model_opt()
    resume.save_state(tmp_path / "r.pt", model=model, optimizer=opt, step=12,
                      data_position={"i": 1})
    r = inspect_checkpoint(tmp_path / "r.pt", "train")
    assert r["ok"] and r["layout"] == "cockpit.resume" and r["step"] == 12
    # Saved without CUDA: its CUDA RNG is not missing, just irrelevant.
    assert r["warnings"] == ["scheduler state not saved", "AMP scaler state not saved"]


def test_lightning_checkpoint_warns_about_rng(tmp_path):
    model, opt = _model_opt()
    torch.save({"pytorch-lightning_version": "2.4.0", "epoch": 2, "global_step": 300,
                "state_dict": model.state_dict(), "optimizer_states": [opt.state_dict()],
                "lr_schedulers": [{"step_size": 1}], "loops": {"fit_loop": {}}},
               tmp_path / "epoch=2-step=300.ckpt")
    r = inspect_checkpoint(tmp_path / "epoch=2-step=300.ckpt", "train")
    assert r["ok"] and r["layout"] == "lightning" and r["step"] == 300
    assert LIGHTNING_RNG_WARNING in r["warnings"]


def _hf_folder(folder: Path, *, model: bool = True) -> Path:
    m, opt = _model_opt()
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 500, "epoch": 1.0}))
    torch.save(opt.state_dict(), folder / "optimizer.pt")
    torch.save({"step_size": 1}, folder / "scheduler.pt")
    import numpy as np

    torch.save({"python": __import__("random").getstate(), "numpy": np.random.get_state(),
                "cpu": torch.get_rng_state()}, folder / "rng_state.pth")
    if model:
        write_safetensors(folder / "model.safetensors")
    return folder


def test_hf_trainer_folder(tmp_path):
    r = inspect_checkpoint(_hf_folder(tmp_path / "checkpoint-500"), "train")
    assert r["ok"] and r["layout"] == "hf-trainer" and r["step"] == 500
    assert r["present"]["rng_numpy"] and r["present"]["rng_python"]  # numpy arrays allowed
    assert HF_RNG_WARNING in r["warnings"] and "CUDA RNG state not saved" in r["warnings"]


def test_hf_folder_still_being_written_says_what_is_missing(tmp_path):
    r = inspect_checkpoint(_hf_folder(tmp_path / "checkpoint-9", model=False), "train")
    assert not r["ok"]
    assert r["missing_required"] == [
        "model weights (model.safetensors or pytorch_model.bin) not in checkpoint-9/"
    ]


def test_accelerate_folder(tmp_path):
    folder = tmp_path / "step_800"
    model, opt = _model_opt()
    write_safetensors(folder / "model.safetensors")
    torch.save(opt.state_dict(), folder / "optimizer.bin")
    torch.save({"x": 1}, folder / "scheduler.bin")
    torch.save({"random_state": [1], "numpy_random_seed": [2], "torch_manual_seed":
                torch.get_rng_state()}, folder / "random_states_0.pkl")
    torch.save({"epoch": 0}, folder / "sampler.bin")
    r = inspect_checkpoint(folder, "train")
    assert r["ok"] and r["layout"] == "accelerate" and r["step"] == 800
    assert r["present"]["data_position"] and r["present"]["rng_torch"]
    assert HF_RNG_WARNING in r["warnings"]


def test_safetensors_file_and_truncation(tmp_path):
    good = write_safetensors(tmp_path / "m.safetensors", {"a": 10, "b": 5})
    assert inspect_checkpoint(good, "inference")["ok"]
    assert not inspect_checkpoint(good, "train")["ok"]
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(good.read_bytes()[:-8])
    r = inspect_checkpoint(cut, "inference")
    assert not r["ok"] and r["error"].startswith("truncated safetensors file")
    (tmp_path / "h.safetensors").write_bytes(good.read_bytes()[:20])
    assert "truncated" in inspect_checkpoint(tmp_path / "h.safetensors", "inference")["error"]


def test_truncated_and_empty_torch_files(tmp_path):
    model, opt = _model_opt()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 1},
               tmp_path / "full.pt")
    data = (tmp_path / "full.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    r = inspect_checkpoint(tmp_path / "cut.pt", "train")
    assert not r["ok"] and r["error"].startswith("truncated or corrupt file: cut.pt")
    (tmp_path / "zero.pt").write_bytes(b"")
    r = inspect_checkpoint(tmp_path / "zero.pt", "train")
    assert r["error"].startswith("empty file (0 bytes)")
    assert inspect_checkpoint(tmp_path / "nope.pt")["error"].endswith("does not exist")


def test_adapter_needs_pinned_base_revision(tmp_path):
    folder = tmp_path / "adapter"
    write_safetensors(folder / "adapter_model.safetensors")
    config = {"base_model_name_or_path": "org/base", "revision": None, "peft_type": "LORA"}
    (folder / "adapter_config.json").write_text(json.dumps(config))
    r = inspect_checkpoint(folder, "adapter")
    assert not r["ok"] and r["layout"] == "peft-adapter"
    assert r["missing_required"] == ["base model revision not pinned"]
    assert VerifyReport.from_dict(r).problems == ("base model revision not pinned",)
    pinned = inspect_checkpoint(folder, "adapter", base_revision="a" * 40)
    assert pinned["ok"]
    config["revision"] = "main"
    (folder / "adapter_config.json").write_text(json.dumps(config))
    assert "branch" in inspect_checkpoint(folder, "adapter")["missing_required"][0]


def test_unsafe_pickle_is_refused_in_process_too(tmp_path):
    marker = tmp_path / "marker"
    torch.save({"model": Evil(marker)}, tmp_path / "evil.pt")
    r = inspect_checkpoint(tmp_path / "evil.pt", "train")
    assert r["unsafe_pickle"] and not r["ok"] and r["error"].startswith(UNSAFE_WORDS)
    assert not marker.exists()


# ------------------------------------------------------------ fresh process (D17)


def test_verify_in_fresh_process_good_checkpoint(tmp_path):
    from cockpit import resume

    model, opt = _model_opt()
    resume.save_state(tmp_path / "r.pt", model=model, optimizer=opt, step=3)
    report = verify_checkpoint(tmp_path / "r.pt", "train", timeout=60)
    assert report.ok and report.exit_code == 0 and exit_code(report) == 0
    assert report.layout == "cockpit.resume" and report.step == 3
    assert report.load_seconds is not None and report.wall_seconds >= report.load_seconds


def test_pickle_that_runs_code_is_not_run_unless_allowed(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    marker, control = tmp_path / "marker", tmp_path / "control-marker"
    torch.save({"model": Evil(marker)}, tmp_path / "evil.pt")
    torch.save({"model": Evil(control)}, tmp_path / "evil2.pt")
    with ThreadPoolExecutor(2) as pool:  # two fresh processes at once: half the wait
        refused = pool.submit(verify_checkpoint, tmp_path / "evil.pt", "train", timeout=60)
        allowed = pool.submit(verify_checkpoint, tmp_path / "evil2.pt", "train", timeout=60,
                              allow_unsafe=True)
        report, allowed_report = refused.result(), allowed.result()
    assert not report.ok and report.unsafe_pickle and report.exit_code == 1
    assert "needs unsafe unpickling" in report.error and "open" in report.error
    assert not marker.exists()
    # Control: with allow_unsafe the payload does run (in the worker, not here).
    assert control.exists() and allowed_report.unsafe_pickle and not allowed_report.ok


def test_timeout_kills_the_worker(tmp_path):
    report = verify_checkpoint(tmp_path / "x.pt", timeout=0.5, python=str(_wrapper(tmp_path)))
    assert not report.ok and report.error == "timed out after 0.5s"
    # Killed at the timeout, not waited for: the worker (300 s of sleep) is gone now.
    # (A loaded box may kill it before its first line wrote the pid: nothing to look at.)
    said = tmp_path / "hang-python.pid"
    pid = int(said.read_text() or 0) if said.exists() else 0
    assert not pid or not psutil.pid_exists(pid) \
        or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def _wrapper(tmp_path: Path) -> Path:
    """A 'python' that hangs: stands in for a load that never finishes (its pid in
    ``hang-python.pid``)."""
    script = tmp_path / "hang-python"
    script.write_text(f"#!/bin/sh\necho $$ > {tmp_path / 'hang-python.pid'}\n"
                      f"exec {sys.executable} -c 'import time; time.sleep(300)'\n")
    script.chmod(0o755)
    return script


def test_worker_that_cannot_start_or_crashes(tmp_path):
    report = verify_checkpoint(tmp_path / "x.pt", python=str(tmp_path / "no-python"))
    assert not report.ok and report.error.startswith("could not start")
    crash = tmp_path / "crash-python"
    crash.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    crash.chmod(0o755)
    report = verify_checkpoint(tmp_path / "x.pt", python=str(crash))
    assert report.error == "verification process failed (exit 3): boom"


def test_worker_prints_exactly_one_json_object(tmp_path):
    write_safetensors(tmp_path / "m.safetensors")
    done = subprocess.run(
        [sys.executable, "-m", "cockpit.runs.checkpoints.reload_worker",
         str(tmp_path / "m.safetensors"),
         "--kind", "inference"], capture_output=True, text=True, timeout=60,
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 1 and json.loads(lines[0])["ok"]


def test_run_verify_command(tmp_path):
    ckpt = tmp_path / "c.pt"
    ckpt.write_bytes(b"x")
    code = "import sys, os; sys.exit(0 if os.path.getsize(sys.argv[1]) else 4)"
    ok = run_verify_command([sys.executable, "-c", code, "{checkpoint}"], ckpt, 30, tmp_path)
    assert ok.ok and ok.exit_code == 0 and ok.layout == "verify-command"
    ckpt.write_bytes(b"")
    bad = run_verify_command([sys.executable, "-c", code, "{checkpoint}"], ckpt, 30, tmp_path)
    assert not bad.ok and bad.error == "verify command exited 4"
    hung = run_verify_command([sys.executable, "-c", "import time; time.sleep(30)"], ckpt, 0.3)
    assert hung.error == "timed out after 0.3s"


def test_import_cockpit_does_not_import_torch():
    code = ("import sys, cockpit, cockpit.runs.checkpoints.reload_check, "
            "cockpit.runs.checkpoints.discovery, "
            "cockpit.runs.checkpoints.reload_worker, cockpit.resume; "
            "print(sorted(m for m in ('torch', 'textual', 'numpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
