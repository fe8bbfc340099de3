"""GPU health fields shared by the NVML and nvidia-smi readers of the `gpu` check.

Clock event ("throttle") reasons, ECC counters, retired pages, remapped rows and the
PCIe link, one dict shape per GPU whichever source read them, and the node summaries
runbooks branch on. Standard library only.
"""

from __future__ import annotations

from typing import Any

# NVML's clocks event reason bits (nvml.h, stable across releases): (bit, name, NVML suffix).
# nvidia-smi's clocks_event_reasons.active prints the same bitmask in hex.
THROTTLE_BITS: tuple[tuple[int, str, str], ...] = (
    (0x1, "gpu_idle", "GpuIdle"),
    (0x2, "applications_clocks_setting", "ApplicationsClocksSetting"),
    (0x4, "sw_power_cap", "SwPowerCap"),
    (0x8, "hw_slowdown", "HwSlowdown"),
    (0x10, "sync_boost", "SyncBoost"),
    (0x20, "sw_thermal_slowdown", "SwThermalSlowdown"),
    (0x40, "hw_thermal_slowdown", "HwThermalSlowdown"),
    (0x80, "hw_power_brake", "HwPowerBrakeSlowdown"),
    (0x100, "display_clock_setting", "DisplayClockSetting"),
)
# Reasons that mean the hardware is slowing down (heat, power brake, HW slowdown), unlike a
# power cap at full load or an idle GPU, which are normal.
SLOWDOWN_REASONS = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake")


def reason_bits(pynvml: Any = None) -> list[tuple[int, str]]:
    """(bit, name) pairs, taking the bit values from an NVML binding when it has them."""
    pairs = []
    for bit, name, suffix in THROTTLE_BITS:
        value = bit
        for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason"):
            found = getattr(pynvml, prefix + suffix, None) if pynvml is not None else None
            if isinstance(found, int) and not isinstance(found, bool) and found > 0:
                value = found
                break
        pairs.append((value, name))
    return pairs


def throttle_names(mask: int | None, pynvml: Any = None) -> list[str] | None:
    """Names of the reasons set in a clocks event bitmask (None when unknown)."""
    if mask is None:
        return None
    names = []
    known = 0
    for bit, name in reason_bits(pynvml):
        known |= bit
        if mask & bit:
            names.append(name)
    unknown = mask & ~known
    if unknown:
        names.append(f"other_{unknown:#x}")
    return names


def pcie(gen: int | None, max_gen: int | None, width: int | None, max_width: int | None,
         idle: bool) -> dict[str, Any]:
    """The PCIe link; degraded when narrower than its maximum, or slower while busy.

    An idle GPU lowers its link generation to save power (Gen1 at idle is normal), so a low
    generation counts only while the GPU works; a narrow link (x8 of x16) always counts.
    """
    narrow = width is not None and max_width is not None and width < max_width
    slow = gen is not None and max_gen is not None and gen < max_gen and not idle
    return {"gen": gen, "max_gen": max_gen, "width": width, "max_width": max_width,
            "degraded": bool(narrow or slow)}


def is_idle(utilization: int | None, reasons: list[str] | None) -> bool:
    return (reasons is not None and "gpu_idle" in reasons) or utilization == 0


def empty_health() -> dict[str, Any]:
    """The health keys of one GPU, all unknown."""
    return {
        "pci_bus_id": None,
        "power_limit_w": None,
        "clocks": {"sm_mhz": None, "mem_mhz": None, "max_sm_mhz": None},
        "throttle_reasons": None,
        "ecc": {"volatile_uncorrected": None, "volatile_corrected": None,
                "aggregate_uncorrected": None, "aggregate_corrected": None},
        "retired_pages": {"single_bit": None, "double_bit": None, "pending": None},
        "remapped_rows": {"correctable": None, "uncorrectable": None, "pending": None,
                          "failure": None},
        "pcie": pcie(None, None, None, None, True),
        "mig_enabled": None,
    }


def summarize(gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """Node-level health summaries over the GPUs' health fields."""
    temps = [g["temperature_c"] for g in gpus if g.get("temperature_c") is not None]
    return {
        "max_temperature_c": max(temps) if temps else None,
        "throttled": [g["index"] for g in gpus
                      if set(g.get("throttle_reasons") or ()) & set(SLOWDOWN_REASONS)],
        "ecc_uncorrected_total": sum(g.get("ecc", {}).get("volatile_uncorrected") or 0
                                     for g in gpus),
        "remap_pending": any(_flag(g, "remapped_rows", "pending") or
                             _flag(g, "retired_pages", "pending") for g in gpus),
        "remap_failed": any(_flag(g, "remapped_rows", "failure") for g in gpus),
        "pcie_degraded": [g["index"] for g in gpus if (g.get("pcie") or {}).get("degraded")],
    }


def _flag(gpu: dict[str, Any], group: str, name: str) -> bool:
    return bool((gpu.get(group) or {}).get(name))


def bus_key(address: str | None) -> tuple[int, int, int] | None:
    """(domain, bus, device) of a PCI address: 00000000:3B:00.0, 0000:3b:00, 3b:00.0."""
    if not address:
        return None
    parts = address.strip().lower().split(":")
    try:
        if len(parts) == 2:
            parts = ["0", *parts]
        domain, bus, device = parts[-3], parts[-2], parts[-1].split(".")[0]
        return int(domain, 16), int(bus, 16), int(device, 16)
    except (ValueError, IndexError):
        return None
