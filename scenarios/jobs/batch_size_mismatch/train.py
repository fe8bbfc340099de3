#!/usr/bin/env python3
"""Scenario `batch_size_mismatch`: DeepSpeed refuses a global batch the ranks cannot make.

A real DeepSpeed job on CPU (needs `torch` and `deepspeed`). The job was written for one node of
8 GPUs: its DeepSpeed config (`ds_config.json`, written to its working directory) asks for
`train_batch_size` 16 = 2 per GPU x 1 accumulation step x 8. It is started on the 3 GPUs that
are left, with real torchrun (`python -m torch.distributed.run --nproc_per_node 3`). Every rank
joins the gloo process group (`deepspeed.init_distributed`) and calls `deepspeed.initialize`,
whose config parser raises its own assertion:

    AssertionError: Check batch related parameters. train_batch_size is not equal to
    micro_batch_per_gpu * gradient_acc_step * world_size 16 != 2 * 1 * 3

torchrun reports the failed ranks (`ChildFailedError`) and the job exits 1 before training.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import free_port as _free_port  # noqa: E402
from _helpers import say as _say

CONFIG_FILE = "ds_config.json"
NPROC = 3  # the GPUs left on the node
CONFIG = {  # written for 8 GPUs: 2 x 1 x 8 = 16
    "train_batch_size": 16,
    "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 1,
    "optimizer": {"type": "SGD", "params": {"lr": 0.01}},
    "zero_optimization": {"stage": 0},
}


def rank_main(config_path: str) -> None:
    """One rank, as torchrun starts it (RANK, WORLD_SIZE, MASTER_* in the environment)."""
    import deepspeed
    import torch

    deepspeed.init_distributed(dist_backend="gloo")
    rank = int(os.environ["RANK"])
    model = torch.nn.Linear(8, 1)
    _say(f"[rank{rank}] process group up: world_size {os.environ['WORLD_SIZE']}; "
         f"deepspeed.initialize with {config_path}")
    deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config_path)
    _say(f"[rank{rank}] engine ready")  # not reached with the config above


def launch(speed: float) -> int:
    """Write the config for 8 GPUs and start the job on 3 with torchrun; its exit status."""
    path = os.path.abspath(CONFIG_FILE)
    with open(path, "w") as f:
        json.dump(CONFIG, f, indent=2)
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={NPROC}",
               "--master_addr=127.0.0.1", f"--master_port={_free_port()}",
               os.path.abspath(__file__), "--rank", path]
    _say("+ torchrun --nproc_per_node 3 train.py --deepspeed " + CONFIG_FILE)
    # DeepSpeed picks the CPU accelerator by itself without a GPU; said here so a GPU machine
    # runs the same job.
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"}
    return subprocess.call(command, env=env)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--speed", type=float, default=1.0)  # the launcher's common option
    parser.add_argument("--rank", metavar="CONFIG", help="run one rank (torchrun starts these)")
    args = parser.parse_args()
    if args.rank:
        rank_main(args.rank)
        return
    sys.exit(launch(args.speed))


if __name__ == "__main__":
    main()
