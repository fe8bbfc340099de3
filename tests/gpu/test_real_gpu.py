"""The GPU checks on a real NVIDIA GPU (`pytest -m gpu`; scripts/gpu-check.sh runs them there).

Skipped where `nvidia-smi -L` lists no GPU, as on CI. Each test starts what it needs: a real
CUDA job (scripts/gpu/matmul_loop.py) or a real out-of-memory error (scripts/gpu/real_oom.py),
and asks the probe as `runbook` does on a node.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GPU_JOBS = ROOT / "scripts" / "gpu"
# The jobs need a CUDA build of torch: the machine's own Python where runbook's venv has a CPU one.
JOB_PYTHON = os.environ.get("GPU_PYTHON") or sys.executable


def _gpus_listed() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listed.returncode == 0 and "GPU 0" in listed.stdout


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _gpus_listed(), reason="no NVIDIA GPU here")]
HAS_NVML = importlib.util.find_spec("pynvml") is not None
HELD_MIB = 2048
RANK_ENV = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}  # as a launcher starts a rank
# The engine first, then whatever the caller put on the path (scripts/gpu-check.sh: offline wheels).
ENV = {**os.environ, "RUNBOOK_LANG": "en",
       "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "engine"), os.environ.get("PYTHONPATH")) if p)}


def probe(check: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> dict[str, Any]:
    """One check through the real probe, as the local transport runs it."""
    request = {"check": check, "with": params or {}, "timeout": timeout}
    done = subprocess.run([sys.executable, "-m", "runbook.probe"], input=json.dumps(request),
                          capture_output=True, text=True, timeout=timeout + 30, env=ENV)
    answer = json.loads(done.stdout)
    assert "result" in answer, answer
    return answer


def runbook(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=ENV)


@pytest.fixture(scope="module")
def cuda_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A real CUDA job holding HELD_MIB of GPU memory, logging a step a second."""
    log = tmp_path_factory.mktemp("cuda-job") / "train.log"
    with log.open("wb") as out:
        job = subprocess.Popen([JOB_PYTHON, str(GPU_JOBS / "matmul_loop.py"), "--seconds", "240",
                                "--hold-gib", str(HELD_MIB / 1024)], stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True, env={**ENV, **RANK_ENV})
    try:
        deadline = time.monotonic() + 90
        while "step 2 " not in log.read_text(errors="replace"):
            assert job.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.5)
        yield job, log
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=30)


def _gpus(source: str) -> dict[str, Any]:
    result = probe("gpu", {"source": source, "xid": True})["result"]
    assert result["available"] and result["source"] == source, result
    return result


@pytest.mark.skipif(not HAS_NVML, reason="nvidia-ml-py (pynvml) is not installed")
def test_nvml_and_nvidia_smi_see_the_same_gpus() -> None:
    nvml, smi = _gpus("nvml"), _gpus("nvidia-smi")
    assert nvml["count"] == smi["count"] >= 1
    assert nvml["driver_version"] == smi["driver_version"]
    for a, b in zip(nvml["gpus"], smi["gpus"], strict=True):
        for field in ("index", "name", "uuid", "memory_total_mib", "mig_enabled", "ecc", "remapped_rows"):
            assert a[field] == b[field], (field, a[field], b[field])
        assert a["pci_bus_id"].lower() == b["pci_bus_id"].lower()
        assert a["power_limit_w"] == pytest.approx(b["power_limit_w"], abs=1.0)
        assert a["clocks"]["max_sm_mhz"] == b["clocks"]["max_sm_mhz"]
        for field in ("max_gen", "max_width"):
            assert a["pcie"][field] == b["pcie"][field], field
        # Both leave the driver's reserved memory out of `used` (NVML v1 counted it: 480 MiB on an
        # idle H100); nothing else runs on the GPU yet, so the two readings agree.
        used = (a["memory_used_mib"], b["memory_used_mib"])
        assert abs(used[0] - used[1]) <= 64, used


@pytest.mark.parametrize("source", ["nvml", "nvidia-smi"])
def test_every_health_field_is_read(source: str) -> None:
    if source == "nvml" and not HAS_NVML:
        pytest.skip("nvidia-ml-py (pynvml) is not installed")
    for gpu in _gpus(source)["gpus"]:
        unread = [k for k in ("name", "uuid", "pci_bus_id", "memory_total_mib", "temperature_c", "power_w",
                              "power_limit_w", "throttle_reasons", "mig_enabled") if gpu[k] is None]
        for group in ("clocks", "ecc", "remapped_rows", "pcie"):
            unread += [f"{group}.{k}" for k, v in gpu[group].items() if v is None]
        assert unread == [], f"GPU {gpu['index']} ({gpu['name']}): not read: {unread}"


@pytest.mark.parametrize("source", ["nvml", "nvidia-smi"])
def test_a_cuda_job_is_seen_with_its_memory(cuda_job: tuple[subprocess.Popen[bytes], Path],
                                            source: str) -> None:
    if source == "nvml" and not HAS_NVML:
        pytest.skip("nvidia-ml-py (pynvml) is not installed")
    job, _ = cuda_job
    gpu = _gpus(source)["gpus"][0]
    assert gpu["memory_used_mib"] >= HELD_MIB
    mine = [p for p in gpu["processes"] if p["pid"] == job.pid]
    assert mine, f"pid {job.pid} not among {gpu['processes']}"
    assert mine[0]["used_mib"] is None or mine[0]["used_mib"] >= HELD_MIB


def test_the_torch_check_sees_cuda_through_the_jobs_interpreter(
        cuda_job: tuple[subprocess.Popen[bytes], Path]) -> None:
    job, _ = cuda_job
    result = probe("torch", {"pid": job.pid}, timeout=60)["result"]
    assert result["available"], result
    assert result["cuda_available"] is True and result["device_count"] >= 1, result
    assert result["cuda"] and result["nccl_version"], result
    assert result["distributed"]["RANK"] == "0" and result["world_size"] == 1


def test_training_hang_on_a_moving_cuda_job_finds_no_problem(
        cuda_job: tuple[subprocess.Popen[bytes], Path]) -> None:
    _, log = cuda_job
    done = runbook("run", "training-hang", "--set", f"log={log}", "--format", "json")
    report = json.loads(done.stdout)
    node = report["nodes"][0]
    assert node["status"] == "concluded", node
    assert node["conclusion"]["severity"] in ("ok", "info"), node["conclusion"]
    assert done.returncode == 0, done.stderr


def test_a_real_cuda_oom_is_diagnosed_as_gpu_memory(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    with log.open("wb") as out:
        died = subprocess.run([JOB_PYTHON, str(GPU_JOBS / "real_oom.py")], stdout=out,
                              stderr=subprocess.STDOUT, timeout=240, env={**ENV, **RANK_ENV})
    text = log.read_text(errors="replace")
    assert died.returncode == 1 and "CUDA out of memory" in text, text[-2000:]
    done = runbook("run", "cuda-oom", "--set", f"log={log}", "--format", "json")
    node = json.loads(done.stdout)["nodes"][0]
    assert "oom.gpu" in node["conclusion"]["taxonomy"], node
    assert done.returncode == 1
