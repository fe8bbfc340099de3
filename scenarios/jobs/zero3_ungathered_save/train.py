#!/usr/bin/env python3
"""Scenario `zero3_ungathered_save` (#29): a ZeRO-3-style job saves its model without gathering it.

Needs `torch`. Started as one process, the "job", like `deepspeed train.py`: it launches two ranks
(this file with `--rank N`, torch.distributed on gloo, CPU) and waits for them.

Each rank partitions every parameter of a small MLP the way ZeRO stage 3 does: the flattened
tensor is padded and split in two, the rank keeps its half (`shard`), and the module's parameter
becomes an empty placeholder, `torch.Size([0])`. A training step gathers the full parameters with
`dist.all_gather`, runs forward and backward, averages the gradients with `dist.all_reduce`,
updates the shard with SGD and releases the full tensors again. After `--steps` steps each rank
writes its shard into `out/checkpoint-N/global_stepN/zero_pp_rank_R_mp_rank_00_model_states.pt`
and `..._optim_states.pt` (and rank 0 the `latest` tag), as `engine.save_checkpoint` does, and
then rank 0 saves the final model the wrong way: `torch.save(model.state_dict(),
"out/pytorch_model.bin")`, which holds the placeholders. The job then loads that file into a fresh
model for evaluation (`--eval`, a third process) and dies of torch's own `RuntimeError: Error(s)
in loading state_dict for MLP: size mismatch for ...: copying a param with shape torch.Size([0])
from checkpoint, the shape in current model is torch.Size([...])`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scenarios/jobs/
from _helpers import die_with_parent as _die_with_parent  # noqa: E402
from _helpers import free_port as _free_port
from _helpers import say

WORLD = 2
OUT = "out"
HIDDEN = 64
LAUNCH_TIMEOUT_S = 600  # both ranks, including importing torch on a busy machine


def build_model():
    import torch

    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(16, HIDDEN)
            self.norm = torch.nn.LayerNorm(HIDDEN)
            self.fc2 = torch.nn.Linear(HIDDEN, 4)

        def forward(self, x):
            return self.fc2(torch.relu(self.norm(self.fc1(x))))

    torch.manual_seed(0)
    return MLP()


# -- one rank ------------------------------------------------------------------------------------


def partition(torch, model, rank: int) -> dict:
    """ZeRO-3's partitioning: each parameter -> this rank's shard; the module keeps Size([0])."""
    shards = {}
    for name, param in model.named_parameters():
        flat = param.data.flatten()
        size = -(-flat.numel() // WORLD)
        padded = torch.cat([flat, flat.new_zeros(size * WORLD - flat.numel())])
        shards[name] = (padded[rank * size:(rank + 1) * size].clone(), param.shape, flat.numel())
        param.data = torch.empty(0, dtype=param.dtype)
    return shards


def gather(torch, dist, model, shards: dict) -> None:
    for name, param in model.named_parameters():
        shard, shape, numel = shards[name]
        parts = [torch.empty_like(shard) for _ in range(WORLD)]
        dist.all_gather(parts, shard)
        param.data = torch.cat(parts)[:numel].view(shape)


def release(torch, model) -> None:
    for param in model.parameters():
        param.data = torch.empty(0, dtype=param.dtype)
        param.grad = None


def rank_main(args: argparse.Namespace) -> int:
    _die_with_parent()
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=args.rank, world_size=WORLD)
    rank = dist.get_rank()
    model = build_model()
    total = sum(p.numel() for p in model.parameters())
    shards = partition(torch, model, rank)
    say(f"[Rank {rank}] ZeRO stage 3: {total:,} parameters partitioned over {WORLD} ranks "
        f"(shard {sum(s[0].numel() for s in shards.values()):,} elements on this rank)")
    gen = torch.Generator().manual_seed(rank)
    for step in range(1, args.steps + 1):
        x = torch.randn(32, 16, generator=gen)
        y = x[:, :4].sum(dim=1).round().long().clamp(0, 3)
        gather(torch, dist, model, shards)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        for name, param in model.named_parameters():
            grad = param.grad.flatten()
            dist.all_reduce(grad)
            shard, _shape, _numel = shards[name]
            size = shard.numel()
            padded = torch.cat([grad, grad.new_zeros(size * WORLD - grad.numel())]) / WORLD
            shard -= 0.1 * padded[rank * size:(rank + 1) * size]
        release(torch, model)
        if rank == 0:
            say(f"step {step} | loss {loss.item():.4f}")
        time.sleep(0.2 / args.speed)
    tag_dir = os.path.join(OUT, f"checkpoint-{args.steps}", f"global_step{args.steps}")
    os.makedirs(tag_dir, exist_ok=True)
    dist.barrier()
    torch.save({"module": model.state_dict(), "global_steps": args.steps,
                "param_shapes": {n: list(s[1]) for n, s in shards.items()}},
               os.path.join(tag_dir, f"zero_pp_rank_{rank}_mp_rank_00_model_states.pt"))
    torch.save({"optimizer_state_dict": {"fp32_flat_groups": [s[0] for s in shards.values()]},
                "zero_stage": 3, "partition_count": WORLD},
               os.path.join(tag_dir, f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"))
    say(f"[Rank {rank}] Saving model checkpoint: {tag_dir}/zero_pp_rank_{rank}_mp_rank_00_model_states.pt")
    dist.barrier()
    if rank == 0:
        with open(os.path.join(OUT, f"checkpoint-{args.steps}", "latest"), "w") as fh:
            fh.write(f"global_step{args.steps}")
        # The bug: the module holds ZeRO-3's placeholders, not the weights.
        torch.save(model.state_dict(), os.path.join(OUT, "pytorch_model.bin"))
        size = os.path.getsize(os.path.join(OUT, "pytorch_model.bin"))
        say(f"[Rank 0] saved the final model to {OUT}/pytorch_model.bin ({size} bytes)")
    dist.barrier()
    dist.destroy_process_group()
    return 0


# -- evaluation: load the final model ------------------------------------------------------------


def eval_main() -> int:
    _die_with_parent()
    import torch

    model = build_model()
    say(f"[eval] loading {OUT}/pytorch_model.bin into a fresh model")
    state = torch.load(os.path.join(OUT, "pytorch_model.bin"), map_location="cpu", weights_only=True)
    model.load_state_dict(state)  # raises: the checkpoint holds torch.Size([0]) placeholders
    say("[eval] loaded")
    return 0


# -- the job -------------------------------------------------------------------------------------


def job(args: argparse.Namespace) -> int:
    port = str(_free_port())
    procs = []
    for rank in range(WORLD):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                   LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD), GLOO_SOCKET_IFNAME="lo",
                   PYTHONUNBUFFERED="1")
        argv = [sys.executable, os.path.abspath(__file__), "--rank", str(rank), "--steps", str(args.steps),
                "--speed", f"{args.speed:g}"]
        procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL))
    say(f"[launcher] started {WORLD} ranks (MASTER_PORT={port}): pids {' '.join(str(p.pid) for p in procs)}")
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=LAUNCH_TIMEOUT_S))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(proc.wait())
    if any(codes):
        say(f"[launcher] ranks exited with {codes}")
        return 1
    status = subprocess.call([sys.executable, os.path.abspath(__file__), "--eval"], stdin=subprocess.DEVNULL)
    say(f"[launcher] evaluation exited with status {status}")
    return status


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="steps come faster when > 1")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rank", type=int, default=None, help="internal: run one rank")
    ap.add_argument("--eval", action="store_true", help="internal: load the saved model")
    args = ap.parse_args(argv)
    if args.eval:
        return eval_main()
    return rank_main(args) if args.rank is not None else job(args)


if __name__ == "__main__":
    sys.exit(main())
