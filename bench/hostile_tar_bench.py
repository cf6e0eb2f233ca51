"""How fast `verify-export` refuses a hostile tar: a 481 KB-ish tar whose bag holds a
1 TiB sparse member (issue 21: it used to be hashed for hours). The baseline, in the
same run, is the interpreter starting (`python -c pass`) and GNU tar listing the same
tar's headers (`tar -tvf`, the least any verifier must read); all as fresh processes.

Run: python bench/hostile_tar_bench.py [--repeat N]   (needs GNU tar)
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bagit


def make_sparse_tar(root: Path) -> Path:
    """A valid little bag, then its payload file swapped for a 1 TiB hole."""
    bag_dir = root / "src" / "hostile-bag"
    bag_dir.mkdir(parents=True)
    (bag_dir / "huge.bin").write_bytes(b"x")
    bagit.make_bag(str(bag_dir), checksums=["sha256"])
    with open(bag_dir / "data" / "huge.bin", "wb") as handle:
        handle.truncate(1 << 40)  # 1 TiB, no block written
    tar = root / "hostile-bag.tar"
    subprocess.run(["tar", "--sparse", "-cf", str(tar), "-C", str(root / "src"), bag_dir.name],
                   check=True, capture_output=True, timeout=120)
    digest = hashlib.sha256(tar.read_bytes()).hexdigest()
    Path(f"{tar}.sha256").write_text(f"{digest}  {tar.name}\n")
    return tar


def timed(cmd: list[str], cwd: Path) -> tuple[float, int]:
    began = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=600)
    return time.perf_counter() - began, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("tar") is None:
        print("needs GNU tar", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tar = make_sparse_tar(root)
        size = tar.stat().st_size
        verify = [sys.executable, "-m", "cockpit", "verify-export", str(tar), "--no-reload"]
        listing = ["tar", "-tvf", str(tar)]
        ours, base, start, codes = [], [], [], set()
        for _ in range(args.repeat):
            took, code = timed(verify, root)
            ours.append(took)
            codes.add(code)
            base.append(timed(listing, root)[0])
            start.append(timed([sys.executable, "-c", "pass"], root)[0])
        left = [p for p in root.iterdir() if p.name not in ("src", tar.name, f"{tar.name}.sha256")]
    med_ours, med_base = statistics.median(ours), statistics.median(base)
    print(f"tar size: {size:,} bytes")
    print(f"verify-export of a tar with a 1 TiB sparse member: median {med_ours:.2f} s "
          f"(max {max(ours):.2f} s), exit codes {sorted(codes)}")
    med_start = statistics.median(start)
    print(f"baseline `python -c pass`: median {med_start:.3f} s ({med_ours / med_start:.1f}x); "
          f"`tar -tvf` of the same tar: median {med_base:.3f} s")
    print(f"left in the work folder: {left or 'nothing'}")
    return 0 if codes == {1} and max(ours) < 5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
