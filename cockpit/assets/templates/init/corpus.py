"""The corpus: Gaussian points labelled by a random "teacher" network (torch only).

The corpus and its split are fixed by ``CORPUS_SEED``, whatever the run's own seed
(D1), so the task is learnable but not trivial. Nothing is downloaded. Replace
``load_corpus`` with your own data: keep the ids (the predictions and the export are
checked against them) and ``truncated_rows``.
"""

from __future__ import annotations

import hashlib

import torch
from model import CLASSES, FEATURES

SPLITS = {"train": 4000, "val": 500, "test": 500}
CORPUS_SEED = 20261202

Split = tuple[torch.Tensor, torch.Tensor, list[str]]  # (x, y, ids)


def load_corpus() -> dict[str, Split]:
    """``{split: (x, y, ids)}``: always the same rows."""
    gen = torch.Generator().manual_seed(CORPUS_SEED)
    total = sum(SPLITS.values())
    x = torch.randn(total, FEATURES, generator=gen)
    w1 = torch.randn(FEATURES, 32, generator=gen) / FEATURES ** 0.5
    w2 = torch.randn(32, CLASSES, generator=gen)
    y = (torch.tanh(x @ w1) @ w2).argmax(dim=1)
    parts: dict[str, Split] = {}
    start = 0
    for name, size in SPLITS.items():
        rows = slice(start, start + size)
        parts[name] = (x[rows], y[rows], [f"{name}-{i:05d}" for i in range(start, start + size)])
        start += size
    return parts


def truncated_rows(x: torch.Tensor) -> int:
    """Rows that lost part of their input (here: not FEATURES finite values)."""
    if x.dim() != 2 or x.shape[1] != FEATURES:
        return int(x.shape[0])
    return int((~torch.isfinite(x).all(dim=1)).sum().item())


def fingerprint(parts: dict[str, Split]) -> str:
    """sha256 of the corpus as text (6 decimals): pin it in data_check.py (D1)."""
    digest = hashlib.sha256()
    for name, (x, y, ids) in parts.items():
        for row_id, row, label in zip(ids, x.tolist(), y.tolist(), strict=True):
            digest.update(f"{name},{row_id},{label},".encode())
            digest.update(",".join(f"{v:.6f}" for v in row).encode() + b"\n")
    return digest.hexdigest()
