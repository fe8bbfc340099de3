"""The gpu_arch check on nvidia-smi CSV (a V100 node, an H100 node) through a fake nvidia-smi."""

from __future__ import annotations

from pathlib import Path

from runbook.checks.gpu import gpu_arch

V100 = "0, Tesla V100-SXM2-16GB, 7.0\n1, Tesla V100-SXM2-16GB, 7.0\n"
MIXED = "0, NVIDIA H100 80GB HBM3, 9.0\n1, Tesla T4, 7.5\n"


def fake_smi(tmp_path: Path, text: str, code: int = 0) -> str:
    script = tmp_path / "nvidia-smi"
    (tmp_path / "out.txt").write_text(text)
    script.write_text(f"#!/bin/sh\ncat '{tmp_path / 'out.txt'}'\nexit {code}\n")
    script.chmod(0o755)
    return str(script)


def test_parse_and_summary() -> None:
    gpus = gpu_arch.parse_csv(V100)
    assert gpus[0] == {"index": 0, "name": "Tesla V100-SXM2-16GB", "compute_cap": 7.0, "sm": "sm_70"}
    assert gpu_arch.summarize(gpus) == "2 x Tesla V100-SXM2-16GB (compute capability 7.0, sm_70)"


def test_below_min_is_the_lowest_gpu(tmp_path: Path, make_ctx) -> None:
    result = gpu_arch.run({"min_cc": "8.0", "nvidia_smi": fake_smi(tmp_path, MIXED)}, make_ctx())
    assert result["available"] and result["below_min"] is True
    assert result["lowest"]["name"] == "Tesla T4" and result["lowest"]["sm"] == "sm_75"
    high = gpu_arch.run({"min_cc": 7.0, "nvidia_smi": fake_smi(tmp_path, MIXED)}, make_ctx())
    assert high["below_min"] is False
    none = gpu_arch.run({"nvidia_smi": fake_smi(tmp_path, MIXED)}, make_ctx())
    assert none["below_min"] is None and none["min_cc"] is None


def test_old_driver_or_no_driver(tmp_path: Path, make_ctx) -> None:
    said = 'Field "compute_cap" is not a valid field to query.\n'
    old = gpu_arch.run({"nvidia_smi": fake_smi(tmp_path, said, 2)}, make_ctx())
    assert not old["available"] and "compute_cap" in old["reason"]
    missing = gpu_arch.run({"nvidia_smi": str(tmp_path / "absent")}, make_ctx())
    assert not missing["available"] and "not found" in missing["reason"]
