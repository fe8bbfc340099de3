"""A paste that just stops: no error, no metric, no dump, only the job's ordinary output.

People paste the last lines a stuck job printed and ask why it hangs. Nothing in them is an
error, yet an engineer reads them: the job stopped making output after its last line, so it
is stuck in (or right after) what that line announced, and its stacks say where. Said only when
nothing else was found (no signature, no error line, no reading of the stacks or the numbers,
nothing that differs across hosts) and the excerpt is ordinary output (advice.py's `info-only`
shape): a paste cut inside a traceback, a table of metrics or a GPU topology is something else. Last lines
that say the run finished name no stall; a warning or values printed in an interactive session
among them, or mostly values it printed, are what the person points at, not a stall. nccl-tests'
output on one node that stops before its first row of results names the PCIe path (ACS, the
IOMMU) that NCCL's troubleshooting guide gives for a collective that hangs within a node.

Rules and texts are data; the site's triage page applies the same ones (site/triage_export.py).
"""

from __future__ import annotations

import re
from typing import Any

from runbook.triage.readings import topology

RULES: dict[str, Any] = {
    "shape": "info-only",  # advice_rules.py's shape of an excerpt of ordinary output
    "min_lines": 3,  # lines that say something: one or two lines are a quoted message, not a log
    # a last line that says the run ended well: no stall to name
    "finished": (r"(?i)\b(?:training (?:is )?(?:complete|completed|finished|done)|finished training"
                 r"|job (?:finished|completed|succeeded)|all done|exit(?:ed)? with (?:code|status) 0"
                 r"|avg bus bandwidth)\b"),
    # a reinforcement-learning stack (rollout engines beside training): its own stages to place
    "rl": r"\b(?:verl|OpenRLHF|openrlhf|LLMRayActor|RayPPOTrainer|vllm_engine|rollouts?|GRPO|PPO)\b",
    # what a person points at in the last lines instead of a stall: a warning, or values printed in
    # an interactive session (a tensor that came out wrong)
    "pointed": (r"\bWARN(?:ING)?\b|\b[A-Z]\w*Warning\b|warnings\.warn|^\s*(?:>>>|In \[\d+\]:) |"
                r"\btensor\(\["),
    "pointed_lines": 5,
    # ... or values it printed (`Booster init max CUDA memory: 3770.59 MB`, `trainer.world_size=1`):
    # at least `values_min` of the last `pointed_lines` lines are a name and a number
    "values": (r"^[>\s]*[A-Za-z_][\w .()/\[\]-]{0,60}?\s*[:=]\s*[-+]?\d[\d.,]*(?:[eE][-+]?\d+)?"
               r"\s*[A-Za-z%]{0,4}\s*$"),
    "values_min": 3,
    # nccl-tests' own output (the device list, a test's name, the table's header) and a row of
    # results: a test on one node that stops before its first row never finished a collective
    "nccl_tests": (r"^[#>\s]*Using devices\b|\b(?:all_reduce|all_gather|alltoall|broadcast|reduce_scatter"
                   r"|reduce|sendrecv|scatter|gather|hypercube)_perf\b|\bbytes\s+N\s+type\s+op\b"
                   r"|\bsize\s+count\s+type\s+redop\b"),
    "nccl_tests_row": (r"^[#>\s]*\d+\s+\d+\s+"
                       r"(?:float|half|bfloat16|double|u?int(?:8|32|64)|fp8_e4m3|fp8_e5m2)\s"),
    "nccl_tests_host": r"\bPid\s+\d+\s+on\s+(\S+)\s+device\b",  # `Rank 0 Group 0 Pid 15833 on node1 device 0`
    "last_chars": 160,  # of the last line, quoted
    "finished_lines": 3,  # the last lines the finish is looked for in (nccl-tests ends with `#`)
}
CONCLUSIONS = {"log-stops": "training-hang:log-stalled", "log-stops-rl": "rlhf-hang:stage-unknown",
               # NCCL's troubleshooting guide: ACS and the IOMMU make peer-to-peer hang within a node
               "log-stops-nccl-tests": "nccl-errors:p2p-redirected"}
