"""`log` against real log files written by the test."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from runbook.checks.log import log, log_signals

SEED_LOG = (
    "[Rank 0] 初始化完成，world_size=8\n"
    "[DataLoader] 进度: 8 个文档批次, Token buffer: 40000/65537 (61%)\n"
    "step 11 | loss 2.7 | lr 3.0e-4\n"
    "[DataLoader] 进度: 10 个文档批次, Token buffer: 50000/65537 (76%)\n"
    "step 12 | loss 2.5 | lr 3.0e-4\n"
    "[DataLoader] 进度: 12 个文档批次, Token buffer: 60000/65537 (91%)\n"
)
PATTERNS = {
    "buffer": r"Token buffer: (\d+)/(\d+)",
    "step": r"step (\d+) \| loss ([\d.]+)",
    "nccl": r"NCCL (WARN|ERROR)",
}


def write(path: Path, text: str | bytes, age_s: float = 0.0) -> Path:
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    when = time.time() - age_s
    os.utime(path, (when, when))
    return path


def test_seed_log_patterns(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "train.log", SEED_LOG, age_s=120)
    result = log.run({"path": str(path), "patterns": PATTERNS, "tail": 2}, make_ctx())
    assert result["exists"] is True and result["reason"] is None
    assert result["path"] == str(path)
    assert result["lines_read"] == 6
    assert result["size_bytes"] == len(SEED_LOG.encode("utf-8"))
    assert 119 < result["age_s"] < 125
    assert result["tail"] == [
        "step 12 | loss 2.5 | lr 3.0e-4",
        "[DataLoader] 进度: 12 个文档批次, Token buffer: 60000/65537 (91%)",
    ]
    assert result["patterns"]["buffer"] == {
        "count": 3,
        "last_line": "[DataLoader] 进度: 12 个文档批次, Token buffer: 60000/65537 (91%)",
        "last_line_no": 6,
        "last_groups": ["60000", "65537"],
        "last_value": 60000.0,
    }
    assert result["patterns"]["step"]["count"] == 2
    assert result["patterns"]["step"]["last_line_no"] == 5
    assert result["patterns"]["step"]["last_groups"] == ["12", "2.5"]
    assert result["patterns"]["step"]["last_value"] == 12.0
    assert result["patterns"]["nccl"] == {
        "count": 0, "last_line": None, "last_line_no": None, "last_groups": [],
        "last_value": None,
    }
    assert result["last_pattern"] == "buffer"
    assert result["pattern_errors"] == {}


def test_last_pattern_follows_latest_line(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "train.log", SEED_LOG + "step 13 | loss 2.4 | lr 3.0e-4\n")
    result = log.run({"path": str(path), "patterns": PATTERNS}, make_ctx())
    assert result["last_pattern"] == "step"
    assert result["patterns"]["step"]["last_value"] == 13.0
    assert result["tail"][-1] == "step 13 | loss 2.4 | lr 3.0e-4"
    assert len(result["tail"]) == 7  # default tail 20, fewer lines


def test_patterns_match_and_quote_lines_without_colour_codes(tmp_path: Path, make_ctx) -> None:
    # Ray's driver log colours the `(raylet)` prefix and the `[repeated Nx]` note
    line = ("\x1b[33m(raylet)\x1b[0m [2026-11-28 11:14:14,937 E 27673 27673] node_manager.cc:562: "
            "Raylet failed to accept new connection: Too many open files\x1b[32m [repeated 6x "
            "across cluster]\x1b[0m")
    path = write(tmp_path / "x.log", line + "\n")
    result = log.run({"path": str(path), "patterns": {
        "fd": r"^\(raylet\) (.*Too many open files)(?: \[repeated \d+x across cluster\])?$"}},
        make_ctx())
    found = result["patterns"]["fd"]
    assert found["count"] == 1
    assert found["last_groups"] == ["[2026-11-28 11:14:14,937 E 27673 27673] node_manager.cc:562: "
                                    "Raylet failed to accept new connection: Too many open files"]
    assert "\x1b" not in found["last_line"] and found["last_line"].endswith("across cluster]")


def test_no_group_and_non_numeric_group(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "x.log", "NCCL WARN timeout\nhello world\n")
    result = log.run(
        {"path": str(path), "patterns": {"warn": "NCCL WARN", "word": r"(hello) (\w+)"}},
        make_ctx(),
    )
    assert result["patterns"]["warn"]["last_groups"] == []
    assert result["patterns"]["warn"]["last_value"] is None
    assert result["patterns"]["word"]["last_groups"] == ["hello", "world"]
    assert result["patterns"]["word"]["last_value"] is None


def test_invalid_regex_does_not_crash(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "x.log", SEED_LOG)
    result = log.run({"path": str(path), "patterns": {"bad": "(oops", **PATTERNS}}, make_ctx())
    assert list(result["pattern_errors"]) == ["bad"]
    assert "missing )" in result["pattern_errors"]["bad"]
    assert "bad" not in result["patterns"]
    assert result["patterns"]["buffer"]["count"] == 3


def test_crlf_progress_bars_and_partial_last_line(tmp_path: Path, make_ctx) -> None:
    text = (
        "epoch 1\r\n"
        "  0%|          | 0/100\r 50%|#####     | 50/100\r100%|##########| 100/100\n"
        "\n"
        "step 3 | loss 1.5 | lr 1e-4\r\n"
        "step 4 | loss 1.4"  # still being written
    )
    path = write(tmp_path / "x.log", text)
    result = log.run({"path": str(path), "patterns": {"pct": r"(\d+)%\|"}}, make_ctx())
    assert result["tail"] == [
        "epoch 1",
        "  0%|          | 0/100",
        " 50%|#####     | 50/100",
        "100%|##########| 100/100",
        "step 3 | loss 1.5 | lr 1e-4",
        "step 4 | loss 1.4",
    ]
    assert result["patterns"]["pct"]["count"] == 3
    assert result["patterns"]["pct"]["last_value"] == 100.0


def test_max_bytes_reads_only_whole_lines_from_the_end(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "big.log", "".join(f"line {i}\n" for i in range(1000)))
    result = log.run({"path": str(path), "max_bytes": 50, "tail": 500}, make_ctx())
    # 9 bytes a line: 50 bytes hold 5 whole lines and the end of "line 994", which is dropped.
    assert result["tail"] == [f"line {i}" for i in range(995, 1000)]
    assert result["lines_read"] == 5
    # A limit that falls exactly on a line start keeps that line.
    exact = log.run({"path": str(path), "max_bytes": 9, "tail": 5}, make_ctx())
    assert exact["tail"] == ["line 999"]


def test_tail_limits_and_long_lines(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "x.log", b"a" * 1000 + b"\nbad \xff byte\n")
    result = log.run({"path": str(path), "tail": 2}, make_ctx())
    assert result["tail"] == ["a" * 400, "bad \ufffd byte"]
    assert log.run({"path": str(path), "tail": 0}, make_ctx())["tail"] == []


def test_glob_picks_newest(tmp_path: Path, make_ctx) -> None:
    old = write(tmp_path / "rank0.log", "old\n", age_s=600)
    new = write(tmp_path / "rank1.log", "new line\n", age_s=5)
    (tmp_path / "dir.log").mkdir()
    result = log.run({"path": str(tmp_path / "*.log")}, make_ctx())
    assert result["path"] == str(new)
    assert result["tail"] == ["new line"]
    assert [f["path"] for f in result["files"]] == [str(new), str(old)]
    assert [f["size_bytes"] for f in result["files"]] == [9, 4]
    assert 4 < result["age_s"] < 10
    assert 599 < result["files"][1]["age_s"] < 605


def test_no_path_and_missing_files(tmp_path: Path, make_ctx) -> None:
    empty = log.run({"path": ""}, make_ctx())
    assert empty["exists"] is False
    assert empty["reason"] == "no log path given (--set log=PATH)"
    assert empty["tail"] == [] and empty["patterns"] == {} and empty["age_s"] is None
    # Patterns are still reported (count 0), so runbook expressions need no guard.
    with_patterns = log.run({"path": "", "patterns": {"loss": "loss", "bad": "("}}, make_ctx())
    assert with_patterns["patterns"]["loss"]["count"] == 0
    assert list(with_patterns["pattern_errors"]) == ["bad"]
    assert log.run({}, make_ctx())["reason"] == "no log path given (--set log=PATH)"
    missing = log.run({"path": str(tmp_path / "nope.log")}, make_ctx())
    assert missing["exists"] is False
    assert missing["reason"] == f"{tmp_path / 'nope.log'} does not exist or is not a regular file"
    no_match = log.run({"path": str(tmp_path / "*.log")}, make_ctx())
    assert no_match["reason"] == f"no file matches {tmp_path / '*.log'}"


# -- error signatures -----------------------------------------------------------------------------

# A torchrun job of 4 ranks: rank 3 runs out of GPU memory, the others then time out in NCCL.
CRASH_LOG = "".join(line + "\n" for line in (
    '[rank0]:[W305 14:20:01.123456789 ProcessGroupNCCL.cpp:4115] Warning: using GPU 0 to'
    ' perform barrier',
    'step 120 | loss 2.31 | lr 3.0e-4',
    '[rank3]: Traceback (most recent call last):',
    '[rank3]:   File "/workspace/train.py", line 412, in <module>',
    '[rank3]:     loss.backward()',
    '[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3'
    ' has a total capacity of 79.10 GiB of which 1.02 GiB is free.',
    '[rank0]:[E305 14:30:01.456789012 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught'
    ' collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1048576,'
    ' NumelOut=1048576, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.',
    '[rank1]:[E305 14:30:01.456789345 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught'
    ' collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1048576,'
    ' NumelOut=1048576, Timeout(ms)=600000) ran for 600044 milliseconds before timing out.',
    '[rank0]: Traceback (most recent call last):',
    '[rank0]: torch.distributed.DistBackendError: NCCL error in:'
    ' ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system error (run with'
    ' NCCL_DEBUG=INFO for details), NCCL version 2.20.5',
    'E0305 14:30:05.123000 139872 torch/distributed/elastic/multiprocessing/api.py:826] failed'
    ' (exitcode: 1) local_rank: 3 (pid: 48214) of binary: /usr/bin/python3',
))


def test_signatures_in_a_crash_log(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "train.log", CRASH_LOG)
    result = log.run({"path": str(path)}, make_ctx())
    sig = result["signatures"]
    assert set(sig) == set(log_signals.SIGNATURES)
    assert sig["cuda_oom"] == {
        "count": 1, "first_line_no": 6, "last_line_no": 6,
        "last_line": "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
                     "GPU 3 has a total capacity of 79.10 GiB of which 1.02 GiB is free.",
    }
    assert (sig["watchdog_timeout"]["count"], sig["watchdog_timeout"]["first_line_no"],
            sig["watchdog_timeout"]["last_line_no"]) == (2, 7, 8)
    assert sig["traceback"]["count"] == 2 and sig["traceback"]["first_line_no"] == 3
    assert sig["nccl_error"]["count"] == 1 and sig["nccl_error"]["last_line_no"] == 10
    assert sig["missing_keys"] == {"count": 0, "first_line_no": None, "last_line_no": None,
                                   "last_line": None}
    assert result["first_signature"] == "cuda_oom"  # the cause; the timeouts follow from it


@pytest.mark.parametrize(("line", "name"), [
    ("[rank0]:[E ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=5, OpType=BROADCAST) ran for 1800000 milliseconds before timing out.",
     "watchdog_timeout"),
    ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB", "cuda_oom"),
    ("RuntimeError: CUDA error: out of memory", "cuda_oom"),
    ("step 300 | loss nan | lr 3.0e-4", "nan_loss"),
    ("{'loss': inf, 'grad_norm': 12.5, 'learning_rate': 1e-05, 'epoch': 0.3}", "nan_loss"),
    ("Loss is NaN, stopping training", "nan_loss"),
    ("FloatingPointError: Detected non-finite loss at step 17", "nan_loss"),
    ('RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\tMissing key(s) in '
     'state_dict: "model.embed_tokens.weight".', "missing_keys"),
    ('\tUnexpected key(s) in state_dict: "module.lm_head.weight".', "unexpected_keys"),
    ("train.py: error: unrecognized arguments: --fp16 True", "unrecognized_args"),
    ("RuntimeError: The server socket has failed to listen on any local network address. "
     "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
     "address_in_use"),
    ("Error: listen EADDRINUSE: address already in use :::8265", "address_in_use"),
    ("RuntimeError: DataLoader worker (pid 48999) is killed by signal: Killed. ", "dataloader_killed"),
    ("RuntimeError: DataLoader worker (pid(s) 51877, 51878) exited unexpectedly",
     "dataloader_killed"),
    ("ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
     "ray_actor_died"),
    ("ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation "
     "task", "ray_actor_died"),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
     "unhandled cuda error (run with NCCL_DEBUG=INFO for details)", "nccl_error"),
    ("ncclSystemError: System call (e.g. socket, malloc) or external library call failed",
     "nccl_error"),
    ("Traceback (most recent call last):", "traceback"),
])
def test_each_signature(line: str, name: str, tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "x.log", f"starting\n{line}\nafter\n")
    result = log.run({"path": str(path)}, make_ctx())
    found = {n for n, entry in result["signatures"].items() if entry["count"]}
    assert name in found
    # Only the ray error also mentions its actor dying twice over; none spill into others.
    assert found - {name} <= ({"ray_actor_died"} if name == "ray_actor_died" else set())
    assert result["signatures"][name]["first_line_no"] == 2


def test_near_misses_are_not_signatures(tmp_path: Path, make_ctx) -> None:
    text = (
        "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ibp26s0:10.0.0.17<0>\n"
        "step 5 | loss 2.31 | nan_count 0\n"
        "Child process exited unexpectedly? No: it finished.\n"
        "loss_scale: 65536.0 | grad norm: 0.92\n"
        "We handle the Address family AF_INET6 here\n"
    )
    result = log.run({"path": str(write(tmp_path / "x.log", text))}, make_ctx())
    assert {n: e["count"] for n, e in result["signatures"].items() if e["count"]} == {}
    assert result["first_signature"] is None


def test_signatures_off(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "train.log", CRASH_LOG)
    result = log.run({"path": str(path), "signatures": False}, make_ctx())
    assert result["signatures"] == {} and result["first_signature"] is None


# -- loss statistics ------------------------------------------------------------------------------


def test_loss_stats_default_regex(tmp_path: Path, make_ctx) -> None:
    losses = [3.2, 3.0, 2.9, 2.7, 2.6, 2.5, 2.45, 2.4]
    text = "".join(f"step {i} | loss {v} | lr 3.0e-4\n" for i, v in enumerate(losses))
    result = log.run({"path": str(write(tmp_path / "x.log", text))}, make_ctx())
    stats = result["loss_stats"]
    assert stats == {"count": 8, "last": 2.4, "last_raw": "2.4", "first": 3.2, "min": 2.4,
                     "max": 3.2, "mean": round(sum(losses) / 8, 6), "trend": "down",
                     "nan_count": 0, "inf_count": 0}
    # The window keeps the last N values.
    windowed = log.run({"path": str(tmp_path / "x.log"), "loss_window": 3}, make_ctx())
    assert windowed["loss_stats"]["count"] == 3 and windowed["loss_stats"]["first"] == 2.5


CORPUS = Path(__file__).resolve().parents[2] / "data" / "triage-corpus"


def test_lr_stats_read_hf_and_step_lines(tmp_path: Path, make_ctx) -> None:
    # HF Trainer under the DeepSpeed launcher, verbatim (Baichuan2#287): the LR stays at its peak.
    flat = log.run({"path": str(CORPUS / "deepspeed" / "287-baichuan2-lr-constant-cosine.log")}, make_ctx())
    assert flat["lr_stats"] == {"count": 8, "first": 1e-05, "last": 1e-05, "min": 1e-05, "max": 1e-05,
                                "distinct": 1}
    warm = "".join(f"step {i} | loss 2.{i} | lr {i * 1e-5:.1e} | grad_norm 0.4\n" for i in range(1, 7))
    moving = log.run({"path": str(write(tmp_path / "w.log", warm)), "loss_window": 4}, make_ctx())
    assert moving["lr_stats"]["distinct"] == 4 and moving["lr_stats"]["last"] == 6e-05
    quiet = log.run({"path": str(write(tmp_path / "q.log", "epoch 1 done\n"))}, make_ctx())
    assert quiet["lr_stats"] == {"count": 0, "first": None, "last": None, "min": None, "max": None,
                                 "distinct": 0}


def test_loss_diverging_to_nan(tmp_path: Path, make_ctx) -> None:
    text = ("step 1 | loss 2.1\nstep 2 | loss 2.4\nstep 3 | Loss: 3.9\nstep 4 | loss 8.7\n"
            "step 5 | loss inf\nstep 6 | loss nan\n")
    result = log.run({"path": str(write(tmp_path / "x.log", text))}, make_ctx())
    stats = result["loss_stats"]
    assert stats["count"] == 6 and stats["nan_count"] == 1 and stats["inf_count"] == 1
    assert stats["last"] is None and stats["last_raw"] == "nan"
    assert stats["max"] == 8.7 and stats["trend"] == "up"
    assert result["signatures"]["nan_loss"]["count"] == 2
    assert json.dumps(result, allow_nan=False)  # NaN never leaks into the JSON answer


def test_loss_pattern_from_the_runbook(tmp_path: Path, make_ctx) -> None:
    text = "".join(f"it={i} train/lm_loss=2.4{i % 3} val/lm_loss=9.9\n" for i in range(10))
    patterns = {"loss": r"train/lm_loss=([\d.]+)"}
    result = log.run({"path": str(write(tmp_path / "x.log", text)), "patterns": patterns},
                     make_ctx())
    assert result["loss_stats"]["last"] == 2.40 and result["loss_stats"]["max"] == 2.42
    assert result["loss_stats"]["trend"] == "flat"  # noise within 2% is flat...
    assert log_signals.trend([2.5, 2.4, 2.3, 2.2]) == "down"  # ...an 8% fall is not


# -- progress -------------------------------------------------------------------------------------


def test_progress_from_timestamps(tmp_path: Path, make_ctx) -> None:
    text = "".join(f"2024-03-05 14:{i // 2:02d}:{30 * (i % 2):02d},120 INFO trainer: step {100 + 10 * i} "
                   f"loss {2.0 - i / 100:.2f}\n" for i in range(12))
    path = write(tmp_path / "train.log", text, age_s=42)
    result = log.run({"path": str(path)}, make_ctx())
    progress = result["progress"]
    assert progress["last_step"] == 210
    assert progress["steps_per_min"] == 20.0 and progress["basis"] == "timestamps"
    assert 41 < progress["seconds_since_progress"] < 45  # the last line is a step line


def test_progress_not_the_last_line(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "train.log", "step 7 | loss 2.0\nCollecting trajectories...\n")
    progress = log.run({"path": str(path)}, make_ctx())["progress"]
    assert progress["last_step"] == 7 and progress["seconds_since_progress"] is None
    assert progress["steps_per_min"] is None and progress["basis"] == "none"


def test_progress_from_printed_rate(tmp_path: Path, make_ctx) -> None:
    text = "".join(
        f" iteration {i:8d}/  500000 | consumed samples: {i * 512:12d} | elapsed time per iteration "
        f"(ms): 1500.0 | learning rate: 3.000E-04 | lm loss: 2.3{i % 10}E+00 |\n"
        for i in range(190, 201))
    progress = log.run({"path": str(write(tmp_path / "x.log", text))}, make_ctx())["progress"]
    assert progress["last_step"] == 200
    assert progress["steps_per_min"] == 40.0 and progress["basis"] == "printed_rate"
    tqdm = "Training:  45%|####5     | 450/1000 [07:30<09:10,  2.50it/s]\n"
    bar = log.run({"path": str(write(tmp_path / "bar.log", tqdm))}, make_ctx())["progress"]
    assert bar["steps_per_min"] == 150.0 and bar["basis"] == "printed_rate"


def test_progress_from_file_times(tmp_path: Path, make_ctx) -> None:
    """No timestamps, no rate: the file's creation and last write bound the steps logged."""
    path = tmp_path / "train.log"
    path.write_text("".join(f"step {i} | loss 2.0\n" for i in range(0, 31)))
    birth = os.stat(path).st_mtime
    os.utime(path, (birth + 60, birth + 60))  # written for a minute
    progress = log.run({"path": str(path)}, make_ctx())["progress"]
    if progress["basis"] == "none":
        pytest.skip("this file system does not record creation times")
    assert progress["basis"] == "file_times"
    assert 29 <= progress["steps_per_min"] <= 31
    partial = log.run({"path": str(path), "max_bytes": 100}, make_ctx())["progress"]
    assert partial["basis"] == "none"  # the window is not the whole file: no start time


