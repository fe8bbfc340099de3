"""`gpu`: GPU state and health per device, via NVML or nvidia-smi, and the driver's Xid events.

State: utilisation, memory, processes. Health: temperature, clocks and the reasons they are
lowered, power, ECC counters, retired pages, remapped rows, the PCIe link. The readers live
in gpu_nvml.py and gpu_smi.py, the shared health logic in gpu_health.py, Xid in gpu_xid.py.
"""

from __future__ import annotations

import threading
from typing import Any

from runbook.checks.base import CheckContext
from runbook.checks.gpu import gpu_health, gpu_xid
from runbook.checks.gpu.gpu_nvml import read_nvml
from runbook.checks.gpu.gpu_smi import (  # noqa: F401  (re-exported: the parsers are this check's API)
    APPS_QUERY,
    FULL_QUERY,
    GPU_QUERY,
    REMAP_QUERY,
    SMI,
    attach_processes,
    parse_apps_csv,
    parse_gpu_csv,
    parse_remap_csv,
    read_smi,
)

NAME = "gpu"
SUMMARY = {
    "en": "GPU state and health per device (utilisation, memory, temperature, clocks and throttling, "
          "ECC, remapped rows, PCIe link, processes) and the driver's Xid events",
    "zh": "每块 GPU 的状态与健康：利用率、显存、温度、时钟与降频原因、ECC、行重映射、PCIe 链路、"
          "计算进程，以及驱动的 Xid 事件",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "source": {
            "type": "string",
            "enum": ["auto", "nvml", "nvidia-smi"],
            "default": "auto",
            "description": "auto: NVML (pynvml) when importable, else nvidia-smi",
        },
        "xid": {"type": "boolean", "default": True,
                "description": "Read the driver's Xid events from the kernel log (dmesg, journalctl -k)"},
    },
    "additionalProperties": False,
}
_GPU_FIELDS = (
    "index, name, uuid, pci_bus_id, utilization_percent, memory_used_mib, memory_total_mib, "
    "temperature_c, power_w, power_limit_w, clocks: {sm_mhz, mem_mhz, max_sm_mhz}, "
    "throttle_reasons: [names], ecc: {volatile_uncorrected, volatile_corrected, aggregate_uncorrected, "
    "aggregate_corrected}, retired_pages: {single_bit, double_bit, pending}, remapped_rows: "
    "{correctable, uncorrectable, pending, failure}, pcie: {gen, max_gen, width, max_width, degraded}, "
    "mig_enabled, processes: [{pid, used_mib}]"
)
_REASONS = ", ".join(name for _, name, _ in gpu_health.THROTTLE_BITS)
RESULT_FIELDS = {
    "available": {"type": "boolean", "en": "GPU state could be read (NVML or nvidia-smi works)",
                  "zh": "能读取 GPU 状态（NVML 或 nvidia-smi 可用）"},
    "reason": {"type": "string", "en": "Why GPU state is missing or incomplete (null when fine)",
               "zh": "GPU 状态缺失或不完整的原因（正常时为 null）"},
    "source": {"type": "string",
               "en": "Where the data came from: nvml or nvidia-smi (null if none)",
               "zh": "数据来源：nvml 或 nvidia-smi（都不可用时为 null）"},
    "nvml_error": {"type": "string",
                   "en": "Why NVML was not used when auto fell back to nvidia-smi (or null)",
                   "zh": "auto 模式下未使用 NVML、改用 nvidia-smi 的原因（或 null）"},
    "driver_version": {"type": "string", "en": "NVIDIA driver version", "zh": "NVIDIA 驱动版本"},
    "count": {"type": "integer", "en": "Number of GPUs seen", "zh": "看到的 GPU 数量"},
    "gpus": {"type": "array",
             "en": f"One entry per GPU: {{{_GPU_FIELDS}}} (null = not reported). throttle_reasons "
                   f"come from: {_REASONS}. pcie.degraded: narrower than its maximum, or a lower "
                   "generation while busy (an idle GPU lowers its generation to save power)",
             "zh": f"每块 GPU 一项：{{{_GPU_FIELDS}}}（null 表示无法读取）。throttle_reasons 取值："
                   f"{_REASONS}。pcie.degraded：链路宽度低于最大值，或 GPU 忙碌时代数低于最大值"
                   "（空闲 GPU 会为省电降低链路代数）"},
    "max_util": {"type": "integer", "en": "Highest GPU utilisation percent (0 when no GPU)",
                 "zh": "最高的 GPU 利用率百分比（没有 GPU 时为 0）"},
    "mean_util": {"type": "number", "en": "Mean GPU utilisation percent (0 when no GPU)",
                  "zh": "GPU 平均利用率百分比（没有 GPU 时为 0）"},
    "memory_used_mib": {"type": "integer", "en": "GPU memory in use, summed over GPUs (MiB)",
                        "zh": "所有 GPU 已用显存之和（MiB）"},
    "max_temperature_c": {"type": "integer", "en": "Hottest GPU temperature, °C (null when unknown)",
                          "zh": "最高的 GPU 温度，摄氏度（无法读取时为 null）"},
    "throttled": {"type": "array",
                  "en": "Indexes of GPUs slowed by hardware: hw_slowdown, sw/hw thermal slowdown or "
                        "hw_power_brake (a power cap under full load is not counted)",
                  "zh": "因硬件原因降频的 GPU 序号：hw_slowdown、软件/硬件过热降频或 hw_power_brake"
                        "（满载时的功耗上限不计入）"},
    "ecc_uncorrected_total": {"type": "integer",
                              "en": "Uncorrected ECC errors since the driver loaded, summed over GPUs",
                              "zh": "驱动加载以来所有 GPU 的不可纠正 ECC 错误之和"},
    "remap_pending": {"type": "boolean",
                      "en": "Some GPU has a row remapping (or page retirement) pending: it needs a "
                            "GPU reset or reboot",
                      "zh": "有 GPU 存在待处理的行重映射（或页退役）：需要重置 GPU 或重启节点"},
    "remap_failed": {"type": "boolean",
                     "en": "Some GPU failed to remap a row: its memory is faulty, replace it",
                     "zh": "有 GPU 行重映射失败：显存有故障，需要更换"},
    "pcie_degraded": {"type": "array", "en": "Indexes of GPUs whose PCIe link is degraded",
                      "zh": "PCIe 链路降级的 GPU 序号"},
    "xid_readable": {"type": "boolean",
                     "en": "The kernel log could be read for Xid events (dmesg or journalctl -k)",
                     "zh": "能读取内核日志以查找 Xid 事件（dmesg 或 journalctl -k）"},
    "xid_reason": {"type": "string", "en": "Why the kernel log could not be read (null when read)",
                   "zh": "无法读取内核日志的原因（读取成功时为 null）"},
    "xid_source": {"type": "string", "en": "Where Xid events were read: dmesg or journalctl",
                   "zh": "Xid 事件的读取来源：dmesg 或 journalctl"},
    "xid_count": {"type": "integer", "en": "Xid events since boot", "zh": "开机以来的 Xid 事件数"},
    "xid_codes": {"type": "array", "en": "Distinct Xid codes since boot, sorted (e.g. 79 = fell off "
                                         "the bus, 48 = double-bit ECC)",
                  "zh": "开机以来出现的不同 Xid 代码，已排序（如 79 = GPU 掉卡，48 = 双比特 ECC 错误）"},
    "xid_events": {"type": "array",
                   "en": f"The last {gpu_xid.EVENTS_MAX} Xid events: {{code, pci, gpu_index, message, "
                         "time}} (time in ISO 8601)",
                   "zh": f"最近 {gpu_xid.EVENTS_MAX} 个 Xid 事件：{{code, pci, gpu_index, message, time}}"
                         "（time 为 ISO 8601 时间）"},
}
DEFAULT_TIMEOUT = 10.0

