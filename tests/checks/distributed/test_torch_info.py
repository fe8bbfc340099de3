"""The `torch` check against the real installed torch (CPU build), in a child of the node's Python."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runbook.checks.base import CheckContext
from runbook.checks.distributed import _torch_worker, torch_info

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed here")


@pytest.fixture
def rank_process() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """rank_process(**env) -> a sleeping Python with the given distributed env; killed at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def spawn(**env: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                env={**os.environ, **env})
        started.append(proc)
        time.sleep(0.1)
        return proc

    yield spawn
    for proc in started:
        proc.kill()
        proc.wait(timeout=10)


@needs_torch
def test_real_cpu_torch(make_ctx: Callable[..., CheckContext]) -> None:
    result = torch_info.run({"python": sys.executable}, make_ctx(60, env={"PATH": os.environ["PATH"]}))
    assert result["available"] is True, result["reason"]
    # "2.13.0+cpu" here; a CUDA build's metadata may lack the local tag ("2.11.0" for "2.11.0+cu130")
    assert result["version"].split("+")[0] == importlib.metadata.version("torch").split("+")[0]
    assert result["python"] == sys.executable
    if "+cpu" in result["version"]:
        assert result["cuda"] is None and result["cudnn"] is None and result["nccl_version"] is None
        assert result["cuda_available"] is False and result["device_count"] == 0
        assert result["nccl_available"] is False
    assert result["gloo_available"] is True
    assert result["import_s"] > 0
    assert result["env_source"] == "probe"
    assert result["distributed"] == dict.fromkeys(torch_info.DIST_VARS)
    assert result["world_size"] is None and result["world_size_ok"] is None
    assert result["visible_devices"] is None  # CUDA_VISIBLE_DEVICES not set


@needs_torch
def test_world_size_mismatch_read_from_the_training_process(
    rank_process: Callable[..., subprocess.Popen[bytes]], make_ctx: Callable[..., CheckContext],
) -> None:
    proc = rank_process(RANK="3", WORLD_SIZE="8", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2",
                        MASTER_ADDR="10.0.0.1", MASTER_PORT="29500", CUDA_VISIBLE_DEVICES="0,1")
    result = torch_info.run({"pid": proc.pid, "gpus_per_node": 2, "num_nodes": 2}, make_ctx(60))
    assert result["available"] is True, result["reason"]
    assert result["env_source"] == f"pid {proc.pid}" and result["env_error"] is None
    assert result["python"] == sys.executable  # the training process's interpreter
    assert result["distributed"] == {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1",
                                     "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1",
                                     "MASTER_PORT": "29500"}
    assert result["world_size"] == 8 and result["expected_world_size"] == 4
    assert result["world_size_ok"] is False
    assert result["world_size_reason"] == "world_size is 8, but num_nodes*gpus_per_node is 4 (2*2)"
    assert result["visible_devices"] == 2  # the training process's CUDA_VISIBLE_DEVICES


@needs_torch
def test_world_size_matches(
    rank_process: Callable[..., subprocess.Popen[bytes]], make_ctx: Callable[..., CheckContext],
) -> None:
    proc = rank_process(WORLD_SIZE="4")
    result = torch_info.run({"pid": str(proc.pid), "gpus_per_node": "2", "num_nodes": "2"}, make_ctx(60))
    assert result["world_size_ok"] is True and result["world_size_reason"] is None


def test_world_size_check() -> None:
    # gpus_per_node defaults to the GPUs torch sees
    assert torch_info.world_size_check(16, 2, None, 8)["world_size_ok"] is True
    no_gpu = torch_info.world_size_check(8, 2, None, 0)
    assert no_gpu["world_size_ok"] is None and no_gpu["world_size_reason"] == (
        "cannot compare: gpus_per_node unknown")
    given = torch_info.world_size_check(8, 1, 4, 8)  # the parameter wins over device_count
    assert given["expected_world_size"] == 4 and given["world_size_ok"] is False


def test_visible_devices() -> None:
    assert torch_info.visible_devices(None) is None  # unset: every device is visible
    assert torch_info.visible_devices("0,1") == 2
    assert torch_info.visible_devices(" 0, 1 ,2,3") == 4
    assert torch_info.visible_devices("GPU-5b3c0f9e-1a2b-3c4d-5e6f-0123456789ab,MIG-1") == 2
    # CUDA stops at the first invalid entry: these hide every device, or the ones after it
    assert torch_info.visible_devices("") == 0
    assert torch_info.visible_devices("-1") == 0
    assert torch_info.visible_devices("NoDevFiles") == 0
    assert torch_info.visible_devices("0,1,-1,2") == 2


def _fake_python(tmp_path: Path, body: str) -> str:
    path = tmp_path / "python3"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_torch_missing(tmp_path: Path, make_ctx: Callable[..., CheckContext]) -> None:
    python = _fake_python(tmp_path, f'exec "{sys.executable}" -S "$@"')  # -S: no site-packages
    result = torch_info.run({"python": python}, make_ctx(30))
    assert result["available"] is False
    assert result["reason"].startswith(f"torch is not installed for {python}")
    assert result["version"] is None


def test_hanging_import_is_killed(tmp_path: Path, make_ctx: Callable[..., CheckContext]) -> None:
    python = _fake_python(tmp_path, "sleep 60")
    start = time.monotonic()
    result = torch_info.run({"python": python}, make_ctx(1.5))
    assert time.monotonic() - start < 5
    assert result["available"] is False and result["timed_out"] is True
    assert "did not finish" in result["reason"]


def test_unknown_pid(make_ctx: Callable[..., CheckContext], tmp_path: Path) -> None:
    python = _fake_python(tmp_path, f'exec "{sys.executable}" -S "$@"')
    result = torch_info.run({"pid": 2**22 + 12345, "python": python}, make_ctx(30))
    assert result["env_error"] == f"no process with pid {2**22 + 12345}"
    assert result["world_size"] is None


def test_format_nccl_version() -> None:
    assert _torch_worker.format_nccl_version((2, 21, 5)) == "2.21.5"
    assert _torch_worker.format_nccl_version(22105) == "2.21.5"
    assert _torch_worker.format_nccl_version(2708) == "2.7.8"
    assert _torch_worker.format_nccl_version(None) is None