def test_missing_log_has_every_field(tmp_path: Path, make_ctx) -> None:
    result = log.run({"path": str(tmp_path / "nope.log")}, make_ctx())
    assert result["signatures"]["cuda_oom"]["count"] == 0
    assert result["loss_stats"]["count"] == 0 and result["loss_stats"]["trend"] is None
    assert result["progress"] == {"last_step": None, "steps_per_min": None, "basis": "none",
                                  "seconds_since_progress": None}
    assert result["per_file"] == [] and result["slowest_file"] is None


# -- every rank's log -----------------------------------------------------------------------------


def test_all_files(tmp_path: Path, make_ctx) -> None:
    for rank in range(4):
        stuck = rank == 2
        text = "".join(f"step {i} | loss 2.0\n" for i in range(100 if stuck else 180))
        if stuck:
            text += "NCCL error: unhandled system error\n"
        write(tmp_path / f"rank{rank}.log", text, age_s=900 if stuck else 5 + rank)
    result = log.run({"path": str(tmp_path / "rank*.log"), "all_files": True}, make_ctx())
    assert result["path"] == str(tmp_path / "rank0.log")  # the newest is still the main file
    assert [f["path"] for f in result["per_file"]] == [
        str(tmp_path / f"rank{r}.log") for r in (0, 1, 3, 2)]
    stuck = result["per_file"][-1]
    assert stuck["last_step"] == 99 and stuck["signatures"] == {"nccl_error": 1}
    assert stuck["first_signature"] == "nccl_error" and stuck["error"] is None
    assert result["per_file"][0]["last_step"] == 179 and result["per_file"][0]["signatures"] == {}
    assert result["slowest_file"] == str(tmp_path / "rank2.log")
    assert 890 < result["age_spread_s"] < 900
    single = log.run({"path": str(tmp_path / "rank*.log")}, make_ctx())
    assert single["per_file"] == [] and single["slowest_file"] is None


