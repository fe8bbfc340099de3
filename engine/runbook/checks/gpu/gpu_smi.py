"""The `gpu` check's nvidia-smi reader: queries, their fallbacks, and CSV parsers.

One `--query-gpu` call reads state and health together. A driver that does not know a
field refuses the whole query ("... is not a valid field to query"), so an older field
name (clocks_throttle_reasons, before R535) and then the basic fields are tried next.
Remapped rows have their own query (--query-remapped-rows), and processes theirs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runbook.checks.base import CheckContext, CommandOutcome
from runbook.checks.gpu import gpu_health

SMI = "nvidia-smi"
BASE_FIELDS = ("index", "name", "uuid", "utilization.gpu", "memory.used", "memory.total",
               "temperature.gpu", "power.draw", "driver_version")
GPU_QUERY = ",".join(BASE_FIELDS)
_REASONS_NEW = "clocks_event_reasons.active"
_REASONS_OLD = "clocks_throttle_reasons.active"
HEALTH_FIELDS = (
    "pci.bus_id", "clocks.sm", "clocks.mem", "clocks.max.sm", _REASONS_NEW, "power.limit",
    "ecc.errors.uncorrected.volatile.total", "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total", "ecc.errors.corrected.aggregate.total",
    "retired_pages.sbe", "retired_pages.dbe", "retired_pages.pending",
    "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max",
    "mig.mode.current",  # last: recorded output from before it was asked for still parses
)
FULL_QUERY = ",".join(BASE_FIELDS + HEALTH_FIELDS)
# Tried in order while the driver refuses a field name.
QUERIES = (FULL_QUERY, FULL_QUERY.replace(_REASONS_NEW, _REASONS_OLD), GPU_QUERY)
REMAP_QUERY = ("gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,"
               "remapped_rows.pending,remapped_rows.failure")
APPS_QUERY = "gpu_uuid,pid,used_memory"
_CSV = "--format=csv,noheader,nounits"


@dataclass
class SmiAnswer:
    """What nvidia-smi said: GPUs, or why there are none."""

    gpus: list[dict[str, Any]] = field(default_factory=list)
    driver: str | None = None
    available: bool = True
    reason: str | None = None
    timed_out: bool = False
    not_found: bool = False


def read_smi(ctx: CheckContext) -> SmiAnswer:
    query, outcome = _query_gpus(ctx)
    if outcome.not_found:
        return SmiAnswer(available=False, not_found=True)
    if outcome.timed_out:
        return SmiAnswer(reason=hung(outcome), timed_out=True)
    if outcome.returncode != 0:
        return SmiAnswer(available=False, reason=f"nvidia-smi failed: {first_line(outcome)}")
    gpus, driver = parse_gpu_csv(outcome.stdout, tuple(query.split(",")))
    for args, attach in (([f"--query-remapped-rows={REMAP_QUERY}", _CSV], _attach_remaps),
                         ([f"--query-compute-apps={APPS_QUERY}", _CSV], _attach_apps)):
        extra = _smi(ctx, args)
        if extra.timed_out:
            return SmiAnswer(gpus, driver, reason=hung(extra), timed_out=True)
        if extra.returncode == 0:
            attach(gpus, extra.stdout)
    return SmiAnswer(gpus, driver)


def _query_gpus(ctx: CheckContext) -> tuple[str, CommandOutcome]:
    for query in QUERIES:
        outcome = _smi(ctx, [f"--query-gpu={query}", _CSV])
        if outcome.returncode == 0 or outcome.timed_out or outcome.not_found:
            break
        if "not a valid field" not in (outcome.stdout + outcome.stderr):
            break
    return query, outcome


def _smi(ctx: CheckContext, args: list[str]) -> CommandOutcome:
    return ctx.run_command([SMI, *args], timeout=ctx.remaining())


def hung(outcome: CommandOutcome) -> str:
    return f"nvidia-smi did not answer within {outcome.duration_s:.1f}s (killed)"


def first_line(outcome: CommandOutcome) -> str:
    text = (outcome.stdout.strip() or outcome.stderr.strip() or f"exit {outcome.returncode}")
    return text.splitlines()[0][:300]


# -- parsers ------------------------------------------------------------------------------------


def parse_gpu_csv(
    text: str, fields: tuple[str, ...] = BASE_FIELDS
) -> tuple[list[dict[str, Any]], str | None]:
    """GPUs from `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits` output.

    With the basic fields, the trailing driver_version column is optional (8 or 9 columns).
    """
    gpus: list[dict[str, Any]] = []
    driver = None
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < 8 or _number(cells[0]) is None:
            continue
        named = {name: cells[i] for i, name in enumerate(fields[:len(cells)])}
        gpus.append(_gpu(named))
        driver = _cell(named.get("driver_version", "")) or driver
    return gpus, driver


def _gpu(c: dict[str, str]) -> dict[str, Any]:
    gpu: dict[str, Any] = {
        "index": int(_number(c["index"]) or 0),
        "name": _cell(c["name"]),
        "uuid": _cell(c["uuid"]),
        "utilization_percent": _int_cell(c["utilization.gpu"]),
        "memory_used_mib": _int_cell(c["memory.used"]),
        "memory_total_mib": _int_cell(c["memory.total"]),
        "temperature_c": _int_cell(c["temperature.gpu"]),
        "power_w": _number(c["power.draw"]),
        "processes": [],
    }
    gpu.update(gpu_health.empty_health())
    if "pcie.link.width.max" in c:  # a health query, and the line holds every column
        _health(gpu, c)
    return gpu


def _health(gpu: dict[str, Any], c: dict[str, str]) -> None:
    reasons = gpu_health.throttle_names(_hex_cell(c.get(_REASONS_NEW, c.get(_REASONS_OLD, ""))))
    gpu.update({
        "pci_bus_id": _cell(c["pci.bus_id"]),
        "power_limit_w": _number(c["power.limit"]),
        "clocks": {"sm_mhz": _int_cell(c["clocks.sm"]), "mem_mhz": _int_cell(c["clocks.mem"]),
                   "max_sm_mhz": _int_cell(c["clocks.max.sm"])},
        "throttle_reasons": reasons,
        "ecc": {
            "volatile_uncorrected": _int_cell(c["ecc.errors.uncorrected.volatile.total"]),
            "volatile_corrected": _int_cell(c["ecc.errors.corrected.volatile.total"]),
            "aggregate_uncorrected": _int_cell(c["ecc.errors.uncorrected.aggregate.total"]),
            "aggregate_corrected": _int_cell(c["ecc.errors.corrected.aggregate.total"]),
        },
        "retired_pages": {"single_bit": _int_cell(c["retired_pages.sbe"]),
                          "double_bit": _int_cell(c["retired_pages.dbe"]),
                          "pending": _bool_cell(c["retired_pages.pending"])},
        "pcie": gpu_health.pcie(
            _int_cell(c["pcie.link.gen.current"]), _int_cell(c["pcie.link.gen.max"]),
            _int_cell(c["pcie.link.width.current"]), _int_cell(c["pcie.link.width.max"]),
            gpu_health.is_idle(gpu["utilization_percent"], reasons),
        ),
        "mig_enabled": _bool_cell(c.get("mig.mode.current", "")),
    })


def parse_remap_csv(text: str) -> dict[str, dict[str, Any]]:
    """gpu_uuid -> {correctable, uncorrectable, pending, failure} from `--query-remapped-rows`."""
    rows: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < 5 or not cells[0].startswith("GPU-"):
            continue
        rows[cells[0]] = {"correctable": _int_cell(cells[1]), "uncorrectable": _int_cell(cells[2]),
                          "pending": _bool_cell(cells[3]), "failure": _bool_cell(cells[4])}
    return rows


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


def _attach_remaps(gpus: list[dict[str, Any]], text: str) -> None:
    rows = parse_remap_csv(text)
    for gpu in gpus:
        if gpu["uuid"] in rows:
            gpu["remapped_rows"] = rows[gpu["uuid"]]


def _attach_apps(gpus: list[dict[str, Any]], text: str) -> None:
    attach_processes(gpus, parse_apps_csv(text))


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


def _hex_cell(text: str) -> int | None:
    value = _cell(text)
    if value is None:
        return None
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        return None


def _bool_cell(text: str) -> bool | None:
    """Yes/No (or 1/0) as nvidia-smi prints pending and failure flags."""
    value = (_cell(text) or "").lower()
    if value in ("yes", "true", "active", "enabled"):
        return True
    if value in ("no", "false", "inactive", "disabled"):
        return False
    number = _number(value) if value else None
    return None if number is None else number > 0
