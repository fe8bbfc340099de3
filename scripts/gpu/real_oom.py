#!/usr/bin/env python3
"""A real CUDA out-of-memory error: a forward pass whose activations outgrow the GPU.

A stack of large linear layers keeps every activation for backward; the batch doubles each step
until the caching allocator cannot find the memory and torch raises its own
`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...`. The traceback goes to the log
as an uncaught exception would, and the job exits 1, as a training job dies of it.
"""

from __future__ import annotations

import sys
import traceback

import torch


class Model(torch.nn.Module):
    def __init__(self, width: int = 8192, depth: int = 8) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x.sum()


def main() -> int:
    model = Model().cuda()
    batch = 1024
    try:
        while True:
            x = torch.randn(batch, 8192, device="cuda", requires_grad=True)
            loss = model(x)
            print(f"step batch={batch} | loss {float(loss):.3e} | "
                  f"reserved {torch.cuda.memory_reserved() >> 20} MiB", flush=True)
            batch *= 2
    except torch.OutOfMemoryError:
        traceback.print_exc()
        sys.stderr.flush()
        return 1


if __name__ == "__main__":
    sys.exit(main())
