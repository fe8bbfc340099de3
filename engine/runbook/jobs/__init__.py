"""Job-level analyses: one look at every node's result of a step, as the job it is.

A node alone cannot tell that its rank is the odd one out, that a rank is missing, or that
its NCCL settings differ from its peers'. A step names an analysis (`analysis:` in the runbook)
and, once every node's check has answered, the analysis reads all those results together and
gives the job a verdict, and each node its own part, which that node's branches test as
`job.node` (the job's verdict as `job.verdict`, its finding as `job.finding.en`).

Analyses are pure functions of recorded results: no I/O, no clock, the standard library
only. `runbook test`, `--replay` and a live run give them the same input and get the same
answer. Each returns a JobResult as a dict:

    verdict    a word the branches test ("odd-ranks", "mismatch", "missing-ranks", "in-sync", ...)
    problem    whether the verdict is a problem for the job (the run then exits 1)
    taxonomy   the failure ids the verdict points at
    finding    {"en": ..., "zh": ...}: the fact, with ranks, hosts, pids and frames
    ranks      the ranks the finding names; hosts: the hosts it names
    nodes      node name -> that node's part ({"suspect": bool, ...})
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runbook.jobs import drift, rank_map, stack_groups

Analysis = Callable[[dict[str, dict[str, Any] | None], dict[str, Any]], dict[str, Any]]


def _flight_recorder(results: dict[str, dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    from runbook.jobs import flight_recorder

    return flight_recorder.analyse(results, params)


ANALYSES: dict[str, Analysis] = {
    "stack-groups": stack_groups.analyse,
    "rank-map": rank_map.analyse,
    "drift": drift.analyse,
    "flight-recorder": _flight_recorder,
}
# The check each analysis reads; lint says when a step pairs one with another check.
READS: dict[str, tuple[str, ...]] = {
    "stack-groups": ("stack",),
    "rank-map": ("process", "stack", "torch"),
    "drift": ("torch", "nccl", "env", "system", "gpu", "host", "command"),
    "flight-recorder": ("flight_recorder",),
}


def failed(name: str, results: dict[str, dict[str, Any] | None], error: str) -> dict[str, Any]:
    """The job result when an analysis raised: said, and no node suspected."""
    return {"analysis": name, "verdict": "failed", "problem": False, "taxonomy": [], "ranks": [], "hosts": [],
            "finding": {"en": f"the {name} analysis failed: {error}", "zh": f"{name} 分析失败：{error}"},
            "nodes": {node: {"suspect": False} for node in results}}


def run_analysis(name: str, results: dict[str, dict[str, Any] | None],
                 params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The job result of analysis `name` over node -> result; every node gets a part."""
    out = ANALYSES[name](results, dict(params or {}))
    out.setdefault("problem", False)
    out.setdefault("taxonomy", [])
    out.setdefault("finding", {"en": "", "zh": ""})
    out.setdefault("ranks", [])
    out.setdefault("hosts", [])
    nodes = out.setdefault("nodes", {})
    for node in results:
        nodes.setdefault(node, {"suspect": False})
    out["analysis"] = name
    return out
