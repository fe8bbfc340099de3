"""`gpu`: this machine as it is, fake nvidia-smi / dmesg programs on PATH, and stub pynvml modules.

The CSV files in data/ are samples in nvidia-smi's exact `csv,noheader,nounits` format for
an 8x H100 80GB HBM3 node where 7 ranks spin in a collective and rank 5 does not (0%).
nvidia_smi_full_8xH100.csv is the same node's health query: GPU 3 (bus 5D) runs hot with
thermal slowdown on an x8 link, and has uncorrected ECC errors and a row remapping pending
(nvidia_smi_remap_8xH100.csv); idle GPU 5 has lowered its link to Gen1, which is normal.
dmesg_T_xid_8xH100.txt is that node's `dmesg -T`: Xid 48/94/63 on bus 5d, Xid 79 on bus db.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import shutil
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

from runbook.checks.gpu import gpu, gpu_health, gpu_xid

DATA = Path(__file__).resolve().parents[1] / "data"
GPU_CSV = DATA / "nvidia_smi_gpu_8xH100.csv"
FULL_CSV = DATA / "nvidia_smi_full_8xH100.csv"
REMAP_CSV = DATA / "nvidia_smi_remap_8xH100.csv"
APPS_CSV = DATA / "nvidia_smi_apps_8xH100.csv"
DMESG = DATA / "dmesg_T_xid_8xH100.txt"
JOURNAL = DATA / "journalctl_kernel_8xH100.txt"
MIB = 1024 * 1024


@pytest.fixture
def no_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError


def fake_bin(tmp_path: Path, **scripts: str) -> dict[str, str]:
    """An env whose PATH starts with a directory of shell scripts: fake_bin(tmp, nvidia_smi=BODY).

    A _ in a keyword stands for - in the program name.
    """
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        script = bindir / name.replace("_", "-")
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


def fake_smi(tmp_path: Path, body: str) -> dict[str, str]:
    """An env whose PATH starts with a directory holding an `nvidia-smi` shell script."""
    return fake_bin(tmp_path, nvidia_smi=body)


RECORDED = f"""echo "$*" >> "$(dirname "$0")/args"
case "$*" in
  *--query-compute-apps*) cat "{APPS_CSV}" ;;
  *--query-remapped-rows*) cat "{REMAP_CSV}" ;;
  *clocks_event_reasons*) cat "{FULL_CSV}" ;;
  *) cat "{GPU_CSV}" ;;
esac
"""
# A driver before R535: it refuses clocks_event_reasons, knows clocks_throttle_reasons.
OLD_DRIVER = f"""echo "$*" >> "$(dirname "$0")/args"
case "$*" in
  *clocks_event_reasons*) echo 'Field "clocks_event_reasons.active" is not a valid field to query.'
                          exit 2 ;;
  *--query-compute-apps*) cat "{APPS_CSV}" ;;
  *--query-remapped-rows*) exit 2 ;;
  *clocks_throttle_reasons*) cat "{FULL_CSV}" ;;
esac
"""
# A driver that refuses every health field: the basic query still works.
NO_HEALTH = f"""echo "$*" >> "$(dirname "$0")/args"
case "$*" in
  *--query-compute-apps*) cat "{APPS_CSV}" ;;
  *--query-remapped-rows*) echo 'Invalid combination of input arguments.'; exit 2 ;;
  *pci.bus_id*) echo 'Field "pci.bus_id" is not a valid field to query.'; exit 2 ;;
  *) cat "{GPU_CSV}" ;;
