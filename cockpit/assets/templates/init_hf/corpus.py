"""The corpus: token sequences from a fixed random Markov chain (standard library only).

Every sequence is ``SEQ_LEN`` tokens over a vocabulary of ``VOCAB``; each token is
followed by one of three likely successors, so a small language model can learn it
(the best possible loss is about 0.9 nats a token; a model that learnt nothing stays
near ln(VOCAB) = 3.9). The corpus and its split are fixed by ``CORPUS_SEED``, whatever
the run's own seed (D1). Nothing is downloaded. Replace ``load_corpus`` with your own
tokenized corpus: keep the ids (the predictions and the export are checked against
them) and ``truncated_rows`` (what the model's context would cut).
"""

from __future__ import annotations

import hashlib
import random

VOCAB = 48
SEQ_LEN = 32  # tokens a sequence; the model's context (n_positions) holds exactly this
SPLITS = {"train": 2000, "val": 200, "test": 200}
CORPUS_SEED = 20261202
SUCCESSOR_WEIGHTS = (0.6, 0.3, 0.1)

Split = tuple[list[list[int]], list[str]]  # (token sequences, ids)


def chain(rng: random.Random) -> list[list[int]]:
    """Each token's three likely successors (the chain that generates the corpus)."""
    return [rng.sample(range(VOCAB), len(SUCCESSOR_WEIGHTS)) for _ in range(VOCAB)]


def load_corpus() -> dict[str, Split]:
    """``{split: (sequences, ids)}``: always the same sequences."""
    rng = random.Random(CORPUS_SEED)
    successors = chain(rng)
    parts: dict[str, Split] = {}
    start = 0
    for name, size in SPLITS.items():
        rows = []
        for _ in range(size):
            row = [rng.randrange(VOCAB)]
            while len(row) < SEQ_LEN:
                row.append(rng.choices(successors[row[-1]], SUCCESSOR_WEIGHTS)[0])
            rows.append(row)
        parts[name] = (rows, [f"{name}-{i:05d}" for i in range(start, start + size)])
        start += size
    return parts


def truncated_rows(rows: list[list[int]], context: int = SEQ_LEN) -> int:
    """Sequences the model's context would cut (longer than ``context`` tokens)."""
    return sum(len(row) > context for row in rows)


def fingerprint(parts: dict[str, Split]) -> str:
    """sha256 of the corpus as text: pin it in data_check.py (D1)."""
    digest = hashlib.sha256()
    for name, (rows, ids) in parts.items():
        for row_id, row in zip(ids, rows, strict=True):
            digest.update(f"{name},{row_id},{' '.join(map(str, row))}\n".encode())
    return digest.hexdigest()
