#!/usr/bin/env python3
"""Scenario `cuda_oom` (seed 002): a GPT pretraining job dies of CUDA out of memory at its first step.

Needs `torch`; no GPU. The job builds a nanoGPT-style GPT (24 layers, n_embd 2048, 1.3B
parameters, bfloat16, attention computed the plain way: softmax(q @ k^T) @ v) and runs the
forward pass of its first step on a batch of 16 x 2048 tokens, on a device with the memory of an
80 GB H100 (79.11 GiB). The tensors do not fit: the saved activations of one batch (about 4 GiB
per layer, half of it the B x heads x T x T attention matrix) fill the device about two thirds
through the model, and the allocation that does not fit raises `torch.OutOfMemoryError` with the
message PyTorch's CUDA caching allocator writes. The job exits with status 1, like any Python
program that dies of an exception.

How the device is modelled: the model really runs, every op of it, on torch's `meta` device
(tensors with shapes, dtypes and strides but no storage, so the 1.3B-parameter model costs no
host memory and no compute). A TorchDispatchMode sees every op and gives each new storage it
returns memory from `CachingAllocator`, a small model of the CUDA caching allocator: sizes
rounded to 512 bytes, a small pool (2 MiB segments) and a large pool (20 MiB segments, or the
size rounded to 2 MiB), best-fit reuse of cached blocks with splitting, freed blocks cached, and,
when a new segment does not fit the device, the cached segments released and the allocation
retried before it fails. Storages are freed when torch frees them (a weakref finalizer on the
storage), so activations saved for backward stay allocated and temporaries return to the cache,
as on a GPU. The numbers in the error message (request, capacity, free, in use, allocated,
reserved-but-unallocated) are that allocator's state at the failing call. The traceback printed
is cut where the allocator model's own frames start, so it ends at the line of model code whose
op needed the memory, as a real CUDA OOM does.

`--batch-size` (default 16) and `--n-layer` change the model and the batch; with
`--batch-size 4` the forward fits (the job then runs its backward and AdamW step and trains on,
slowly: one step per second / speed).

Other processes on the device (`--gpu-processes DIR`, used by scenario `oom_other_process`): the
simulated GPU's list of running processes, what NVML's nvmlDeviceGetComputeRunningProcesses gives
a real one. DIR holds one file per process that holds memory on the device, named by its PID and
holding its bytes; a process that has exited holds nothing (the driver frees a dead process's
memory). What they hold is not free for this job, and the OOM message lists each of them before
this process, as PyTorch's does (`Process 4242 has 70.00 GiB memory in use. Including non-PyTorch
memory, this process has ...`).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import traceback
import weakref

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

DEVICE_NAME = "NVIDIA H100 80GB HBM3"
DEVICE_TOTAL = 84_942_979_072  # bytes; torch.cuda.get_device_properties(0).total_memory: 79.11 GiB
CUDA_CONTEXT = 534 * MiB  # CUDA context + cuBLAS workspace: memory of the process PyTorch did not allocate

# c10/cuda/CUDACachingAllocator.cpp constants
MIN_BLOCK = 512
SMALL_SIZE = 1 * MiB
SMALL_BUFFER = 2 * MiB
LARGE_BUFFER = 20 * MiB
MIN_LARGE_ALLOC = 10 * MiB
ROUND_LARGE = 2 * MiB


def log(message: str) -> None:
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def format_size(size: int) -> str:
    """c10's format_size: bytes, KiB, MiB or GiB with two decimals."""
    if size <= 1024:
        return f"{size} bytes"
    if size <= MiB:
        return f"{size / KiB:.2f} KiB"
    if size <= GiB:
        return f"{size / MiB:.2f} MiB"
    return f"{size / GiB:.2f} GiB"


# -- the other processes on the simulated GPU ---------------------------------------------------


def _alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            raw = fh.read()
    except OSError:
        return False
    return raw[raw.rfind(")") + 2:][:1] not in ("Z", "X", "")


class GpuProcesses:
    """The simulated GPU's running processes other than this one: [(pid, bytes)], oldest first.

    `folder` holds one file per process, named by its PID, holding the bytes it uses (see the
    module docstring); None: no other process uses the device.
    """

    def __init__(self, folder: str | None) -> None:
        self.folder = folder

    def others(self) -> list[tuple[int, int]]:
        if not self.folder or not os.path.isdir(self.folder):
            return []
        found = []
        for name in os.listdir(self.folder):
            path = os.path.join(self.folder, name)
            if not name.isdigit() or int(name) == os.getpid() or not _alive(int(name)):
                continue
            try:
                with open(path) as fh:
                    used = int(fh.read().strip() or 0)
                since = os.stat(path).st_mtime
            except (OSError, ValueError):
                continue  # gone meanwhile, or not written yet
            found.append((since, int(name), used))
        return [(pid, used) for _, pid, used in sorted(found)]


# -- a model of the CUDA caching allocator ------------------------------------------------------


class MemBlock:
    __slots__ = ("size", "allocated", "prev", "next", "small")

    def __init__(self, size: int, small: bool) -> None:
        self.size = size
        self.allocated = False
        self.prev: MemBlock | None = None
        self.next: MemBlock | None = None
        self.small = small


