"""Export benchmark: one large artifact exported vs ``cp`` + ``sha256sum`` of the same file.

Usage: python bench/export_bench.py [--size-mb 2048] [--dir DIR] [--reload]

Measures, in the same run and on the same file (page cache warm for every contender):

- baseline: ``cp SRC DST && sha256sum DST && sync DST`` (two reads, one write, flushed);
- export, copy mode (links off): the payload step (copy + hash in ONE read, fsync'ed),
  and the whole export (payload + verify-export's full re-hash + the .tar);
- export, hard-link mode, first time (link + one read to hash) and again (hash cache:
  near zero).

Goal: the payload copy <= 1.1x the baseline. Free disk is checked first: copy mode needs
about 4x the artifact (source, cp copy, bag copy, tar); a smaller file is used, and said
so, when space is short.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cockpit.campaign import load_campaign  # noqa: E402
from cockpit.export import export_campaign  # noqa: E402
from cockpit.journal.fold import fold  # noqa: E402
from cockpit.journal.log import Journal  # noqa: E402

START = datetime(2026, 12, 2, 8, 0, tzinfo=timezone.utc)


def write_artifact(path: Path, size: int) -> None:
    """A safetensors file of ``size`` bytes (header + float32 data), written fast."""
    count = max((size - 256) // 4, 1)
    header = json.dumps({"w": {"dtype": "F32", "shape": [count],
                               "data_offsets": [0, 4 * count]}}).encode()
    block = os.urandom(8 * 1024 * 1024)
    left = 4 * count
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(header)) + header)
        while left > 0:
            n = min(left, len(block))
            out.write(block[:n])
            left -= n
        out.flush()
        os.fsync(out.fileno())


def make_campaign(folder: Path, size: int):
    folder.mkdir(parents=True, exist_ok=True)
    write_artifact(folder / "ckpt" / "model-step100.safetensors", size)
    doc = {
        "campaign": "bench", "question": "how fast is an export?",
        "package": {"offer": "rtx4090-3d", "start": "2026-12-02T08:00:00Z"},
        "stages": [{"id": "train", "duration": "1h", "resource": "gpu", "run": "train"}],
        "runs": {"train": {"kind": "inference", "checkpoints": "ckpt"}},
    }
    (folder / "campaign.yaml").write_text(json.dumps(doc, indent=2))
    campaign = load_campaign(folder / "campaign.yaml")
    j = Journal(campaign.state_dir / "journal.jsonl")
    ev = j.append("stage_started", now=START, stage="train", run="train")
    j.append("run_started", now=START, run="train", stage="train", attempt=ev["seq"], gpus=[0])
    j.append("run_exited", now=START + timedelta(hours=1), run="train", code=0,
             attempt=ev["seq"])
    j.append("stage_finished", now=START + timedelta(hours=1), stage="train", outcome="done")
    j.append("result_accepted", now=START + timedelta(hours=1), run="train", reason="bench")
    return campaign


def timed(argv: str) -> float:
    t = time.perf_counter()
    subprocess.run(argv, shell=True, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=2048)
    parser.add_argument("--dir", default=None, help="where to work (default: a temp folder)")
    parser.add_argument("--reload", action="store_true",
                        help="also reload the artifact in a fresh process (verify-export)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="export-bench-", dir=args.dir))
    try:
        size = args.size_mb * 1024 * 1024
        free = shutil.disk_usage(base).free
        if free < 4.5 * size:
            smaller = int(free / 5) // (1024 * 1024) * 1024 * 1024
            print(f"only {free / 2**30:.1f} GiB free in {base}: using {smaller // 2**20} MiB "
                  f"instead of {args.size_mb} MiB (copy mode needs about 4x the file)")
            size = smaller
        if size < 16 * 1024 * 1024:
            print("not enough free disk for a meaningful run")
            return 1
        campaign = make_campaign(base / "campaign", size)
        src = campaign.folder / "ckpt" / "model-step100.safetensors"
        state = fold(campaign, Journal(campaign.state_dir / "journal.jsonl").events(),
                     START + timedelta(hours=2))
        print(f"artifact: {size / 2**20:.0f} MiB at {src}")
        timed(f"cat '{src}' > /dev/null")  # page cache warm for everyone

        dst = base / "cp-copy.safetensors"
        cp_s = timed(f"cp '{src}' '{dst}' && sha256sum '{dst}'")
        dst.unlink()
        cp_sync_s = timed(f"cp '{src}' '{dst}' && sha256sum '{dst}' && sync '{dst}'")
        dst.unlink()

        def export(link: bool, tar: bool = True):
            t = time.perf_counter()
            result = export_campaign(campaign, state, now=START + timedelta(hours=2),
                                     verify_reload=args.reload, link=link, tar=tar,
                                     journal=False)
            return result, time.perf_counter() - t

        cache = campaign.state_dir / "export-hash-cache.json"
        copy_res, copy_total = export(link=False)
        cache.unlink(missing_ok=True)
        link_res, link_total = export(link=True, tar=False)
        link2_res, link2_total = export(link=True, tar=False)
        assert copy_res.verified and link_res.verified and link2_res.verified
        assert link_res.linked == 1

        payload = copy_res.timings["payload_s"]
        print(f"cp + sha256sum                     {cp_s:8.2f} s")
        print(f"cp + sha256sum + sync              {cp_sync_s:8.2f} s")
        print(f"export payload, copy mode          {payload:8.2f} s  "
              f"ratio {payload / cp_sync_s:.2f}x (vs with sync), {payload / cp_s:.2f}x "
              "(vs without)")
        print(f"  + verify-export (full re-hash)   {copy_res.timings['verify_s']:8.2f} s")
        print(f"  + tar (one more read and write)  {copy_res.timings.get('tar_s', 0):8.2f} s")
        print(f"  whole export, copy mode          {copy_total:8.2f} s")
        print(f"export payload, hard link, 1st     {link_res.timings['payload_s']:8.2f} s "
              "(link + one read to hash)")
        print(f"export payload, hard link, again   {link2_res.timings['payload_s']:8.2f} s "
              "(hash cache)")
        print(f"  whole export, hard link, again   {link2_total:8.2f} s (verify re-hashes; "
              "no tar)")
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