esac
"""


@pytest.mark.skipif(
    shutil.which("nvidia-smi") is not None or importlib.util.find_spec("pynvml") is not None,
    reason="this machine has an NVIDIA driver or pynvml",
)
def test_this_machine_has_no_gpu(make_ctx) -> None:
    result = gpu.run({}, make_ctx(3.0))
    assert result["available"] is False
    assert result["reason"] == "no NVIDIA driver: pynvml not importable and nvidia-smi not on PATH"
    assert result["source"] is None
    assert result["count"] == 0 and result["gpus"] == []
    assert result["max_util"] == 0 and result["mean_util"] == 0.0


def test_no_driver_anywhere(no_pynvml, tmp_path: Path, make_ctx) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}
    result = gpu.run({"source": "auto"}, make_ctx(3.0, env=env))
    assert result["available"] is False
    assert result["reason"] == "no NVIDIA driver: pynvml not importable and nvidia-smi not on PATH"
    only_smi = gpu.run({"source": "nvidia-smi"}, make_ctx(3.0, env=env))
    assert only_smi["reason"] == "no NVIDIA driver: nvidia-smi not on PATH"
    only_nvml = gpu.run({"source": "nvml"}, make_ctx(3.0, env=env))
    assert only_nvml["available"] is False
    assert only_nvml["reason"].startswith("NVML unavailable: pynvml not importable")


def test_hanging_nvidia_smi_is_killed(no_pynvml, tmp_path: Path, make_ctx) -> None:
    env = fake_smi(tmp_path, 'echo $$ > "$(dirname "$0")/pid"\nexec sleep 60\n')
    ctx = make_ctx(2.0, env=env)
    start = time.monotonic()
    result = gpu.run({}, ctx)
    assert time.monotonic() < ctx.deadline + 1.0
    assert time.monotonic() - start < 3.0
    assert result["available"] is True
    assert result["source"] == "nvidia-smi"
    assert result["timed_out"] is True
    assert result["reason"].startswith("nvidia-smi did not answer within ")
    assert result["reason"].endswith("s (killed)")
    pid = int((tmp_path / "bin" / "pid").read_text())
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().rpartition(")")[2].split()[0] == "Z"


H100 = "NVIDIA H100 80GB HBM3"
NO_ECC = {"volatile_uncorrected": 0, "volatile_corrected": 0, "aggregate_uncorrected": 0,
          "aggregate_corrected": 0}
NO_PAGES = {"single_bit": None, "double_bit": None, "pending": None}  # H100 remaps rows instead
NO_REMAP = {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}


def test_recorded_nvidia_smi_output(no_pynvml, tmp_path: Path, make_ctx) -> None:
    result = gpu.run({}, make_ctx(5.0, env=fake_smi(tmp_path, RECORDED)))
    assert result["available"] is True and result["timed_out"] is False
    assert result["source"] == "nvidia-smi"
    assert result["reason"] is None
    assert result["driver_version"] == "535.129.03"
    assert result["count"] == 8
    assert result["gpus"][0] == {
        "index": 0,
        "name": H100,
        "uuid": "GPU-8f6c1a2e-3b4d-5e6f-7a8b-9c0d1e2f3a4b",
        "pci_bus_id": "00000000:18:00.0",
        "utilization_percent": 100,
        "memory_used_mib": 71234,
        "memory_total_mib": 81559,
        "temperature_c": 54,
        "power_w": 142.87,
        "power_limit_w": 700.0,
        "clocks": {"sm_mhz": 1980, "mem_mhz": 2619, "max_sm_mhz": 1980},
        "throttle_reasons": [],
        "ecc": NO_ECC,
        "retired_pages": NO_PAGES,
        "remapped_rows": NO_REMAP,
        "pcie": {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16, "degraded": False},
        "mig_enabled": None,  # recorded before the query asked for it
        "processes": [{"pid": 48211, "used_mib": 70686}, {"pid": 48391, "used_mib": None}],
    }
    hot = result["gpus"][3]
    assert hot["temperature_c"] == 89 and hot["clocks"]["sm_mhz"] == 1215
    assert hot["throttle_reasons"] == ["hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown"]
    assert hot["ecc"] == {"volatile_uncorrected": 2, "volatile_corrected": 14,
                          "aggregate_uncorrected": 2, "aggregate_corrected": 37}
    assert hot["remapped_rows"] == {"correctable": 0, "uncorrectable": 2, "pending": True,
                                    "failure": False}
    assert hot["pcie"] == {"gen": 5, "max_gen": 5, "width": 8, "max_width": 16, "degraded": True}
    idle = result["gpus"][5]
    assert idle["utilization_percent"] == 0 and idle["throttle_reasons"] == ["gpu_idle"]
    assert idle["pcie"]["gen"] == 1 and idle["pcie"]["degraded"] is False  # power saving
    assert result["gpus"][7]["power_w"] is None  # [N/A]
    assert [g["processes"][0]["pid"] for g in result["gpus"]] == list(range(48211, 48219))
    assert result["max_util"] == 100
    assert result["mean_util"] == 87.5
    assert result["memory_used_mib"] == 568366
    assert result["max_temperature_c"] == 89
    assert result["throttled"] == [3]
    assert result["ecc_uncorrected_total"] == 2
    assert result["remap_pending"] is True and result["remap_failed"] is False
    assert result["pcie_degraded"] == [3]
    args = (tmp_path / "bin" / "args").read_text().splitlines()
    assert args == [
        f"--query-gpu={gpu.FULL_QUERY} --format=csv,noheader,nounits",
        f"--query-remapped-rows={gpu.REMAP_QUERY} --format=csv,noheader,nounits",
        f"--query-compute-apps={gpu.APPS_QUERY} --format=csv,noheader,nounits",
    ]


def test_driver_before_r535_uses_throttle_reasons(no_pynvml, tmp_path: Path, make_ctx) -> None:
    result = gpu.run({}, make_ctx(5.0, env=fake_smi(tmp_path, OLD_DRIVER)))
    assert result["available"] is True and result["reason"] is None
    assert result["gpus"][3]["throttle_reasons"] == ["hw_slowdown", "sw_thermal_slowdown",
                                                     "hw_thermal_slowdown"]
    # No remapped-rows query on this driver: those stay unknown, the rest is read.
    assert result["gpus"][3]["remapped_rows"]["pending"] is None
    assert result["remap_pending"] is False
    assert result["throttled"] == [3] and result["pcie_degraded"] == [3]
    args = (tmp_path / "bin" / "args").read_text().splitlines()
    assert args[0] == f"--query-gpu={gpu.FULL_QUERY} --format=csv,noheader,nounits"
    assert args[1] == (f"--query-gpu={gpu.FULL_QUERY.replace('clocks_event', 'clocks_throttle')}"
                       " --format=csv,noheader,nounits")
    assert len(args) == 4


def test_driver_without_health_fields_still_reads_state(no_pynvml, tmp_path: Path,
                                                         make_ctx) -> None:
    result = gpu.run({}, make_ctx(5.0, env=fake_smi(tmp_path, NO_HEALTH)))
    assert result["available"] is True and result["reason"] is None
    assert result["count"] == 8 and result["max_util"] == 100
    first = result["gpus"][0]
    assert first["temperature_c"] == 54 and first["power_w"] == 142.87
    assert first["throttle_reasons"] is None and first["pci_bus_id"] is None
    assert first["clocks"] == {"sm_mhz": None, "mem_mhz": None, "max_sm_mhz": None}
    assert first["pcie"]["degraded"] is False
    assert result["max_temperature_c"] == 56
    assert result["throttled"] == [] and result["pcie_degraded"] == []
    assert result["ecc_uncorrected_total"] == 0 and result["remap_pending"] is False
    args = (tmp_path / "bin" / "args").read_text().splitlines()
    assert [a.split(" ")[0] for a in args] == [
        f"--query-gpu={gpu.FULL_QUERY}",
        f"--query-gpu={gpu.FULL_QUERY.replace('clocks_event', 'clocks_throttle')}",
        f"--query-gpu={gpu.GPU_QUERY}",
        f"--query-remapped-rows={gpu.REMAP_QUERY}",
        f"--query-compute-apps={gpu.APPS_QUERY}",
    ]


def test_nvidia_smi_failing(no_pynvml, tmp_path: Path, make_ctx) -> None:
    message = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.")
    env = fake_smi(tmp_path, f'echo "{message}"\nexit 9\n')
    result = gpu.run({}, make_ctx(3.0, env=env))
    assert result["available"] is False
    assert result["reason"] == f"nvidia-smi failed: {message}"


def test_parsers_on_recorded_csv() -> None:
    gpus, driver = gpu.parse_gpu_csv(GPU_CSV.read_text())
    assert driver == "535.129.03"
    assert [g["index"] for g in gpus] == list(range(8))
    assert {g["memory_total_mib"] for g in gpus} == {81559}
    apps = gpu.parse_apps_csv(APPS_CSV.read_text() + "No running processes found\n")
    assert len(apps) == 9
    assert apps[1] == {"gpu_uuid": "GPU-8f6c1a2e-3b4d-5e6f-7a8b-9c0d1e2f3a4b", "pid": 48391,
                       "used_mib": None}
    # Without the driver_version column (the 8-column query) and with odd values.
    eight, no_driver = gpu.parse_gpu_csv(
        "0, NVIDIA H100 80GB HBM3, GPU-x, [N/A], [Not Supported], 81559, [Unknown Error], 70.5\n"
    )
    assert no_driver is None
    assert eight[0]["utilization_percent"] is None
    assert eight[0]["memory_used_mib"] is None
    assert eight[0]["temperature_c"] is None
    assert eight[0]["power_w"] == 70.5


# -- NVML through a stub pynvml module ---------------------------------------------------------


class NVMLError(Exception):
    pass


def stub_pynvml(**overrides: Any) -> types.ModuleType:
    """A stand-in for the nvidia-ml-py module: two H100s, the second without power readings."""

    def power(handle: tuple[str, int]) -> int:
        if handle[1] == 1:
            raise NVMLError("Not Supported")
        return 689_512  # milliwatts

    def procs(handle: tuple[str, int]) -> list[types.SimpleNamespace]:
        if handle[1] == 1:
            return [types.SimpleNamespace(pid=5002, usedGpuMemory=None)]
        return [types.SimpleNamespace(pid=5001, usedGpuMemory=74_000 * MIB)]

    module = types.ModuleType("pynvml")
    calls = {
        "NVML_TEMPERATURE_GPU": 0,
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: b"550.54.15",
        "nvmlDeviceGetCount": lambda: 2,
        "nvmlDeviceGetHandleByIndex": lambda i: ("handle", i),
        "nvmlDeviceGetName": lambda h: b"NVIDIA H100 80GB HBM3",
        "nvmlDeviceGetUUID": lambda h: f"GPU-0000000{h[1]}-aaaa-bbbb-cccc-dddddddddddd",
        "nvmlDeviceGetUtilizationRates": lambda h: types.SimpleNamespace(gpu=97 - 97 * h[1],
                                                                          memory=40),
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(
            total=81559 * MIB, used=(75_000 - h[1] * 1_000) * MIB + 123, free=0),
        "nvmlDeviceGetTemperature": lambda h, sensor: 61 - h[1],
        "nvmlDeviceGetPowerUsage": power,
        "nvmlDeviceGetComputeRunningProcesses": procs,
    }
    calls.update(overrides)
    for name, value in calls.items():
        setattr(module, name, value)
    return module


STATE_KEYS = ("index", "name", "uuid", "utilization_percent", "memory_used_mib", "memory_total_mib",
              "temperature_c", "power_w", "processes")


def test_nvml_with_stub(monkeypatch: pytest.MonkeyPatch, make_ctx) -> None:
    """An old binding without any health function: state is read, health stays unknown."""
    monkeypatch.setitem(sys.modules, "pynvml", stub_pynvml())
    result = gpu.run({"xid": False}, make_ctx(3.0))
    assert result["available"] is True and result["timed_out"] is False
    assert result["source"] == "nvml"
    assert result["driver_version"] == "550.54.15"
    assert [{k: g[k] for k in STATE_KEYS} for g in result["gpus"]] == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3",
         "uuid": "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd", "utilization_percent": 97,
         "memory_used_mib": 75000, "memory_total_mib": 81559, "temperature_c": 61,
         "power_w": 689.51, "processes": [{"pid": 5001, "used_mib": 74000}]},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3",
         "uuid": "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd", "utilization_percent": 0,
         "memory_used_mib": 74000, "memory_total_mib": 81559, "temperature_c": 60,
         "power_w": None, "processes": [{"pid": 5002, "used_mib": None}]},
    ]
    assert result["max_util"] == 97 and result["mean_util"] == 48.5
    assert result["memory_used_mib"] == 149000
    unknown = result["gpus"][0]
    assert unknown["throttle_reasons"] is None and unknown["power_limit_w"] is None
    assert unknown["ecc"]["volatile_uncorrected"] is None
    assert unknown["remapped_rows"]["pending"] is None
    assert result["max_temperature_c"] == 61 and result["throttled"] == []
    assert result["xid_readable"] is False and result["xid_reason"] == "not asked (xid: false)"


# -- NVML through a recorded 8x H100 node ------------------------------------------------------


class NVMLError_NotSupported(NVMLError):  # noqa: N801  (nvidia-ml-py's spelling)
    pass


class NVMLError_FunctionNotFound(NVMLError):  # noqa: N801
    pass


# Recorded from the same node as the CSV files: per GPU index.
H100_BUS = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
H100_UTIL = [100, 100, 100, 100, 100, 0, 100, 100]
H100_TEMP = [54, 52, 55, 89, 56, 38, 54, 52]
H100_SM = [1980, 1980, 1980, 1215, 1980, 345, 1980, 1980]
H100_REASONS = [0x0, 0x0, 0x0, 0x8 | 0x20 | 0x40, 0x0, 0x1, 0x0, 0x0]
H100_GEN = [5, 5, 5, 5, 5, 1, 5, 5]
H100_WIDTH = [16, 16, 16, 8, 16, 16, 16, 16]
H100_ECC = {  # (errorType, counterType) -> count on GPU 3; 0 elsewhere
    (1, 0): 2, (0, 0): 14, (1, 1): 2, (0, 1): 37,
}
REASON_CONSTANTS = {
    "GpuIdle": 0x1, "ApplicationsClocksSetting": 0x2, "SwPowerCap": 0x4, "HwSlowdown": 0x8,
    "SyncBoost": 0x10, "SwThermalSlowdown": 0x20, "HwThermalSlowdown": 0x40,
    "HwPowerBrakeSlowdown": 0x80, "DisplayClockSetting": 0x100,
}


def h100_pynvml(**overrides: Any) -> types.ModuleType:
    """A stand-in for nvidia-ml-py 12.535+ on an 8x H100 node, names and constants as there."""

    def gpu_index(handle: Any) -> int:
        return handle.index

    def not_supported(*_args: Any) -> Any:
        raise NVMLError_NotSupported("Not Supported")

    def ecc(handle: Any, error_type: int, counter_type: int) -> int:
        return H100_ECC[(error_type, counter_type)] if handle.index == 3 else 0

    def clock(handle: Any, clock_type: int) -> int:
        return {0: H100_SM[handle.index], 1: H100_SM[handle.index], 2: 2619}[clock_type]

    def reasons(handle: Any) -> int:
        return H100_REASONS[handle.index]

    module = types.ModuleType("pynvml")
    calls: dict[str, Any] = {
        "NVMLError": NVMLError,
        "NVMLError_NotSupported": NVMLError_NotSupported,
        "NVML_TEMPERATURE_GPU": 0,
        "NVML_CLOCK_GRAPHICS": 0, "NVML_CLOCK_SM": 1, "NVML_CLOCK_MEM": 2,
        "NVML_MEMORY_ERROR_TYPE_CORRECTED": 0, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED": 1,
        "NVML_VOLATILE_ECC": 0, "NVML_AGGREGATE_ECC": 1,
        "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS": 0,
        "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR": 1,
        "NVML_FEATURE_DISABLED": 0, "NVML_FEATURE_ENABLED": 1,
        **{f"nvmlClocksEventReason{k}": v for k, v in REASON_CONSTANTS.items()},
        **{f"nvmlClocksThrottleReason{k}": v for k, v in REASON_CONSTANTS.items()},
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "535.129.03",
        "nvmlDeviceGetCount": lambda: 8,
        "nvmlDeviceGetHandleByIndex": lambda i: types.SimpleNamespace(index=i),
        "nvmlDeviceGetName": lambda h: H100,
        "nvmlDeviceGetUUID": lambda h: f"GPU-{h.index}0000000-aaaa-bbbb-cccc-dddddddddddd",
        "nvmlDeviceGetPciInfo": lambda h: types.SimpleNamespace(
            busId=f"00000000:{H100_BUS[h.index]}:00.0".encode(), bus=int(H100_BUS[h.index], 16)),
        "nvmlDeviceGetUtilizationRates": lambda h: types.SimpleNamespace(
            gpu=H100_UTIL[h.index], memory=35),
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(
            total=81559 * MIB, used=71_000 * MIB, free=10_559 * MIB),
        "nvmlDeviceGetTemperature": lambda h, sensor: H100_TEMP[h.index],
        "nvmlDeviceGetPowerUsage": lambda h: 312_400 if h.index == 3 else 141_020,
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700_000,
        "nvmlDeviceGetPowerManagementLimit": lambda h: 700_000,
        "nvmlDeviceGetClockInfo": clock,
        "nvmlDeviceGetMaxClockInfo": lambda h, t: {0: 1980, 1: 1980, 2: 2619}[t],
        "nvmlDeviceGetCurrentClocksEventReasons": reasons,
        "nvmlDeviceGetCurrentClocksThrottleReasons": reasons,
        "nvmlDeviceGetTotalEccErrors": ecc,
        "nvmlDeviceGetRetiredPages": not_supported,  # A100/H100 remap rows instead
        "nvmlDeviceGetRetiredPagesPendingStatus": not_supported,
        "nvmlDeviceGetRemappedRows": lambda h: (0, 2, 1, 0) if h.index == 3 else (0, 0, 0, 0),
        "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: H100_GEN[h.index],
        "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: 5,
        "nvmlDeviceGetCurrPcieLinkWidth": lambda h: H100_WIDTH[h.index],
        "nvmlDeviceGetMaxPcieLinkWidth": lambda h: 16,
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [
            types.SimpleNamespace(pid=48211 + gpu_index(h), usedGpuMemory=70_650 * MIB)],
    }
    calls.update(overrides)
    for name, value in calls.items():
        if value is not None:
            setattr(module, name, value)
    return module


def test_nvml_health_on_recorded_h100_node(monkeypatch: pytest.MonkeyPatch, make_ctx) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", h100_pynvml())
    result = gpu.run({"xid": False}, make_ctx(3.0))
    assert result["source"] == "nvml" and result["count"] == 8
    assert result["gpus"][0] == {
        "index": 0, "name": H100, "uuid": "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd",
        "pci_bus_id": "00000000:18:00.0", "utilization_percent": 100, "memory_used_mib": 71000,
        "memory_total_mib": 81559, "temperature_c": 54, "power_w": 141.02, "power_limit_w": 700.0,
        "clocks": {"sm_mhz": 1980, "mem_mhz": 2619, "max_sm_mhz": 1980},
        "throttle_reasons": [], "ecc": NO_ECC, "retired_pages": NO_PAGES,
        "remapped_rows": NO_REMAP,
        "pcie": {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16, "degraded": False},
        "mig_enabled": None,  # the stub has no nvmlDeviceGetMigMode
        "processes": [{"pid": 48211, "used_mib": 70650}],
    }
    hot = result["gpus"][3]
    assert hot["throttle_reasons"] == ["hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown"]
    assert hot["ecc"] == {"volatile_uncorrected": 2, "volatile_corrected": 14,
                          "aggregate_uncorrected": 2, "aggregate_corrected": 37}
    assert hot["remapped_rows"] == {"correctable": 0, "uncorrectable": 2, "pending": True,
                                    "failure": False}
    assert hot["pcie"]["degraded"] is True and hot["power_w"] == 312.4
    assert result["gpus"][5]["pcie"]["degraded"] is False  # idle at Gen1
    assert (result["max_temperature_c"], result["throttled"], result["ecc_uncorrected_total"],
            result["remap_pending"], result["remap_failed"], result["pcie_degraded"]) == (
        89, [3], 2, True, False, [3])


def test_nvml_same_answers_as_nvidia_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                         make_ctx) -> None:
    """Both readers give the same health for the same node."""
    monkeypatch.setitem(sys.modules, "pynvml", h100_pynvml())
    nvml = gpu.run({"xid": False}, make_ctx(3.0))
    smi = gpu.run({"xid": False, "source": "nvidia-smi"},
                  make_ctx(5.0, env=fake_smi(tmp_path, RECORDED)))
    health = ("pci_bus_id", "power_limit_w", "clocks", "throttle_reasons", "ecc", "retired_pages",
              "remapped_rows", "pcie", "temperature_c")
    for a, b in zip(nvml["gpus"], smi["gpus"], strict=True):
        assert {k: a[k] for k in health} == {k: b[k] for k in health}
    summary = ("max_temperature_c", "throttled", "ecc_uncorrected_total", "remap_pending",
               "remap_failed", "pcie_degraded")
    assert {k: nvml[k] for k in summary} == {k: smi[k] for k in summary}


def test_nvml_memory_used_leaves_out_the_drivers_reserve(monkeypatch: pytest.MonkeyPatch, make_ctx) -> None:
    """v1 counts the driver's reserve as used (480 MiB on an idle H100); v2 and nvidia-smi do not."""
    v2 = 0x2000028

    def memory(handle: Any, version: int | None = None) -> Any:
        if version == v2:
            return types.SimpleNamespace(version=v2, total=81559 * MIB, reserved=480 * MIB,
                                         free=81079 * MIB, used=0)
        return types.SimpleNamespace(total=81559 * MIB, free=81079 * MIB, used=480 * MIB)

    monkeypatch.setitem(sys.modules, "pynvml", h100_pynvml(nvmlMemory_v2=v2, nvmlDeviceGetMemoryInfo=memory))
    assert gpu.run({"xid": False}, make_ctx(3.0))["gpus"][0]["memory_used_mib"] == 0
    monkeypatch.setitem(sys.modules, "pynvml", h100_pynvml(nvmlDeviceGetMemoryInfo=memory))
    assert gpu.run({"xid": False}, make_ctx(3.0))["gpus"][0]["memory_used_mib"] == 480  # an older binding


