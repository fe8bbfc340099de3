#!/usr/bin/env python3
"""Scenario `cuda_lib_missing_symbol`: LD_LIBRARY_PATH puts an older cuBLASLt before the wheel's.

No GPU and no torch: two small C libraries (built with `cc` at start-up) play the CUDA libraries,
in the layout of pytorch#103832 and pytorch#174320.

1. The job's site-packages holds the "wheel": nvidia/cublas/lib/libcublasLt.so.12, which defines
   cublasLtGetVersion and cublasLtCreate, and libcublas.so.12, which calls cublasLtGetVersion and
   finds libcublasLt.so.12 through its RUNPATH ($ORIGIN), as NVIDIA's wheels do.
2. An "older system CUDA", WORKDIR/cuda-12.1/lib64, has a libcublasLt.so.12 with cublasLtCreate
   only. The launcher exports LD_LIBRARY_PATH=WORKDIR/cuda-12.1/lib64 and execs the job.
3. The job, like a framework preloading its CUDA libraries, loads libcublasLt.so.12 by name (the
   loader takes the LD_LIBRARY_PATH copy: searched before any RUNPATH), then the wheel's
   libcublas.so.12, which binds to the cuBLASLt already loaded and fails:
   `OSError: .../site-packages/nvidia/cublas/lib/libcublas.so.12: undefined symbol:
   cublasLtGetVersion`. The driver logs the traceback and stays up (as a Ray driver does after a
   worker dies), with the old copy still mapped.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import exec_self, say  # noqa: E402

LT_NEW = "int cublasLtGetVersion(void) { return 120901; }\nint cublasLtCreate(void **h) { return 0; }\n"
LT_OLD = "int cublasLtCreate(void **h) { return 0; }\n"
CUBLAS = ("int cublasLtGetVersion(void);\n"
          "int cublasGetVersion(void) { return cublasLtGetVersion(); }\n")


def build(cc: str, out: str, source: str, *link: str) -> None:
    os.makedirs(os.path.dirname(out), exist_ok=True)
    src = out + ".c"
    with open(src, "w") as fh:
        fh.write(source)
    subprocess.run([cc, "-shared", "-fPIC", "-o", out, src, f"-Wl,-soname,{os.path.basename(out)}", *link],
                   check=True, timeout=120)
    os.unlink(src)


def install(workdir: str) -> tuple[str, str]:
    """(the wheel's lib directory, the old CUDA's lib64) with the libraries built in them."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise SystemExit("this scenario needs a C compiler (cc) to build its stand-in libraries")
    wheel = os.path.join(workdir, "site-packages", "nvidia", "cublas", "lib")
    old = os.path.join(workdir, "cuda-12.1", "lib64")
    build(cc, os.path.join(wheel, "libcublasLt.so.12"), LT_NEW)
    build(cc, os.path.join(old, "libcublasLt.so.12"), LT_OLD)
    # RUNPATH $ORIGIN (new dtags): LD_LIBRARY_PATH is searched first, as with NVIDIA's wheels.
    build(cc, os.path.join(wheel, "libcublas.so.12"), CUBLAS, "-L" + wheel, "-l:libcublasLt.so.12",
          "-Wl,-rpath,$ORIGIN", "-Wl,--enable-new-dtags")
    return wheel, old


def job(wheel: str, speed: float) -> None:
    say(f"[driver] pid {os.getpid()}: LD_LIBRARY_PATH={os.environ.get('LD_LIBRARY_PATH', '')}")
    try:
        ctypes.CDLL("libcublasLt.so.12", mode=ctypes.RTLD_GLOBAL)  # preloaded by name
        ctypes.CDLL(os.path.join(wheel, "libcublas.so.12"), mode=ctypes.RTLD_GLOBAL)
        say("[driver] CUDA libraries loaded")  # not reached
    except OSError:
        sys.stdout.write(traceback.format_exc())
        sys.stdout.flush()
        say("[driver] worker failed to start; waiting for the others")
    while True:
        time.sleep(1.0 / speed)


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="accepted for uniformity")
    ap.add_argument("--job", default="", help="(internal) the wheel's lib directory: run the job")
    args = ap.parse_args(argv)
    if args.job:
        job(args.job, args.speed)
        return 0
    wheel, old = install(os.path.abspath("."))
    env = {**os.environ, "LD_LIBRARY_PATH": old}
    say(f"[launcher] export LD_LIBRARY_PATH={old}; exec the job")
    exec_self(__file__, env, "--speed", str(args.speed), "--job", wheel)
    return 1


if __name__ == "__main__":
    sys.exit(main())
