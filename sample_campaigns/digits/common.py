"""Shared by the digits scripts: the fixed corpus, its fixed split, the model."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "data" / "digits.csv.gz"
SPLIT_SEED = 20261202  # the split is fixed before the runs


def corpus_sha256(path: Path = CORPUS) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_rows(path: Path = CORPUS) -> list[list[str]]:
    with gzip.open(path, "rt", encoding="ascii") as handle:
        return [line.strip().split(",") for line in handle if line.strip()]


def load_split():
    """Tensors for train / val / test (1,197 / 300 / 300), always the same split."""
    import torch

    rows = [r for r in read_rows() if len(r) == 65]
    x = torch.tensor([[float(v) / 16.0 for v in r[:64]] for r in rows])
    y = torch.tensor([int(r[64]) for r in rows])
    order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(SPLIT_SEED))
    ids = order.tolist()
    parts = {"train": ids[:1197], "val": ids[1197:1497], "test": ids[1497:]}
    return {name: (x[idx], y[idx], idx) for name, idx in parts.items()}


def make_model(hidden: int = 64, dropout: float = 0.2):
    import torch

    return torch.nn.Sequential(
        torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Dropout(dropout),
        torch.nn.Linear(hidden, 10),
    )
