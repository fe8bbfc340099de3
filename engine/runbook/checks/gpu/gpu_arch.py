"""`gpu_arch`: each GPU's compute capability (sm_XY), and is the oldest below what a library needs?

FlashAttention 2, Triton (compute capability 8.0+ per its README) and bf16 need Ampere (8.0);
a V100 is 7.0, a T4 7.5. A torch or kernel build also lists the architectures it was compiled
for, and a GPU newer than the build (an RTX 5090, sm_120, with a build up to sm_90) finds no
kernel image. nvidia-smi reports `compute_cap` (drivers from R510 on).
"""

from __future__ import annotations

import re
from typing import Any

from runbook.checks.base import CheckContext

NAME = "gpu_arch"
SUMMARY = {
    "en": "Each GPU's compute capability (sm_XY) from nvidia-smi, compared with what a library needs",
    "zh": "通过 nvidia-smi 读取每块 GPU 的计算能力（sm_XY），并与库所要求的最低计算能力比较",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "min_cc": {"type": ["number", "string"], "default": "",
                   "description": 'The compute capability the library needs, e.g. 8.0 ("" = no comparison)'},
        "nvidia_smi": {"type": "string", "default": "nvidia-smi", "description": "The nvidia-smi program"},
    },
    "additionalProperties": False,
}
RESULT_FIELDS = {
    "available": {"type": "boolean", "en": "nvidia-smi reported the GPUs' compute capability",
                  "zh": "nvidia-smi 报告了 GPU 的计算能力"},
    "reason": {"type": "string", "en": "Why it could not be read (null when it was)",
               "zh": "无法读取的原因（能读取时为 null）"},
    "gpus": {"type": "array", "en": "One entry per GPU: {index, name, compute_cap, sm}",
             "zh": "每块 GPU 一项：{index, name, compute_cap, sm}"},
    "lowest": {"type": "object", "en": "The GPU with the lowest compute capability (null when none)",
               "zh": "计算能力最低的 GPU（没有时为 null）"},
    "summary": {"type": "string",
                "en": "The GPUs in one line, e.g. `8 x Tesla V100-SXM2-16GB (compute capability 7.0, sm_70)`",
                "zh": "一行概括 GPU，例如 `8 x Tesla V100-SXM2-16GB (compute capability 7.0, sm_70)`"},
    "min_cc": {"type": "number", "en": "The compute capability asked for (null when not given)",
               "zh": "要求的最低计算能力（未给出时为 null）"},
    "below_min": {"type": "boolean", "en": "The lowest GPU is below min_cc (null when either is unknown)",
                  "zh": "最低的 GPU 低于 min_cc（任一未知时为 null）"},
}
DEFAULT_TIMEOUT = 15.0
QUERY = "index,name,compute_cap"
_CC = re.compile(r"^(\d+)\.(\d+)$")


def parse_csv(text: str) -> list[dict[str, Any]]:
    """Rows of `nvidia-smi --query-gpu=index,name,compute_cap --format=csv,noheader`."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        m = _CC.match(parts[2])
        cc = float(parts[2]) if m else None
        gpus.append({"index": int(parts[0]), "name": parts[1], "compute_cap": cc,
                     "sm": f"sm_{m.group(1)}{m.group(2)}" if m else None})
    return gpus


def summarize(gpus: list[dict[str, Any]]) -> str:
    """`8 x NAME (compute capability 7.0, sm_70)`, one group per distinct model, `; `-joined."""
    groups: dict[tuple[str, Any, Any], int] = {}
    for g in gpus:
        key = (g["name"], g["compute_cap"], g["sm"])
        groups[key] = groups.get(key, 0) + 1
    return "; ".join(f"{n} x {name} (compute capability {cc}, {sm})" for (name, cc, sm), n in groups.items())


def _min_cc(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    wanted = _min_cc(params.get("min_cc"))
    result: dict[str, Any] = {"available": False, "reason": None, "gpus": [], "lowest": None, "summary": "",
                              "min_cc": wanted, "below_min": None}
    smi = params.get("nvidia_smi") or "nvidia-smi"
    out = ctx.run_command([smi, f"--query-gpu={QUERY}", "--format=csv,noheader"])
    if out.not_found:
        return {**result, "reason": f"{smi} not found (no NVIDIA driver on this node?)"}
    gpus = parse_csv(out.stdout)
    known = [g for g in gpus if g["compute_cap"] is not None]
    if out.returncode != 0 or not known:
        said = (out.stderr or out.stdout).strip().splitlines()
        return {**result, "gpus": gpus,
                "reason": f"{smi} gave no compute_cap (exit {out.returncode}): "
                          f"{said[0][:200] if said else 'no output'} (drivers before R510 lack the field)"}
    lowest = min(known, key=lambda g: g["compute_cap"])
    return {**result, "available": True, "gpus": gpus, "lowest": lowest, "summary": summarize(gpus),
            "below_min": None if wanted is None else lowest["compute_cap"] < wanted}
