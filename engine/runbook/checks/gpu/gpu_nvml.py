"""The `gpu` check's NVML reader: one dict per GPU from an nvidia-ml-py (`pynvml`) binding.

The binding is passed in (imported by `gpu.run`, inside a thread with a deadline), so this
module imports only the standard library. Every query that a GPU or driver does not
support (NVMLError_NotSupported, a function an older binding lacks) reads as None.
"""

from __future__ import annotations

from typing import Any

from runbook.checks.gpu import gpu_health

_MIB = 1024 * 1024


def read_nvml(pynvml: Any) -> dict[str, Any]:
    """{driver_version, gpus} from an NVML binding (raises when nvmlInit fails)."""
    pynvml.nvmlInit()
    try:
        driver = _text(_call(pynvml.nvmlSystemGetDriverVersion))
        count = int(pynvml.nvmlDeviceGetCount())
        gpus = [nvml_gpu(pynvml, index) for index in range(count)]
    finally:
        _call(pynvml.nvmlShutdown)
    return {"driver_version": driver, "gpus": gpus}


def nvml_gpu(pynvml: Any, index: int) -> dict[str, Any]:
    handle = _call(pynvml.nvmlDeviceGetHandleByIndex, index)
    util = _call(pynvml.nvmlDeviceGetUtilizationRates, handle)
    memory = _memory(pynvml, handle)
    temperature = _call(pynvml.nvmlDeviceGetTemperature, handle,
                        _const(pynvml, "NVML_TEMPERATURE_GPU", 0))
    procs = _call(pynvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
    gpu: dict[str, Any] = {
        "index": index,
        "name": _text(_call(pynvml.nvmlDeviceGetName, handle)),
        "uuid": _text(_call(pynvml.nvmlDeviceGetUUID, handle)),
        "utilization_percent": _int_attr(util, "gpu"),
        "memory_used_mib": _mib(getattr(memory, "used", None)),
        "memory_total_mib": _mib(getattr(memory, "total", None)),
        "temperature_c": _int(temperature),
        "power_w": _watts(_call(pynvml.nvmlDeviceGetPowerUsage, handle)),
        "processes": [
            {"pid": _int_attr(p, "pid"), "used_mib": _mib(getattr(p, "usedGpuMemory", None))}
            for p in procs
        ],
    }
    gpu.update(_health(pynvml, handle, gpu["utilization_percent"]))
    return gpu


def _memory(pynvml: Any, handle: Any) -> Any:
    """Memory as nvidia-smi counts it. NVML's v2 answer keeps the driver's reserved memory out of
    `used`; the v1 answer counts it as used (480 MiB on an idle H100, seen on real hardware)."""
    v2 = getattr(pynvml, "nvmlMemory_v2", None)
    memory = _call(pynvml.nvmlDeviceGetMemoryInfo, handle, v2) if isinstance(v2, int) else None
    return memory if memory is not None else _call(pynvml.nvmlDeviceGetMemoryInfo, handle)


def _health(pynvml: Any, handle: Any, utilization: int | None) -> dict[str, Any]:
    reasons = gpu_health.throttle_names(_reasons(pynvml, handle), pynvml)
    health = gpu_health.empty_health()
    health.update({
        "pci_bus_id": _text(getattr(_call(_fn(pynvml, "nvmlDeviceGetPciInfo"), handle), "busId", None)),
        "power_limit_w": _watts(_first(pynvml, handle, "nvmlDeviceGetEnforcedPowerLimit",
                                       "nvmlDeviceGetPowerManagementLimit")),
        "clocks": _clocks(pynvml, handle),
        "throttle_reasons": reasons,
        "ecc": _ecc(pynvml, handle),
        "retired_pages": _retired_pages(pynvml, handle),
        "remapped_rows": _remapped_rows(pynvml, handle),
        "pcie": gpu_health.pcie(
            _int(_call(_fn(pynvml, "nvmlDeviceGetCurrPcieLinkGeneration"), handle)),
            _int(_call(_fn(pynvml, "nvmlDeviceGetMaxPcieLinkGeneration"), handle)),
            _int(_call(_fn(pynvml, "nvmlDeviceGetCurrPcieLinkWidth"), handle)),
            _int(_call(_fn(pynvml, "nvmlDeviceGetMaxPcieLinkWidth"), handle)),
            gpu_health.is_idle(utilization, reasons),
        ),
        "mig_enabled": _mig_enabled(pynvml, handle),
    })
    return health


def _reasons(pynvml: Any, handle: Any) -> int | None:
    """The clocks event reasons bitmask (the 'throttle' name before driver R535)."""
    return _int(_first(pynvml, handle, "nvmlDeviceGetCurrentClocksEventReasons",
                       "nvmlDeviceGetCurrentClocksThrottleReasons"))


def _clocks(pynvml: Any, handle: Any) -> dict[str, int | None]:
    sm = _const(pynvml, "NVML_CLOCK_SM", 1)
    mem = _const(pynvml, "NVML_CLOCK_MEM", 2)
    current = _fn(pynvml, "nvmlDeviceGetClockInfo")
    return {
        "sm_mhz": _int(_call(current, handle, sm)),
        "mem_mhz": _int(_call(current, handle, mem)),
        "max_sm_mhz": _int(_call(_fn(pynvml, "nvmlDeviceGetMaxClockInfo"), handle, sm)),
    }


def _ecc(pynvml: Any, handle: Any) -> dict[str, int | None]:
    total = _fn(pynvml, "nvmlDeviceGetTotalEccErrors")
    unc = _const(pynvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    cor = _const(pynvml, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    vol = _const(pynvml, "NVML_VOLATILE_ECC", 0)
    agg = _const(pynvml, "NVML_AGGREGATE_ECC", 1)
    return {
        "volatile_uncorrected": _int(_call(total, handle, unc, vol)),
        "volatile_corrected": _int(_call(total, handle, cor, vol)),
        "aggregate_uncorrected": _int(_call(total, handle, unc, agg)),
        "aggregate_corrected": _int(_call(total, handle, cor, agg)),
    }


def _retired_pages(pynvml: Any, handle: Any) -> dict[str, Any]:
    """Pre-Ampere page retirement (A100/H100 remap rows instead and answer NotSupported)."""
    pages = _fn(pynvml, "nvmlDeviceGetRetiredPages")
    sbe = _const(pynvml, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0)
    dbe = _const(pynvml, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
    pending = _call(_fn(pynvml, "nvmlDeviceGetRetiredPagesPendingStatus"), handle)
    return {
        "single_bit": _count(_call(pages, handle, sbe)),
        "double_bit": _count(_call(pages, handle, dbe)),
        "pending": None if pending is None else bool(pending),
    }


def _remapped_rows(pynvml: Any, handle: Any) -> dict[str, Any]:
    """Ampere and later: (corrRows, uncRows, isPending, failureOccurred)."""
    rows = _call(_fn(pynvml, "nvmlDeviceGetRemappedRows"), handle)
    if not isinstance(rows, (tuple, list)) or len(rows) < 4:
        return {"correctable": None, "uncorrectable": None, "pending": None, "failure": None}
    return {"correctable": _int(rows[0]), "uncorrectable": _int(rows[1]),
            "pending": bool(rows[2]), "failure": bool(rows[3])}


def _mig_enabled(pynvml: Any, handle: Any) -> bool | None:
    """MIG mode now ((current, pending) from NVML); None on a GPU without MIG."""
    modes = _call(_fn(pynvml, "nvmlDeviceGetMigMode"), handle)
    if not isinstance(modes, (tuple, list)) or not modes or _int(modes[0]) is None:
        return None
    return modes[0] == _const(pynvml, "NVML_DEVICE_MIG_ENABLE", 1)


def _fn(pynvml: Any, name: str) -> Any:
    return getattr(pynvml, name, None)


def _first(pynvml: Any, handle: Any, *names: str) -> Any:
    """The answer of the first of several equivalent NVML functions that answers."""
    for name in names:
        value = _call(_fn(pynvml, name), handle)
        if value is not None:
            return value
    return None


def _const(pynvml: Any, name: str, default: int) -> int:
    value = getattr(pynvml, name, default)
    return value if isinstance(value, int) else default


def _call(fn: Any, *args: Any) -> Any:
    """One NVML query; None when this GPU, driver or binding does not support it or it fails."""
    if fn is None or (args and args[0] is None):
        return None  # no such function, or no handle: every per-device query would fail anyway
    try:
        return fn(*args)
    except Exception:
        return None


def _count(pages: Any) -> int | None:
    """Number of retired pages (the binding returns a list, or a map object)."""
    if pages is None:
        return None
    try:
        return len(list(pages))
    except TypeError:
        return None


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):  # older pynvml returns bytes
        return value.decode("utf-8", "replace")
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int_attr(obj: Any, name: str) -> int | None:
    return _int(getattr(obj, name, None))


def _mib(value: Any) -> int | None:
    return value // _MIB if isinstance(value, int) and not isinstance(value, bool) else None


def _watts(milliwatts: Any) -> float | None:
    if isinstance(milliwatts, (int, float)) and not isinstance(milliwatts, bool):
        return round(milliwatts / 1000.0, 2)
    return None
