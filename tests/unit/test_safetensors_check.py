"""Safetensors files are checked against the file, not only their header (issue 14).

Each file is built by hand (8-byte little-endian header length, JSON header, data), so
the test needs neither torch nor the safetensors package: a good file reloads, and each
bad variant fails with a reason in words.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cockpit.runs.checkpoints.reload_worker import inspect_checkpoint


def build(path: Path, header: dict[str, Any], data_bytes: int) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\x01" * data_bytes)
    return path


def tensor(dtype: str, shape: list[Any], begin: Any, end: Any) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


GOOD = {
    "__metadata__": {"format": "pt"},
    "a": tensor("F32", [2, 3], 0, 24),
    "b": tensor("BF16", [4], 24, 32),
    "c": tensor("I64", [0], 32, 32),  # an empty tensor is fine
    "d": tensor("U8", [5], 32, 37),
}


def test_a_good_hand_built_file_reloads(tmp_path):
    report = inspect_checkpoint(build(tmp_path / "m.safetensors", GOOD, 37), "inference")
    assert report["ok"], report
    assert report["layout"] == "safetensors"


def test_the_worker_checks_it_in_a_fresh_process(tmp_path):
    bad = dict(GOOD, a=tensor("F32", [-2, 3], 0, 24))
    path = build(tmp_path / "m.safetensors", bad, 37)
    done = subprocess.run([sys.executable, "-m", "cockpit.runs.checkpoints.reload_worker",
                           str(path), "--kind", "inference"],
                          capture_output=True, text=True, timeout=60)
    report = json.loads(done.stdout.splitlines()[-1])
    assert not report["ok"] and "shape [-2, 3]" in report["error"]


BAD = {
    "negative shape": (dict(GOOD, a=tensor("F32", [-2, -3], 0, 24)), 37,
                       "tensor 'a' has shape [-2, -3]"),
    "fractional shape": (dict(GOOD, a=tensor("F32", [1.5, 4], 0, 24)), 37,
                         "tensor 'a' has shape [1.5, 4]"),
    "boolean shape": (dict(GOOD, d=tensor("U8", [True], 32, 37)), 37,
                      "tensor 'd' has shape [True]"),
    "unknown dtype": (dict(GOOD, b=tensor("F128", [4], 24, 32)), 37,
                      "tensor 'b' has an unknown dtype 'F128'"),
    "overlapping offsets": (dict(GOOD, b=tensor("BF16", [4], 20, 28),
                                 d=tensor("U8", [9], 28, 37)), 37,
                            "tensor 'b' at bytes 20-28 overlaps the one before it"),
    "inverted offsets": (dict(GOOD, b=tensor("BF16", [4], 32, 24)), 37,
                         "tensor 'b' has inverted data_offsets [32, 24]"),
    "a gap between tensors": (dict(GOOD, d=tensor("U8", [4], 33, 37)), 37,
                              "leaves a gap of 1 bytes before it"),
    "offsets past the end of the file": (dict(GOOD, d=tensor("U8", [500], 32, 532)), 37,
                                         "truncated safetensors file"),
    "size not shape x dtype": (dict(GOOD, a=tensor("F32", [2, 3], 0, 20),
                                    b=tensor("BF16", [6], 20, 32)), 37,
                               "shape [2, 3] of F32 needs 24 bytes, its data_offsets [0, 20] "
                               "hold 20"),
    "negative offsets": (dict(GOOD, a=tensor("F32", [2, 3], -4, 20)), 37,
                         "data_offsets [-4, 20]"),
    "bytes no tensor covers": (GOOD, 45, "8 bytes after its last tensor"),
    "a header that is a list": ([1, 2], 0, "not a JSON object"),
    "a tensor that is not a mapping": (dict(GOOD, e="F32"), 37,
                                       "tensor 'e' is not described by a mapping"),
    "metadata that is not texts": (dict(GOOD, __metadata__={"epoch": 3}), 37,
                                   "__metadata__ must map texts to texts"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_bad_variant_fails_with_its_reason(tmp_path, case):
    header, data_bytes, words = BAD[case]
    path = build(tmp_path / "m.safetensors", header, data_bytes)  # type: ignore[arg-type]
    report = inspect_checkpoint(path, "inference")
    assert not report["ok"], case
    assert words in report["error"], report["error"]


def test_sharded_index_never_reaches_outside_its_folder(tmp_path):
    folder = tmp_path / "checkpoint-1"
    folder.mkdir()
    build(tmp_path / "outside.safetensors", GOOD, 37)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "../outside.safetensors"}}))
    report = inspect_checkpoint(folder, "inference")
    assert not report["ok"] and "names shards outside its folder" in report["error"]