def test_nvml_binding_before_clocks_event_names(monkeypatch: pytest.MonkeyPatch, make_ctx) -> None:
    """nvidia-ml-py before 12.535 has only the 'throttle' names."""
    old = {f"nvmlClocksEventReason{k}": None for k in REASON_CONSTANTS}
    monkeypatch.setitem(sys.modules, "pynvml", h100_pynvml(
        nvmlDeviceGetCurrentClocksEventReasons=None, **old))
    assert not hasattr(sys.modules["pynvml"], "nvmlDeviceGetCurrentClocksEventReasons")
    result = gpu.run({"xid": False}, make_ctx(3.0))
    assert result["gpus"][3]["throttle_reasons"] == ["hw_slowdown", "sw_thermal_slowdown",
                                                     "hw_thermal_slowdown"]
    assert result["gpus"][5]["throttle_reasons"] == ["gpu_idle"]


def test_nvml_driver_before_clocks_event_function(monkeypatch: pytest.MonkeyPatch,
                                                  make_ctx) -> None:
    """A new binding on an old driver: the new function is not found, the old one answers."""

    def missing(handle: Any) -> int:
        raise NVMLError_FunctionNotFound("Function Not Found")

    monkeypatch.setitem(sys.modules, "pynvml",
                        h100_pynvml(nvmlDeviceGetCurrentClocksEventReasons=missing))
    result = gpu.run({"xid": False}, make_ctx(3.0))
    assert result["throttled"] == [3]


