#!/usr/bin/env python3
"""Scenario `stale_extension_lock`: a JIT extension build waits forever on a lock a killed build left.

Real torch on CPU (needs `torch`), no compiler needed: the build never gets past the lock.

1. The previous start of the job (a child process here) began building the `fused_scale` op in
   the job's extensions directory, WORKDIR/torch_extensions: torch's own `FileBaton` created
   `torch_extensions/fused_scale/lock`, the way `torch.utils.cpp_extension` does before it runs
   ninja. It was killed (SIGKILL, as the OOM killer or a job timeout does), so the lock stayed.
2. The job then runs with `TORCH_EXTENSIONS_DIR` set to that directory in its environment (it
   execs itself with it, like a launcher script's `export TORCH_EXTENSIONS_DIR=...; exec python`),
   logs `Using .../torch_extensions as PyTorch extensions root...` (torch's own line) and calls
   `torch.utils.cpp_extension.load_inline(name="fused_scale", ...)`. `_jit_compile` finds the lock
   taken and waits in `FileBaton.wait()`, polling every 0.1 s for a file nobody will remove: the
   log stops there, no ninja or compiler runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import exec_self, say  # noqa: E402

OP = "fused_scale"
CPP = "torch::Tensor scale(torch::Tensor x, double factor) { return x * factor; }"
# What the killed build ran: torch's lock, taken like _jit_compile takes it, then the process waits
# for ninja (here: forever, until it is killed).
PREVIOUS_BUILD = (
    "import os, sys, time\n"
    "from torch.utils.file_baton import FileBaton\n"
    "folder = os.path.join(sys.argv[1], sys.argv[2]); os.makedirs(folder, exist_ok=True)\n"
    "assert FileBaton(os.path.join(folder, 'lock')).try_acquire()\n"
    "print('building', flush=True)\n"
    "time.sleep(3600)\n"
)


def killed_build(root: str) -> None:
    """Start a build that takes the lock, and kill it mid-way: its lock stays behind."""
    build = subprocess.Popen([sys.executable, "-c", PREVIOUS_BUILD, root, OP], stdout=subprocess.PIPE,
                             text=True)
    assert build.stdout is not None
    if build.stdout.readline().strip() != "building":
        raise SystemExit(f"the previous build did not start (exit {build.wait()})")
    build.send_signal(signal.SIGKILL)  # no finally runs: FileBaton.release() never happens
    build.wait()
    say(f"[launcher] previous build of {OP} (pid {build.pid}) was killed with SIGKILL; "
        f"{os.path.join(root, OP, 'lock')} is left behind")


def build_op(speed: float) -> None:
    """The job proper: JIT-build the op like a DeepSpeed or custom-kernel job does at start-up."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    import torch
    from torch.utils.cpp_extension import load_inline

    # verbose=True logs torch's own "Using ... as PyTorch extensions root..." line at INFO level
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.INFO)

    say(f"[rank 0] pid {os.getpid()}: torch {torch.__version__}, building op {OP} (JIT)")
    module = load_inline(name=OP, cpp_sources=[CPP], functions=["scale"], verbose=True)
    say(f"[rank 0] op {OP} loaded: {module.scale(torch.ones(2), 2.0).tolist()}")  # never reached
    while True:
        time.sleep(1.0 / speed)


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="accepted for uniformity")
    ap.add_argument("--build", action="store_true", help="(internal) the job after the launcher")
    args = ap.parse_args(argv)
    if args.build:
        build_op(args.speed)
        return 0
    root = os.path.abspath("torch_extensions")  # in the job's working directory
    killed_build(root)
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": root}
    say(f"[launcher] export TORCH_EXTENSIONS_DIR={root}; exec the job")
    exec_self(__file__, env, "--speed", str(args.speed), "--build")
    return 1


if __name__ == "__main__":
    sys.exit(main())
