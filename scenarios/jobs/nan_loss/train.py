#!/usr/bin/env python3
"""Scenario `nan_loss` (seed 003): the loss explodes to Inf, then NaN, and the job trains on.

A real torch training loop on CPU (needs `torch`): a small MLP regressor (32 -> 256 -> 256 -> 1,
GELU) trained on synthetic data with SGD + momentum, with the mistakes the seed's guides name:
a learning rate far too high (5.0, a cosine schedule with no warmup) and no gradient clipping
(`grad_clip=0.0`). The first updates overshoot, the weights grow by orders of magnitude per
step, the activations overflow float32 (loss `inf`), the next backward produces NaN gradients
and from then on every parameter is NaN.

Like most hand-written PyTorch loops (nanoGPT's train.py, the Hugging Face Trainer by default),
the loop does not check for a non-finite loss: it keeps training and keeps logging `loss nan |
grad_norm nan`, forever, one step line every 0.2 s / speed. The process stays alive (one core
lightly busy) until it is killed. The grad norm is the total norm torch computes for clipping
(`clip_grad_norm_` with an infinite max_norm, i.e. measured, not clipped).

It also writes the run's configuration to `config.yaml` in its working directory (the way
trainers save their hyper-parameters next to the run), before the first step.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

IN_FEATURES = 32
HIDDEN = 256
SAMPLES = 4096
CONFIG_FILE = "config.yaml"


def log(message: str) -> None:
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def lr_at(step: int, peak: float, warmup: int, max_steps: int) -> float:
    """Linear warmup over `warmup` steps (none here), then cosine decay to 10% of the peak."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, max_steps - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def write_config(args: argparse.Namespace, path: str) -> None:
    text = (
        "# written by train.py at start\n"
        "model:\n"
        f"  in_features: {IN_FEATURES}\n"
        f"  hidden_size: {HIDDEN}\n"
        "  num_layers: 2\n"
        "training:\n"
        f"  batch_size: {args.batch_size}\n"
        f"  max_steps: {args.max_steps}\n"
        "  optimizer: sgd\n"
        f"  learning_rate: {args.lr}\n"
        f"  momentum: {args.momentum}\n"
        "  lr_schedule: cosine\n"
        f"  warmup_steps: {args.warmup}\n"
        f"  gradient_clip_val: {args.grad_clip}\n"
        "  precision: fp32\n"
    )
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="steps come faster when > 1")
    ap.add_argument("--lr", type=float, default=5.0)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--grad-clip", type=float, default=0.0, help="0 disables clipping")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-steps", type=int, default=100000)
    args = ap.parse_args(argv)
    interval = 0.2 / max(args.speed, 1e-6)

    import torch

    torch.manual_seed(0)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    model = torch.nn.Sequential(
        torch.nn.Linear(IN_FEATURES, HIDDEN), torch.nn.GELU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU(),
        torch.nn.Linear(HIDDEN, 1),
    )
    n_params = sum(p.numel() for p in model.parameters())
    log(f"[Train] MLP regression (cpu): {IN_FEATURES}-{HIDDEN}-{HIDDEN}-1, {n_params:,} parameters, "
        f"rank={rank}, world_size={world}, torch {torch.__version__}")
    log(f"[Train] config: optimizer=SGD lr={args.lr} momentum={args.momentum} "
        f"warmup_steps={args.warmup} lr_schedule=cosine max_steps={args.max_steps} "
        f"grad_clip={args.grad_clip} batch_size={args.batch_size} dtype=float32")
    write_config(args, CONFIG_FILE)
    log(f"[Train] saved config to {os.path.abspath(CONFIG_FILE)}")

    gen = torch.Generator().manual_seed(1234)
    x_all = torch.randn(SAMPLES, IN_FEATURES, generator=gen)
    w_true = torch.randn(IN_FEATURES, 1, generator=gen)
    y_all = torch.sin(x_all @ w_true) * 3.0 + 0.1 * torch.randn(SAMPLES, 1, generator=gen)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    log(f"[Train] data: {SAMPLES} synthetic samples; starting training")

    step = 0
    next_at = time.monotonic()
    while step < args.max_steps:
        idx = torch.randint(0, SAMPLES, (args.batch_size,), generator=gen)
        lr = lr_at(step, args.lr, args.warmup, args.max_steps)
        for group in opt.param_groups:
            group["lr"] = lr
        loss = torch.nn.functional.mse_loss(model(x_all[idx]), y_all[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        max_norm = args.grad_clip if args.grad_clip > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
        log(f"step {step} | loss {loss.item():.4e} | grad_norm {grad_norm.item():.4e} | lr {lr:.4e}")
        step += 1
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    log(f"[Train] reached max_steps={args.max_steps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