_XID_SHARE = 0.25  # of the time left, at most _XID_MAX_S, for reading the kernel log
_XID_MAX_S = 2.0


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    # The kernel log first: a dead driver may hang the GPU queries, and Xid explains why.
    if params.get("xid", True) is False:
        xid = gpu_xid.empty("not asked (xid: false)")
    else:
        xid = gpu_xid.read_xid(ctx, min(_XID_MAX_S, ctx.remaining() * _XID_SHARE))
    result = _gpu_state(params, ctx)
    gpu_xid.attach_gpu_indexes(xid["xid_events"], result["gpus"])
    result.update(xid)
    return result


def _gpu_state(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    source = params.get("source") or "auto"
    nvml_error = None
    if source in ("auto", "nvml"):
        pynvml, nvml_error = _import_pynvml()
        if pynvml is not None:
            result, nvml_error = _via_nvml(pynvml, ctx)
            if result is not None:
                return result
        if source == "nvml":
            return _result(False, f"NVML unavailable: {nvml_error}", None)
    return _via_smi(ctx, nvml_error)


def _result(
    available: bool, reason: str | None, source: str | None,
    gpus: list[dict[str, Any]] | None = None, driver: str | None = None,
    timed_out: bool = False, nvml_error: str | None = None,
) -> dict[str, Any]:
    gpus = gpus or []
    utils = [g["utilization_percent"] for g in gpus if g["utilization_percent"] is not None]
    used = [g["memory_used_mib"] for g in gpus if g["memory_used_mib"] is not None]
    return {
        "available": available,
        "reason": reason,
        "source": source,
        "timed_out": timed_out,
        "nvml_error": nvml_error,
        "driver_version": driver,
        "count": len(gpus),
        "gpus": gpus,
        "max_util": max(utils) if utils else 0,
        "mean_util": round(sum(utils) / len(utils), 1) if utils else 0.0,
        "memory_used_mib": sum(used),
        **gpu_health.summarize(gpus),
    }


# -- NVML ---------------------------------------------------------------------------------------


def _import_pynvml() -> tuple[Any, str | None]:
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]  # nvidia-ml-py, optional
    except Exception as exc:  # ImportError, or a broken install failing to load
        return None, f"pynvml not importable ({type(exc).__name__}: {exc})"
    return pynvml, None


