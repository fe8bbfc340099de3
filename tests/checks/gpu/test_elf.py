"""The stdlib ELF reader, on real shared libraries of this machine (libc, torch's libc10)."""

from __future__ import annotations

import ctypes.util
import glob
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runbook.checks.gpu import _elf


def _libc() -> str:
    for pattern in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/lib64/libc.so.6",
                    "/usr/lib*/libc.so.6"):
        found = glob.glob(pattern)
        if found:
            return found[0]
    pytest.skip(f"no libc.so.6 found ({ctypes.util.find_library('c')})")


def test_libc_defines_malloc_and_not_a_made_up_name() -> None:
    libc = _libc()
    assert _elf.defines(libc, "malloc") is True
    assert _elf.defines(libc, "cublasLtGetStatusString") is False


def test_undefined_imports_are_not_counted_as_defined() -> None:
    torch = pytest.importorskip("torch")
    lib = Path(torch.__file__).parent / "lib" / "libc10.so"
    if not lib.is_file():
        pytest.skip("torch has no libc10.so here")
    names = _elf.dynamic_symbols(str(lib))
    assert names and "malloc" not in names  # libc10 imports malloc; it does not define it
    if shutil.which("nm"):  # the optional cross-check against binutils
        out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True,
                             timeout=60, check=True).stdout
        nm_names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
        assert names == nm_names


def test_not_elf_or_missing_is_unknown(tmp_path: Path) -> None:
    text = tmp_path / "libfake.so"
    text.write_text("not a library")
    assert _elf.defines(str(text), "x") is None
    assert _elf.defines(str(tmp_path / "absent.so"), "x") is None
    with pytest.raises(_elf.ElfError):
        _elf.dynamic_symbols(str(text))


def test_python_binary_reads_without_error() -> None:
    # An executable (not a .so) still has a .dynsym: the reader does not care which.
    assert _elf.dynamic_symbols(sys.executable) is not None
