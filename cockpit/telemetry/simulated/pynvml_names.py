"""pynvml's names as nvidia-ml-py spells them: integer constants and exception classes.

This module owns the part of the fake NVML that must match the real module name for
name: the ``NVML_*`` / ``nvml*`` constants, ``NVMLError`` and its per-code subclasses
(built the way nvidia-ml-py builds them: ``NVMLError(15)`` is an ``NVMLError_GpuIsLost``
with ``.value == 15``), and ``PUBLIC_NAMES``, which a test checks against the installed
pynvml. The scripted library that raises them is :mod:`cockpit.telemetry.simulated.nvml`.
"""

from __future__ import annotations

from typing import Any

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_FREQ_NOT_SUPPORTED = 24
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_DEPRECATED = 26
NVML_ERROR_NOT_READY = 27
NVML_ERROR_GPU_NOT_FOUND = 28
NVML_ERROR_INVALID_STATE = 29
NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30
NVML_ERROR_UNKNOWN = 999
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1
nvmlMemory_v2 = 0x02000028
nvmlTemperature_v1 = 0x100000C
nvmlEventTypeNone = 0x0
nvmlEventTypeSingleBitEccError = 0x1
nvmlEventTypeDoubleBitEccError = 0x2
nvmlEventTypePState = 0x4
nvmlEventTypeXidCriticalError = 0x8
nvmlEventTypeClock = 0x10
nvmlClocksEventReasonNone = 0x0
nvmlClocksEventReasonGpuIdle = 0x1
nvmlClocksEventReasonApplicationsClocksSetting = 0x2
nvmlClocksEventReasonSwPowerCap = 0x4
nvmlClocksEventReasonHwSlowdown = 0x8
nvmlClocksEventReasonSyncBoost = 0x10
nvmlClocksEventReasonSwThermalSlowdown = 0x20
nvmlClocksEventReasonHwThermalSlowdown = 0x40
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80
nvmlClocksEventReasonDisplayClockSetting = 0x100
nvmlClocksThrottleReasonNone = 0x0
nvmlClocksThrottleReasonGpuIdle = 0x1
nvmlClocksThrottleReasonApplicationsClocksSetting = 0x2
nvmlClocksThrottleReasonSwPowerCap = 0x4
nvmlClocksThrottleReasonHwSlowdown = 0x8
nvmlClocksThrottleReasonSyncBoost = 0x10
nvmlClocksThrottleReasonSwThermalSlowdown = 0x20
nvmlClocksThrottleReasonHwThermalSlowdown = 0x40
nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80
nvmlClocksThrottleReasonDisplayClockSetting = 0x100
nvmlClocksThrottleReasonBoardLimit = 0x200
nvmlClocksThrottleReasonReliability = 0x400


class NVMLLibraryMismatchError(Exception):
    """Raised by pynvml's unversioned wrappers when the library lacks the symbol."""


class NVMLError(Exception):
    """Base NVML error; `NVMLError(code)` returns the subclass for that code."""

    _code: int = NVML_ERROR_UNKNOWN
    _valClassMapping: dict[int, type[NVMLError]] = {}
    value: int

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        NVMLError._valClassMapping[cls._code] = cls

    def __new__(cls, *args: Any) -> NVMLError:
        if cls is NVMLError:
            value = int(args[0]) if args else NVML_ERROR_UNKNOWN
            cls = NVMLError._valClassMapping.get(value, NVMLError)
        else:
            value = cls._code
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __init__(self, *args: Any) -> None:
        super().__init__(self.value)

    def __str__(self) -> str:
        return ERROR_STRINGS.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NVMLError) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


class NVMLError_Uninitialized(NVMLError):
    _code = NVML_ERROR_UNINITIALIZED


class NVMLError_InvalidArgument(NVMLError):
    _code = NVML_ERROR_INVALID_ARGUMENT


class NVMLError_NotSupported(NVMLError):
    _code = NVML_ERROR_NOT_SUPPORTED


class NVMLError_NoPermission(NVMLError):
    _code = NVML_ERROR_NO_PERMISSION


class NVMLError_AlreadyInitialized(NVMLError):
    _code = NVML_ERROR_ALREADY_INITIALIZED


