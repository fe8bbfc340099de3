"""`rank-map`: the ranks the job should have against the ranks found on each node.

The expected world size comes from the training processes' WORLD_SIZE (the largest seen), or
the step's `with: {world_size: N}`. Ranks come from the `process` check's processes (their
RANK), a `stack` result's ranks or a `torch_info` result's RANK. A job that expects more ranks
than run can never start: its other ranks wait in the rendezvous forever. A host with no rank
while its peers run some is named, and so are the missing ranks.
"""

from __future__ import annotations

from typing import Any

from runbook.jobs.words import NAMED_MAX, named, ranges, ranks_word


def analyse(results: dict[str, dict[str, Any] | None], params: dict[str, Any]) -> dict[str, Any]:
    # Equal answers are one object (the walk interns them): each distinct one is read once.
    distinct = {id(result): result for result in results.values()}
    ranks_of = {key: _ranks(result) for key, result in distinct.items()}
    found: dict[str, set[int]] = {node: ranks_of[id(result)] for node, result in results.items()}
    sizes = [size for result in distinct.values() for size in _world_sizes(result)]
    expected = int(params.get("world_size") or (max(sizes) if sizes else 0))
    ranks = set().union(*ranks_of.values()) if ranks_of else set()
    unanswered = sorted(node for node, result in results.items() if result is None)
    idle = sorted(node for node, result in results.items() if result is not None and not found[node])
    if not expected:
        return {"verdict": "unknown",
                "finding": {"en": "no WORLD_SIZE found: the expected ranks are unknown",
                            "zh": "没有找到 WORLD_SIZE：不知道应有多少个 rank"}}
    missing = sorted(set(range(expected)) - ranks)
    per_node = max((len(r) for r in found.values()), default=0)
    if missing and not idle and not unanswered and len(results) * per_node < expected:
        # Fewer nodes were given than the job runs on (`--nodes gpu01` of a 16-node job): the
        # other ranks are on nodes not asked about, not missing.
        return {"verdict": "partial", "ranks": sorted(ranks),
                "finding": {"en": f"ranks {ranges(sorted(ranks))} of {expected} run on the nodes given; "
                                  "the others run on nodes not asked about",
                            "zh": f"所给节点上运行着 {expected} 个 rank 中的 {ranges(sorted(ranks))}；"
                                  "其余 rank 在未被检查的节点上"}}
    idle_set, unanswered_set = set(idle), set(unanswered)  # membership per node: never a list's scan
    parts: dict[tuple[bool, bool, int], dict[str, Any]] = {}  # nodes alike share one part
    nodes = {}
    for node in results:
        no_rank, mine = node in idle_set, found[node]
        key = (no_rank, node in unanswered_set, id(mine))
        part = parts.get(key)
        if part is None:
            part = parts[key] = {"suspect": no_rank or key[1], "ranks": sorted(mine), "no_rank": no_rank}
        nodes[node] = part
    if not missing:
        return {"verdict": "complete", "ranks": sorted(ranks), "nodes": nodes,
                "finding": {"en": f"all {expected} ranks run ({_where(found)})",
                            "zh": f"全部 {expected} 个 rank 都在运行（{_where(found, 'zh')}）"}}
    hosts = idle + unanswered
    present = ranges(sorted(ranks))
    en = f"{ranks_word(missing)} of {expected} missing: ranks {present or 'none'} found"
    zh = f"应有 {expected} 个 rank，缺少 {ranks_word(missing, 'zh')}：找到的是 {present or '无'}"
    if idle:
        one = len(idle) == 1
        en += (f"; {named(idle)} run{'s' if one else ''} no rank while {'its' if one else 'their'}"
               " peers wait")
        zh += f"；{named(idle, 'zh', '、')} 上没有 rank，而其他节点在等待"
    if unanswered:
        en += f"; {named(unanswered)} did not answer"
        zh += f"；{named(unanswered, 'zh', '、')} 没有应答"
    taxonomy = ["hardware.host"] if unanswered and not idle else ["launch.rendezvous"]
    return {"verdict": "missing-ranks", "problem": True, "taxonomy": taxonomy, "ranks": missing,
            "hosts": hosts, "expected": expected, "found": sorted(ranks), "nodes": nodes,
            "finding": {"en": en, "zh": zh}}


def _ranks(result: dict[str, Any] | None) -> set[int]:
    if not result:
        return set()
    out: set[int] = set()
    for process in result.get("processes") or []:
        alive = isinstance(process, dict) and not process.get("zombie")
        if alive and isinstance(process.get("rank"), int):
            out.add(process["rank"])
    for key in (result.get("ranks") or {}) if isinstance(result.get("ranks"), dict) else {}:
        if str(key).isdigit():
            out.add(int(key))
    distributed = result.get("distributed")
    rank = distributed.get("rank") if isinstance(distributed, dict) else None
    if isinstance(rank, int):
        out.add(rank)
    return out


def _world_sizes(result: dict[str, Any] | None) -> list[int]:
    if not result:
        return []
    sizes = [p.get("world_size") for p in result.get("processes") or [] if isinstance(p, dict)]
    sizes.append(result.get("world_size"))
    return [s for s in sizes if isinstance(s, int) and s > 0]


def _where(found: dict[str, set[int]], lang: str = "en") -> str:
    running = sorted(node for node, r in found.items() if r)
    # only the nodes the sentence names are written out; the others are counted
    shown = [f"{node}: {ranges(sorted(found[node]))}" for node in running[:NAMED_MAX]]
    return named(shown + running[NAMED_MAX:], lang, "; ")
