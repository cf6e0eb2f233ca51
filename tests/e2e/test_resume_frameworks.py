"""Issue 42, the resume check on the real frameworks (CPU, tiny models from a config, no
hub): the Hugging Face Trainer resumed from ``checkpoint-4`` reproduces steps 5-8 of
the run exactly (it restores the RNG states and skips the batches already seen), and
PyTorch Lightning resumed from a mid-epoch ``step=3`` checkpoint does not (it starts the
epoch's data again, and keeps no RNG state): reported inexact, naming the first step
that differs. Neither resumed process imports the cockpit: the check reads what each
writes under its scratch folder — the Trainer's ``trainer_state.json``, Lightning's
``metrics.csv`` — as the run's own source, under one metric name (``loss``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cockpit.campaign import load_campaign
from cockpit.runs.checkpoints.resume_check import ResumeResult, resume_equivalence
from tests.helpers.campaigns import write_campaign

pytest.importorskip("transformers", reason="the real Trainer")
pytest.importorskip("pytorch_lightning", reason="the real Lightning")

# argv: output folder, [checkpoint to resume from]; logs every step, saves every 4.
TRAIN_HF = textwrap.dedent("""
    import sys
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=32)
    ids = [torch.randint(0, 64, (16,)) for _ in range(32)]
    data = [{"input_ids": i, "labels": i.clone()} for i in ids]
    args = TrainingArguments(output_dir=sys.argv[1], max_steps=8, save_steps=4,
                             logging_steps=1, per_device_train_batch_size=4, report_to=[],
                             use_cpu=True, disable_tqdm=True)
    trainer = Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=data)
    trainer.train(resume_from_checkpoint=sys.argv[2] if len(sys.argv) > 2 else None)
""")

# argv: root folder, [checkpoint]; one epoch is 8 batches, a checkpoint every 3 steps.
TRAIN_PL = textwrap.dedent("""
    import sys
    import torch
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import ModelCheckpoint
    from pytorch_lightning.loggers import CSVLogger

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    pl.seed_everything(0)
    torch.set_num_threads(1)
    root = sys.argv[1]
    x = torch.randn(32, 4)
    data = torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True))
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True)
    saves = ModelCheckpoint(dirpath=f"{root}/ckpt", every_n_train_steps=3, save_top_k=-1)
    trainer = pl.Trainer(max_steps=6, accelerator="cpu", logger=CSVLogger(root),
                         log_every_n_steps=1, callbacks=[saves], enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(Tiny(), loader, ckpt_path=sys.argv[2] if len(sys.argv) > 2 else None)
""")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A campaign whose two runs trained for real (each once, in its own process)."""
    folder = tmp_path_factory.mktemp("frameworks") / "c"
    runs = {
        "hf": {"metrics": ["out"], "checkpoints": "out",
               "resume_check": {"command": ["{python}", "train_hf.py", "{scratch}/out",
                                            "{checkpoint}"], "steps": 4}},
        "pl": {"metrics": ["pl/lightning_logs/version_0/metrics.csv"], "checkpoints": "pl/ckpt",
               "resume_check": {"command": ["{python}", "train_pl.py", "{scratch}",
                                            "{checkpoint}"], "steps": 3}},
    }
    path = write_campaign(folder, [{"id": run, "duration": "5m", "resource": "cpu", "run": run,
                                    "command": ["true"]} for run in runs], runs=runs)
    (folder / "train_hf.py").write_text(TRAIN_HF)
    (folder / "train_pl.py").write_text(TRAIN_PL)
    for argv in (["train_hf.py", "out"], ["train_pl.py", "pl"]):
        done = subprocess.run([sys.executable, *argv], cwd=folder, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    return path


def _resume(path: Path, run: str, checkpoint: str, step: int) -> ResumeResult:
    campaign = load_campaign(path)
    return resume_equivalence(campaign, campaign.runs[run], path.parent / checkpoint, step,
                              datetime.now(timezone.utc))


def test_the_trainers_resume_check_is_exact(trained: Path) -> None:
    result = _resume(trained, "hf", "out/checkpoint-4", 4)
    assert result.ok, result.message
    assert result.compared == 4 and result.message == (
        "4 steps of loss match the original within 0: the restart is exact")


def test_lightnings_mid_epoch_resume_is_reported_inexact(trained: Path) -> None:
    (checkpoint,) = (trained.parent / "pl" / "ckpt").glob("*step=3.ckpt")
    result = _resume(trained, "pl", f"pl/ckpt/{checkpoint.name}", 3)
    assert not result.ok and result.diverged_step == 4, result.message
    assert result.message.startswith("loss diverged at step 4: original ")
    assert "the restart is not exact" in result.message