def _via_nvml(pynvml: Any, ctx: CheckContext) -> tuple[dict[str, Any] | None, str | None]:
    """(result, None) when NVML answered or hung; (None, error) when auto should fall back."""
    limit = ctx.remaining()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["data"] = read_nvml(pynvml)
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            box["error"] = f"{type(exc).__name__}: {exc}"

    # NVML calls block in C and cannot be interrupted: a daemon thread lets the probe move on.
    worker = threading.Thread(target=work, name="runbook-nvml", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        reason = f"NVML did not answer within {limit:.1f}s (the driver or a GPU may be hung)"
        return _result(True, reason, "nvml", timed_out=True), None
    if "data" not in box:
        return None, box.get("error", "NVML query failed")
    data = box["data"]
    return _result(True, None, "nvml", data["gpus"], data["driver_version"]), None


# -- nvidia-smi ---------------------------------------------------------------------------------


def _via_smi(ctx: CheckContext, nvml_error: str | None) -> dict[str, Any]:
    answer = read_smi(ctx)
    if answer.not_found:
        return _result(False, _no_driver(nvml_error), None, nvml_error=nvml_error)
    return _result(answer.available, answer.reason, SMI, answer.gpus, answer.driver,
                   timed_out=answer.timed_out, nvml_error=nvml_error)


def _no_driver(nvml_error: str | None) -> str:
    if nvml_error is None:  # source: nvidia-smi, NVML not tried
        return "no NVIDIA driver: nvidia-smi not on PATH"
    if nvml_error.startswith("pynvml not importable"):
        return "no NVIDIA driver: pynvml not importable and nvidia-smi not on PATH"
    return f"no NVIDIA driver: NVML failed ({nvml_error}) and nvidia-smi not on PATH"
