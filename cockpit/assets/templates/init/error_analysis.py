"""Error analysis per accepted run (an essential stage): where does each model go wrong?

Reads each run's ``out/RUN/predictions.csv`` (``id,label,pred``) and writes beside it
``confusion.csv`` (true label × predicted label) and ``errors.md`` (accuracy per class,
the most confused pairs, a few misclassified ids). Without arguments it analyses every
run the campaign journal shows as accepted; ``python error_analysis.py out/control``
analyses one folder. Standard library only.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import Counter
from pathlib import Path


def analyse(folder: Path) -> str:
    with open(folder / "predictions.csv", newline="") as handle:
        preds = [(r["id"], r["label"], r["pred"]) for r in csv.DictReader(handle)]
    labels = sorted({label for _, label, _ in preds} | {pred for _, _, pred in preds})
    counts = Counter((label, pred) for _, label, pred in preds)
    with open(folder / "confusion.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["label\\pred", *labels])
        for label in labels:
            writer.writerow([label, *(counts[label, pred] for pred in labels)])
    wrong = [p for p in preds if p[1] != p[2]]
    accuracy = 1 - len(wrong) / len(preds) if preds else 0.0
    lines = [f"# Errors of {folder.name}", "",
             f"test accuracy {accuracy:.3f} ({len(wrong)} of {len(preds)} wrong)", "",
             "| class | examples | accuracy |", "|---|---|---|"]
    for label in labels:
        total = sum(n for (a, _), n in counts.items() if a == label)
        right = counts[label, label]
        lines.append(f"| {label} | {total} | {right / total if total else 0:.3f} |")
    pairs = Counter((label, pred) for _, label, pred in wrong)
    lines += ["", "| true | predicted | count |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {n} |" for (a, b), n in pairs.most_common(5)]
    lines += ["", "misclassified (first 10): " + ", ".join(i for i, _, _ in wrong[:10]), ""]
    (folder / "errors.md").write_text("\n".join(lines))
    top = [f"{a} as {b}" for (a, b), _ in pairs.most_common(1)]
    return f"{folder.name}: accuracy {accuracy:.3f}" + (f", most often {top[0]}" if top else "")


def accepted_runs(journal: Path = Path(".cockpit/journal.jsonl")) -> list[Path]:
    """out/RUN for each run whose last verdict in the journal is result_accepted."""
    verdicts: dict[str, bool] = {}
    for line in journal.read_text().splitlines() if journal.exists() else []:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a torn line: the journal's own reader reports it
        if event.get("kind") in ("result_accepted", "result_rejected"):
            verdicts[event["run"]] = event["kind"] == "result_accepted"
    return [Path("out") / run for run, ok in verdicts.items() if ok]


def main() -> int:
    folders = [Path(p) for p in sys.argv[1:]] or accepted_runs()
    if not folders:
        print("no accepted run to analyse", file=sys.stderr)
        return 1
    for folder in folders:
        if not (folder / "predictions.csv").exists():
            print(f"{folder}: no predictions.csv, skipped", file=sys.stderr)
            continue
        print(analyse(folder))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