class NVMLError_NotFound(NVMLError):
    _code = NVML_ERROR_NOT_FOUND


class NVMLError_InsufficientSize(NVMLError):
    _code = NVML_ERROR_INSUFFICIENT_SIZE


class NVMLError_InsufficientPower(NVMLError):
    _code = NVML_ERROR_INSUFFICIENT_POWER


class NVMLError_DriverNotLoaded(NVMLError):
    _code = NVML_ERROR_DRIVER_NOT_LOADED


class NVMLError_Timeout(NVMLError):
    _code = NVML_ERROR_TIMEOUT


class NVMLError_IrqIssue(NVMLError):
    _code = NVML_ERROR_IRQ_ISSUE


class NVMLError_LibraryNotFound(NVMLError):
    _code = NVML_ERROR_LIBRARY_NOT_FOUND


class NVMLError_FunctionNotFound(NVMLError):
    _code = NVML_ERROR_FUNCTION_NOT_FOUND


class NVMLError_CorruptedInforom(NVMLError):
    _code = NVML_ERROR_CORRUPTED_INFOROM


class NVMLError_GpuIsLost(NVMLError):
    _code = NVML_ERROR_GPU_IS_LOST


class NVMLError_ResetRequired(NVMLError):
    _code = NVML_ERROR_RESET_REQUIRED


class NVMLError_OperatingSystem(NVMLError):
    _code = NVML_ERROR_OPERATING_SYSTEM


class NVMLError_LibRmVersionMismatch(NVMLError):
    _code = NVML_ERROR_LIB_RM_VERSION_MISMATCH


class NVMLError_InUse(NVMLError):
    _code = NVML_ERROR_IN_USE


class NVMLError_Memory(NVMLError):
    _code = NVML_ERROR_MEMORY


class NVMLError_NoData(NVMLError):
    _code = NVML_ERROR_NO_DATA


class NVMLError_VgpuEccNotSupported(NVMLError):
    _code = NVML_ERROR_VGPU_ECC_NOT_SUPPORTED


class NVMLError_InsufficientResources(NVMLError):
    _code = NVML_ERROR_INSUFFICIENT_RESOURCES


class NVMLError_FreqNotSupported(NVMLError):
    _code = NVML_ERROR_FREQ_NOT_SUPPORTED


class NVMLError_ArgumentVersionMismatch(NVMLError):
    _code = NVML_ERROR_ARGUMENT_VERSION_MISMATCH


class NVMLError_Deprecated(NVMLError):
    _code = NVML_ERROR_DEPRECATED


class NVMLError_NotReady(NVMLError):
    _code = NVML_ERROR_NOT_READY


class NVMLError_GpuNotFound(NVMLError):
    _code = NVML_ERROR_GPU_NOT_FOUND


class NVMLError_InvalidState(NVMLError):
    _code = NVML_ERROR_INVALID_STATE


class NVMLError_ResetTypeNotSupported(NVMLError):
    _code = NVML_ERROR_RESET_TYPE_NOT_SUPPORTED


class NVMLError_Unknown(NVMLError):
    _code = NVML_ERROR_UNKNOWN


def _public_names() -> dict[str, Any]:
    names: dict[str, Any] = {}
    for name, value in globals().items():
        if name.startswith(("NVML", "nvml")) and (
            isinstance(value, int) or (isinstance(value, type) and issubclass(value, Exception))
        ):
            names[name] = value
    return names


PUBLIC_NAMES: dict[str, Any] = _public_names()


ERROR_STRINGS: dict[int, str] = {
    1: "Uninitialized",
    2: "Invalid Argument",
    3: "Not Supported",
    4: "Insufficient Permissions",
    5: "Already Initialized",
    6: "Not Found",
    7: "Insufficient Size",
    8: "Insufficient External Power",
    9: "Driver Not Loaded",
    10: "Timeout",
    11: "Interrupt Request Issue",
    12: "NVML Shared Library Not Found",
    13: "Function Not Found",
    14: "Corrupted infoROM",
    15: "GPU is lost",
    16: "GPU requires restart",
    17: "The operating system has blocked the request.",
    18: "RM has detected an NVML/RM version mismatch.",
    20: "Insufficient Memory",
    999: "Unknown Error",
}
