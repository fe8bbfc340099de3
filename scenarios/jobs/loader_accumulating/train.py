#!/usr/bin/env python3
"""Scenario `loader_accumulating` (seed 000): the data loader has not produced a batch yet.

A small nanochat-style pre-training job, CPU only, standard library only. It
initialises a (tiny) model, then its data loader reads many short documents
from shard files, tokenises them in ONE process with a naive byte-pair-encoding
tokenizer and accumulates tokens until the buffer holds B*T+1 tokens
(32*2048+1 = 65537). Only then does the first batch exist and training start.
While it accumulates, the process burns one CPU core, prints progress lines and
trains nothing: exactly the "model loaded, CPU 100%, GPU 0%, no step" state of
the field report.

The work is real: shards are generated on the first start under
DATA_DIR/parquet_shards/ (JSONL standing in for parquet), a BPE tokenizer is
trained on them and cached, and every document is encoded with the textbook
definition of BPE implemented naively (repeat: find the highest-priority merge
that occurs, apply it; no pre-tokenisation, no cache). The time to the first
batch (default ~120 s at --speed 1) is set by how many merges the tokenizer
uses; a short calibration at start measures this machine and picks that number.
The job never sleeps while it accumulates.

After the first batch the job trains a bigram softmax model (the "tiny model")
by plain gradient descent on the rows of that batch, printing
`step N | loss X | tokens/s Y` about once a second, forever.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import os
import random
import re
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterator, Tuple

PROCESS_START = time.monotonic()

NUM_SHARDS = 10  # the last one is the validation split, as in nanochat
ROW_GROUPS_PER_SHARD = 2
DOCS_PER_ROW_GROUP = 512
DOC_BATCH = 128  # documents handed to the tokenizer at once
MAX_MERGES = 16384
SHARD_FORMAT = 1  # bump when the generator changes, so old shards are regenerated
REFERENCE_TOKENS = 32 * 2048 + 1  # the timing target is defined for the default B, T
PROGRESS_EVERY_S = 1.0
STEP_PRINT_EVERY_S = 1.0
BUCKETS = 512  # the bigram model predicts next-token bucket (id % BUCKETS): 512*512 params

_LOG_LOCK = threading.Lock()


def log(message: str) -> None:
    """One line to stdout, whole, flushed (the reporter thread prints too)."""
    with _LOG_LOCK:
        sys.stdout.write(message + "\n")
        sys.stdout.flush()


# --------------------------------------------------------------------------- corpus

_ONSETS = ["", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v",
           "w", "z", "br", "ch", "cl", "dr", "gr", "pl", "pr", "sh", "st", "th", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "io", "ee"]
_CODAS = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng"]
_HAN = ("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能"
        "下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量"
        "都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重")


def _zipf_cum_weights(n: int, s: float = 1.07) -> list[float]:
    total, out = 0.0, []
    for rank in range(n):
        total += 1.0 / (rank + 2) ** s
        out.append(total)
    return out


class Corpus:
    """A synthetic two-language corpus with Zipf-distributed words: short documents."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < 4000:
            syllables = self.rng.choice((1, 1, 2, 2, 2, 3, 3))
            words.add("".join(self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS)
                              + self.rng.choice(_CODAS) for _ in range(syllables)))
        self.words = sorted(words)
        self.rng.shuffle(self.words)
        han = [a + b for a, b in itertools.product(_HAN[:60], _HAN[60:120])]
        self.rng.shuffle(han)
        self.han = han[:1500]
        self.word_cum = _zipf_cum_weights(len(self.words))
        self.han_cum = _zipf_cum_weights(len(self.han))

    def document(self) -> str:
        rng = self.rng
        if rng.random() < 0.25:  # a short Chinese document
            n = rng.randint(10, 60)
            han = rng.choices(self.han, cum_weights=self.han_cum, k=n)
            parts, i = [], 0
            while i < n:
                k = rng.randint(3, 9)
                parts.append("".join(han[i:i + k]) + rng.choice("。。。，！？"))
                i += k
            return "".join(parts)
        n = rng.randint(15, 70)
        words = rng.choices(self.words, cum_weights=self.word_cum, k=n)
        sentences, i = [], 0
        while i < n:
            k = rng.randint(4, 12)
            chunk = words[i:i + k]
            sentences.append(" ".join([chunk[0].capitalize(), *chunk[1:]]) + rng.choice("...?!"))
            i += k
        return " ".join(sentences)


def shard_name(index: int) -> str:
    return f"shard_{index:05d}.jsonl"