class CachingAllocator:
    """Segments from the device, split into blocks; freed blocks stay cached (reserved)."""

    def __init__(self, total: int, context: int, device: int = 0,
                 processes: GpuProcesses | None = None) -> None:
        self.total = total
        self.context = context
        self.device = device
        self.processes = processes or GpuProcesses(None)
        self.pools: dict[bool, list[MemBlock]] = {True: [], False: []}  # small? -> free blocks
        self.allocated = 0
        self.reserved = 0
        self.peak = 0

    @staticmethod
    def round_size(size: int) -> int:
        return MIN_BLOCK if size < MIN_BLOCK else MIN_BLOCK * ((size + MIN_BLOCK - 1) // MIN_BLOCK)

    @staticmethod
    def allocation_size(size: int) -> int:
        if size <= SMALL_SIZE:
            return SMALL_BUFFER
        if size < MIN_LARGE_ALLOC:
            return LARGE_BUFFER
        return ROUND_LARGE * ((size + ROUND_LARGE - 1) // ROUND_LARGE)

    def device_free(self) -> int:
        """What cudaMemGetInfo would call free: less this process's and every other one's."""
        others = sum(used for _, used in self.processes.others())
        return max(0, self.total - self.context - self.reserved - others)

    def malloc(self, nbytes: int) -> MemBlock:
        size = self.round_size(nbytes)
        small = size <= SMALL_SIZE
        alloc_size = self.allocation_size(size)
        block = self._free_block(size, small)
        if block is None:
            block = self._new_segment(alloc_size, small)
            if block is None and self._release_cached_blocks():
                block = self._new_segment(alloc_size, small)
            if block is None:
                raise self._oom(alloc_size)
        remaining = block.size - size
        if (remaining >= MIN_BLOCK) if small else (remaining > SMALL_SIZE):  # should_split
            rest = MemBlock(remaining, small)
            rest.prev, rest.next = block, block.next
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = size
            self.pools[small].append(rest)
        block.allocated = True
        self.allocated += block.size
        self.peak = max(self.peak, self.allocated)
        return block

    def free(self, block: MemBlock) -> None:
        block.allocated = False
        self.allocated -= block.size
        pool = self.pools[block.small]
        for neighbour in (block.prev, block.next):
            if neighbour is not None and not neighbour.allocated:
                pool.remove(neighbour)
                if neighbour is block.prev:
                    block.size += neighbour.size
                    block.prev = neighbour.prev
                    if block.prev is not None:
                        block.prev.next = block
                else:
                    block.size += neighbour.size
                    block.next = neighbour.next
                    if block.next is not None:
                        block.next.prev = block
        pool.append(block)

    def _free_block(self, size: int, small: bool) -> MemBlock | None:
        pool = self.pools[small]
        fits = [b for b in pool if b.size >= size]
        if not fits:
            return None
        best = min(fits, key=lambda b: b.size)
        pool.remove(best)
        return best

    def _new_segment(self, alloc_size: int, small: bool) -> MemBlock | None:
        if alloc_size > self.device_free():  # cudaMalloc fails
            return None
        self.reserved += alloc_size
        return MemBlock(alloc_size, small)

    def _release_cached_blocks(self) -> bool:
        """Give back every cached segment that is not split (release_cached_blocks)."""
        for pool in self.pools.values():
            whole = [b for b in pool if b.prev is None and b.next is None]
            for block in whole:
                pool.remove(block)
                self.reserved -= block.size
        return True

    def _oom(self, alloc_size: int) -> Exception:
        import torch

        message = (
            f"CUDA out of memory. Tried to allocate {format_size(alloc_size)}. GPU {self.device} "
            f"has a total capacity of {format_size(self.total)} of which "
            f"{format_size(self.device_free())} is free. {self._process_info()}Of the allocated memory "
            f"{format_size(self.allocated)} is allocated by PyTorch, and "
            f"{format_size(self.reserved - self.allocated)} is reserved by PyTorch but unallocated."
            " If reserved but unallocated memory is large try setting"
            " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See"
            " documentation for Memory Management "
            " (https://docs.pytorch.org/docs/stable/notes/cuda.html"
            "#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)"
        )
        return torch.OutOfMemoryError(message)

    def _process_info(self) -> str:
        """reportProcessMemoryInfo: each process on the device in NVML's order (the oldest first,
        this one last here), as PyTorch 2.x words it."""
        parts = [f"Process {pid} has {format_size(used)} memory in use. "
                 for pid, used in self.processes.others()]
        parts.append(f"Including non-PyTorch memory, this process has "
                     f"{format_size(self.reserved + self.context)} memory in use. ")
        return "".join(parts)


def device_memory_mode(allocator: CachingAllocator):
    """A TorchDispatchMode that gives every new storage an allocator block, freed with it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    live: dict[int, MemBlock] = {}

    def release(key: int) -> None:
        block = live.pop(key, None)
        if block is not None:
            allocator.free(block)

    class DeviceMemory(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for tensor in out if isinstance(out, (tuple, list)) else (out,):
                if getattr(tensor, "is_meta", False):
                    storage = tensor.untyped_storage()
                    key = storage._cdata
                    if key not in live and storage.nbytes() > 0:
                        live[key] = allocator.malloc(storage.nbytes())
                        weakref.finalize(storage, release, key)
            return out

    return DeviceMemory()


_DISPATCH_WRAPPERS = ("torch/_compile.py", "torch/_dynamo/eval_frame.py")


def excepthook(etype, value, tb) -> None:
    """Print the traceback up to the model code, as a real CUDA OOM (raised in C++) shows it.

    The frames cut are this file's __torch_dispatch__ and the allocator model under it, and the
    torch wrappers (dynamo disabled) through which torch calls __torch_dispatch__.
    """
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    for index, entry in enumerate(entries):
        code = entry.tb_frame.f_code
        if code.co_name == "__torch_dispatch__" and code.co_filename == __file__:
            while index > 0 and entries[index - 1].tb_frame.f_code.co_filename.replace(
                    os.sep, "/").endswith(_DISPATCH_WRAPPERS):
                index -= 1
            if index > 0:
                entries[index - 1].tb_next = None
            break
    traceback.print_exception(etype, value, entries[0] if entries else None)
    sys.stderr.flush()


# -- the model (nanoGPT's, with the attention written out) ----------------------------------------


def build_gpt(torch, n_layer: int, n_head: int, n_embd: int, block_size: int, vocab: int):
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
            self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
            self.register_buffer("bias", torch.ones(block_size, block_size, dtype=torch.bool).tril()
                                 .view(1, 1, block_size, block_size), persistent=False)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(~self.bias[:, :, :T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=False)
            self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=False)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block_size, n_embd)
            self.h = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # weight tying

        def forward(self, idx, targets):
            pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))

    return GPT()


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="start-up and steps come faster when > 1")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--block-size", type=int, default=2048)
    ap.add_argument("--n-layer", type=int, default=24)
    ap.add_argument("--n-head", type=int, default=16)
    ap.add_argument("--n-embd", type=int, default=2048)
    ap.add_argument("--vocab-size", type=int, default=50304)
    ap.add_argument("--max-steps", type=int, default=600000)
    ap.add_argument("--gpu-processes", metavar="DIR",
                    help="the simulated GPU's other processes (see the module docstring)")
    args = ap.parse_args(argv)
    pause = 1.0 / max(args.speed, 1e-6)
    sys.excepthook = excepthook

    import torch

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    log(f"[Train] GPT pretraining (nanoGPT style): rank={rank}, world_size={world}, "
        f"torch {torch.__version__}")
    log(f"[Train] config: n_layer={args.n_layer} n_head={args.n_head} n_embd={args.n_embd} "
        f"block_size={args.block_size} vocab_size={args.vocab_size} dropout=0.0 bias=False "
        "attention=math (no flash)")
    log(f"[Train] config: batch_size={args.batch_size} gradient_accumulation_steps=1 "
        f"activation_checkpointing=False dtype=bfloat16 optimizer=AdamW learning_rate=6e-4 "
        f"max_iters={args.max_steps}")
    log(f"[Train] tokens per iteration will be: {args.batch_size * args.block_size:,}")
    log(f"[Device] cuda:0 {DEVICE_NAME}, total memory {format_size(DEVICE_TOTAL)} (simulated: the "
        "model runs on torch's meta device; a model of the CUDA caching allocator with this "
        "capacity gives memory to every tensor it creates)")

    allocator = CachingAllocator(DEVICE_TOTAL, CUDA_CONTEXT, processes=GpuProcesses(args.gpu_processes))
    mode = device_memory_mode(allocator)
    device = torch.device("meta")  # stands for cuda:0
    with mode:
        torch.set_default_dtype(torch.bfloat16)
        with device:
            model = build_gpt(torch, args.n_layer, args.n_head, args.n_embd, args.block_size,
                              args.vocab_size)
        torch.set_default_dtype(torch.float32)
        n_params = sum(p.numel() for p in model.parameters())
        log(f"[Model] number of parameters: {n_params / 1e6:.2f}M; memory allocated "
            f"{format_size(allocator.allocated)}, reserved {format_size(allocator.reserved)}")
        optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95),
                                      weight_decay=0.1, foreach=False)
        time.sleep(pause)
        log(f"[Data] train.bin: memory-mapped, batches of {args.batch_size} x {args.block_size} "
            "tokens")
        for step in range(args.max_steps):
            shape = (args.batch_size, args.block_size)
            x = torch.randint(0, args.vocab_size, shape, device=device)
            y = torch.randint(0, args.vocab_size, shape, device=device)
            if step == 0:
                log(f"[Train] step 0: inputs.shape={tuple(x.shape)}, batch_size={args.batch_size}")
            loss = model(x, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            log(f"step {step} | batch_size {args.batch_size} | memory allocated "
                f"{format_size(allocator.allocated)} (peak {format_size(allocator.peak)}), "
                f"reserved {format_size(allocator.reserved)}")
            time.sleep(pause)
    return 0


if __name__ == "__main__":
    sys.exit(main())
