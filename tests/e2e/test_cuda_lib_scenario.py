"""Issue #29: a real process whose LD_LIBRARY_PATH puts a CUDA library without the needed symbol
first (stand-in libraries built with cc), diagnosed end to end by `runbook run extension-errors`.

`cuda_lib_missing_symbol`: the job loads DIR/cuda-12.1/lib64/libcublasLt.so.12 (no
cublasLtGetVersion) through LD_LIBRARY_PATH, then the wheel's libcublas.so.12 fails with
`undefined symbol: cublasLtGetVersion`; the driver stays up. The cuda_libs check reads the
process's own LD_LIBRARY_PATH and maps and the libraries' .dynsym, and the finding names the old
copy, the wheel's copy and the variable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e
if not (shutil.which("cc") or shutil.which("gcc")):
    pytest.skip("the scenario builds its stand-in libraries with a C compiler", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0  # two cc runs on a busy 2-core machine


def test_cuda_lib_missing_symbol_diagnosed(scenario) -> None:
    job = scenario("cuda_lib_missing_symbol")
    assert job.wait_for_log(r"worker failed to start", START_TIMEOUT_S), job.read_log()[-2000:]
    old = job.workdir / "cuda-12.1" / "lib64" / "libcublasLt.so.12"
    wheel = job.workdir / "site-packages" / "nvidia" / "cublas" / "lib" / "libcublasLt.so.12"
    assert "undefined symbol: cublasLtGetVersion" in job.read_log()
    assert job.is_alive() and str(old) in Path(f"/proc/{job.pid}/maps").read_text()

    env = job.tool_env()
    env["RUNBOOK_LANG"] = "en"
    env.pop("LD_LIBRARY_PATH", None)  # the job's own value must come from its process
    # this tree's engine, not an installed one
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "engine"), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "runbook", "run", "extension-errors", "--set", f"log={job.log}",
            "--format", "json"]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert out.stdout, out.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.stdout)
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "cuda-library-missing-symbol", json.dumps(node)[:3000]
    finding = node["finding"]
    assert f"{old} (found through LD_LIBRARY_PATH) does not define cublasLtGetVersion" in finding
    assert f"the copy that defines it: {wheel}" in finding
    assert f"pid {job.pid} maps {old} from outside {wheel.parents[2]}" in finding
    assert f"LD_LIBRARY_PATH={old.parent}" in finding
    evidence = next(e["result"] for e in node["evidence"] if e["step"] == "cuda-libs")
    assert [(c["source"], c["defines"]) for c in evidence["candidates"][:2]] == [
        ("LD_LIBRARY_PATH", False), ("wheel", True)]
    assert os.path.realpath(evidence["loaded"]["path"]) == os.path.realpath(old)
