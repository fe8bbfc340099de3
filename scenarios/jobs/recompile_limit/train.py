#!/usr/bin/env python3
"""Scenario `recompile_limit`: torch.compile recompiles at every step until dynamo gives up.

Real torch on CPU (needs `torch`), no compiler needed: `torch.compile(backend="eager")` runs
dynamo's tracing and guards (what recompiles) without inductor's code generation.

A multi-task model (a shared trunk, one head per task, 12 tasks in turn) trains with a compiled
step that takes the task's name as a Python string and picks its head with it. A string is
always specialised (automatic dynamic shapes help ints, not strings), so each new task fails a
guard (`task == 'task03'`) and dynamo compiles again; `TORCH_LOGS=recompiles` (set by the job
for itself, as a user debugging it would) prints each `Recompiling function ...` with the guard
that failed. After `torch._dynamo.config.recompile_limit` compilations (8) dynamo warns that it
hit the limit and runs the step eagerly from then on. Training goes on: the log keeps moving.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import exec_self, say  # noqa: E402


def train(speed: float) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    import torch

    torch.manual_seed(0)
    tasks = [f"task{i:02d}" for i in range(12)]
    trunk = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU())
    heads = torch.nn.ModuleDict({task: torch.nn.Linear(32, 1) for task in tasks})
    params = list(trunk.parameters()) + list(heads.parameters())
    optimizer = torch.optim.SGD(params, lr=0.01)

    def loss_of(x: torch.Tensor, y: torch.Tensor, task: str) -> torch.Tensor:
        # `task` is a Python string: dynamo guards on its value, a new task fails the guard
        return ((heads[task](trunk(x)) - y) ** 2).mean()

    step_fn = torch.compile(loss_of, backend="eager")
    say(f"[rank 0] pid {os.getpid()}: torch {torch.__version__}, torch.compile(backend='eager'), "
        f"{len(tasks)} tasks, recompile limit {torch._dynamo.config.recompile_limit}")
    step = 0
    while True:
        step += 1
        task = tasks[step % len(tasks)]
        x, y = torch.randn(32, 16), torch.randn(32, 1)
        started = time.monotonic()
        loss = step_fn(x, y, task)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        say(f"step {step} | loss {loss.item():.4f} | lr 1.0e-02 | {task} | "
            f"{(time.monotonic() - started) * 1000:.0f} ms")
        time.sleep(0.5 / speed)


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="steps are 0.5 s / speed apart")
    ap.add_argument("--train", action="store_true", help="(internal) the job, with TORCH_LOGS set")
    args = ap.parse_args(argv)
    if args.train:
        train(args.speed)
        return 0
    env = {**os.environ, "TORCH_LOGS": "recompiles"}  # how the user sees why it recompiles
    say("[launcher] export TORCH_LOGS=recompiles; exec the job")
    exec_self(__file__, env, "--speed", str(args.speed), "--train")
    return 1


if __name__ == "__main__":
    sys.exit(main())
