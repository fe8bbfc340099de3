"""Metric logs in the formats trainers print, for the series tests of the CLI and of the site's
triage page (Megatron-LM's iteration line, HF Trainer's dicts, torchtitan's step line)."""

from __future__ import annotations


def megatron(iteration: int, ms: float, loss: float = 7.0, lr: str = "1.500E-04") -> str:
    return (f" iteration {iteration:8d}/  500000 | consumed samples: {iteration * 256:12d} | elapsed "
            f"time per iteration (ms): {ms:.1f} | learning rate: {lr} | global batch size:   256 | lm "
            f"loss: {loss:.6E} | loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 | "
            "number of nan iterations:   0 |")


def lines(*rows: str) -> str:
    return "\n".join(rows) + "\n"


CLIMBING = [2.0, 1.9, 1.8, 1.7, 1.65, 1.7, 2.2, 2.9, 3.8, 4.9, 6.1, 7.4]
STEPS = "".join(f"step {i} loss {3 - i * 0.01:.3f} lr 0.0001\n" for i in range(10))
IRREGULAR = {5, 6, 19, 33, 34}  # checkpoints and a GC pause, not the loader

def overflow(scale: int) -> str:
    return ("[INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
            f"Attempted loss scale: {scale}, reducing to {scale // 2}")


def neox(iteration: int, loss: float) -> str:
    """GPT-NeoX's iteration line (megatron/training.py's training_log): `lm_loss`, not `lm loss`."""
    return (f" samples/sec: 2.721 | iteration {iteration:8d}/   55000 | elapsed time per iteration (ms): "
            f"11761.2 | learning rate: 2.424E-09 | approx flops per GPU: 9.1TFLOPS | lm_loss: {loss:.6E} | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |")


def vllm_stats(running: int, waiting: int, kv: float, word: str = "Pending") -> str:
    """vLLM's periodic scheduler stats line (V0's `Pending`, V1's `Waiting`)."""
    return (f"INFO 08-01 03:09:02 metrics.py:341] Avg prompt throughput: 0.0 tokens/s, Avg generation "
            f"throughput: 0.0 tokens/s, Running: {running} reqs, Swapped: 0 reqs, {word}: {waiting} reqs, "
            f"GPU KV cache usage: {kv:.1f}%, CPU KV cache usage: 0.0%.")


EXAMPLES: dict[str, str] = {
    # GPT-NeoX's lm_loss back near a random model's after one update, and it stays there
    "loss-jumps": lines(neox(1, 2.275809), neox(2, 11.05449), neox(3, 10.9), neox(4, 10.7)),
    # ... and a spike that comes back down is noise, not a broken update
    "loss-spike-recovers": lines(*(neox(i, v) for i, v in enumerate([2.3, 2.2, 7.5, 2.1, 2.0, 2.0], 1))),
    # HF Trainer's dicts: 0 through the first epochs, then one value to the end
    "lr-zero-then-constant": lines(*(f"{{'loss': 0.4, 'learning_rate': {v}, 'epoch': {i}.0}}"
                                     for i, v in enumerate([0, 0, 0.0, 0.0, 0.0003, 0.0003, 0.0003], 1))),
    # a warm-up from 0 that ramps is a schedule
    "lr-warmup-from-zero": lines(*(f"{{'loss': 0.4, 'learning_rate': {v}, 'epoch': {i}.0}}"
                                   for i, v in enumerate([0, 0, 1e-5, 2e-5, 3e-5, 3e-5], 1))),
    # vLLM: the KV cache filled, the request was preempted and now waits with nothing running
    "kv-cache-stuck": lines(vllm_stats(1, 0, 92.9), vllm_stats(1, 0, 100.0), vllm_stats(0, 1, 0.0),
                            vllm_stats(0, 1, 0.0), vllm_stats(0, 1, 0.0, "Waiting")),
    # ... and a full cache that keeps serving is only busy
    "kv-cache-busy": lines(vllm_stats(8, 2, 100.0), vllm_stats(8, 1, 99.5), vllm_stats(7, 0, 98.0),
                           vllm_stats(8, 0, 100.0)),
    # DeepSpeed's fp16 scale halved on every step down to 8: overflow at any scale
    "loss-scale-collapses": lines(*(overflow(2 ** k) for k in range(16, 3, -1))),
    # from DeepSpeed's default 2^16 it kept halving, to 512: overflow after overflow
    "loss-scale-keeps-falling": lines(*(overflow(2 ** k) for k in range(16, 9, -1))),
    # ... and two drops from 2^16 at the start: the scale finding its level
    "loss-scale-settling": lines(*(overflow(2 ** k) for k in range(16, 13, -1))),
    # ... and from 2^32 to 2^24 at the start: calibration, not a fault
    "loss-scale-calibrating": lines(*(overflow(2 ** k) for k in range(32, 24, -1))),
    # a rank's resident memory, as WeNet's logger prints it, growing from 5 GB to 212 GB
    "host-memory-grows": lines(*(f"DEBUG TRAIN Batch 0/{185000 + 100 * i} loss 4.5 lr 0.00065 rank 0 "
                                 f"RSS MEM USE: {v}G" for i, v in enumerate([5.11, 5.11, 5.11, 46.51, 105.61,
                                                                              161.09, 212.04]))),
    "every-8th-step-slow": lines(*(megatron(i, 2400.0 if i % 8 == 0 else 310.0 + i % 3)
                                   for i in range(1, 49))),
    "irregular-spikes": lines(*(megatron(i, 2400.0 if i in IRREGULAR else 310.0) for i in range(1, 49))),
    "loss-turns-nan": lines(
        *(f"{{'loss': {2.5 - i * 0.01:.4f}, 'grad_norm': {1 + i}, 'learning_rate': 2e-05, 'epoch': 0.{i}}}"
          for i in range(6)),
        "{'loss': nan, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 0.6}"),
    "lightning-nan-from-start": lines(
        "Epoch 0:  71%|███▏ | 5880/8295 [04:01<01:39, 24.37it/s, v_num=0, learning_rate_step=0.0005, "
        "train_loss_step=nan.0"),
    "loss-climbs": "".join(f"step {i} | loss: {v} | lr: 3e-4\n" for i, v in enumerate(CLIMBING)),
    "lr-under-schedule": "lr_scheduler_type: cosine, warmup_steps: 100\n" + STEPS,
    "lr-constant-no-schedule": STEPS,
    "lr-zero": "".join(f"step {i} loss 3.0 lr 0.0\n" for i in range(10)),
    "rank-2-slow": lines(*(
        f"[rank{r}]:[titan] 2025-01-01 10:00:0{s} - root - INFO - step: {s}  loss: {5 - s * 0.1:.4f}  "
        f"memory: 4.0GiB(4.2%)  tps: {int(12000 / (1.9 if r == 2 else 1.0)):,}  mfu: 30.1%"
        for s in range(1, 6) for r in range(4))),
}