def test_nvml_page_retirement_gpu(monkeypatch: pytest.MonkeyPatch, make_ctx) -> None:
    """A pre-Ampere GPU retires pages: counts (the binding returns a map) and the pending flag."""

    def pages(handle: Any, cause: int) -> Any:
        return map(int, [0x1A2B000, 0x1A2C000] if cause == 0 else [0x3F00000])

    monkeypatch.setitem(sys.modules, "pynvml", h100_pynvml(
        nvmlDeviceGetCount=lambda: 1, nvmlDeviceGetRetiredPages=pages,
        nvmlDeviceGetRetiredPagesPendingStatus=lambda h: 1,
        nvmlDeviceGetRemappedRows=lambda h: (_ for _ in ()).throw(NVMLError_NotSupported("x"))))
    result = gpu.run({"xid": False}, make_ctx(3.0))
    [only] = result["gpus"]
    assert only["retired_pages"] == {"single_bit": 2, "double_bit": 1, "pending": True}
    assert only["remapped_rows"] == {"correctable": None, "uncorrectable": None, "pending": None,
                                     "failure": None}
    assert result["remap_pending"] is True and result["remap_failed"] is False


def test_throttle_names() -> None:
    assert gpu_health.throttle_names(None) is None
    assert gpu_health.throttle_names(0) == []
    assert gpu_health.throttle_names(0x4 | 0x80) == ["sw_power_cap", "hw_power_brake"]
    assert gpu_health.throttle_names(0x100 | 0x2000) == ["display_clock_setting", "other_0x2000"]


