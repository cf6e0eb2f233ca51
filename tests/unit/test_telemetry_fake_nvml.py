"""The fake NVML cannot drift from the installed nvidia-ml-py (`pynvml`)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from cockpit.telemetry import load_pynvml
from cockpit.telemetry.simulated import nvml as fk
from cockpit.telemetry.simulated import pynvml_names as nv
from cockpit.telemetry.simulated.nvml import FakeGpu, FakeNvml

pynvml = load_pynvml()


def _kind(value: Any) -> str:
    if isinstance(value, type) and issubclass(value, BaseException):
        return "exception"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if callable(value):
        return "function"
    return type(value).__name__


def _public(mod: Any) -> dict[str, Any]:
    return {n: getattr(mod, n) for n in dir(mod) if not n.startswith("_")}


def test_every_public_name_of_the_fake_exists_in_pynvml_with_the_same_kind() -> None:
    fake_mod = FakeNvml(1).module()
    names = _public(fake_mod)
    assert len(names) > 100  # constants, 31 exception classes, the functions
    for name, value in names.items():
        assert hasattr(pynvml, name), f"{name} is not in pynvml"
        assert _kind(value) == _kind(getattr(pynvml, name)), name


def test_int_constants_have_pynvml_values() -> None:
    for name, value in nv.PUBLIC_NAMES.items():
        if isinstance(value, int):
            assert getattr(pynvml, name) == value, name


@pytest.mark.parametrize("name", fk.FUNCTION_NAMES)
def test_functions_take_pynvml_parameters(name: str) -> None:
    ours = list(inspect.signature(getattr(FakeNvml(1), name)).parameters)
    theirs = list(inspect.signature(getattr(pynvml, name)).parameters)
    assert ours == theirs


def test_every_pynvml_error_code_has_the_same_class_in_the_fake() -> None:
    codes = {getattr(pynvml, n) for n in dir(pynvml) if n.startswith("NVML_ERROR_")}
    assert len(codes) >= 30
    for code in codes:
        real = pynvml.NVMLError(code)
        ours = nv.NVMLError(code)
        assert type(ours).__name__ == type(real).__name__
        assert ours.value == real.value == code
        assert isinstance(ours, nv.NVMLError)
        assert issubclass(getattr(pynvml, type(ours).__name__), pynvml.NVMLError)
        if code in pynvml.NVMLError._errcode_to_string:
            assert str(ours) == str(real)


def test_error_subclasses_construct_like_pynvml() -> None:
    lost = nv.NVMLError_GpuIsLost()
    assert lost.value == pynvml.NVMLError_GpuIsLost().value == 15
    assert isinstance(nv.NVMLError(3), nv.NVMLError_NotSupported)
    assert nv.NVMLError(3) == nv.NVMLError_NotSupported()
    with pytest.raises(nv.NVMLError_LibRmVersionMismatch):
        raise nv.NVMLError(nv.NVML_ERROR_LIB_RM_VERSION_MISMATCH)


def test_fake_refuses_calls_before_init_like_nvml() -> None:
    mod = FakeNvml(1).module()
    with pytest.raises(nv.NVMLError_Uninitialized):
        mod.nvmlDeviceGetCount()
    mod.nvmlInit()
    assert mod.nvmlDeviceGetCount() == 1


def test_fake_missing_functions_absent_or_raising() -> None:
    absent = FakeNvml(1, missing={"nvmlDeviceGetTemperatureV"}, missing_as="absent").module()
    assert not hasattr(absent, "nvmlDeviceGetTemperatureV")
    raising = FakeNvml(1, missing={"nvmlDeviceGetTemperatureV"}).module()
    raising.nvmlInit()
    h = raising.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(nv.NVMLError_FunctionNotFound):
        raising.nvmlDeviceGetTemperatureV(h, nv.NVML_TEMPERATURE_GPU)
    assert raising.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU) == 35


def test_fake_gpu_lost_after_k_utilization_reads() -> None:
    fake = FakeNvml([FakeGpu(lost_after=2)])
    mod = fake.module()
    mod.nvmlInit()
    h = mod.nvmlDeviceGetHandleByIndex(0)
    mod.nvmlDeviceGetUtilizationRates(h)
    mod.nvmlDeviceGetUtilizationRates(h)
    with pytest.raises(nv.NVMLError_GpuIsLost):
        mod.nvmlDeviceGetUtilizationRates(h)
    with pytest.raises(nv.NVMLError_GpuIsLost):
        mod.nvmlDeviceGetName(h)


def test_fake_event_wait_times_out_when_empty() -> None:
    mod = FakeNvml(1).module()
    mod.nvmlInit()
    es = mod.nvmlEventSetCreate()
    with pytest.raises(nv.NVMLError_Timeout):
        mod.nvmlEventSetWait(es, 0)
