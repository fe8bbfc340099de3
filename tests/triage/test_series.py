"""Numbers as evidence (triage/readings/series.py): metric lines read as series per rank, through the real
`runbook triage` on files. The lines follow the formats trainers print (Megatron-LM's iteration
line, HF Trainer's dicts, torchtitan's step line, tqdm's rate)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runbook.library.runbooks import load_library
from runbook.triage.readings.series import HEAD_BLOCKS, TAIL_BLOCKS, describe_reading
from runbook.triage.result import triage_sources
from runbook.triage.scan import BLOCK_LINES
from runbook.triage.sources import Source, expand_inputs
from tests.triage.series_examples import EXAMPLES, megatron

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = load_library()


def readings(path: Path) -> list[dict]:
    return triage_sources(LIBRARY, None, [Source(str(path))]).readings


def readings_of(tmp_path: Path, name: str) -> tuple[Path, list[dict]]:
    log = tmp_path / f"{name}.log"
    log.write_text(EXAMPLES[name])
    return log, readings(log)


def test_every_kth_step_slow_is_the_input_pipeline(tmp_path: Path) -> None:
    log, [found] = readings_of(tmp_path, "every-8th-step-slow")
    assert found["reading"] == "step-spikes" and found["conclusion"] == "slow-training:input-bound"
    assert found["facts"] == {"who": "", "every": 8, "spike": 2.4, "median": 0.311, "count": 6, "points": 48}
    assert found["first"] == f"{log}:8"
    assert "one step in every 8 takes 2.4 s against a median of 0.311 s" in describe_reading(found)
    assert "每隔 8 步" in describe_reading(found, "zh")


def test_spikes_at_no_regular_interval_are_not_called_input_bound(tmp_path: Path) -> None:
    _, found = readings_of(tmp_path, "irregular-spikes")
    assert [r["reading"] for r in found] == ["loss-steady"]


def test_a_loss_that_turns_nan_is_dated_by_its_line(tmp_path: Path) -> None:
    log, [found, *_] = readings_of(tmp_path, "loss-turns-nan")
    assert found["reading"] == "loss-nonfinite" and found["conclusion"] == "nan-loss:loss-diverged"
    assert found["facts"] == {"who": "", "value": "NaN", "at": f"{log}:7", "finite": 6, "last": 2.45}


def test_a_loss_that_is_nan_from_its_first_value(tmp_path: Path) -> None:
    """Lightning's progress bar names the step's loss `train_loss_step`."""
    log, [found] = readings_of(tmp_path, "lightning-nan-from-start")
    assert found["reading"] == "loss-nonfinite-from-start" and found["conclusion"] == "nan-loss:loss-diverged"
    assert found["facts"] == {"who": "", "value": "NaN", "at": f"{log}:1"}


def test_a_climbing_loss_is_diverging(tmp_path: Path) -> None:
    _, [found] = readings_of(tmp_path, "loss-climbs")
    assert found["reading"] == "loss-climbs"
    assert found["facts"] == {"who": "", "start": 1.9, "end": 6.133, "low": 1.65, "count": 12}


def test_a_constant_learning_rate_under_a_schedule(tmp_path: Path) -> None:
    _, [found] = readings_of(tmp_path, "lr-under-schedule")
    assert found["reading"] == "lr-constant" and found["conclusion"] == "nan-loss:lr-not-scheduled"
    assert found["facts"]["value"] == 0.0001 and found["facts"]["count"] == 10
    assert found["facts"]["schedule"] == "lr_scheduler_type: cosine, warmup_steps: 100"
    # a constant rate with no schedule set is a choice, not a fault
    assert [r["reading"] for r in readings_of(tmp_path, "lr-constant-no-schedule")[1]] == ["loss-steady"]
    assert readings_of(tmp_path, "lr-zero")[1][0]["reading"] == "lr-zero"


def test_a_loss_that_jumps_and_stays_up_is_a_broken_update(tmp_path: Path) -> None:
    """GPT-NeoX prints `lm_loss`; from 2.28 to 11.05 in one step is a model reset, even in 4 values."""
    log, [found] = readings_of(tmp_path, "loss-jumps")
    assert found["reading"] == "loss-jumps" and found["conclusion"] == "nan-loss:loss-diverged"
    assert found["facts"] == {"who": "", "before": 2.276, "after": 11.05, "at": f"{log}:2", "ratio": 4.9}
    assert "jumps from 2.276 to 11.05" in describe_reading(found)
    assert [r["reading"] for r in readings_of(tmp_path, "loss-spike-recovers")[1]] == ["loss-steady"]


def test_a_learning_rate_that_is_zero_then_one_value_is_no_schedule(tmp_path: Path) -> None:
    log, [found, *_] = readings_of(tmp_path, "lr-zero-then-constant")
    assert found["reading"] == "lr-zero-then-constant" and found["conclusion"] == "nan-loss:lr-not-scheduled"
    assert found["facts"] == {"who": "", "zeros": 4, "value": 0.0003, "count": 3}
    assert found["first"] == f"{log}:5"
    assert "lr" not in {r["reading"][:2] for r in readings_of(tmp_path, "lr-warmup-from-zero")[1]}


def test_vllm_stats_with_requests_waiting_and_none_running_after_a_full_kv_cache(tmp_path: Path) -> None:
    log, [found] = readings_of(tmp_path, "kv-cache-stuck")
    assert found["reading"] == "kv-cache-stuck" and found["conclusion"] == "cuda-oom:kv-cache-too-small"
    assert found["facts"] == {"who": "", "peak": 100.0, "at": f"{log}:2", "count": 3, "waiting": 1.0}
    assert "GPU KV cache was 100% full" in describe_reading(found)
    assert readings_of(tmp_path, "kv-cache-busy")[1] == []


def test_one_rank_slower_than_the_others(tmp_path: Path) -> None:
    log, every = readings_of(tmp_path, "rank-2-slow")
    found = [r for r in every if r["reading"] == "slow-rank"]
    assert found == [{"reading": "slow-rank", "conclusion": "slow-training:straggler-node",
                      "first": f"{log}:3", "facts": {"slow": "rank 2", "metric": "throughput",
                                                     "value": 6315.0, "others": 12000.0, "peers": 3,
                                                     "ratio": 1.9}}]


def test_ranks_in_a_directory_of_logs_are_compared_by_step_time(tmp_path: Path) -> None:
    for rank in range(3):
        seconds = 3.1 if rank == 1 else 1.0
        (tmp_path / f"rank{rank}.log").write_text(
            "".join(f"Epoch 0: {s}/100 [00:{s:02d}<01:00, {seconds:.2f}s/it, loss=2.{s}]\n"
                    for s in range(1, 8)))
    found = triage_sources(LIBRARY, None, expand_inputs([str(tmp_path)])).readings
    slow = [r for r in found if r["reading"] == "slow-rank"]
    assert slow and slow[0]["facts"]["slow"] == "rank 1" and slow[0]["facts"]["metric"] == "step_time"
    assert slow[0]["facts"]["ratio"] == 3.1


def test_a_large_log_is_read_at_its_head_and_tail(tmp_path: Path) -> None:
    """The middle of a long log is not read for numbers; the NaN at its end is found."""
    log = tmp_path / "long.log"
    middle = BLOCK_LINES * (HEAD_BLOCKS + TAIL_BLOCKS + 2)
    with log.open("w") as out:
        for i in range(middle):
            out.write(f"step {i} | loss: {3.0 - i * 1e-5:.5f}\n")
        out.write(f"step {middle} | loss: nan\n")
    [found] = readings(log)
    assert found["reading"] == "loss-nonfinite" and found["facts"]["at"] == f"{log}:{middle + 1}"


def test_json_and_text_carry_the_readings(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("\n".join(megatron(i, 2400.0 if i % 6 == 0 else 300.0) for i in range(1, 37)) + "\n")
    env = {**os.environ, "RUNBOOK_LANG": "en"}
    done = subprocess.run([sys.executable, "-m", "runbook", "triage", "--format", "json", str(log)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    doc = json.loads(done.stdout)
    assert [r["reading"] for r in doc["readings"]] == ["step-spikes"]
    # no signature matched, so what the numbers name is the answer (a match with that reading)
    assert doc["verdict"] == "cause" and doc["matches"][0]["conclusion"]["id"] == "input-bound"
    assert doc["matches"][0]["reading"]["reading"] == "step-spikes"
    assert "one step in every 6" in doc["summary"]
    text = subprocess.run([sys.executable, "-m", "runbook", "triage", str(log)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env).stdout
    assert "the numbers: one step in every 6" in text and "runbook run slow-training" in text


def test_a_loss_scale_that_keeps_halving_is_fp16_overflow(tmp_path: Path) -> None:
    _, [found] = readings_of(tmp_path, "loss-scale-collapses")
    assert found["reading"] == "loss-scale-collapses" and found["conclusion"] == "nan-loss:fp16-overflow"
    assert (found["facts"]["start"], found["facts"]["end"], found["facts"]["drops"]) == (32768, 8, 12)


def test_a_loss_scale_that_keeps_falling_from_its_usual_start_is_fp16_overflow(tmp_path: Path) -> None:
    _, [found] = readings_of(tmp_path, "loss-scale-keeps-falling")
    assert found["conclusion"] == "nan-loss:fp16-overflow"
    assert (found["facts"]["start"], found["facts"]["end"], found["facts"]["drops"]) == (32768, 512, 6)
    _, settling = readings_of(tmp_path, "loss-scale-settling")
    assert not [r for r in settling if r["reading"] == "loss-scale-collapses"]


def test_the_loss_scale_calibrating_at_the_start_is_no_fault(tmp_path: Path) -> None:
    """DeepSpeed starting at 2^32 halves on its first steps until the scale fits: not an overflow."""
    _, found = readings_of(tmp_path, "loss-scale-calibrating")
    assert not [r for r in found if r["reading"] == "loss-scale-collapses"]


def test_resident_memory_that_grows_is_a_leak(tmp_path: Path) -> None:
    _, [found] = readings_of(tmp_path, "host-memory-grows")
    assert found["conclusion"] == "memory-growth:host-memory-growth"
    assert (found["facts"]["start"], found["facts"]["end"]) == (5.11, 212.0)


def test_real_logs_read_by_their_numbers() -> None:
    """deepspeed#534 (the scale halving to 4 after hours of training) and wenet#989 (rank 0's RSS
    growing to 212 GB): named by their numbers, with no error line."""
    corpus = ROOT / "tests" / "data" / "triage-corpus"
    scale = triage_sources(LIBRARY, None, [Source(str(corpus / "deepspeed/534-loss-scale-collapse.log"))])
    assert scale.matches[0].conclusion == "fp16-overflow"
    wenet = corpus / "pytorch/wenet-989-rank0-rss-grows-to-212g.log"
    rss = triage_sources(LIBRARY, None, [Source(str(wenet))])
    assert rss.matches[0].conclusion == "host-memory-growth" and rss.verdict == "cause"


def test_a_loss_scale_that_halves_from_its_start_and_stays_high_is_calibrating() -> None:
    """DeepSpeed's first steps: the dynamic loss scale halves on each overflow until the gradients fit
    fp16; still at 2^26 (or 8192 from 2^16) it is settling, a healthy answer (nan-loss:loss-finite)."""
    from runbook.library.runbooks import load_library
    from runbook.triage.result import triage_text

    line = ("[2024-09-11 17:52:{s:02d},320] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! "
            "Rank 0 Skipping step. Attempted loss scale: {a}, reducing to {b}")
    text = "\n".join(line.format(s=i, a=2 ** (32 - i), b=2 ** (31 - i)) for i in range(6)) + "\n"
    result = triage_text(load_library(), None, text, "paste")
    assert [r["reading"] for r in result.readings] == ["loss-scale-settles"]
    assert result.verdict == "no-error"
    answers = [(m.runbook, m.conclusion, m.role) for m in result.matches]
    assert answers == [("nan-loss", "loss-finite", "healthy")]
    collapsed = "\n".join(line.format(s=i, a=2 ** (12 - i), b=2 ** (11 - i)) for i in range(8)) + "\n"
    assert [r["reading"] for r in triage_text(load_library(), None, collapsed, "paste").readings] == [
        "loss-scale-collapses"]  # on to 2^4: overflow after overflow, not calibration