def ensure_shards(shard_dir: Path) -> list[Path]:
    """Return the shard files, generating them on the first start."""
    manifest_path = shard_dir / "_manifest.json"
    expected = {"format": SHARD_FORMAT, "num_shards": NUM_SHARDS,
                "row_groups_per_shard": ROW_GROUPS_PER_SHARD,
                "docs_per_row_group": DOCS_PER_ROW_GROUP, "stands_in_for": "parquet"}
    paths = [shard_dir / shard_name(i) for i in range(NUM_SHARDS)]
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = None
    if manifest == expected and all(p.is_file() for p in paths):
        log(f"[Data] 使用已有的 {NUM_SHARDS} 个 JSONL 分片 (代替 parquet 文件): {shard_dir}")
        return paths
    log(f"[Data] 首次启动: 生成 {NUM_SHARDS} 个 JSONL 分片 (代替 parquet 文件, "
        f"每个 {ROW_GROUPS_PER_SHARD} 个 row group x {DOCS_PER_ROW_GROUP} 个短文档) -> {shard_dir}")
    t0 = time.monotonic()
    shard_dir.mkdir(parents=True, exist_ok=True)
    corpus = Corpus(seed=1234)
    total_bytes = 0
    for i, path in enumerate(paths):
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for rg in range(ROW_GROUPS_PER_SHARD):
                for _ in range(DOCS_PER_ROW_GROUP):
                    line = json.dumps({"text": corpus.document(), "row_group": rg},
                                      ensure_ascii=False)
                    total_bytes += len(line) + 1
                    fh.write(line + "\n")
        tmp.replace(path)
        del i
    manifest_path.write_text(json.dumps(expected))
    log(f"[Data] ✓ 生成完成: {NUM_SHARDS * ROW_GROUPS_PER_SHARD * DOCS_PER_ROW_GROUP} 个文档, "
        f"{total_bytes / 1e6:.1f} MB, 用时 {time.monotonic() - t0:.2f}s")
    return paths


def read_row_groups(path: Path) -> list[list[str]]:
    """All row groups of one shard: lists of document texts."""
    groups: dict[int, list[str]] = defaultdict(list)
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            groups[int(row["row_group"])].append(row["text"])
    return [groups[k] for k in sorted(groups)]


# --------------------------------------------------------------------------- tokenizer

# GPT-style pre-tokenisation, used for training only: words with their leading space,
# single CJK characters, runs of punctuation.
_PRETOKEN = re.compile(r" ?[A-Za-z]+| ?[\u4e00-\u9fff]| ?[^\sA-Za-z\u4e00-\u9fff]+|\s+")

Pair = Tuple[int, int]