def test_the_error_messages_facts_and_whether_the_log_moves(tmp_path: Path, make_ctx) -> None:
    # The OOM line is verbatim from https://github.com/awslabs/keys_values/issues/92.
    path = tmp_path / "train.log"
    path.write_text(
        "step 10 loss 2.1\n"
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 572.00 MiB. GPU 0 has a "
        "total capacity of 39.49 GiB of which 321.31 MiB is free. Process 3721648 has 414.00 MiB memory "
        "in use. Including non-PyTorch memory, this process has 37.46 GiB memory in use. Process 1374765 "
        "has 414.00 MiB memory in use. Process 1374763 has 414.00 MiB memory in use. Process 1374764 has "
        "414.00 MiB memory in use. Of the allocated memory 36.04 GiB is allocated by PyTorch, and 321.37 "
        "MiB is reserved by PyTorch but unallocated.\n")
    result = log.run({"path": str(path), "stall_after": 120}, make_ctx())
    oom = result["facts"]["cuda_oom"]
    assert oom["requested_mib"] == 572.0 and oom["other_processes_count"] == 4
    assert oom["held_by_others"] is False  # 1.6 GiB of 39.5: not what filled the GPU
    assert result["progressing"] is True
    os.utime(path, (time.time() - 600, time.time() - 600))
    old = log.run({"path": str(path), "stall_after": "120", "facts": False}, make_ctx())
    assert old["progressing"] is False and old["facts"] == {}
    assert log.run({"path": str(path)}, make_ctx())["progressing"] is None
    assert log.run({"path": str(tmp_path / "none.log"), "stall_after": 5}, make_ctx())["progressing"] is None
