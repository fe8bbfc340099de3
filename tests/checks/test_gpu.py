"""`gpu`: this machine as it is, fake nvidia-smi programs on PATH, and a stub pynvml module.

The CSV files in data/ are samples in nvidia-smi's exact `csv,noheader,nounits` format for
an 8x H100 80GB HBM3 node where 7 ranks spin in a collective and rank 5 does not (0%).
"""

from __future__ import annotations

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

from runbook.checks import gpu

DATA = Path(__file__).parent / "data"
GPU_CSV = DATA / "nvidia_smi_gpu_8xH100.csv"
APPS_CSV = DATA / "nvidia_smi_apps_8xH100.csv"
MIB = 1024 * 1024


@pytest.fixture
def no_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError


def fake_smi(tmp_path: Path, body: str) -> dict[str, str]:
    """An env whose PATH starts with a directory holding an `nvidia-smi` shell script."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


RECORDED = f"""echo "$*" >> "$(dirname "$0")/args"
case "$*" in
  *--query-compute-apps*) cat "{APPS_CSV}" ;;
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


def test_recorded_nvidia_smi_output(no_pynvml, tmp_path: Path, make_ctx) -> None:
    result = gpu.run({}, make_ctx(5.0, env=fake_smi(tmp_path, RECORDED)))
    assert result["available"] is True and result["timed_out"] is False
    assert result["source"] == "nvidia-smi"
    assert result["reason"] is None
    assert result["driver_version"] == "535.129.03"
    assert result["count"] == 8
    assert result["gpus"][0] == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-8f6c1a2e-3b4d-5e6f-7a8b-9c0d1e2f3a4b",
        "utilization_percent": 100,
        "memory_used_mib": 71234,
        "memory_total_mib": 81559,
        "temperature_c": 54,
        "power_w": 142.87,
        "processes": [{"pid": 48211, "used_mib": 70686}, {"pid": 48391, "used_mib": None}],
    }
    assert result["gpus"][5]["utilization_percent"] == 0
    assert result["gpus"][7]["power_w"] is None  # [N/A]
    assert [g["processes"][0]["pid"] for g in result["gpus"]] == list(range(48211, 48219))
    assert result["max_util"] == 100
    assert result["mean_util"] == 87.5
    assert result["memory_used_mib"] == 568366
    args = (tmp_path / "bin" / "args").read_text().splitlines()
    assert args == [
        f"--query-gpu={gpu.GPU_QUERY} --format=csv,noheader,nounits",
        f"--query-compute-apps={gpu.APPS_QUERY} --format=csv,noheader,nounits",
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


def test_nvml_with_stub(monkeypatch: pytest.MonkeyPatch, make_ctx) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", stub_pynvml())
    result = gpu.run({}, make_ctx(3.0))
    assert result["available"] is True and result["timed_out"] is False
    assert result["source"] == "nvml"
    assert result["driver_version"] == "550.54.15"
    assert result["gpus"] == [
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