def _merge_all(ids: list[int], a: int, b: int, new: int, start: int = 0) -> list[int]:
    out = ids[:start]
    i, n = start, len(ids)
    while i < n:
        if i < n - 1 and ids[i] == a and ids[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def train_bpe(chunk_counts: Counter[bytes], num_merges: int) -> list[Pair]:
    """Byte-level BPE training on pre-token counts (incremental pair statistics)."""
    words = [list(w) for w in chunk_counts]
    freqs = list(chunk_counts.values())
    pair_counts: dict[Pair, int] = defaultdict(int)
    where: dict[Pair, set[int]] = defaultdict(set)
    for wi, w in enumerate(words):
        for pair in zip(w, w[1:]):
            pair_counts[pair] += freqs[wi]
            where[pair].add(wi)
    heap = [(-c, p) for p, c in pair_counts.items()]
    heapq.heapify(heap)
    merges: list[Pair] = []
    while len(merges) < num_merges and heap:
        neg, pair = heapq.heappop(heap)
        if neg == 0 or pair_counts.get(pair, 0) != -neg:
            continue  # stale heap entry
        new = 256 + len(merges)
        merges.append(pair)
        changed: set[Pair] = set()
        for wi in where.pop(pair, ()):
            w, f = words[wi], freqs[wi]
            for q in zip(w, w[1:]):
                pair_counts[q] -= f
                changed.add(q)
            w = _merge_all(w, pair[0], pair[1], new)
            words[wi] = w
            for q in zip(w, w[1:]):
                pair_counts[q] += f
                changed.add(q)
                where[q].add(wi)
        pair_counts.pop(pair, None)
        changed.discard(pair)
        for q in changed:
            count = pair_counts.get(q, 0)
            if count > 0:
                heapq.heappush(heap, (-count, q))
            else:
                pair_counts.pop(q, None)
    return merges


def load_or_train_tokenizer(tok_dir: Path, shards: list[Path]) -> list[Pair]:
    path = tok_dir / "merges.json"
    try:
        data = json.loads(path.read_text())
        if data.get("format") == SHARD_FORMAT:
            merges = [(int(a), int(b)) for a, b in data["merges"]]
            log(f"[Tokenizer] 加载 BPE 分词器: {path} ({len(merges)} 个 merges)")
            return merges
    except (OSError, ValueError, KeyError, TypeError):
        pass
    t0 = time.monotonic()
    counts: Counter[bytes] = Counter()
    for shard in shards[:4]:
        for group in read_row_groups(shard):
            for text in group:
                counts.update(m.encode("utf-8") for m in _PRETOKEN.findall(text))
    merges = train_bpe(counts, MAX_MERGES)
    tok_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": SHARD_FORMAT, "merges": merges}))
    log(f"[Tokenizer] 训练 BPE 分词器: {len(merges)} 个 merges (词表 {256 + len(merges)}), "
        f"{len(counts)} 个不同的 pre-token, 用时 {time.monotonic() - t0:.2f}s -> {path}")
    return merges


class NaiveBPE:
    """Byte-level BPE encoding by its definition, implemented naively on purpose.

    Repeat: walk the merges in priority order, scan the whole document for the
    first one that occurs, apply it everywhere; stop when none occurs. No
    pre-tokenisation, no cache, pure Python: CPU-heavy by design, and it gives
    exactly the tokens of an efficient BPE encoder with the same merges.
    """

    def __init__(self, merges: list[Pair], n_merges: int) -> None:
        self.merges = merges[:n_merges]

    def encode(self, text: str) -> list[int]:
        ids = list(text.encode("utf-8"))
        merges = self.merges
        while True:
            n = len(ids)
            for rank, (a, b) in enumerate(merges):
                for i in range(n - 1):
                    if ids[i] == a and ids[i + 1] == b:
                        break
                else:
                    continue
                ids = _merge_all(ids, a, b, 256 + rank, start=i)
                break
            else:
                return ids


def bpe_trace(text: str, ranks: dict[Pair, int], merges: list[Pair]) -> tuple[list[tuple[int, int]], int]:
    """Fast BPE encode that records (rank applied, length before) for each round."""
    ids = list(text.encode("utf-8"))
    trace: list[tuple[int, int]] = []
    while len(ids) >= 2:
        best = min((ranks.get(p, 1 << 30) for p in set(zip(ids, ids[1:]))), default=1 << 30)
        if best >= len(merges):
            break
        trace.append((best, len(ids)))
        a, b = merges[best]
        ids = _merge_all(ids, a, b, 256 + best)
    return trace, len(ids)


def naive_cost(trace: list[tuple[int, int]], final_len: int, n_merges: int) -> tuple[int, int]:
    """Element visits NaiveBPE makes on one document with the first n_merges merges,
    and the number of tokens it produces."""
    ops = 0
    for rank, length in trace:
        if rank >= n_merges:
            final_len = length
            break
        ops += rank * (length - 1) + length + length // 2
    return ops + n_merges * max(final_len - 1, 0), final_len


def calibrate(merges: list[Pair], docs: list[str],
              deadline: float) -> tuple[int, float, float, float]:
    """Pick how many merges make tokenising REFERENCE_TOKENS end near `deadline` here.

    A fast encoder traces which merges each sample document goes through; from
    the trace, the element visits NaiveBPE would make with any number of merges
    follow exactly. Timing NaiveBPE on a few documents gives this machine's
    seconds per visit (measured twice: small, then at the chosen size).
    Returns (n_merges, predicted seconds, tokens per document, seconds per visit).
    """
    ranks = {p: i for i, p in enumerate(merges)}
    traces = [bpe_trace(d, ranks, merges) for d in docs]

    def time_per_op(n: int, max_s: float) -> float:
        naive = NaiveBPE(merges, n)
        ops, t0 = 0, time.perf_counter()
        for i, d in enumerate(docs):
            naive.encode(d)
            ops += naive_cost(*traces[i], n)[0]
            if time.perf_counter() - t0 >= max_s and i >= 1:
                break
        return (time.perf_counter() - t0) / max(ops, 1)

    def predict(n: int, s_per_op: float) -> tuple[float, float]:
        ops = toks = 0
        for trace, final in traces:
            o, t = naive_cost(trace, final, n)
            ops += o
            toks += t + 1  # + BOS
        return REFERENCE_TOKENS * ops / max(toks, 1) * s_per_op, toks / len(traces)

    def choose(s_per_op: float) -> int:
        budget_s = deadline - time.monotonic()
        lo, hi = 0, len(merges)
        while lo < hi:  # the smallest n whose predicted time reaches the budget
            mid = (lo + hi) // 2
            if predict(mid, s_per_op)[0] >= budget_s:
                hi = mid
            else:
                lo = mid + 1
        return lo

    s_per_op = time_per_op(min(256, len(merges)), 0.15)
    n = choose(s_per_op)
    if n > 0:
        s_per_op = time_per_op(n, 0.3)
        n = choose(s_per_op)
    seconds, per_doc = predict(n, s_per_op)
    return n, seconds, per_doc, s_per_op


# --------------------------------------------------------------------------- loader


class Progress:
    """Counters the main thread updates and a reporter thread prints every second."""

    def __init__(self, needed: int) -> None:
        self.needed = needed
        self.doc_batches = 0
        self.tokens = 0
        self.done = threading.Event()

    def line(self) -> str:
        pct = min(100, self.tokens * 100 // self.needed)
        return (f"[DataLoader] 进度: {self.doc_batches} 个文档批次, "
                f"Token buffer: {self.tokens}/{self.needed} ({pct}%)")

    def report_forever(self) -> None:
        while not self.done.wait(PROGRESS_EVERY_S):
            log(self.line())


def parquets_iter_batched(shards: list[Path], split: str, start: int,
                          step: int) -> Iterator[list[str]]:
    """Yield lists of document texts, one row group at a time (nanochat's iterator)."""
    log(f"[parquets_iter_batched] 开始迭代 (split={split}, start={start}, step={step})")
    log(f"[parquets_iter_batched] 找到 {len(shards)} 个 parquet 文件")
    files = shards[:-1] if split == "train" else shards[-1:]
    log(f"[parquets_iter_batched] 使用 {len(files)} 个文件用于 {split}")
    first = True
    epoch = 0
    seen = 0  # row groups are dealt to ranks round-robin across all files
    while True:
        for fi, path in enumerate(files):
            if epoch == 0:
                log(f"[parquets_iter_batched] 处理文件 {fi + 1}/{len(files)}: {path.name}")
            groups = read_row_groups(path)
            if epoch == 0 and fi == 0:
                log(f"[parquets_iter_batched]   文件有 {len(groups)} 个 row groups")
            for rg in range(len(groups)):
                seen += 1
                if (seen - 1) % step != start:
                    continue
                if first:
                    log(f"[parquets_iter_batched]   读取第一个 row group (idx={rg})...")
                texts = groups[rg]
                valid = [t for t in texts if t.strip()]
                if first:
                    log(f"[parquets_iter_batched]   ✓ 第一个 row group: {len(texts)} 个原始文本, "
                        f"{len(valid)} 个有效文本")
                    first = False
                yield valid
        epoch += 1


def first_batch(shards: list[Path], tokenizer: NaiveBPE, needed: int, rank: int, world: int,
                progress: Progress) -> list[int]:
    """Tokenise documents until the buffer holds `needed` tokens (nanochat's loader)."""
    buffer: list[int] = []
    first_rg = True
    first_batch_logged = False
    for texts in parquets_iter_batched(shards, "train", rank, world):
        if first_rg:
            log(f"[DataLoader] ✓ 成功加载第一个批次: {len(texts)} 个文档")
            first_rg = False
        for b in range(0, len(texts), DOC_BATCH):
            docs = texts[b:b + DOC_BATCH]
            if not first_batch_logged:
                log(f"[DataLoader] ✓ 获取到第一个文档批次: {len(docs)} 个文档")
                log("[DataLoader] 开始 tokenize 第一个批次...")
            before = len(buffer)
            for doc in docs:
                buffer.append(0)  # BOS; bytes are 0..255, 0 never occurs in text
                buffer.extend(tokenizer.encode(doc))
                progress.tokens = len(buffer)
                if len(buffer) >= needed:
                    break
            progress.doc_batches += 1
            if not first_batch_logged:
                log(f"[DataLoader] ✓ Tokenize 完成: {len(docs)} 个序列, "
                    f"{len(buffer) - before} 个 tokens")
                log(f"[DataLoader] Token buffer 当前大小: {before}, 需要: {needed}")
                log(f"[DataLoader] Token buffer 更新后大小: {len(buffer)}")
                first_batch_logged = True
            if len(buffer) >= needed:
                return buffer
    raise AssertionError("unreachable: the iterator is infinite")


# --------------------------------------------------------------------------- training


def train_forever(params: list[float], rows: list[list[int]], targets: list[list[int]]) -> None:
    """Plain gradient descent on a bigram softmax model, one batch row per step."""
    k = BUCKETS
    lr = 20.0
    step = 0
    last_print = time.monotonic()
    losses: list[float] = []
    tokens_since = 0
    while True:
        row, tgt = rows[step % len(rows)], targets[step % len(rows)]
        counts: dict[int, Counter[int]] = defaultdict(Counter)
        for x, y in zip(row, tgt):
            counts[x % k][y % k] += 1
        n = len(row)
        loss = 0.0
        for x, cy in counts.items():
            base = x * k
            logits = params[base:base + k]
            m = max(logits)
            exps = [math.exp(v - m) for v in logits]
            z = sum(exps)
            nx = sum(cy.values())
            for y, c in cy.items():
                loss -= c * (logits[y] - m - math.log(z))
            scale = lr * nx / (n * z)
            for j in range(k):
                params[base + j] -= scale * exps[j]
            for y, c in cy.items():
                params[base + y] += lr * c / n
        losses.append(loss / n)
        tokens_since += n
        step += 1
        now = time.monotonic()
        if now - last_print >= STEP_PRINT_EVERY_S:
            mean = sum(losses) / len(losses)
            log(f"step {step} | loss {mean:.4f} | tokens/s {int(tokens_since / (now - last_print))}")
            losses, tokens_since, last_print = [], 0, now


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0,
                    help="time to the first batch is about --target-seconds / speed")
    ap.add_argument("--target-seconds", type=float, default=120.0)
    ap.add_argument("--data-dir", type=Path, default=Path("data"))
    ap.add_argument("--batch-size", type=int,
                    default=int(os.environ.get("DEVICE_BATCH_SIZE", "32")))
    ap.add_argument("--seq-len", type=int, default=2048)
    args = ap.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    B, T = args.batch_size, args.seq_len
    needed = B * T + 1

    log(f"[Train] base_train (nanochat 风格, 仅 CPU): B={B}, T={T}, rank={rank}, "
        f"world_size={world}, speed={args.speed:g}")
    t0 = time.monotonic()
    log(f"[Model] 初始化模型: bigram (vocab_buckets={BUCKETS}, n_params={BUCKETS * BUCKETS:,}, "
        f"device=cpu)")
    rng = random.Random(rank)
    params = [rng.gauss(0.0, 0.02) for _ in range(BUCKETS * BUCKETS)]
    log(f"[Model] ✓ 模型初始化完成: {len(params):,} 个参数, 用时 {time.monotonic() - t0:.2f}s")

    log(f"[DataLoader] 开始加载数据 (rank={rank}, world_size={world})")
    progress = Progress(needed)
    reporter = threading.Thread(target=progress.report_forever, name="progress", daemon=True)
    reporter.start()

    data_dir = args.data_dir.resolve()
    shards = ensure_shards(data_dir / "parquet_shards")
    log(f"[DataLoader] 找到 {len(shards)} 个 parquet 文件")
    merges = load_or_train_tokenizer(data_dir / "tokenizer", shards)

    # Calibrate on an even sample of the documents the loader is about to read.
    upcoming = [t for shard in shards[:2] for g in read_row_groups(shard) for t in g if t.strip()]
    sample = upcoming[::max(1, len(upcoming) // 64)]
    # Aim the first batch at target/speed after start (0.3 s: reading shards, building it).
    deadline = PROCESS_START + args.target_seconds / max(args.speed, 1e-6) - 0.3
    n_merges, predicted, per_doc, s_per_op = calibrate(merges, sample, deadline)
    log(f"[Tokenizer] 校准: {s_per_op * 1e9:.1f} ns/次比较; 朴素 BPE (单进程, 无缓存) "
        f"使用前 {n_merges} 个 merges, "
        f"约 {per_doc:.0f} tokens/文档, 预计 {needed / max(per_doc, 1):.0f} 个文档, "
        f"预计 tokenize 用时 {predicted * needed / REFERENCE_TOKENS:.0f}s")
    tokenizer = NaiveBPE(merges, n_merges)

    buffer = first_batch(shards, tokenizer, needed, rank, world, progress)
    progress.done.set()
    reporter.join(timeout=2.0)
    log(progress.line())
    log(f"[DataLoader] 准备创建第一个训练批次 (tokens: {needed})...")
    inputs = [buffer[r * T:(r + 1) * T] for r in range(B)]
    targets = [buffer[r * T + 1:(r + 1) * T + 1] for r in range(B)]
    log(f"[DataLoader] ✓ 第一个训练批次已准备好: inputs.shape=torch.Size([{B}, {T}]), "
        f"targets.shape=torch.Size([{B}, {T}])")
    log("[DataLoader] 数据已移动到 cpu")
    log(f"[Train] 距启动 {time.monotonic() - PROCESS_START:.1f}s 后开始训练")
    train_forever(params, inputs, targets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
