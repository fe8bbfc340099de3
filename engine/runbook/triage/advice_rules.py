"""What `runbook triage` says when it names no cause, as data, written once.

A paste that no signature explains still gets an answer (advice.py applies these rules):

- `shapes`: what the excerpt lacks. The first shape whose test holds on the excerpt's last
  `tail_lines` lines describes it. A test is one of:
  - `none`: the excerpt has no line that is not blank;
  - `any`: some line matches `pattern`;
  - `last`: the last line that is not blank matches `pattern`;
  - `share`: at least `share` of the lines that are not blank match `pattern`;
  - `verdict`: the triage's verdict is `verdict`;
  - `always`: the last shape, when nothing else held.
  Each shape names the `collect` entries to suggest, most useful first.
- `collect`: what to gather next, each with its exact command (on every rank's node: `LOG`,
  `PID` and `HOSTS` stand for the user's own), the runbook that gathers it `instead` where one
  does, and why it helps.
- `closest`: how many conclusions to offer by similarity when no line reads as an error (the
  similarity itself is fallback.py's), and how many shared words to name as the reason.

Everything is plain JSON: site/triage_export.py writes it into the triage page's data, and the
page (site/static/triage.js) applies the same rules, so the CLI and the page say the same.
The patterns are written for both Python's `re` and JavaScript's RegExp.
"""

from __future__ import annotations

from typing import Any

_FRAME = r'^\s*File "[^"]+", line \d+, in \S|^Traceback \(most recent call last\):\s*$'
_DUMP = (r"^Thread 0x[0-9a-fA-F]+ \((?:active|idle|most recent call first)"
         r"|^Current thread 0x[0-9a-fA-F]+ \(most recent call first\)"
         r"|^Process \d+: .*python|^Thread \d+ \(idle\): \"|^#\d+ +0x[0-9a-f]+ in ")
_METRIC = (r"(?:\b(?:loss|lr|learning_rate|grad_norm|step|iter(?:ation)?|epoch|tps|mfu|throughput"
           r"|samples/s(?:ec)?|tokens/s|it/s|s/it)\b|SamplesPerSec)\D{0,24}\d")


def _collect(command: str, instead: str | None, en: str, zh: str) -> dict[str, Any]:
    return {"command": command, "instead": instead, "why": {"en": en, "zh": zh}}


ADVICE: dict[str, Any] = {
    "tail_lines": 200,
    "shapes": [
        {"id": "empty", "test": "none", "collect": ["tail"],
         "text": {"en": "The excerpt is empty.", "zh": "粘贴的内容为空。"}},
        {"id": "cut-in-traceback", "test": "last", "pattern": _FRAME,
         "collect": ["traceback-end", "tail", "collect-env"],
         "text": {"en": "The excerpt ends inside a traceback, before its exception line: the error "
                        "itself was cut off.",
                  "zh": "内容在 traceback 中间截断，缺少最后的异常行：错误本身被截掉了。"}},
        {"id": "stack-dump", "test": "any", "pattern": _DUMP,
         "collect": ["py-spy", "flight-recorder", "tail"],
         "text": {"en": "A stack dump with no error line: it shows where one process waited, not "
                        "why; a hang is told from comparing every rank's dump.",
                  "zh": "只有一份没有错误行的栈转储：它显示一个进程在哪里等待，但不说明原因；"
                        "判断卡住的原因需要比较所有 rank 的栈。"}},
        {"id": "error-unknown", "test": "verdict", "verdict": "similar",
         "collect": ["tail", "collect-env", "dmesg"],
         "text": {"en": "An error no runbook's signature knows: the lines before it and the versions "
                        "in use usually name the cause.",
                  "zh": "出现了没有任何 runbook 特征能识别的错误："
                        "它之前的日志行和所用的版本通常能说明原因。"}},
        {"id": "metrics-only", "test": "share", "share": 0.5, "pattern": _METRIC,
         "collect": ["step-times", "py-spy", "tail"],
         "text": {"en": "Only progress and metric lines (loss, step, throughput): no error, no "
                        "traceback, and no stall shown in them.",
                  "zh": "只有进度和指标行（loss、step、吞吐）："
                        "其中没有错误、没有 traceback，也看不出卡住。"}},
        {"id": "info-only", "test": "always", "collect": ["tail", "nccl-debug", "py-spy"],
         "text": {"en": "Only informational lines: no traceback, no error, no signature of a known "
                        "failure.",
                  "zh": "只有普通信息行：没有 traceback、没有错误，也没有已知故障的特征。"}},
    ],
    "collect": {
        "tail": _collect(
            "tail -n 300 LOG", "runbook triage DIR_OF_EVERY_RANKS_LOGS",
            "the lines before and after the failure, from every rank: which rank failed first",
            "每个 rank 在故障前后的日志：哪个 rank 最先出错"),
        "traceback-end": _collect(
            "grep -n -A 60 'Traceback (most recent call last)' LOG | tail -n 80", None,
            "the whole traceback, down to its exception line",
            "完整的 traceback，直到最后的异常行"),
        "collect-env": _collect(
            "python -m torch.utils.collect_env", None,
            "the torch, CUDA, NCCL and driver versions the error depends on",
            "错误所依赖的 torch、CUDA、NCCL 和驱动版本"),
        "py-spy": _collect(
            "py-spy dump --pid PID", "runbook run training-hang --nodes HOSTS",
            "on every rank: where its threads wait: a collective, the rendezvous, the data "
            "loader, a CUDA synchronize",
            "在每个 rank 上：线程在哪里等待：集合通信、rendezvous、数据加载还是 CUDA 同步"),
        "flight-recorder": _collect(
            "export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1",
            "runbook run training-hang --nodes HOSTS",
            "for the next run: every rank's last collectives at the timeout: which rank did "
            "not join which one",
            "为下一次运行设置：超时时每个 rank 最后的集合通信：哪个 rank 没有参与哪一次"),
        "nccl-debug": _collect(
            "export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET", None,
            "for the next run: NCCL's own account of its start-up, transports and errors",
            "为下一次运行设置：NCCL 自己对初始化、传输通道和错误的记录"),
        "dmesg": _collect(
            "dmesg -T | grep -iE 'xid|nvrm|oom|segfault' | tail -n 50", None,
            "GPU Xid errors, the kernel's OOM killer and crashes, which the training log "
            "does not show",
            "训练日志里看不到的 GPU Xid 错误、内核 OOM killer 和崩溃"),
        "step-times": _collect(
            "runbook run slow-training --nodes HOSTS", None,
            "step times side by side: one slow rank, periodic stalls, or an input-bound loop",
            "并排比较各 rank 的步时：是某个 rank 慢、周期性停顿，还是受输入限制"),
    },
    "closest": {"top": 3, "why_words": 4, "query_lines": 40},
}
