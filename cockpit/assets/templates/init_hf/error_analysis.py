"""Error analysis per accepted run (an essential stage): where does each model lose?

A language model has no confusion matrix; its errors are tokens it predicts badly.
Reads each run's ``out/RUN/token_losses.csv`` (one row per test token: ``id``,
``position``, ``token``, ``target``, ``loss``, ``correct``, written by train.py) and
writes beside it ``per_token.csv`` (per target token: count, mean loss, accuracy) and
``errors.md``: the loss by position in the sequence (the first tokens have the least
context), the hardest target tokens, the tokens after which the model is most often
wrong, and the sequences with the highest loss (their ids, to look at). Without
arguments it analyses every run the campaign journal shows as accepted;
``python error_analysis.py out/control`` analyses one folder. Standard library only.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

Stats = dict[str, list[float]]  # key -> [count, loss sum, correct]


def tally(stats: Stats, key: str, loss: float, correct: int) -> None:
    entry = stats.setdefault(key, [0.0, 0.0, 0.0])
    entry[0] += 1
    entry[1] += loss
    entry[2] += correct


def table(title: str, stats: Stats, rows: list[str]) -> list[str]:
    lines = ["", f"| {title} | tokens | mean loss | accuracy |", "|---|---|---|---|"]
    for key in rows:
        n, loss, right = stats[key]
        lines.append(f"| {key} | {int(n)} | {loss / n:.3f} | {right / n:.3f} |")
    return lines


def analyse(folder: Path) -> str:
    by_target: Stats = {}
    by_context: Stats = {}
    by_position: Stats = {}
    per_sequence: dict[str, list[float]] = defaultdict(list)
    with open(folder / "token_losses.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            loss, correct = float(row["loss"]), int(row["correct"])
            tally(by_target, row["target"], loss, correct)
            tally(by_context, row["token"], loss, correct)
            tally(by_position, f"{(int(row['position']) - 1) // 8 * 8 + 1:>2}-"
                  f"{(int(row['position']) - 1) // 8 * 8 + 8}", loss, correct)
            per_sequence[row["id"]].append(loss)
    with open(folder / "per_token.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["target", "count", "mean_loss", "accuracy"])
        for key, (n, loss, right) in sorted(by_target.items(), key=lambda kv: int(kv[0])):
            writer.writerow([key, int(n), f"{loss / n:.4f}", f"{right / n:.4f}"])
    n, total, right = (sum(v[i] for v in by_target.values()) for i in range(3))
    mean = total / n if n else 0.0

    def hardest(stats: Stats) -> list[str]:
        return sorted(stats, key=lambda k: -stats[k][1] / stats[k][0])[:5]

    worst = sorted(per_sequence, key=lambda i: -sum(per_sequence[i]) / len(per_sequence[i]))
    lines = [f"# Errors of {folder.name}", "",
             f"test loss {mean:.3f} a token, next-token accuracy {right / n if n else 0:.3f} "
             f"({int(n)} tokens, {len(per_sequence)} sequences)"]
    lines += table("positions", by_position, sorted(by_position))
    lines += table("hardest target", by_target, hardest(by_target))
    lines += table("after token", by_context, hardest(by_context))
    lines += ["", "highest-loss sequences: " + ", ".join(
        f"{i} ({sum(per_sequence[i]) / len(per_sequence[i]):.3f})" for i in worst[:5]), ""]
    (folder / "errors.md").write_text("\n".join(lines))
    top = hardest(by_target)[:1]
    return f"{folder.name}: test loss {mean:.3f}" + (f", hardest target token {top[0]}"
                                                       if top else "")


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
        if not (folder / "token_losses.csv").exists():
            print(f"{folder}: no token_losses.csv, skipped", file=sys.stderr)
            continue
        print(analyse(folder))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
