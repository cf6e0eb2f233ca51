"""Data check (an essential stage, D3): the corpus is the one fixed before the runs.

- reports ``data/truncated`` (rows that lost part of their input) through
  ``cockpit.report``, so the ``no-truncation`` stop rule stops this stage when any is;
- writes ``data/test_ids.txt``, the ids the predictions must hold exactly (the
  ``expected_ids`` acceptance check and the export's check, D23);
- exits 1 when a class is missing or, once you pin it, when the corpus hash differs.

It imports no training framework (a quick stage). For your own corpus: read it here
the way train.py does (from corpus.py), and set EXPECTED_SHA256 to the hash this script
prints on the corpus you fixed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from corpus import fingerprint, load_corpus, truncated_rows
from model import CLASSES

from cockpit import report

EXPECTED_SHA256: str | None = None  # e.g. "3f2a…": pin it once the corpus is fixed (D1)


def main() -> int:
    parts = load_corpus()
    truncated = sum(truncated_rows(x) for x, _, _ in parts.values())
    rows = sum(len(ids) for _, _, ids in parts.values())
    report.truncated(truncated)
    report.log(None, **{"data/rows": rows})
    digest = fingerprint(parts)
    sizes = ", ".join(f"{name} {len(ids)}" for name, (_, _, ids) in parts.items())
    print(f"corpus: {rows} rows ({sizes}), {truncated} truncated, sha256 {digest[:12]}")
    problems = []
    for name, (_, y, _) in parts.items():
        missing = sorted(set(range(CLASSES)) - set(y.tolist()))
        if missing:
            problems.append(f"split {name} has no example of class(es) {missing}")
    if EXPECTED_SHA256 is not None and digest != EXPECTED_SHA256:
        problems.append(f"corpus hash {digest} != expected {EXPECTED_SHA256}")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    ids_file = Path("data") / "test_ids.txt"
    ids_file.parent.mkdir(parents=True, exist_ok=True)
    ids_file.write_text("\n".join(parts["test"][2]) + "\n")
    print(f"expected test ids: {ids_file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
