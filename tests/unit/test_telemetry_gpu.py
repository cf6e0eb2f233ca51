"""GpuSampler against the scripted fake NVML: values, cadence, every failure path."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import psutil
import pytest

from cockpit.telemetry import (
    GpuSampler,
    decode_throttle,
    gpu_json,
    reading_json,
    simulate_count_from_env,
)
from cockpit.telemetry.simulated import nvml as fk
from cockpit.telemetry.simulated import pynvml_names as nv
from cockpit.telemetry.simulated.nvml import FakeGpu, FakeNvml

GIB = 2**30
INVISIBLE_PID = 2**22 + 5  # above Linux's maximum pid_max: psutil cannot see it


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(fake: FakeNvml, clock: Clock | None = None, **kw: object) -> GpuSampler:
    sampler = GpuSampler(nvml=fake.module(), clock=clock or Clock(), **kw)  # type: ignore[arg-type]
    sampler.start()
    return sampler


def h100(**kw: object) -> FakeGpu:
    base: dict[str, object] = dict(
        util=87,
        mem_util=41,
        mem_used=30 * GIB,
        mem_total=80 * GIB,
        temp=64,
        power_mw=512_345,
        power_limit_mw=700_000,
        sm_clock=1755,
        mem_clock=2619,
        fan=55,
    )
    base.update(kw)
    return FakeGpu(**base)  # type: ignore[arg-type]


# --- happy paths ---------------------------------------------------------------


def test_one_gpu_reads_every_field_in_cockpit_units() -> None:
    fake = FakeNvml([h100(throttle=0x4, processes=[(os.getpid(), 2 * GIB)])], driver="555.42.06")
    r = make(fake).sample()
    assert r.status == "ok" and r.error is None and r.driver == "555.42.06"
    (g,) = r.gpus
    assert (g.index, g.name, g.uuid) == (0, "NVIDIA H100 80GB HBM3", fake.gpus[0].uuid)
    assert (g.util, g.mem_util) == (87.0, 41.0)
    assert (g.mem_used, g.mem_total) == (30 * GIB, 80 * GIB)
    assert g.power == pytest.approx(512.345) and g.power_limit == pytest.approx(700.0)
    assert (g.temp, g.fan, g.sm_clock, g.mem_clock) == (64.0, 55.0, 1755, 2619)
    assert g.throttle == ("power cap",)
    assert not g.lost and g.unsupported == ()
    assert r.events == () and r.warnings == ()


def test_eight_gpus_each_reported_with_its_own_values() -> None:
    fake = FakeNvml([h100(util=10 * i) for i in range(8)])
    r = make(fake).sample()
    assert [g.index for g in r.gpus] == list(range(8))
    assert [g.util for g in r.gpus] == [10.0 * i for i in range(8)]
    assert len({g.uuid for g in r.gpus}) == 8


def test_values_move_between_ticks() -> None:
    fake = FakeNvml([h100()])
    s = make(fake)
    assert s.sample().gpus[0].util == 87.0
    fake.gpus[0].util = 3
    fake.gpus[0].mem_used = 5 * GIB
    g = s.sample().gpus[0]
    assert (g.util, g.mem_used) == (3.0, 5 * GIB)


def test_init_once_shutdown_on_close_and_sample_starts_lazily() -> None:
    fake = FakeNvml([h100()])
    s = GpuSampler(nvml=fake.module(), clock=Clock())
    assert fake.calls["nvmlInit"] == 0  # constructing does not touch NVML
    s.sample()
    s.start()
    s.sample()
    assert fake.calls["nvmlInit"] == 1
    s.close()
    s.close()
    assert fake.calls["nvmlShutdown"] == 1 and fake.initialized == 0
    assert all(es.freed for es in fake.event_sets)
    after = s.sample()
    assert after.status == "unavailable" and "closed" in (after.error or "")


def test_context_manager_closes() -> None:
    fake = FakeNvml(1)
    with GpuSampler(nvml=fake.module(), clock=Clock()) as s:
        assert s.sample().status == "ok"
    assert fake.calls["nvmlShutdown"] == 1


def test_importing_telemetry_imports_neither_pynvml_nor_textual() -> None:
    code = (
        "import sys, cockpit.telemetry, cockpit.telemetry.simulated.nvml;"
        "bad=[m for m in sys.modules if m.split('.')[0] in ('pynvml','textual','rich')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


# --- cadence -------------------------------------------------------------------


def test_static_facts_read_once_fast_fields_every_tick_slow_fields_every_5s() -> None:
    fake = FakeNvml([h100()])
    clock = Clock()
    s = make(fake, clock)
    for _ in range(4):
        s.sample()
        clock.t += 1.0
    assert fake.calls["nvmlDeviceGetName"] == 1
    assert fake.calls["nvmlDeviceGetUUID"] == 1
    assert fake.calls["nvmlDeviceGetEnforcedPowerLimit"] == 1
    assert fake.calls["nvmlDeviceGetUtilizationRates"] == 4
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 4
    assert fake.calls["nvmlDeviceGetTemperatureV"] == 1
    assert fake.calls["nvmlDeviceGetFanSpeed"] == 1
    assert fake.calls["nvmlDeviceGetTotalEccErrors"] == 1
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0  # never per tick
    fake.gpus[0].temp = 80
    clock.t += 1.0  # 5 s after the first slow read
    assert s.sample().gpus[0].temp == 80.0
    assert fake.calls["nvmlDeviceGetTemperatureV"] == 2


def test_cached_temperature_is_reported_between_slow_reads() -> None:
    fake = FakeNvml([h100(temp=50)])
    clock = Clock()
    s = make(fake, clock)
    s.sample()
    fake.gpus[0].temp = 90
    clock.t += 2
    assert s.sample().gpus[0].temp == 50.0  # cached value, not None


# --- per-field degradation ---------------------------------------------------


def test_unsupported_fields_become_none_and_are_not_asked_again() -> None:
    gpu = h100(
        unsupported={
            "nvmlDeviceGetFanSpeed",
            "nvmlDeviceGetPowerUsage",
            "nvmlDeviceGetTotalEccErrors",
        }
    )
    fake = FakeNvml([gpu])
    clock = Clock()
    s = make(fake, clock)
    for _ in range(3):
        r = s.sample()
        clock.t += 10
    g = r.gpus[0]
    assert g.fan is None and g.power is None
    assert g.util == 87.0 and g.temp == 64.0  # the rest still reads
    assert set(g.unsupported) == {"fan", "power", "ecc"}
    assert fake.calls["nvmlDeviceGetFanSpeed"] == 1
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 1
    assert r.warnings == ()
    assert gpu_json(g)["fan"] is None


def test_transient_field_error_is_a_warning_not_unsupported() -> None:
    fake = FakeNvml([h100(errors={"nvmlDeviceGetPowerUsage": nv.NVML_ERROR_TIMEOUT})])
    s = make(fake)
    r = s.sample()
    assert r.gpus[0].power is None and "power" not in r.gpus[0].unsupported
    assert "GPU0 power: Timeout" in r.warnings
    del fake.gpus[0].errors["nvmlDeviceGetPowerUsage"]
    r2 = s.sample()
    assert r2.gpus[0].power == pytest.approx(512.345) and r2.warnings == ()


def test_no_permission_on_a_field_degrades_that_field() -> None:
    fake = FakeNvml(
        [h100(errors={"nvmlDeviceGetComputeRunningProcesses_v3": nv.NVML_ERROR_NO_PERMISSION})]
    )
    g = make(fake).sample().gpus[0]
    assert g.processes == () and "processes" in g.unsupported and g.util == 87.0


def test_unexpected_exception_in_one_gpu_keeps_the_others() -> None:
    fake = FakeNvml([h100(), h100()])
    mod = fake.module()
    real = mod.nvmlDeviceGetPowerUsage

    def flaky(handle: fk.FakeHandle) -> int:
        if handle.index == 1:
            raise RuntimeError("ctypes blew up")
        return real(handle)

    mod.nvmlDeviceGetPowerUsage = flaky
    s = GpuSampler(nvml=mod, clock=Clock())
    r = s.sample()
    assert r.gpus[0].power == pytest.approx(512.345)
    assert r.gpus[1].util is None and r.gpus[1].index == 1
    assert any("GPU1 read failed" in w and "ctypes blew up" in w for w in r.warnings)


# --- older drivers ----------------------------------------------------------------

NEW_FUNCTIONS = {
    "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetEnforcedPowerLimit",
}


@pytest.mark.parametrize("missing_as", ["raise", "absent"])
def test_older_driver_falls_back_and_records_each_missing_function_once(
    missing_as: fk.MissingAs,
) -> None:
    missing = NEW_FUNCTIONS | {"nvmlDeviceGetMemoryInfo_v2"}
    fake = FakeNvml(
        [h100(throttle=0x20, processes=[(INVISIBLE_PID, GIB)]), h100()],
        missing=missing,
        missing_as=missing_as,
    )
    if missing_as == "absent":
        assert not hasattr(fake.module(), "nvmlDeviceGetTemperatureV")
    clock = Clock()
    s = make(fake, clock)
    for _ in range(3):
        r = s.sample()
        clock.t += 6
    g = r.gpus[0]
    assert g.temp == 64.0 and g.throttle == ("sw thermal",) and g.power_limit == 700.0
    assert g.mem_used == 30 * GIB and g.processes[0].pid == INVISIBLE_PID
    assert g.unsupported == ()
    assert s.missing_functions == frozenset(missing)
    # tried once for the first GPU, then never again, on any GPU
    expected = 1 if missing_as == "raise" else 0
    for name in NEW_FUNCTIONS:
        assert fake.calls[name] == expected, name
    assert fake.calls["nvmlDeviceGetTemperature"] == 6  # 2 GPUs x 3 slow reads
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 6


def test_field_with_every_function_missing_is_unsupported() -> None:
    fake = FakeNvml([h100()], missing={"nvmlDeviceGetFanSpeed"}, missing_as="absent")
    g = make(fake).sample().gpus[0]
    assert g.fan is None and "fan" in g.unsupported


def test_library_mismatch_error_of_unversioned_wrapper_counts_as_missing() -> None:
    fake = FakeNvml(
        [h100(processes=[(INVISIBLE_PID, GIB)])],
        missing={
            "nvmlDeviceGetComputeRunningProcesses_v3",
            "nvmlDeviceGetComputeRunningProcesses_v2",
        },
    )
    mod = fake.module()

    def unversioned(handle: fk.FakeHandle) -> list[fk.FakeProcessInfo]:
        raise nv.NVMLLibraryMismatchError("use a versioned function")

    mod.nvmlDeviceGetComputeRunningProcesses = unversioned
    s = GpuSampler(nvml=mod, clock=Clock())
    g = s.sample().gpus[0]
    assert g.processes == () and "processes" in g.unsupported
    assert "nvmlDeviceGetComputeRunningProcesses" in s.missing_functions


# --- lost GPUs --------------------------------------------------------------------


@pytest.mark.parametrize("code", [nv.NVML_ERROR_GPU_IS_LOST, nv.NVML_ERROR_UNKNOWN])
def test_gpu_lost_mid_run_is_marked_once_and_others_keep_reporting(code: int) -> None:
    fake = FakeNvml([h100(util=50), h100(util=60, lost_after=3, lost_code=code)])
    clock = Clock()
    s = make(fake, clock)
    for _ in range(3):
        r = s.sample()
        clock.t += 1
        assert r.gpus[1].util == 60.0 and r.events == ()
    r = s.sample()
    g0, g1 = r.gpus
    assert g0.util == 50.0 and not g0.lost
    assert g1.lost and g1.util is None and g1.power is None and g1.temp is None
    assert (g1.name, g1.uuid) == ("NVIDIA H100 80GB HBM3", fake.gpus[1].uuid)  # kept
    assert [(e.kind, e.gpu, e.code) for e in r.events] == [("gpu_lost", 1, code)]
    assert any(w.startswith("GPU1") and "lost" in w for w in r.warnings)
    calls_before = sum(fake.calls.values())
    r2 = s.sample()
    assert r2.events == () and r2.gpus[1].lost and r2.gpus[0].util == 50.0
    assert any("GPU1" in w and "lost" in w for w in r2.warnings)  # still shown
    # the lost GPU is not asked again: only GPU0's per-tick reads (+ event poll)
    assert sum(fake.calls.values()) - calls_before <= 8


def test_gpu_lost_before_start_is_reported_with_an_event() -> None:
    fake = FakeNvml([h100(), h100(handle_error=nv.NVML_ERROR_GPU_IS_LOST)])
    r = make(fake).sample()
    assert r.gpus[1].lost and r.gpus[0].util == 87.0
    assert [e.kind for e in r.events] == ["gpu_lost"]


def test_gpu_outside_the_container_is_skipped_with_a_warning() -> None:
    fake = FakeNvml([h100(), h100(handle_error=nv.NVML_ERROR_NO_PERMISSION), h100()])
    r = make(fake).sample()
    assert [g.index for g in r.gpus] == [0, 2]
    assert "GPU1 not accessible: Insufficient Permissions" in r.warnings
    assert r.events == ()


# --- NVML not there ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (nv.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML library not found: install the NVIDIA driver"),
        (nv.NVML_ERROR_DRIVER_NOT_LOADED, "driver not loaded"),
        (
            nv.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
            "driver/library version mismatch: reboot or reload the nvidia kernel module",
        ),
        (nv.NVML_ERROR_NO_PERMISSION, "no permission"),
        (nv.NVML_ERROR_UNINITIALIZED, "NVML init failed (Uninitialized)"),
    ],
)
def test_init_failure_gives_unavailable_with_reason_and_fix(code: int, words: str) -> None:
    fake = FakeNvml([h100()], init_error=code)
    s = GpuSampler(nvml=fake.module(), clock=Clock())
    s.start()  # must not raise
    r = s.sample()
    assert r.status == "unavailable" and r.gpus == () and words in (r.error or "")
    assert "\n" not in (r.error or "")
    s.close()
    assert fake.calls["nvmlShutdown"] == 0  # never initialised, nothing to shut down


def test_init_raising_a_non_nvml_exception_is_unavailable() -> None:
    fake = FakeNvml([h100()], init_exception=OSError("libnvidia-ml.so.1: bad ELF"))
    r = make(fake).sample()
    assert r.status == "unavailable" and "OSError: libnvidia-ml.so.1: bad ELF" in (r.error or "")


def test_no_gpus_is_unavailable() -> None:
    r = make(FakeNvml([])).sample()
    assert r.status == "unavailable" and "no GPUs" in (r.error or "")


def _libnvml_loadable() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_libnvml_loadable(), reason="a real NVIDIA driver is present")
def test_real_pynvml_without_driver_reports_library_not_found() -> None:
    s = GpuSampler(clock=Clock())
    r = s.sample()
    assert r.status == "unavailable"
    assert r.error == "NVML library not found: install the NVIDIA driver (libnvidia-ml.so.1)"
    s.close()


# --- processes ---------------------------------------------------------------------


def test_processes_visible_and_invisible_are_both_kept() -> None:
    me = os.getpid()
    fake = FakeNvml([h100(processes=[(me, 3 * GIB), (INVISIBLE_PID, None)])])
    g = make(fake).sample().gpus[0]
    mine, hidden = g.processes
    assert mine.pid == me and mine.used_memory == 3 * GIB and mine.visible
    assert mine.user == psutil.Process(me).username()
    assert mine.command is not None and "python" in mine.command.lower()
    assert hidden.pid == INVISIBLE_PID and not hidden.visible
    assert (hidden.user, hidden.command, hidden.used_memory) == (None, None, None)
    assert gpu_json(g)["processes"][1] == {
        "pid": INVISIBLE_PID,
        "used_memory": None,
        "user": None,
        "command": None,
        "visible": False,
    }


def test_process_description_is_cached_while_the_pid_stays() -> None:
    asked: list[int] = []

    def describe(pid: int) -> tuple[str | None, str | None, bool]:
        asked.append(pid)
        return "alice", f"python train.py #{pid}", True

    fake = FakeNvml([h100(processes=[(101, GIB), (102, GIB)])])
    s = make(fake, describe=describe)
    s.sample()
    s.sample()
    assert sorted(asked) == [101, 102]
    fake.gpus[0].processes = [(102, GIB)]
    s.sample()
    fake.gpus[0].processes = [(101, GIB), (102, GIB)]  # 101 came back: maybe a new process
    g = s.sample().gpus[0]
    assert sorted(asked) == [101, 101, 102]
    assert g.processes[0].command == "python train.py #101"


# --- throttle, events, ECC ---------------------------------------------------------


def test_decode_throttle_words() -> None:
    assert decode_throttle(0) == ()
    assert decode_throttle(0x1 | 0x4 | 0x8 | 0x20 | 0x40) == (
        "idle",
        "power cap",
        "hw slowdown",
        "sw thermal",
        "hw thermal",
    )


def test_thermal_throttle_is_a_warning_power_cap_is_not() -> None:
    fake = FakeNvml([h100(throttle=0x4)])
    s = make(fake)
    assert s.sample().warnings == ()
    fake.gpus[0].throttle = 0x4 | 0x40
    assert s.sample().warnings == ("GPU0 clocks held down: hw thermal",)


def test_xid_event_is_reported_once_and_warned_for_a_while() -> None:
    fake = FakeNvml([h100(), h100()])
    clock = Clock()
    s = make(fake, clock, sticky_s=600)
    fake.queue_xid(1, 79)
    r = s.sample()
    assert [(e.kind, e.gpu, e.code) for e in r.events] == [("gpu_xid", 1, 79)]
    assert "fallen off the bus" in r.events[0].message
    assert any("Xid 79" in w for w in r.warnings)
    clock.t += 300
    r2 = s.sample()
    assert r2.events == () and any("Xid 79" in w for w in r2.warnings)
    clock.t += 301
    assert not any("Xid" in w for w in s.sample().warnings)


def test_several_events_in_one_tick_are_all_drained() -> None:
    fake = FakeNvml([h100()])
    s = make(fake)
    for xid in (13, 31, 43):
        fake.queue_xid(0, xid)
    assert [e.code for e in s.sample().events] == [13, 31, 43]
    assert s.sample().events == ()


def test_volatile_ecc_errors_make_an_event_per_increase() -> None:
    fake = FakeNvml([h100()])
    clock = Clock()
    s = make(fake, clock)
    assert s.sample().events == ()
    fake.gpus[0].ecc_uncorrected = 2
    clock.t += 5
    r = s.sample()
    assert [(e.kind, e.code) for e in r.events] == [("gpu_ecc", 2)]
    assert "GPU0: 2 volatile uncorrected ECC error(s)" in r.warnings
    clock.t += 5
    r = s.sample()
    assert r.events == () and "GPU0: 2 volatile uncorrected ECC error(s)" in r.warnings
    fake.gpus[0].ecc_uncorrected = 3
    clock.t += 5
    assert [e.code for e in s.sample().events] == [3]


def test_ecc_event_reads_the_counter_at_once() -> None:
    fake = FakeNvml([h100()])
    clock = Clock()
    s = make(fake, clock)
    s.sample()
    fake.gpus[0].ecc_uncorrected = 1
    fake.queue_ecc_event(0)
    clock.t += 1  # long before the 5 s slow read
    r = s.sample()
    assert [(e.kind, e.gpu, e.code) for e in r.events] == [("gpu_ecc", 0, 1)]


def test_gpu_without_event_support_still_samples() -> None:
    fake = FakeNvml([h100(event_types=0)])
    s = make(fake)
    fake.queue_xid(0, 79)
    r = s.sample()
    assert r.events == () and "events" in r.gpus[0].unsupported and r.gpus[0].util == 87.0


def test_events_only_for_registered_types() -> None:
    # consumer card: Xid events but no ECC
    fake = FakeNvml([h100(event_types=nv.nvmlEventTypeXidCriticalError)])
    make(fake)
    assert fake.event_sets[0].registered == {0: nv.nvmlEventTypeXidCriticalError}


# --- simulation ----------------------------------------------------------------------


def test_simulated_readings_are_labelled_plausible_and_moving() -> None:
    clock = Clock(0.0)
    s = GpuSampler(simulate=8, clock=clock)
    utils = []
    for _ in range(30):
        r = s.sample()
        utils.append(r.gpus[3].util)
        clock.t += 1
    assert r.status == "simulated" and r.simulated and r.error is None
    assert reading_json(r)["simulated"] is True
    assert len(r.gpus) == 8
    for g in r.gpus:
        assert g.util is not None and 0 <= g.util <= 100
        assert g.mem_total == 80 * GIB and g.mem_used is not None and 0 < g.mem_used < g.mem_total
        assert g.power is not None and 0 < g.power <= 700
        assert g.temp is not None and 20 < g.temp < 90
        assert g.fan is None and "fan" in g.unsupported
        (p,) = g.processes
        assert p.visible and p.command is not None and "simulated" in p.command
    assert len(set(utils)) > 5  # it moves


def test_simulation_is_deterministic_for_a_clock() -> None:
    def run() -> list[tuple[float | None, ...]]:
        clock = Clock(0.0)
        s = GpuSampler(simulate=2, clock=clock)
        out = []
        for _ in range(20):
            out.append(tuple(g.util for g in s.sample().gpus))
            clock.t += 1
        return out

    assert run() == run()


def test_simulate_and_nvml_are_exclusive() -> None:
    with pytest.raises(ValueError):
        GpuSampler(nvml=FakeNvml(1).module(), simulate=1)
    with pytest.raises(ValueError):
        GpuSampler(simulate=-1)


def test_simulate_count_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COCKPIT_SIMULATE_GPUS", raising=False)
    assert simulate_count_from_env(None) == 0
    monkeypatch.setenv("COCKPIT_SIMULATE_GPUS", "8")
    assert simulate_count_from_env(None) == 8
    assert simulate_count_from_env(2) == 2  # the flag wins
    assert simulate_count_from_env(0) == 0
    monkeypatch.setenv("COCKPIT_SIMULATE_GPUS", "eight")
    with pytest.raises(ValueError, match="COCKPIT_SIMULATE_GPUS"):
        simulate_count_from_env(None)
    monkeypatch.setenv("COCKPIT_SIMULATE_GPUS", "-1")
    with pytest.raises(ValueError):
        simulate_count_from_env(None)


# --- JSON ---------------------------------------------------------------------------


def test_gpu_json_has_the_agreed_keys_in_plain_units() -> None:
    fake = FakeNvml([h100(unsupported={"nvmlDeviceGetFanSpeed"})])
    d = gpu_json(make(fake).sample().gpus[0])
    assert {
        "index",
        "name",
        "uuid",
        "util",
        "mem_used",
        "mem_total",
        "temp",
        "power",
        "power_limit",
        "processes",
        "mem_util",
        "sm_clock",
        "mem_clock",
        "fan",
        "throttle",
        "lost",
    } <= set(d)
    assert d["mem_total"] == 80 * GIB and d["power_limit"] == 700.0 and d["fan"] is None
    assert d["throttle"] == [] and d["lost"] is False


def test_event_set_failure_leaves_sampling_working() -> None:
    fake = FakeNvml([h100()])
    mod = fake.module()

    def no_events() -> None:
        raise nv.NVMLError(nv.NVML_ERROR_NOT_SUPPORTED)

    mod.nvmlEventSetCreate = no_events
    s = GpuSampler(nvml=mod, clock=Clock())
    fake.queue_xid(0, 79)
    r = s.sample()
    assert r.status == "ok" and r.gpus[0].util == 87.0 and r.events == ()
    assert fake.calls["nvmlEventSetWait"] == 0


def test_broken_binding_during_setup_is_unavailable_not_a_crash() -> None:
    mod = FakeNvml([h100()]).module()

    def broken(index: int) -> None:
        raise TypeError("wrong ctypes argument")

    mod.nvmlDeviceGetHandleByIndex = broken
    s = GpuSampler(nvml=mod, clock=Clock())
    s.start()
    r = s.sample()
    assert r.status == "unavailable" and "NVML setup failed" in (r.error or "")
    assert "wrong ctypes argument" in (r.error or "")