def test_nvml_init_failure_falls_back_to_nvidia_smi(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make_ctx
) -> None:
    def init() -> None:
        raise NVMLError("NVML Shared Library Not Found")

    monkeypatch.setitem(sys.modules, "pynvml", stub_pynvml(nvmlInit=init))
    result = gpu.run({}, make_ctx(5.0, env=fake_smi(tmp_path, RECORDED)))
    assert result["source"] == "nvidia-smi"
    assert result["count"] == 8
    assert result["nvml_error"] == "NVMLError: NVML Shared Library Not Found"
    nothing = gpu.run({}, make_ctx(3.0, env={**os.environ, "PATH": str(tmp_path)}))
    assert nothing["reason"] == ("no NVIDIA driver: NVML failed (NVMLError: NVML Shared Library "
                                 "Not Found) and nvidia-smi not on PATH")


def test_hanging_nvml_times_out(monkeypatch: pytest.MonkeyPatch, make_ctx) -> None:
    release = threading.Event()
    monkeypatch.setitem(sys.modules, "pynvml", stub_pynvml(nvmlInit=lambda: release.wait(30)))
    ctx = make_ctx(1.5)
    try:
        result = gpu.run({}, ctx)
        assert time.monotonic() < ctx.deadline + 1.0
    finally:
        release.set()  # let the stuck daemon thread finish
    assert result["available"] is True
    assert result["timed_out"] is True
    assert result["source"] == "nvml"
    assert result["reason"].startswith("NVML did not answer within 1.")


