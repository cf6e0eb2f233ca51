"""Data check (essential): the corpus is the one fixed before the runs, nothing truncated.

Reports `data/truncated` (rows without 64 pixels and a label) through cockpit.report,
so the `no-truncation` stop rule sees it; exits 1 when the hash does not match.
"""

from __future__ import annotations

import sys
from pathlib import Path

from common import CORPUS, corpus_sha256, read_rows

from cockpit import report


def main() -> int:
    corpus = Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS
    expected = (CORPUS.parent / "digits.csv.gz.sha256").read_text().strip()
    rows = read_rows(corpus)
    truncated = sum(1 for r in rows if len(r) != 65)
    report.truncated(truncated)
    report.log(None, **{"data/rows": len(rows)})
    actual = corpus_sha256(corpus)
    print(f"corpus {corpus.name}: {len(rows)} rows, {truncated} truncated, sha256 {actual[:12]}")
    if actual != expected:
        print(f"corpus hash {actual} != expected {expected}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
