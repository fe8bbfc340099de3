"""`gpu`: GPU utilisation, memory, temperature, power and processes, via NVML or nvidia-smi."""

from __future__ import annotations

import threading
from typing import Any

from runbook.checks.base import CheckContext, CommandOutcome

NAME = "gpu"
SUMMARY = {
    "en": "GPU state per device: utilisation, memory, temperature, power, compute processes",
    "zh": "每块 GPU 的状态：利用率、显存、温度、功耗和计算进程",
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
    },
    "additionalProperties": False,
}
_GPU_FIELDS = (
    "index, name, uuid, utilization_percent, memory_used_mib, memory_total_mib, temperature_c, "
    "power_w, processes: [{pid, used_mib}]"
)
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
    "gpus": {"type": "array", "en": f"One entry per GPU: {{{_GPU_FIELDS}}} (null = not reported)",
             "zh": f"每块 GPU 一项：{{{_GPU_FIELDS}}}（null 表示无法读取）"},
    "max_util": {"type": "integer", "en": "Highest GPU utilisation percent (0 when no GPU)",
                 "zh": "最高的 GPU 利用率百分比（没有 GPU 时为 0）"},
    "mean_util": {"type": "number", "en": "Mean GPU utilisation percent (0 when no GPU)",
                  "zh": "GPU 平均利用率百分比（没有 GPU 时为 0）"},
    "memory_used_mib": {"type": "integer", "en": "GPU memory in use, summed over GPUs (MiB)",
                        "zh": "所有 GPU 已用显存之和（MiB）"},
}
DEFAULT_TIMEOUT = 10.0

SMI = "nvidia-smi"
GPU_QUERY = (
    "index,name,uuid,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,"
    "driver_version"
)
APPS_QUERY = "gpu_uuid,pid,used_memory"
_MIB = 1024 * 1024


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
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


def read_nvml(pynvml: Any) -> dict[str, Any]:
    """{driver_version, gpus} from an NVML binding (raises when nvmlInit fails)."""
    pynvml.nvmlInit()
    try:
        driver = _text(_call(pynvml.nvmlSystemGetDriverVersion))
        count = int(pynvml.nvmlDeviceGetCount())
        gpus = [_nvml_gpu(pynvml, index) for index in range(count)]
    finally:
        _call(pynvml.nvmlShutdown)
    return {"driver_version": driver, "gpus": gpus}


def _nvml_gpu(pynvml: Any, index: int) -> dict[str, Any]:
    handle = _call(pynvml.nvmlDeviceGetHandleByIndex, index)
    util = _call(pynvml.nvmlDeviceGetUtilizationRates, handle)
    memory = _call(pynvml.nvmlDeviceGetMemoryInfo, handle)
    temperature = _call(pynvml.nvmlDeviceGetTemperature, handle,
                        getattr(pynvml, "NVML_TEMPERATURE_GPU", 0))
    power_mw = _call(pynvml.nvmlDeviceGetPowerUsage, handle)
    procs = _call(pynvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
    return {
        "index": index,
        "name": _text(_call(pynvml.nvmlDeviceGetName, handle)),
        "uuid": _text(_call(pynvml.nvmlDeviceGetUUID, handle)),
        "utilization_percent": _int_attr(util, "gpu"),
        "memory_used_mib": _mib(getattr(memory, "used", None)),
        "memory_total_mib": _mib(getattr(memory, "total", None)),
        "temperature_c": temperature if isinstance(temperature, int) else None,
        "power_w": round(power_mw / 1000.0, 2) if isinstance(power_mw, (int, float)) else None,
        "processes": [
            {"pid": _int_attr(p, "pid"), "used_mib": _mib(getattr(p, "usedGpuMemory", None))}
            for p in procs
        ],
    }


def _call(fn: Any, *args: Any) -> Any:
    """One NVML query; None when this GPU or driver does not support it or it fails."""
    if args and args[0] is None:
        return None  # no handle: every per-device query would fail anyway
    try:
        return fn(*args)
    except Exception:
        return None


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):  # older pynvml returns bytes
        return value.decode("utf-8", "replace")
    return None if value is None else str(value)