# -- Xid events from the kernel log --------------------------------------------------------------

REFUSED = 'echo "dmesg: read kernel buffer failed: Operation not permitted" >&2\nexit 1\n'
NO_JOURNAL = 'echo "No journal files were found." >&2\necho "-- No entries --"\n'


def test_parse_recorded_dmesg() -> None:
    events = gpu_xid.parse_xid(DMESG.read_text().splitlines())
    assert [e["code"] for e in events] == [48, 94, 63, 79, 79]
    assert events[0] == {
        "code": 48,
        "pci": "0000:5d:00",
        "message": "pid=48214, name=python, An uncorrectable double bit error (DBE) has been "
                   "detected on GPU in the framebuffer at partition 6, subpartition 0.",
        "time": events[0]["time"],
        "gpu_index": None,
    }
    # dmesg -T prints local time; it comes back as local ISO 8601 with the offset.
    assert events[0]["time"].startswith("2024-03-05T14:22:07")
    assert events[3]["message"] == "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    assert all(len(e["message"]) <= 160 for e in events)


def test_xid_from_dmesg_mapped_to_gpus(no_pynvml, tmp_path: Path, make_ctx) -> None:
    env = fake_bin(tmp_path, nvidia_smi=RECORDED, dmesg=f'cat "{DMESG}"\n')
    result = gpu.run({}, make_ctx(5.0, env=env))
    assert result["xid_readable"] is True and result["xid_reason"] is None
    assert result["xid_source"] == "dmesg"
    assert result["xid_count"] == 5
    assert result["xid_codes"] == [48, 63, 79, 94]
    assert [(e["code"], e["gpu_index"]) for e in result["xid_events"]] == [
        (48, 3), (94, 3), (63, 3), (79, 7), (79, 7)]
    assert result["count"] == 8  # the GPU queries ran too


