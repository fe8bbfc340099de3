#!/usr/bin/env python3
"""Scenario `healthy`: a training job that is fine (the control case).

Linear regression trained by gradient descent on synthetic data, pure Python,
standard library only, CPU only. Every step computes the full-batch gradient of
the mean squared error over a fixed data set, so the loss goes down at every
step; the features have scales spread over four decades, so it keeps going down
for a long time (minutes to hours) instead of flattening after a few seconds.

It prints `step N | loss X | lr Y` about twice a second, forever.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time

PRINT_EVERY_S = 0.5


def log(message: str) -> None:
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def make_data(n: int, d: int, seed: int) -> tuple[list[list[float]], list[float]]:
    """Features with variances log-spaced from 1 to 3e-5; every direction starts with
    the same share of the loss, so slow directions keep the loss falling."""
    rng = random.Random(seed)
    variances = [10 ** (-4.5 * j / max(d - 1, 1)) for j in range(d)]
    scales = [math.sqrt(v) for v in variances]
    w_true = [rng.choice((-1.0, 1.0)) / s for s in scales]
    xs = [[rng.gauss(0.0, 1.0) * s for s in scales] for _ in range(n)]
    ys = [sum(a * b for a, b in zip(x, w_true)) + rng.gauss(0.0, 0.01) for x in xs]
    return xs, ys


def lr_at(step: int, peak: float, warmup: int) -> float:
    """Linear warmup, then inverse square root decay."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * math.sqrt(warmup / (step + 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="accepted for uniformity; unused")
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--warmup", type=int, default=50)
    args = ap.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))

    log(f"[Train] linear regression (仅 CPU): samples={args.samples}, features={args.features}, "
        f"rank={rank}, world_size={world}")
    xs, ys = make_data(args.samples, args.features, seed=1234)
    n, d = len(xs), args.features
    w = [0.0] * d
    log(f"[Train] 数据就绪, 开始训练 (lr={args.lr}, warmup={args.warmup})")
    step = 0
    last_print = 0.0
    while True:
        grad = [0.0] * d
        loss = 0.0
        for x, y in zip(xs, ys):
            err = sum(a * b for a, b in zip(x, w)) - y
            loss += err * err
            for j in range(d):
                grad[j] += err * x[j]
        loss /= 2 * n
        lr = lr_at(step, args.lr, args.warmup)
        for j in range(d):
            w[j] -= lr * grad[j] / n
        now = time.monotonic()
        if now - last_print >= PRINT_EVERY_S:
            log(f"step {step} | loss {loss:.4f} | lr {lr:.6f}")
            last_print = now
        step += 1


if __name__ == "__main__":
    sys.exit(main())
