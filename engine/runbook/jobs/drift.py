"""`drift`: what differs across nodes that should be the same: versions and settings.

Each node's result is flattened to `path: value` (torch, NCCL, CUDA, driver and Python
versions, the `NCCL_*`/`TORCH_*`/`CUDA_*` settings, whatever the step's check reports), and
every path whose value is not the same on all nodes is named, with each node's value. The
value most nodes share is presumed right; the nodes that differ from it are suspects. A
step's `with: {fields: [...]}` limits the comparison to those path prefixes.
"""

from __future__ import annotations

from typing import Any

from runbook.jobs.words import named

MAX_NAMED = 6  # differing fields named in the finding
# Fields that differ on every node by nature: ids, times, sizes.
_SKIP = ("pid", "duration", "age", "time", "uptime", "hostname", "node", "_s", "_at", "count",
         "rss", "cpu", "percent", "free", "used", "available_mib", "load")
_DEFAULT_PREFIXES = ("version", "nccl_version", "cuda", "cudnn", "driver", "python", "settings.",
                     "env.", "variables.", "nccl", "torch")


def analyse(results: dict[str, dict[str, Any] | None], params: dict[str, Any]) -> dict[str, Any]:
    # A node whose check found no training process has nothing to compare: every setting unset.
    # Equal answers are one object (the walk interns them): each is flattened once.
    flats: dict[int, dict[str, Any]] = {}
    answered: dict[str, dict[str, Any]] = {}
    for node, result in results.items():
        if result and result.get("available", True) is not False:
            flat = flats.get(id(result))
            answered[node] = flat if flat is not None else flats.setdefault(id(result), _flat(result))
    ranks = {node: result.get("rank") for node, result in results.items()
             if result and isinstance(result.get("rank"), int)}
    prefixes = tuple(params.get("fields") or _DEFAULT_PREFIXES)
    paths = sorted({p for flat in flats.values() for p in flat if _wanted(p, prefixes)})
    differing: dict[str, dict[str, Any]] = {}
    for path in paths:
        if len({_key(flat.get(path)) for flat in flats.values()}) < 2:
            continue  # the same on every distinct answer, so on every node
        values = {node: flat.get(path) for node, flat in answered.items()}
        if _has_majority(values):
            differing[path] = values
    nodes = {node: {"suspect": False, "differs": {}} for node in results}
    if len(answered) < 2 or not differing:
        return {"verdict": "same", "nodes": nodes,
                "finding": {"en": f"{len(paths)} setting(s) compared: the same on all {len(answered)} nodes",
                            "zh": f"比较了 {len(paths)} 项设置：{len(answered)} 个节点上都相同"}}
    parts_en, parts_zh = [], []
    for path, values in list(differing.items()):
        usual = _majority(values)
        odd = {node: value for node, value in values.items() if _key(value) != _key(usual)}
        for node, value in odd.items():
            nodes[node]["suspect"] = True
            nodes[node]["differs"][path] = value
        shown = named([f"{_who(node, ranks)}: {_show(v)}" for node, v in sorted(odd.items())])
        parts_en.append(f"{path} is {_show(usual)} on most nodes but {shown}")
        parts_zh.append(f"{path} 在多数节点上是 {_show(usual)}，但 {shown}")
    more = len(parts_en) - MAX_NAMED
    en = "; ".join(parts_en[:MAX_NAMED]) + (f"; {more} more" if more > 0 else "")
    zh = "；".join(parts_zh[:MAX_NAMED]) + (f"；另有 {more} 项" if more > 0 else "")
    hosts = sorted(node for node, part in nodes.items() if part["suspect"])
    return {"verdict": "differs", "problem": True, "taxonomy": ["launch.environment"], "hosts": hosts,
            "ranks": sorted(ranks[h] for h in hosts if h in ranks),
            "fields": sorted(differing), "nodes": nodes, "finding": {"en": en, "zh": zh}}


def _has_majority(values: dict[str, Any]) -> bool:
    """A value more nodes share than any other, and by at least two: a setting that differs
    on every node (a per-host path) or splits two against two names no odd node."""
    counts = sorted((list(map(_key, values.values())).count(k) for k in {_key(v) for v in values.values()}),
                    reverse=True)
    return counts[0] >= 2 and (len(counts) == 1 or counts[0] > counts[1])


def _who(node: str, ranks: dict[str, int]) -> str:
    return f"{node} (rank {ranks[node]})" if node in ranks else node


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: value} if prefix else {}


def _wanted(path: str, prefixes: tuple[str, ...]) -> bool:
    leaf = path.rsplit(".", 1)[-1].lower()
    if any(word in leaf for word in _SKIP) and not leaf.startswith(("nccl_", "torch_", "cuda_")):
        return False
    return path.startswith(prefixes)


def _key(value: Any) -> str:
    return repr(value)


def _majority(values: dict[str, Any]) -> Any:
    counts: dict[str, tuple[int, Any]] = {}
    for value in values.values():
        key = _key(value)
        counts[key] = (counts.get(key, (0, value))[0] + 1, value)
    return max(counts.values(), key=lambda item: item[0])[1]


def _show(value: Any) -> str:
    return "unset" if value is None else str(value)