def _int_attr(obj: Any, name: str) -> int | None:
    value = getattr(obj, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _mib(value: Any) -> int | None:
    return value // _MIB if isinstance(value, int) and not isinstance(value, bool) else None


# -- nvidia-smi ---------------------------------------------------------------------------------


def _via_smi(ctx: CheckContext, nvml_error: str | None) -> dict[str, Any]:
    outcome = _smi(ctx, [f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"])
    if outcome.not_found:
        return _result(False, _no_driver(nvml_error), None, nvml_error=nvml_error)
    if outcome.timed_out:
        return _result(True, _hung(outcome), SMI, timed_out=True, nvml_error=nvml_error)
    if outcome.returncode != 0:
        return _result(False, f"nvidia-smi failed: {_first_line(outcome)}", SMI,
                       nvml_error=nvml_error)
    gpus, driver = parse_gpu_csv(outcome.stdout)
    apps = _smi(ctx, [f"--query-compute-apps={APPS_QUERY}", "--format=csv,noheader,nounits"])
    reason = None
    if apps.timed_out:
        reason = _hung(apps)
    elif apps.returncode == 0:
        attach_processes(gpus, parse_apps_csv(apps.stdout))
    return _result(True, reason, SMI, gpus, driver, timed_out=apps.timed_out,
                   nvml_error=nvml_error)


def _no_driver(nvml_error: str | None) -> str:
    if nvml_error is None:  # source: nvidia-smi, NVML not tried
        return "no NVIDIA driver: nvidia-smi not on PATH"
    if nvml_error.startswith("pynvml not importable"):
        return "no NVIDIA driver: pynvml not importable and nvidia-smi not on PATH"
    return f"no NVIDIA driver: NVML failed ({nvml_error}) and nvidia-smi not on PATH"


def _smi(ctx: CheckContext, args: list[str]) -> CommandOutcome:
    return ctx.run_command([SMI, *args], timeout=ctx.remaining())


def _hung(outcome: CommandOutcome) -> str:
    return f"nvidia-smi did not answer within {outcome.duration_s:.1f}s (killed)"


def _first_line(outcome: CommandOutcome) -> str:
    text = (outcome.stdout.strip() or outcome.stderr.strip() or f"exit {outcome.returncode}")
    return text.splitlines()[0][:300]


def parse_gpu_csv(text: str) -> tuple[list[dict[str, Any]], str | None]:
    """GPUs from `nvidia-smi --query-gpu=GPU_QUERY --format=csv,noheader,nounits` output.

    The trailing driver_version column is optional (8 or 9 columns).
    """
    gpus: list[dict[str, Any]] = []
    driver = None
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < 8 or _number(cells[0]) is None:
            continue
        gpus.append({
            "index": int(cells[0]),
            "name": _cell(cells[1]),
            "uuid": _cell(cells[2]),
            "utilization_percent": _int_cell(cells[3]),
            "memory_used_mib": _int_cell(cells[4]),
            "memory_total_mib": _int_cell(cells[5]),
            "temperature_c": _int_cell(cells[6]),
            "power_w": _number(cells[7]),
            "processes": [],
        })
        if len(cells) > 8:
            driver = _cell(cells[8]) or driver
    return gpus, driver


def parse_apps_csv(text: str) -> list[dict[str, Any]]:
    """[{gpu_uuid, pid, used_mib}] from `--query-compute-apps=APPS_QUERY` output."""
    apps: list[dict[str, Any]] = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < 3 or _int_cell(cells[1]) is None:
            continue  # e.g. "No running processes found"
        apps.append({"gpu_uuid": cells[0], "pid": _int_cell(cells[1]),
                     "used_mib": _int_cell(cells[2])})
    return apps


def attach_processes(gpus: list[dict[str, Any]], apps: list[dict[str, Any]]) -> None:
    by_uuid = {gpu["uuid"]: gpu for gpu in gpus}
    for app in apps:
        gpu = by_uuid.get(app["gpu_uuid"])
        if gpu is not None:
            gpu["processes"].append({"pid": app["pid"], "used_mib": app["used_mib"]})


def _cell(text: str) -> str | None:
    """A CSV value; None for nvidia-smi's "[N/A]", "[Not Supported]", "[Unknown Error]"..."""
    if not text or text.startswith("[") or text in ("N/A", "Not Supported"):
        return None
    return text


def _number(text: str) -> float | None:
    value = _cell(text)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _int_cell(text: str) -> int | None:
    value = _number(text)
    return None if value is None else int(value)
