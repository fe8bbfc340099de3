"""`stack-groups`: every rank's main-thread stack across all nodes, grouped by where it waits.

Each rank's stack (from the `stack` check: wait kind, op, innermost user frame) falls in a
group with the ranks that wait the same way. The largest group is presumed healthy; every
other rank is a suspect, named with its host, pid and frame. Two groups of the same size are
a tie, and the finding says so rather than guessing. Ranks in `init_process_group` or a
rendezvous point at the launch, not at a collective.

One rank says a lot on its own, and most people ask about the node they are logged into: a
rank in the rendezvous is `rendezvous` whatever the count (with its WORLD_SIZE, the ranks found
and the store it waits on), and a lone rank elsewhere is `one-rank`, with how it waits
(`wait`: collective with its op, cuda-sync, dataloader, ray, extension-lock, lock, io, running) and where.
"""

from __future__ import annotations

from typing import Any

from runbook.jobs.words import named, ranges, ranks_word

_RENDEZVOUS = ("init_process_group", "rendezvous", "_store_based_barrier", "next_rendezvous",
               "_create_c10d_store", "_new_process_group_helper", "TCPStore")


def analyse(results: dict[str, dict[str, Any] | None], params: dict[str, Any]) -> dict[str, Any]:
    ranks = _ranks(results)
    if not ranks:
        return {"verdict": "no-stacks", "finding": {"en": "no rank's stack was dumped",
                                                    "zh": "没有导出任何 rank 的调用栈"}}
    rendezvous = [r for r in ranks if _in_rendezvous(r)]
    if rendezvous:  # one rank in init_process_group is enough to know its peers never came
        return _rendezvous(results, rendezvous, ranks)
    if len(ranks) == 1:
        return _one(results, ranks[0])
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for rank in ranks:
        groups.setdefault(rank["key"], []).append(rank)
    ordered = sorted(groups.values(), key=lambda g: (-len(g), min(r["rank"] for r in g)))
    if len(ordered) == 1:
        return _same(results, ordered[0])
    tie = len(ordered[0]) == len(ordered[1])
    return _odd(results, ordered, tie)


