"""The house's one atomic write (cockpit.common.fsutil.write_atomic): whole or not at
all, never through a planted link, no temporary file left behind either way."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from cockpit.common.fsutil import write_atomic


def _litter(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_file_is_replaced_whole_and_its_folder_made(tmp_path: Path) -> None:
    target = tmp_path / "new" / "status.json"
    write_atomic(target, "first")
    write_atomic(target, b"second \xe2\x9c\x93", durable=True)
    assert target.read_bytes() == b"second \xe2\x9c\x93"
    assert _litter(target.parent) == []


def test_a_planted_link_is_refused_and_what_it_names_is_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    link = tmp_path / "cockpit.prom"
    link.symlink_to(victim)
    with pytest.raises(OSError) as caught:
        write_atomic(link, "metrics")
    assert caught.value.errno == errno.ELOOP
    assert victim.read_text() == "keep me" and link.is_symlink()
    assert _litter(tmp_path) == []


def test_a_failed_rename_leaves_the_old_target_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "cache"
    target.mkdir()  # a folder where the file should go: the rename fails
    (target / "inside").write_text("x")
    with pytest.raises(OSError):
        write_atomic(target, "data")
    assert (target / "inside").read_text() == "x"
    assert _litter(tmp_path) == []


def test_two_writers_never_share_a_temporary_file(tmp_path: Path) -> None:
    """Each process writes its own temporary file (named by its pid): a second writer's
    temporary file left mid-write is never taken over or renamed by the first."""
    target = tmp_path / "state.json"
    other = tmp_path / f".state.json.{os.getpid() + 1}.tmp"
    other.write_text("another process's half-written")
    write_atomic(target, "mine")
    assert target.read_text() == "mine"
    assert other.read_text() == "another process's half-written"
