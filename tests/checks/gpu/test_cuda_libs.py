"""The cuda_libs check: error lines from public threads, maps text, and a real process on this CPU
where LD_LIBRARY_PATH puts a library without the needed symbol first."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runbook.checks.gpu import cuda_libs

DATA = Path(__file__).resolve().parents[2] / "data" / "cuda-libs"

# Verbatim lines: pytorch/pytorch#111469, zai-org/ChatGLM-6B#921 (shape), verl-project/verl#5659.
NVJITLINK = ("ImportError: /usr/local/lib/python3.10/dist-packages/torch/lib/../../nvidia/cusparse/lib/"
             "libcusparse.so.12: undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12")
CUBLASLT = ("OSError: /home/jz748/anaconda3/envs/tf/lib/python3.10/site-packages/nvidia/cublas/lib/"
            "libcublas.so.11: symbol cublasLtHSHMatmulAlgoInit, version libcublasLt.so.11 not defined in "
            "file libcublasLt.so.11 with link time reference")
CANNOT_LOAD = ("(WorkerDict pid=23189) Invalid handle. Cannot load symbol cublasLtGetVersion "
               "[repeated 7x across cluster]")


def test_error_lines_name_symbol_library_and_who_needs_it() -> None:
    assert cuda_libs.parse_error(NVJITLINK) == {
        "symbol": "__nvJitLinkAddData_12_1", "library": "libnvJitLink.so.12",
        "needed_by": "/usr/local/lib/python3.10/dist-packages/torch/lib/../../nvidia/cusparse/lib/"
                     "libcusparse.so.12"}
    assert cuda_libs.parse_error(CUBLASLT)["symbol"] == "cublasLtHSHMatmulAlgoInit"
    assert cuda_libs.parse_error(CUBLASLT)["library"] == "libcublasLt.so.11"
    assert cuda_libs.parse_error(CANNOT_LOAD) == {"symbol": "cublasLtGetVersion", "library": "libcublasLt",
                                                  "needed_by": None}
    assert cuda_libs.parse_error("RuntimeError: CUDA out of memory")["symbol"] is None
    cudnn = ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled against (8, 3, 2) but linked "
             "against (8, 0, 3)")  # pytorch/pytorch#80637
    assert cuda_libs.parse_error(cudnn) == {"symbol": None, "library": "libcudnn", "needed_by": None}


def test_wheels_dir_from_torch_relative_path() -> None:
    assert cuda_libs.wheels_dir_of(cuda_libs.parse_error(NVJITLINK)["needed_by"]) == \
        "/usr/local/lib/python3.10/dist-packages/nvidia"
    assert cuda_libs.wheels_dir_of("/usr/local/cuda/lib64/libcublas.so.12") is None


def test_maps_flag_the_library_from_ld_library_path() -> None:
    paths = cuda_libs.parse_maps((DATA / "maps-ld-library-path.txt").read_text())
    assert "/usr/local/cuda-12.1/lib64/libnvJitLink.so.12" in paths
    assert len(paths) == 6 and not any(os.path.basename(p).startswith(("libtorch", "python")) for p in paths)
    assert paths[-1].endswith("libnccl.so.2")  # " (deleted)" removed
    _entries, outside = cuda_libs.mapped_entries(paths, "/opt/conda/lib/python3.10/site-packages/nvidia")
    assert outside == ["/usr/local/cuda-12.1/lib64/libnvJitLink.so.12"]


def _cc() -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    return cc


def _build(cc: str, out: Path, source: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.parent / "src.c"
    src.write_text(source)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-soname,{out.name}"],
                   check=True, capture_output=True, timeout=60)


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """A site-packages whose nvidia wheel has the symbol, and an 'old system CUDA' copy without it."""
    cc = _cc()
    wheel = tmp_path / "site-packages" / "nvidia" / "cublas" / "lib" / "libcublasLt.so.12"
    old = tmp_path / "cuda-12.1" / "lib64" / "libcublasLt.so.12"
    _build(cc, wheel, "int cublasLtGetVersion(void) { return 120901; }\n"
                      "int cublasLtCreate(void) { return 0; }\n")
    _build(cc, old, "int cublasLtCreate(void) { return 0; }\n")
    return {"wheel": wheel, "old": old, "site": tmp_path / "site-packages"}


def test_ld_library_path_copy_without_the_symbol_is_named(layout: dict[str, Path], make_ctx) -> None:
    result = cuda_libs.run({"error": CANNOT_LOAD, "ld_library_path": str(layout["old"].parent),
                            "site_packages": str(layout["site"])}, make_ctx())
    assert result["available"] and result["symbol"] == "cublasLtGetVersion"
    assert [(c["source"], c["defines"]) for c in result["candidates"][:2]] == [
        ("LD_LIBRARY_PATH", False), ("wheel", True)]
    assert result["lacking"] == str(layout["old"])
    assert result["provider"] == str(layout["wheel"])


def test_nothing_lacking_when_the_wheel_is_first(layout: dict[str, Path], make_ctx) -> None:
    result = cuda_libs.run({"symbol": "cublasLtGetVersion", "library": "libcublasLt.so.12",
                            "ld_library_path": "/nonexistent", "site_packages": str(layout["site"])},
                           make_ctx())
    assert result["lacking"] is None and result["loaded"]["source"] == "wheel"


def test_nothing_to_examine(make_ctx) -> None:
    result = cuda_libs.run({"error": "no symbol here"}, make_ctx())
    assert not result["available"] and "no symbol" in result["reason"]


def test_a_real_process_maps_the_old_copy(layout: dict[str, Path], make_ctx) -> None:
    """CPU reproduction: a process whose LD_LIBRARY_PATH puts the old copy first loads it by soname."""
    env = {**os.environ, "LD_LIBRARY_PATH": str(layout["old"].parent)}
    code = ("import ctypes, sys, time\nctypes.CDLL('libcublasLt.so.12')\nprint('loaded', flush=True)\n"
            "sys.stdin.readline()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "loaded"
        deadline = time.monotonic() + 10
        result: dict = {}
        while time.monotonic() < deadline:  # bounded: the maps are there once the line is printed
            result = cuda_libs.run({"pid": proc.pid, "symbol": "cublasLtGetVersion", "library": "libcublasLt",
                                    "site_packages": str(layout["site"])}, make_ctx())
            if result["mapped"]:
                break
            time.sleep(0.1)
        assert result["pid"] == proc.pid
        assert result["ld_library_path"] == [str(layout["old"].parent)]  # the process's, not ours
        assert result["outside"] == [str(layout["old"])]
        assert result["loaded"]["mapped"] and result["loaded"]["source"] == "LD_LIBRARY_PATH"
        assert result["lacking"] == str(layout["old"])
        assert result["provider"] == str(layout["wheel"])
    finally:
        proc.communicate("\n", timeout=10)