def _ranks(results: dict[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    out = []
    for node, result in sorted(results.items()):
        if not result:
            continue
        for rank, entry in sorted((result.get("ranks") or {}).items(), key=lambda kv: _int(kv[0])):
            if not isinstance(entry, dict) or entry.get("wait") is None:
                continue
            frame = entry.get("user_frame")
            out.append({"rank": _int(rank), "node": node, "pid": entry.get("pid"), "wait": entry.get("wait"),
                        "op": entry.get("op"), "frame": frame, "frames": _frames(result, entry.get("pid")),
                        "world_size": entry.get("world_size"), "master": entry.get("master"),
                        "key": _group_key(entry.get("wait"), entry.get("op"), frame)})
    return out


def _same(results: dict[str, dict[str, Any]], group: list[dict[str, Any]]) -> dict[str, Any]:
    first = group[0]
    what = _what(first)
    return {"verdict": "in-step", "ranks": [r["rank"] for r in group], "hosts": [],
            "finding": {"en": f"all {len(group)} ranks wait the same way: {what['en']}",
                        "zh": f"全部 {len(group)} 个 rank 的等待方式相同：{what['zh']}"},
            "nodes": {node: {"suspect": False} for node in results}}


def _odd(results: dict[str, dict[str, Any] | None], ordered: list[list[dict[str, Any]]],
         tie: bool) -> dict[str, Any]:
    healthy = ordered[0]
    suspects = [r for group in ordered[1:] for r in group]
    first = suspects[0]
    odd = _what(first)
    usual = _what(healthy[0])
    who = f"{ranks_word([first['rank']])} ({first['node']}, pid {first['pid']})"
    others = ranks_word([r["rank"] for r in healthy])
    verb = usual["en_one"] if len(healthy) == 1 else usual["en_plural"]
    en = f"{who} is {odd['en']} while {others} {verb}"
    healthy_zh = ranks_word([r["rank"] for r in healthy], "zh")
    zh = (f"rank {first['rank']}（{first['node']}，pid {first['pid']}）{odd['zh']}，"
          f"而 {healthy_zh} {usual['zh']}")
    if len(suspects) > 1:
        rest = ranks_word([r["rank"] for r in suspects[1:]])
        en += f"; {rest} differ too"
        zh += f"；{ranks_word([r['rank'] for r in suspects[1:]], 'zh')} 也不同"
    if tie:
        en = f"a tie, no majority to trust: {en}"
        zh = f"两组人数相同，没有可信的多数：{zh}"
    nodes = {node: {"suspect": False} for node in results}
    for rank in suspects:
        part = nodes[rank["node"]]
        part["suspect"] = True
        part.setdefault("ranks", []).append(rank["rank"])
        part.setdefault("frames", []).append(rank["frame"])
    in_collective = any(r["wait"] == "collective" for r in healthy + suspects)
    return {"verdict": "tie" if tie else "odd-ranks", "problem": True,
            "taxonomy": ["hang.collective"] if in_collective else ["perf.straggler"],
            "ranks": [r["rank"] for r in suspects], "hosts": sorted({r["node"] for r in suspects}),
            "suspects": [{k: r[k] for k in ("rank", "node", "pid", "wait", "op", "frame")} for r in suspects],
            "majority": {"wait": healthy[0]["wait"], "op": healthy[0]["op"],
                         "ranks": [r["rank"] for r in healthy]},
            "finding": {"en": en, "zh": zh}, "nodes": nodes}


def _rendezvous(results: dict[str, dict[str, Any]], waiting: list[dict[str, Any]],
                ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Ranks in init_process_group: its peers never joined. With WORLD_SIZE known, the ranks
    that were never seen are named; the store they wait on is the one in MASTER_ADDR:PORT."""
    waiting_ranks = [r["rank"] for r in waiting]
    sizes = [r["world_size"] for r in ranks if isinstance(r.get("world_size"), int)]
    world = max(sizes) if sizes else None
    found = sorted({r["rank"] for r in ranks})
    masters = sorted({str(r["master"]) for r in waiting if r.get("master")})
    first = waiting[0]
    func, place = _split(first["frame"])
    at = f" at {place}" if place else ""
    en = f"{ranks_word(waiting_ranks)} {'waits' if len(waiting) == 1 else 'wait'} in the rendezvous " \
         f"(init_process_group{at})"
    zh = f"{ranks_word(waiting_ranks, 'zh')} 在 rendezvous（init_process_group{at}）中等待"
    if world:
        unseen = [r for r in range(world) if r not in found]
        en += f" for WORLD_SIZE={world} ranks; ranks found: {ranges(found)}"
        zh += f"，WORLD_SIZE={world}；找到的 rank：{ranges(found)}"
        if unseen:
            en += f"; {ranks_word(unseen)} never joined"
            zh += f"；{ranks_word(unseen, 'zh')} 没有加入"
    else:
        en += ": a rank or host never joined"
        zh += "：有 rank 或主机没有加入"
    if masters:
        en += f" (store {named(masters)})"
        zh += f"（store {named(masters, 'zh', '、')}）"
    return {"verdict": "rendezvous", "problem": True, "taxonomy": ["launch.rendezvous"],
            "ranks": waiting_ranks, "hosts": sorted({r["node"] for r in waiting}), "world_size": world,
            "found": found,
            "master": masters[0] if masters else None, "pid": first["pid"], "frame": first["frame"],
            "finding": {"en": en, "zh": zh},
            "nodes": {node: {"suspect": False} for node in results}}


def _one(results: dict[str, dict[str, Any]], rank: dict[str, Any]) -> dict[str, Any]:
    """A lone rank: how it waits is the finding; there is no peer to compare it with here."""
    what = _what(rank)
    who = f"rank {rank['rank']} ({rank['node']}, pid {rank['pid']})"
    who_zh = f"rank {rank['rank']}（{rank['node']}，pid {rank['pid']}）"
    return {"verdict": "one-rank", "wait": _kind(rank["wait"]), "op": rank["op"], "frame": rank["frame"],
            "pid": rank["pid"], "ranks": [rank["rank"]], "hosts": [rank["node"]],
            "world_size": rank.get("world_size"), "master": rank.get("master"),
            "finding": {"en": f"{who} is {what['en']}", "zh": f"{who_zh}{what['zh']}"},
            "nodes": {node: {"suspect": False} for node in results}}


def _what(rank: dict[str, Any]) -> dict[str, str]:
    """How one rank waits, as `is ...` (en), `... wait` for a group (en_plural) and zh."""
    func, place = _split(rank["frame"])
    at = f" ({place})" if place else ""
    if rank["wait"] == "collective":
        op = rank["op"] or "a collective"
        caller = f" from `{func}`{at}" if func else ""
        caller_zh = f"（由 `{func}`{at} 调用）" if func else ""
        return {"en": f"in `{op}`{caller}", "en_plural": f"wait in `{op}`", "en_one": f"waits in `{op}`",
                "zh": f"在 `{op}` 中等待{caller_zh}"}
    if rank["wait"] in ("running", "idle"):
        where = f"`{func}`{at}" if func else "code outside any collective"
        return {"en": f"in {where}", "en_plural": f"are in {where}", "en_one": f"is in {where}",
                "zh": f"停在 {where}（集合通信之外）"}
    what = {"dataloader": "the DataLoader", "ray": "ray.get/ray.wait", "cuda-sync": "a CUDA synchronize",
            "io": "I/O", "lock": "a lock", "extension-lock": "the torch extensions lock (FileBaton.wait)",
            }.get(rank["wait"], str(rank["wait"]))
    what_zh = {"dataloader": "DataLoader", "ray": "ray.get/ray.wait", "cuda-sync": "CUDA 同步",
               "io": "I/O", "lock": "一把锁", "extension-lock": "torch 扩展目录的锁（FileBaton.wait）",
               }.get(rank["wait"], str(rank["wait"]))
    return {"en": f"waiting on {what}{at}", "en_plural": f"wait on {what}", "en_one": f"waits on {what}",
            "zh": f"在等待 {what_zh}{at}"}


def _split(frame: Any) -> tuple[str | None, str | None]:
    """`/app/train.py:88 save_shard` -> ("save_shard", "train.py:88")."""
    if not frame:
        return None, None
    place, _, func = str(frame).partition(" ")
    return (func or None), place.rsplit("/", 1)[-1]


def _group_key(wait: Any, op: Any, frame: Any) -> tuple[Any, ...]:
    """Ranks that wait the same way share a key. A rank blocked in a call waits at its line; a
    running or idle rank is wherever py-spy's sample caught it (a polling loop's `while` or its
    `sleep`), so running and idle are one kind, and the line inside the function is left out."""
    kind = _kind(wait)
    if kind != "running":
        return kind, op, _where(frame)
    func, place = _split(frame)
    return kind, op, func, (place or "").rpartition(":")[0] or place


def _where(frame: Any) -> str | None:
    func, place = _split(frame)
    return f"{func} ({place})" if func else place


def _in_rendezvous(rank: dict[str, Any]) -> bool:
    """In init_process_group or the store it waits on, however the program wraps the call."""
    texts = [str(rank.get("frame") or ""), *rank["frames"]]
    return any(word in text for word in _RENDEZVOUS for text in texts) or rank.get("op") in _RENDEZVOUS


def _frames(result: dict[str, Any], pid: Any) -> list[str]:
    """The frames of the main thread of process `pid` in a `stack` result (innermost first)."""
    for process in result.get("processes") or []:
        if isinstance(process, dict) and process.get("pid") == pid:
            threads = [t for t in process.get("threads") or [] if isinstance(t, dict)]
            main = next((t for t in threads if t.get("name") == "MainThread"), threads[0] if threads else {})
            return [str(f) for f in main.get("frames") or []]
    return []


def _kind(wait: Any) -> Any:
    return "running" if wait == "idle" else wait


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1