def test_xid_from_journalctl_when_dmesg_is_refused(no_pynvml, tmp_path: Path, make_ctx) -> None:
    env = fake_bin(tmp_path, nvidia_smi=RECORDED, dmesg=REFUSED,
                   journalctl=f'echo "$*" > "$(dirname "$0")/journal_args"\ncat "{JOURNAL}"\n')
    result = gpu.run({}, make_ctx(5.0, env=env))
    assert result["xid_readable"] is True and result["xid_source"] == "journalctl"
    assert (tmp_path / "bin" / "journal_args").read_text().split() == [
        "-k", "-b", "--no-pager", "-o", "short-iso", "-n", "50000"]
    [event] = result["xid_events"]
    assert event["code"] == 48 and event["gpu_index"] == 3
    when = datetime.datetime.fromisoformat(event["time"])
    assert when == datetime.datetime(2024, 3, 5, 14, 22, 7, tzinfo=datetime.timezone.utc)


def test_xid_unreadable_is_a_field(no_pynvml, tmp_path: Path, make_ctx) -> None:
    env = fake_bin(tmp_path, nvidia_smi=RECORDED, dmesg=REFUSED, journalctl=NO_JOURNAL)
    result = gpu.run({}, make_ctx(5.0, env=env))
    assert result["available"] is True and result["count"] == 8
    assert result["xid_readable"] is False
    assert result["xid_reason"] == (
        "kernel log not readable: dmesg: dmesg: read kernel buffer failed: Operation not permitted; "
        "journalctl: no kernel messages (No journal files were found.)")
    assert result["xid_events"] == [] and result["xid_codes"] == [] and result["xid_count"] == 0


