"""Train a small next-character language model: `python -m llm.training.train [options]`.

The model embeds the previous character (hidden_size) and predicts the next one with a
dense output layer, or with a mixture of experts (--model-use-moe: num_experts output
layers, a softmax gate over the top_k of them). It is trained by SGD with linear warmup
and gradient clipping on text sampled from a fixed random Markov chain, so the loss falls.
Pure Python, CPU only, standard library only.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time

from llm.config import Config, parse_config

ALPHABET = "abcdefghijklmnopqrstuvwxyz .,;!?"


def log(message: str) -> None:
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def make_corpus(vocab: int, length: int, seed: int) -> list[int]:
    """Text from a sparse random Markov chain: each character has 3 likely successors."""
    rng = random.Random(seed)
    successors = [[rng.randrange(vocab) for _ in range(3)] for _ in range(vocab)]
    text = [0]
    for _ in range(length - 1):
        prev = text[-1]
        text.append(rng.choice(successors[prev]) if rng.random() < 0.9 else rng.randrange(vocab))
    return text


class Model:
    """Embedding -> dense output layer, or -> top-k softmax-gated mixture of output layers."""

    def __init__(self, config: Config, rng: random.Random) -> None:
        m = config.model
        self.vocab, self.hidden = m.vocab_size, m.hidden_size
        self.experts = m.num_experts if m.use_moe else 1
        self.top_k = max(1, min(m.top_k, self.experts)) if m.use_moe else 1
        scale = 1.0 / math.sqrt(self.hidden)
        self.emb = [[rng.gauss(0.0, 1.0) for _ in range(self.hidden)] for _ in range(self.vocab)]
        # out[e][i][v]: expert e, hidden unit i, output character v
        self.out = [[[rng.gauss(0.0, scale) for _ in range(self.vocab)] for _ in range(self.hidden)]
                    for _ in range(self.experts)]
        self.gate = [[0.0] * self.experts for _ in range(self.hidden)] if m.use_moe else None

    def num_params(self) -> int:
        gate = self.hidden * self.experts if self.gate is not None else 0
        return self.vocab * self.hidden + self.experts * self.hidden * self.vocab + gate

    def zero_grads(self) -> dict:
        return {
            "emb": {},
            "out": [[[0.0] * self.vocab for _ in range(self.hidden)] for _ in range(self.experts)],
            "gate": [[0.0] * self.experts for _ in range(self.hidden)] if self.gate else None,
        }

    def _expert_logits(self, h: list[float], e: int) -> list[float]:
        logits = [0.0] * self.vocab
        for i, hi in enumerate(h):
            row = self.out[e][i]
            for v in range(self.vocab):
                logits[v] += hi * row[v]
        return logits

    def loss_and_grad(self, prev: int, target: int, grads: dict) -> float:
        h = self.emb[prev]
        if self.gate is None:
            chosen, weights = [0], [1.0]
        else:
            scores = [sum(h[i] * self.gate[i][e] for i in range(self.hidden)) for e in range(self.experts)]
            chosen = sorted(range(self.experts), key=lambda e: -scores[e])[: self.top_k]
            top = max(scores[e] for e in chosen)
            exp = [math.exp(scores[e] - top) for e in chosen]
            weights = [x / sum(exp) for x in exp]
        ys = [self._expert_logits(h, e) for e in chosen]
        logits = [sum(w * y[v] for w, y in zip(weights, ys)) for v in range(self.vocab)]
        top = max(logits)
        exp = [math.exp(x - top) for x in logits]
        total = sum(exp)
        probs = [x / total for x in exp]
        loss = -math.log(max(probs[target], 1e-12))
        dlogits = probs
        dlogits[target] -= 1.0
        dh = [0.0] * self.hidden
        dweights = []
        for w, y, e in zip(weights, ys, chosen):
            dweights.append(sum(d * yv for d, yv in zip(dlogits, y)))
            gout = grads["out"][e]
            for i in range(self.hidden):
                row, grow, hi = self.out[e][i], gout[i], h[i] * w
                acc = 0.0
                for v in range(self.vocab):
                    grow[v] += hi * dlogits[v]
                    acc += row[v] * dlogits[v]
                dh[i] += w * acc
        if self.gate is not None:
            mean = sum(w * d for w, d in zip(weights, dweights))
            for w, d, e in zip(weights, dweights, chosen):
                dscore = w * (d - mean)
                for i in range(self.hidden):
                    grads["gate"][i][e] += h[i] * dscore
                    dh[i] += self.gate[i][e] * dscore
        acc = grads["emb"].setdefault(prev, [0.0] * self.hidden)
        for i in range(self.hidden):
            acc[i] += dh[i]
        return loss

    def apply(self, grads: dict, lr: float, n: int, clip: float, weight_decay: float) -> float:
        """SGD step on the mean gradient over n tokens, clipped to a global norm; returns the norm."""
        sq = sum(g * g for row in grads["emb"].values() for g in row)
        sq += sum(g * g for expert in grads["out"] for row in expert for g in row)
        if grads["gate"] is not None:
            sq += sum(g * g for row in grads["gate"] for g in row)
        norm = math.sqrt(sq) / n
        factor = lr / n * (min(1.0, clip / norm) if clip > 0 and norm > 0 else 1.0)
        for tok, row in grads["emb"].items():
            emb = self.emb[tok]
            for i in range(self.hidden):
                emb[i] -= factor * row[i]
        for e in range(self.experts):
            for i in range(self.hidden):
                weights, g = self.out[e][i], grads["out"][e][i]
                for v in range(self.vocab):
                    weights[v] -= factor * g[v] + lr * weight_decay * weights[v]
        if self.gate is not None:
            for i in range(self.hidden):
                for e in range(self.experts):
                    self.gate[i][e] -= factor * grads["gate"][i][e]
        return norm


def lr_at(step: int, peak: float, warmup: int) -> float:
    return peak * (step + 1) / warmup if step < warmup else peak


def main(argv: list[str] | None = None) -> int:
    config = parse_config(argv)
    m, t, o = config.model, config.training, config.optimization
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if not 2 <= m.vocab_size <= len(ALPHABET):
        log(f"[Config] error: model.vocab_size must be between 2 and {len(ALPHABET)}")
        return 1
    log(f"[Config] model: vocab_size={m.vocab_size} hidden_size={m.hidden_size} "
        f"num_layers={m.num_layers} use_moe={m.use_moe} num_experts={m.num_experts} top_k={m.top_k}")
    log(f"[Config] training: epochs={t.epochs} batch_size={t.batch_size} "
        f"steps_per_epoch={t.steps_per_epoch} gradient_clip_val={t.gradient_clip_val}")
    log(f"[Config] optimization: lr={o.lr} warmup_steps={o.warmup_steps} "
        f"use_amp={o.use_amp} use_compile={o.use_compile} (no effect on cpu)")
    rng = random.Random(t.seed)
    corpus = make_corpus(m.vocab_size, 20000, t.seed)
    model = Model(config, rng)
    log(f"[Train] rank={rank} world_size={world} device=cpu, {model.num_params():,} parameters, "
        f"{'MoE' if m.use_moe else 'dense'} output layer")
    started = time.monotonic()
    step = 0
    for epoch in range(t.epochs):
        for _ in range(t.steps_per_epoch):
            grads = model.zero_grads()
            loss = 0.0
            for _ in range(t.batch_size):
                pos = rng.randrange(len(corpus) - 1)
                loss += model.loss_and_grad(corpus[pos], corpus[pos + 1], grads)
            lr = lr_at(step, o.lr, o.warmup_steps)
            model.apply(grads, lr, t.batch_size, t.gradient_clip_val, o.weight_decay)
            if step % t.log_interval == 0:
                log(f"step {step} | epoch {epoch + 1}/{t.epochs} | loss {loss / t.batch_size:.4f} "
                    f"| lr {lr:.6f}")
            step += 1
    log(f"[Train] done: {step} steps in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
