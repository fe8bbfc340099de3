#!/usr/bin/env python3
"""Scenario `state_dict_mismatch` (seeds 002, 003): a resubmitted job cannot load its own checkpoint.

Needs `torch`. Started as one process, the "job": like a batch script that resubmits a training
run until it finishes, it runs the training script (this file with `--run`) as a child process,
attempt after attempt, passing `--resume <newest checkpoint>` once one exists.

Attempt 1 trains a small GPT-style language model (2 blocks, n_embd 64, synthetic tokens) on CPU
under DistributedDataParallel (gloo, world size 1, the launcher's MASTER_ADDR), writes a complete
checkpoint with `torch.save` at `exit_interval` (step 30): `{"model", "optimizer", "scheduler",
"step", "rng", "config"}` to `checkpoints/step_000030.pt`, and exits 0 to be resubmitted (as
Megatron's `--exit-interval` does). Attempt 2 builds the model, loads the checkpoint with
`torch.load` and calls `model.load_state_dict(ckpt["model"])` before wrapping the model in DDP,
which raises torch's own `RuntimeError: Error(s) in loading state_dict for TinyGPT: Missing
key(s) in state_dict: ... Unexpected key(s) in state_dict: ...`. The traceback goes to the log,
attempt 2 exits 1, and the job gives up with that status. The checkpoint stays on disk.

Two causes (`--variant`):

- `prefix` (default): attempt 1 saved `model.state_dict()` of the DDP-wrapped model, so every key
  carries `module.` (`module.tok_emb.weight`); the bare model expects `tok_emb.weight`.
- `config`: the save is correct (`model.module.state_dict()`), but attempt 1 was launched with
  `--model-use-moe` (each block's MLP is a mixture of 4 experts) and the resubmission without it:
  the checkpoint has `blocks.N.moe.*` keys, the model `blocks.N.mlp.*`.

`build_model()` (importable: `train:build_model` with this directory on sys.path) builds the model
attempt 2 builds, the reference for `runbook run checkpoint-problems --set reference=...`.
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

CHECKPOINT_DIR = "checkpoints"
EXIT_INTERVAL = 30
MAX_ATTEMPTS = 3
VOCAB = 256
BLOCK = 32
N_EMBD = 64
N_HEAD = 4
N_LAYER = 2
N_EXPERTS = 4


def log(message: str) -> None:
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


# -- the model ---------------------------------------------------------------------------------


def build_model(n_layer: int = N_LAYER, n_embd: int = N_EMBD, n_head: int = N_HEAD,
                vocab_size: int = VOCAB, block_size: int = BLOCK, use_moe: bool = False,
                n_experts: int = N_EXPERTS):
    """The model of the training script: TinyGPT, dense MLPs unless use_moe."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(n_embd, 4 * n_embd)
            self.proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            return self.proj(F.gelu(self.fc(x)))

    class MoE(nn.Module):
        """Top-1 routing over n_experts MLPs."""

        def __init__(self) -> None:
            super().__init__()
            self.gate = nn.Linear(n_embd, n_experts, bias=False)
            self.experts = nn.ModuleList([MLP() for _ in range(n_experts)])

        def forward(self, x):
            weights = F.softmax(self.gate(x), dim=-1)
            top_w, top_i = weights.max(dim=-1, keepdim=True)
            out = torch.zeros_like(x)
            for index, expert in enumerate(self.experts):
                mask = (top_i == index).to(x.dtype)
                out = out + mask * top_w * expert(x)
            return out

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(n_embd, 3 * n_embd)
            self.proj = nn.Linear(n_embd, n_embd)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(x).split(C, dim=2)
            q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(B, T, C))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(n_embd)
            if use_moe:
                self.moe = MoE()
            else:
                self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + (self.moe if use_moe else self.mlp)(self.ln_2(x))

    class TinyGPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok_emb = nn.Embedding(vocab_size, n_embd)
            self.pos_emb = nn.Embedding(block_size, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

        def forward(self, idx):
            pos = torch.arange(idx.size(1), device=idx.device)
            x = self.tok_emb(idx) + self.pos_emb(pos)
            for block in self.blocks:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return TinyGPT()


# -- one attempt: the training script ----------------------------------------------------------


def batches(torch, gen, batch_size: int):
    """Synthetic tokens with structure to learn: each sequence counts up by a fixed stride."""
    while True:
        start = torch.randint(0, VOCAB, (batch_size, 1), generator=gen)
        stride = torch.randint(1, 4, (batch_size, 1), generator=gen)
        seq = (start + stride * torch.arange(BLOCK + 1)) % VOCAB
        yield seq[:, :-1], seq[:, 1:]


def run(args: argparse.Namespace) -> int:
    _die_with_parent()
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    log(f"[Train] initialised process group: backend=gloo rank={rank} world_size={world} "
        f"MASTER_ADDR={os.environ.get('MASTER_ADDR')} MASTER_PORT={os.environ.get('MASTER_PORT')} "
        f"(pid {os.getpid()}, torch {torch.__version__})")
    config = {"n_layer": N_LAYER, "n_embd": N_EMBD, "n_head": N_HEAD, "vocab_size": VOCAB,
              "block_size": BLOCK, "use_moe": bool(args.model_use_moe)}
    model = build_model(**config)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"[Model] TinyGPT: n_layer={N_LAYER} n_embd={N_EMBD} n_head={N_HEAD} vocab_size={VOCAB} "
        f"block_size={BLOCK} use_moe={config['use_moe']}, {n_params:,} parameters")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10))
    start_step = 0
    if args.resume:
        log(f"[Train] resuming from checkpoint {args.resume}")
        ckpt = torch.load(args.resume, map_location="cpu")
        model.load_state_dict(ckpt["model"])  # attempt 1's keys do not match: raises
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        torch.set_rng_state(ckpt["rng"])
        start_step = int(ckpt["step"])
        log(f"[Train] resumed at step {start_step}")
    else:
        log("[Train] no checkpoint to resume from: training from scratch")
    ddp_model = DDP(model)
    log("[Model] wrapped in DistributedDataParallel")

    gen = torch.Generator().manual_seed(1 + start_step)
    data = batches(torch, gen, args.batch_size)
    interval = 0.1 / max(args.speed, 1e-6)
    step = start_step
    while step < args.max_steps:
        x, y = next(data)
        logits = ddp_model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        step += 1
        log(f"step {step} | loss {loss.item():.4f} | lr {scheduler.get_last_lr()[0]:.2e}")
        if step % args.exit_interval == 0:
            os.makedirs(CHECKPOINT_DIR, exist_ok=True)
            path = os.path.join(CHECKPOINT_DIR, f"step_{step:06d}.pt")
            weights = ddp_model.module.state_dict() if args.save_unwrapped else ddp_model.state_dict()
            torch.save({"model": weights, "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(), "step": step,
                        "rng": torch.get_rng_state(), "config": config}, path + ".tmp")
            os.replace(path + ".tmp", path)
            log(f"[Checkpoint] saved {path} (model, optimizer, scheduler, step, rng, config)")
            log(f"[Train] exit_interval={args.exit_interval} reached at step {step}: exiting, "
                "resubmit to continue")
            break
        time.sleep(interval)
    dist.destroy_process_group()
    return 0


