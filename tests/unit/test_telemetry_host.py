"""HostSampler: psutil readings, disks per filesystem, low-disk warning."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from cockpit.telemetry import HostInfo, HostSampler, format_bytes, host_json
from tests.helpers.process import wait_for


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_host_reading_has_real_numbers() -> None:
    h = HostSampler().sample()
    assert h.cpu_count == psutil.cpu_count(logical=True)
    assert h.cpu_percent is None  # the first sample has no real interval behind it
    assert 0 < h.mem_used <= h.mem_total == psutil.virtual_memory().total
    assert 0 <= h.swap_used <= max(h.swap_total, 0) or h.swap_total == 0
    assert h.own_rss > 10 * 2**20  # a python with pytest loaded
    assert h.load1 is None or h.load1 >= 0
    assert h.disks == () and h.warnings == ()


def test_own_cpu_percent_sees_work() -> None:
    hs = HostSampler()
    deadline = psutil.Process().cpu_times().user + 0.2
    not_before = time.monotonic() + 0.6  # past the sampler's baseline interval
    while psutil.Process().cpu_times().user < deadline or time.monotonic() < not_before:
        sum(i * i for i in range(10_000))
    own = hs.sample().own_cpu_percent
    assert own is not None and own > 10.0


def test_no_cpu_figure_until_the_baseline_is_real() -> None:
    """A sample taken right after start is noise (1133 % was shown): none until 0.5 s."""
    hs = HostSampler()
    first = hs.sample()
    assert first.cpu_percent is None and first.own_cpu_percent is None
    seen = []

    def figure() -> HostInfo | None:
        seen.append(hs.sample())
        return seen[-1] if seen[-1].cpu_percent is not None else None
    later = wait_for(figure, what="a CPU figure once the baseline is real")
    # Until then, neither figure: never the noise of a baseline a few ms old.
    assert all(s.cpu_percent is None and s.own_cpu_percent is None for s in seen[:-1])
    assert later.cpu_percent is not None and 0.0 <= later.cpu_percent <= 100.0
    assert later.own_cpu_percent is not None and later.own_cpu_percent < 400.0


def test_paths_on_one_filesystem_are_reported_once(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    hs = HostSampler([tmp_path, tmp_path / "ckpt", tmp_path / "not" / "yet"], disk_warn_bytes=0)
    h = hs.sample()
    assert [d.path for d in h.disks] == [str(tmp_path)]
    usage = psutil.disk_usage(str(tmp_path))
    assert h.disks[0].total == usage.total
    assert abs(h.disks[0].free - usage.free) < 64 * 2**20
    assert not h.disks[0].low and h.warnings == ()


def test_paths_on_different_filesystems_are_each_reported(tmp_path: Path) -> None:
    if os.stat("/proc").st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second filesystem here")
    h = HostSampler([tmp_path, Path("/proc")], disk_warn_bytes=0).sample()
    assert [d.path for d in h.disks] == [str(tmp_path), "/proc"]


def test_low_disk_warning_under_threshold(tmp_path: Path) -> None:
    free = psutil.disk_usage(str(tmp_path)).free
    h = HostSampler([tmp_path], disk_warn_bytes=free + 2**40).sample()
    assert h.disks[0].low
    assert len(h.warnings) == 1 and h.warnings[0].startswith(f"low disk: {tmp_path} has ")
    assert "free (warning under" in h.warnings[0]
    assert host_json(h)["disks"][0]["low"] is True


def test_disks_refreshed_every_interval_not_every_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = psutil.disk_usage

    def counting(path: str) -> object:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(psutil, "disk_usage", counting)
    clock = Clock()
    hs = HostSampler([tmp_path], clock=clock, disk_interval_s=5.0)
    for _ in range(5):
        hs.sample()
        clock.t += 1
    assert len(calls) == 1
    hs.sample()
    assert len(calls) == 2


def test_host_json_is_plain() -> None:
    d = host_json(HostSampler().sample())
    assert set(d) >= {
        "cpu_percent",
        "cpu_count",
        "load1",
        "mem_used",
        "mem_total",
        "swap_used",
        "swap_total",
        "disks",
        "own_cpu_percent",
        "own_rss",
        "warnings",
    }
    assert isinstance(d["disks"], list) and isinstance(d["warnings"], list)


def test_format_bytes() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(3.5 * 2**30) == "3.5 GiB"
    assert format_bytes(10 * 2**40) == "10.0 TiB"