def test_xid_read_even_without_a_driver(no_pynvml, tmp_path: Path, make_ctx) -> None:
    """Xid 79 is why nvidia-smi fails: the kernel log is read whatever the GPU queries do."""
    message = "Unable to determine the device handle for GPU0000:DB:00.0: Unknown Error"
    env = fake_bin(tmp_path, nvidia_smi=f'echo "{message}"\nexit 15\n', dmesg=f'cat "{DMESG}"\n')
    result = gpu.run({}, make_ctx(5.0, env=env))
    assert result["available"] is False and result["reason"] == f"nvidia-smi failed: {message}"
    assert 79 in result["xid_codes"]
    assert result["xid_events"][-1]["gpu_index"] is None  # no GPU list to map it to


def test_xid_events_are_capped(no_pynvml, tmp_path: Path, make_ctx) -> None:
    lines = "".join(f"[Tue Mar  5 14:{i // 60:02d}:{i % 60:02d} 2024] NVRM: Xid (PCI:0000:18:00): "
                    f"{13 if i % 2 else 31}, pid=1, name=python, event {i}\n" for i in range(60))
    (tmp_path / "dmesg.txt").write_text(lines)
    env = fake_bin(tmp_path, dmesg=f'cat "{tmp_path / "dmesg.txt"}"\n')
    result = gpu.run({"source": "nvidia-smi"}, make_ctx(5.0, env=env))
    assert result["xid_count"] == 60 and result["xid_codes"] == [13, 31]
    assert len(result["xid_events"]) == gpu_xid.EVENTS_MAX == 50
    assert result["xid_events"][-1]["message"].endswith("event 59")  # the newest are kept
