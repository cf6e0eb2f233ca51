"""Error analysis per accepted run: confusion matrix, most confused pairs, examples.

Reads each run's predictions.csv (id,label,pred) and writes, in the run's own folder:
confusion.csv, confused_pairs.md and misclassified.md (with the 8×8 images as text).
Without arguments it analyses every run the campaign journal shows as accepted.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import Counter
from pathlib import Path

from common import read_rows

SHADES = " .:-=+*#%@"


def analyse(folder: Path, rows: list[list[str]]) -> str:
    with open(folder / "predictions.csv", newline="") as handle:
        preds = [(int(r["id"]), int(r["label"]), int(r["pred"])) for r in csv.DictReader(handle)]
    matrix = [[0] * 10 for _ in range(10)]
    for _, label, pred in preds:
        matrix[label][pred] += 1
    with open(folder / "confusion.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["label\\pred", *range(10)])
        for label in range(10):
            writer.writerow([label, *matrix[label]])
    pairs = Counter((label, pred) for _, label, pred in preds if label != pred)
    wrong = [p for p in preds if p[1] != p[2]]
    accuracy = 1 - len(wrong) / len(preds)
    lines = [f"# Most confused pairs ({folder.name})", "",
             f"test accuracy {accuracy:.3f} ({len(wrong)} of {len(preds)} wrong)", "",
             "| true | predicted | count |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {n} |" for (a, b), n in pairs.most_common(5)]
    (folder / "confused_pairs.md").write_text("\n".join(lines) + "\n")
    examples = [f"# Misclassified examples ({folder.name})", ""]
    for image_id, label, pred in wrong[:5]:
        pixels = [int(v) for v in rows[image_id][:64]]
        art = ["".join(SHADES[min(p * len(SHADES) // 17, 9)] * 2 for p in pixels[r * 8:r * 8 + 8])
               for r in range(8)]
        examples += [f"## image {image_id}: true {label}, predicted {pred}", "", "```",
                     *art, "```", ""]
    (folder / "misclassified.md").write_text("\n".join(examples))
    return f"{folder.name}: accuracy {accuracy:.3f}, top pair {pairs.most_common(1)}"


def accepted_runs(journal: Path = Path(".cockpit/journal.jsonl")) -> list[Path]:
    """out/RUN for each run with a result_accepted event (and no later rejection)."""
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
    rows = read_rows()
    folders = [Path(p) for p in sys.argv[1:]] or accepted_runs()
    if not folders:
        print("no accepted run to analyse", file=sys.stderr)
        return 1
    for folder in folders:
        if not (folder / "predictions.csv").exists():
            print(f"{folder}: no predictions.csv, skipped", file=sys.stderr)
            continue
        print(analyse(folder, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