TEXTS: dict[str, dict[str, str]] = {
    "log-stops": {
        "en": "the paste shows no error and ends with `{last}`: the job printed nothing after it, so it "
              "is stuck in or right after that step; its stacks say where",
        "zh": "粘贴的内容没有错误，最后一行是 `{last}`：作业此后没有任何输出，卡在这一步之中或紧随其后；"
              "它的调用栈会说明具体位置"},
    "log-stops-rl": {
        "en": "the paste shows no error and ends with `{last}`: the RL job printed nothing after it; which "
              "stage (rollout, weight sync, training) it stopped in is not said",
        "zh": "粘贴的内容没有错误，最后一行是 `{last}`：这个强化学习作业此后没有任何输出；"
              "没有说明停在哪个阶段（rollout、权重同步还是训练）"},
    "log-stops-nccl-tests": {
        "en": "nccl-tests' output on one node stops before its first row of results, at `{last}`: its first "
              "collective never completed. Between the GPUs of one node that is most often peer-to-peer "
              "traffic that PCIe ACS or the IOMMU redirects; `NCCL_P2P_DISABLE=1` on a rerun confirms it",
        "zh": "单节点上的 nccl-tests 输出在第一行结果之前就停止了，停在 `{last}`：第一次集合通信从未完成。"
              "同一节点的 GPU 之间出现这种情况，最常见的原因是点对点流量被 PCIe ACS 或 IOMMU 重定向；"
              "重新运行时设置 `NCCL_P2P_DISABLE=1` 可以验证"},
}
FINISHED = re.compile(RULES["finished"])
RL = re.compile(RULES["rl"])
POINTED = re.compile(RULES["pointed"])
VALUES = re.compile(RULES["values"])
NCCL_TESTS = re.compile(RULES["nccl_tests"])
NCCL_TESTS_ROW = re.compile(RULES["nccl_tests_row"])
NCCL_TESTS_HOST = re.compile(RULES["nccl_tests_host"])
WORD = re.compile(r"[A-Za-z0-9\u3400-\u9fff]")  # a line that says something


def readings(tail: list[str], shape: str, raw_tail: list[str] | None = None) -> list[dict[str, Any]]:
    """The reading of a paste that stops (at most one), from its last lines that hold a word and
    its advice shape; [] when the shape is not ordinary output or its last lines say it finished.
    `raw_tail`: the same lines as written, whose launcher prefixes may name an RL job's actors."""
    lines = [line for line in tail if WORD.search(line)]
    if shape != RULES["shape"] or len(lines) < RULES["min_lines"]:
        return []
    if any(FINISHED.search(line) for line in lines[-RULES["finished_lines"]:]):
        return []
    if any(topology.is_table(line) for line in lines):  # how the GPUs connect: no log at all
        return []
    recent = lines[-RULES["pointed_lines"]:]
    if any(POINTED.search(line) for line in recent):
        return []
    if sum(1 for line in recent if VALUES.search(line)) >= RULES["values_min"]:
        return []
    if _nccl_tests_stalled(lines):
        kind = "log-stops-nccl-tests"
    elif any(RL.search(line) for line in [*lines, *(raw_tail or [])]):
        kind = "log-stops-rl"
    else:
        kind = "log-stops"
    last = lines[-1].strip()
    if len(last) > RULES["last_chars"]:
        last = last[: RULES["last_chars"] - 3] + "..."
    return [{"reading": kind, "conclusion": CONCLUSIONS[kind], "guess": True, "first": None,
             "facts": {"last": last}}]


def _nccl_tests_stalled(lines: list[str]) -> bool:
    """nccl-tests' output on at most one host, with no row of results yet."""
    if not any(NCCL_TESTS.search(line) for line in lines):
        return False
    if any(NCCL_TESTS_ROW.search(line) for line in lines):
        return False
    return len({m.group(1) for line in lines for m in NCCL_TESTS_HOST.finditer(line)}) <= 1


def describe_reading(reading: dict[str, Any], lang: str = "en") -> str:
    return TEXTS[reading["reading"]][lang].format(**reading["facts"])
