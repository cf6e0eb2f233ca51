"""Data check (an essential stage, D3): the corpus is the one fixed before the runs.

- reports ``data/truncated`` (sequences the model's context would cut) through
  ``cockpit.report``, so the ``no-truncation`` stop rule stops this stage when any is;
- writes ``data/test_ids.txt``, the ids the predictions must hold exactly (the
  ``expected_ids`` acceptance check and the export's check, D23);
- exits 1 when a token of the vocabulary never occurs in the training split or, once
  you pin it, when the corpus hash differs.

Standard library and cockpit.report only: it needs no transformers. For your own
corpus: read it here the way train.py does, and set EXPECTED_SHA256 to the hash this
script prints on the corpus you fixed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from corpus import SEQ_LEN, VOCAB, fingerprint, load_corpus, truncated_rows

from cockpit import report

EXPECTED_SHA256: str | None = None  # e.g. "3f2a…": pin it once the corpus is fixed (D1)


def main() -> int:
    parts = load_corpus()
    truncated = sum(truncated_rows(rows, SEQ_LEN) for rows, _ in parts.values())
    rows = sum(len(ids) for _, ids in parts.values())
    tokens = sum(len(row) for seqs, _ in parts.values() for row in seqs)
    report.truncated(truncated)
    report.log(None, **{"data/rows": rows, "data/tokens": tokens})
    digest = fingerprint(parts)
    sizes = ", ".join(f"{name} {len(ids)}" for name, (_, ids) in parts.items())
    print(f"corpus: {rows} sequences ({sizes}), {tokens} tokens, {truncated} truncated, "
          f"sha256 {digest[:12]}")
    problems = []
    seen = {token for row in parts["train"][0] for token in row}
    missing = sorted(set(range(VOCAB)) - seen)
    if missing:
        problems.append(f"the training split never has token(s) {missing}")
    if EXPECTED_SHA256 is not None and digest != EXPECTED_SHA256:
        problems.append(f"corpus hash {digest} != expected {EXPECTED_SHA256}")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    ids_file = Path("data") / "test_ids.txt"
    ids_file.parent.mkdir(parents=True, exist_ok=True)
    ids_file.write_text("\n".join(parts["test"][1]) + "\n")
    print(f"expected test ids: {ids_file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