# -- the job: resubmits the training script until it finishes ----------------------------------


def newest_checkpoint() -> str | None:
    try:
        names = sorted(n for n in os.listdir(CHECKPOINT_DIR) if n.endswith(".pt"))
    except OSError:
        return None
    return os.path.join(CHECKPOINT_DIR, names[-1]) if names else None


def job(args: argparse.Namespace) -> int:
    moe_first = args.variant == "config"
    status = 0
    for attempt in range(1, MAX_ATTEMPTS + 1):
        argv = [sys.executable, os.path.abspath(__file__), "--run", "--speed", f"{args.speed:g}",
                "--batch-size", str(args.batch_size), "--exit-interval", str(args.exit_interval)]
        if args.variant == "config":
            argv.append("--save-unwrapped")
        if moe_first and attempt == 1:
            argv.append("--model-use-moe")
        resume = newest_checkpoint()
        if resume:
            argv += ["--resume", resume]
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
                   PYTHONUNBUFFERED="1")
        for name, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"),
                            ("LOCAL_WORLD_SIZE", "1"), ("GLOO_SOCKET_IFNAME", "lo")):
            env.setdefault(name, value)
        log(f"[job] attempt {attempt}/{MAX_ATTEMPTS}: {' '.join(argv[1:])} "
            f"(MASTER_PORT={env['MASTER_PORT']})")
        status = subprocess.call(argv, env=env, stdin=subprocess.DEVNULL)
        if status != 0:
            log(f"[job] attempt {attempt} exited with status {status}; giving up")
            return status
        if newest_checkpoint() is None:
            log(f"[job] attempt {attempt} finished training")
            return 0
        log(f"[job] attempt {attempt} exited with status 0 at its exit interval; resubmitting "
            f"from {newest_checkpoint()}")
    return status


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="steps come faster when > 1")
    ap.add_argument("--variant", choices=("prefix", "config"), default="prefix",
                    help="prefix: DDP's module. prefix in the saved keys; config: saved with MoE, "
                         "resumed without")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--exit-interval", type=int, default=EXIT_INTERVAL)
    ap.add_argument("--max-steps", type=int, default=1000)
    ap.add_argument("--run", action="store_true", help="internal: one attempt of the training script")
    ap.add_argument("--resume", default=None, help="with --run: checkpoint to resume from")
    ap.add_argument("--model-use-moe", action="store_true", help="with --run: MoE blocks")
    ap.add_argument("--save-unwrapped", action="store_true",
                    help="with --run: save model.module.state_dict() instead of the DDP wrapper's")
    args = ap.parse_args(argv)
    return run(args) if args.run else job(args)


if __name__ == "__main__":
    sys.exit(main())
