"""`flight-recorder`: every rank's flight-recorder dump across the nodes, compared per process group.

Each node's `flight_recorder` check result holds its ranks' dumps: per process group, the
collectives each rank issued (sequence number, op, sizes, dtypes) and how far it completed. Ranks
of one group must issue the same collectives in the same order, so:

- the first sequence number where ranks issued different collectives (op, input sizes or
  dtypes) is a `mismatch`: the ranks in the minority took another code path (`hang.collective`);
  two sides of the same size are a tie, and the finding says so rather than guessing;
- ranks whose last issued collective is older than their peers' are `behind` (`perf.straggler`):
  their peers wait in a collective they have not reached;
- ranks of the group with no dump at all are `missing-ranks` (`launch.rendezvous`);
- otherwise the group is `in-sync`. No dump anywhere is `no-data`.

Asked about one node with one rank, there is nothing to compare, but the dump still says where
the rank is: `one-rank`, with the collective it last issued (op, sequence number, sizes) and how
far it completed, which is what to match against its peers' dumps.

The group compared is the one with the worst verdict (mismatch, missing-ranks, behind, then
in-sync), the default group first among equals, or the one `with: {pg: NAME}` names. gloo's
dumps leave the group's name empty in pg_config, dumps may hold only their last entries, ranks
may have no dump: all tolerated. Pure: no I/O, no clock, the standard library only.
"""

from __future__ import annotations

from typing import Any

from runbook.jobs.words import named, ranges, ranks_word

_P2P_OPS = ("send", "recv", "isend", "irecv")
_ORDER = {"mismatch": 0, "missing-ranks": 1, "behind": 2, "in-sync": 3}
_TAXONOMY = {"mismatch": ["hang.collective"], "behind": ["perf.straggler"],
             "missing-ranks": ["launch.rendezvous"]}
_WORDS = {1: "one", 2: "two", 3: "three"}


def analyse(results: dict[str, dict[str, Any] | None], params: dict[str, Any]) -> dict[str, Any]:
    """The JobResult of the analysis (see runbook/jobs/__init__.py)."""
    return compare(results, pg=params.get("pg") or None)


def compare(dumps_by_node: dict[str, dict[str, Any] | None], pg: str | None = None) -> dict[str, Any]:
    """Compare the ranks' flight-recorder dumps (node -> `flight_recorder` check result)."""
    ranks, unanswered = _collect(dumps_by_node)
    if not ranks:
        return _no_data(dumps_by_node, unanswered)
    if len(ranks) == 1 and len(dumps_by_node) == 1:
        alone = _one_rank(dumps_by_node, *next(iter(ranks.items())))
        if alone is not None:
            return alone
    groups = sorted({name for rank in ranks.values() for name in rank["groups"]})
    if pg is not None:
        groups = [g for g in groups if pg in (g, _label_of(ranks, g))] or groups
    verdicts = [_group_verdict(ranks, name) for name in groups]
    verdicts.sort(key=lambda v: (_ORDER[v["verdict"]], not v["default"], v["pg"]["name"]))
    chosen = verdicts[0]
    out = _shape(dumps_by_node, ranks, chosen, unanswered)
    out["groups"] = {v["pg"]["name"]: v["verdict"] for v in verdicts}
    return out


# -- gathering --------------------------------------------------------------------------------------


def _collect(results: dict[str, dict[str, Any] | None]) -> tuple[dict[int, dict[str, Any]], list[str]]:
    """rank -> {node, groups: name -> {desc, ranks, seqs: {seq: sig}, issued, completed}}."""
    ranks: dict[int, dict[str, Any]] = {}
    unanswered = []
    for node, result in sorted(results.items()):
        if not isinstance(result, dict):
            unanswered.append(node)
            continue
        for dump in result.get("dumps") or []:
            rank = dump.get("rank") if isinstance(dump, dict) else None
            if not isinstance(rank, int) or isinstance(rank, bool) or rank in ranks:
                continue
            ranks[rank] = {"node": node, "groups": _groups(dump)}
    return ranks, unanswered


def _groups(dump: dict[str, Any]) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for pg in dump.get("pg") or []:
        if isinstance(pg, dict):
            groups[str(pg.get("name") or "")] = _blank_group(pg)
    for entry in dump.get("entries") or []:
        if not isinstance(entry, dict) or entry.get("op") in _P2P_OPS:
            continue
        seq = entry.get("collective_seq_id")
        if not isinstance(seq, int) or seq <= 0:
            continue
        name = str(entry.get("pg_name") or "")
        group = groups.setdefault(name, _blank_group({"name": name, "desc": entry.get("pg_desc")}))
        group["seqs"].setdefault(seq, _signature(entry))
        if entry.get("state") == "completed":
            group["completed"] = max(group["completed"] or 0, seq)
    _fold_unnamed(groups)
    for group in groups.values():
        group["issued"] = max([group["issued"] or 0, *group["seqs"]]) or None
    return {name: g for name, g in groups.items() if g["seqs"] or g["issued"]}


def _blank_group(pg: dict[str, Any]) -> dict[str, Any]:
    completed = pg.get("last_completed")
    issued = pg.get("last_enqueued")
    ranks = pg.get("ranks")
    return {"desc": str(pg.get("desc") or ""), "ranks": ranks if isinstance(ranks, list) else None,
            "seqs": {}, "issued": issued if isinstance(issued, int) and issued > 0 else None,
            "completed": completed if isinstance(completed, int) and completed > 0 else None}


def _fold_unnamed(groups: dict[str, dict[str, Any]]) -> None:
    """gloo's pg_config has an empty name: its ranks belong to the one named group with none."""
    unnamed = groups.get("")
    orphans = [g for name, g in groups.items() if name and g["ranks"] is None]
    if unnamed is not None and not unnamed["seqs"] and len(orphans) == 1:
        orphans[0]["ranks"] = unnamed["ranks"]
        del groups[""]


def _signature(entry: dict[str, Any]) -> dict[str, Any]:
    return {"op": entry.get("op"), "sizes": entry.get("input_sizes"), "dtypes": entry.get("input_dtypes")}


def _label_of(ranks: dict[int, dict[str, Any]], name: str) -> str:
    descs = [r["groups"][name]["desc"] for r in ranks.values() if name in r["groups"]]
    return next((d for d in descs if d), name or "the unnamed group")


# -- one group --------------------------------------------------------------------------------------


def _group_verdict(ranks: dict[int, dict[str, Any]], name: str) -> dict[str, Any]:
    members = {rank: info["groups"][name] for rank, info in ranks.items() if name in info["groups"]}
    expected = sorted({r for g in members.values() for r in (g["ranks"] or []) if isinstance(r, int)})
    missing = sorted(set(expected) - set(ranks)) if expected else _gaps(sorted(ranks))
    label = _label_of(ranks, name)
    base = {"pg": {"name": name, "desc": label if label != name else "", "label": label},
            "default": label == "default_pg" or name == "0", "missing": missing,
            "expected": expected or None, "members": sorted(members),
            "last_completed": {r: g["completed"] for r, g in sorted(members.items())},
            "last_issued": {r: g["issued"] for r, g in sorted(members.items())},
            "first_mismatch": None, "behind": [], "tie": False, "sides": []}
    mismatch = _first_mismatch(members)
    if mismatch is not None:
        return {**base, "verdict": "mismatch", **mismatch}
    if missing:
        return {**base, "verdict": "missing-ranks"}
    top = max(g["issued"] or 0 for g in members.values())
    behind = sorted(r for r, g in members.items() if (g["issued"] or 0) < top)
    return {**base, "verdict": "behind" if behind else "in-sync", "behind": behind, "top": top}


def _gaps(present: list[int]) -> list[int]:
    return sorted(set(range(present[-1] + 1)) - set(present)) if present else []


def _first_mismatch(members: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    if len(members) < 2:
        return None
    common = set.intersection(*(set(g["seqs"]) for g in members.values()))
    for seq in sorted(common):
        ops = {rank: g["seqs"][seq] for rank, g in sorted(members.items())}
        sides: dict[str, list[int]] = {}
        for rank, sig in ops.items():
            sides.setdefault(repr(sorted(sig.items())), []).append(rank)
        if len(sides) > 1:
            ordered = sorted(sides.values(), key=lambda rs: (-len(rs), rs[0]))
            return {"first_mismatch": {"seq": seq, "ops": ops}, "sides": ordered,
                    "tie": len(ordered[0]) == len(ordered[1])}
    return None


# -- the result -------------------------------------------------------------------------------------


def _shape(results: dict[str, Any], ranks: dict[int, dict[str, Any]], v: dict[str, Any],
           unanswered: list[str]) -> dict[str, Any]:
    verdict = v["verdict"]
    suspects = _suspects(ranks, v)
    finding = _finding(ranks, v)
    if unanswered:
        finding["en"] += f"; {named(unanswered)} did not answer"
        finding["zh"] += f"；{named(unanswered, 'zh', '、')} 没有应答"
    suspect_ranks = [s["rank"] for s in suspects] if verdict != "missing-ranks" else v["missing"]
    with_dump = {info["node"] for info in ranks.values()}
    empty = sorted(n for n, r in results.items() if isinstance(r, dict) and n not in with_dump)
    if verdict == "missing-ranks" and empty:
        finding["en"] += f"; {named(empty)} {'has' if len(empty) == 1 else 'have'} no dump"
        finding["zh"] += f"；{named(empty, 'zh', '、')} 上没有转储"
    hosts = sorted({s["node"] for s in suspects} | set(unanswered)
                   | (set(empty) if verdict == "missing-ranks" else set()))
    host_set, empty_set = set(hosts), set(empty)  # membership per node: never a list's scan
    nodes: dict[str, dict[str, Any]] = {
        node: {"suspect": node in host_set, "ranks": [], "no_dump": node in empty_set} for node in results}
    for rank, info in sorted(ranks.items()):
        nodes[info["node"]]["ranks"].append(rank)
    return {"verdict": verdict, "problem": verdict != "in-sync", "taxonomy": list(_TAXONOMY.get(verdict, [])),
            "pg": {"name": v["pg"]["name"], "desc": v["pg"]["desc"]},
            "last_completed": v["last_completed"], "last_issued": v["last_issued"],
            "first_mismatch": v["first_mismatch"], "tie": v["tie"], "behind": v["behind"],
            "missing": v["missing"], "expected": v["expected"], "suspects": suspects,
            "ranks": suspect_ranks, "hosts": hosts, "nodes": nodes, "finding": finding}


def _suspects(ranks: dict[int, dict[str, Any]], v: dict[str, Any]) -> list[dict[str, Any]]:
    if v["verdict"] == "mismatch":
        seq = v["first_mismatch"]["seq"]
        odd = [r for side in v["sides"][1:] for r in side]
        return [{"rank": r, "node": ranks[r]["node"], "seq": seq,
                 "op": v["first_mismatch"]["ops"][r]["op"]} for r in sorted(odd)]
    if v["verdict"] == "behind":
        return [{"rank": r, "node": ranks[r]["node"], "seq": v["last_issued"][r],
                 "op": _op_at(ranks, v, r)} for r in v["behind"]]
    return []


def _op_at(ranks: dict[int, dict[str, Any]], v: dict[str, Any], rank: int) -> Any:
    group = ranks[rank]["groups"][v["pg"]["name"]]
    sig = group["seqs"].get(v["last_issued"][rank] or 0)
    return sig["op"] if sig else None


def _who(ranks: dict[int, dict[str, Any]], members: list[int]) -> str:
    nodes = sorted({ranks[r]["node"] for r in members})
    return f"{ranks_word(members)} ({named(nodes)})"


def _who_zh(ranks: dict[int, dict[str, Any]], members: list[int]) -> str:
    nodes = sorted({ranks[r]["node"] for r in members})
    return f"{ranks_word(members, 'zh')}（{'、'.join(nodes)}）"


def _finding(ranks: dict[int, dict[str, Any]], v: dict[str, Any]) -> dict[str, str]:
    return {"mismatch": _mismatch_text, "behind": _behind_text, "missing-ranks": _missing_text,
            "in-sync": _in_sync_text}[v["verdict"]](ranks, v)


def _sig_text(sig: dict[str, Any], with_shape: bool) -> str:
    op = str(sig.get("op") or "an unknown op")
    if not with_shape:
        return op
    return f"{op} (sizes {sig.get('sizes')}, dtypes {sig.get('dtypes')})"


def _mismatch_text(ranks: dict[int, dict[str, Any]], v: dict[str, Any]) -> dict[str, str]:
    seq, ops = v["first_mismatch"]["seq"], v["first_mismatch"]["ops"]
    sides = v["sides"]
    same_op = len({ops[side[0]]["op"] for side in sides}) == 1
    usual = _sig_text(ops[sides[0][0]], same_op)
    label = v["pg"]["label"]
    parts_en, parts_zh = [], []
    for side in sides[1:]:
        what = _sig_text(ops[side[0]], same_op)
        parts_en.append(f"{_who(ranks, side)} issued {what} as collective #{seq} of {label}")
        parts_zh.append(f"{_who_zh(ranks, side)}的第 {seq} 个集合通信（{label}）是 {what}")
    majority = ranks_word(sides[0])
    en = "; ".join(parts_en) + f" where {majority} issued {usual}"
    zh = "；".join(parts_zh) + f"，而 {ranks_word(sides[0], 'zh')} 是 {usual}"
    if v["tie"]:
        en = f"a tie ({' vs '.join(str(len(s)) for s in sides)}), no majority to trust: {en}"
        zh = f"两边人数相同（{' 对 '.join(str(len(s)) for s in sides)}），没有可信的多数：{zh}"
    return {"en": en, "zh": zh}


def _behind_text(ranks: dict[int, dict[str, Any]], v: dict[str, Any]) -> dict[str, str]:
    top, label = v["top"], v["pg"]["label"]
    ahead = [r for r in v["members"] if r not in v["behind"]]
    by_gap: dict[int, list[int]] = {}
    for rank in v["behind"]:
        by_gap.setdefault(top - (v["last_issued"][rank] or 0), []).append(rank)
    parts_en, parts_zh = [], []
    for gap, group in sorted(by_gap.items()):
        last = v["last_issued"][group[0]] or 0
        done = v["last_completed"][group[0]]
        where = f"last completed #{last}" if done == last else (
            f"last issued #{last}" + (f" (completed #{done})" if done else ""))
        where_zh = f"最后完成的是第 {last} 个" if done == last else (
            f"最后发起的是第 {last} 个" + (f"（完成到第 {done} 个）" if done else ""))
        many = len(group) > 1
        count = _WORDS.get(gap, str(gap))
        parts_en.append(f"{_who(ranks, group)} {'are' if many else 'is'} {count} collective"
                        f"{'s' if gap > 1 else ''} behind: {where}")
        parts_zh.append(f"{_who_zh(ranks, group)}落后 {gap} 个集合通信：{where_zh}")
    en = "; ".join(parts_en) + f", {ranks_word(ahead)} reached #{top} of {label}"
    zh = "；".join(parts_zh) + f"，而 {ranks_word(ahead, 'zh')} 已到第 {top} 个（{label}）"
    return {"en": en, "zh": zh}


def _missing_text(ranks: dict[int, dict[str, Any]], v: dict[str, Any]) -> dict[str, str]:
    missing = v["missing"]
    total = len(v["expected"]) if v["expected"] else None
    of = f" of {total}" if total else ""
    them = "them" if len(missing) > 1 else "it"
    present = ranges(sorted(ranks))
    en = (f"{ranks_word(missing)}{of} missing: no flight-recorder dump from {them} "
          f"({v['pg']['label']}); dumps from {ranks_word(sorted(ranks))}")
    pronoun = "它们" if len(missing) > 1 else "它"
    zh = (f"{ranks_word(missing, 'zh')} 缺失：没有{pronoun}的 flight recorder 转储（{v['pg']['label']}"
          f"{'，共 ' + str(total) + ' 个 rank' if total else ''}）；有转储的是 rank {present}")
    return {"en": en, "zh": zh}


def _in_sync_text(ranks: dict[int, dict[str, Any]], v: dict[str, Any]) -> dict[str, str]:
    members, top, label = v["members"], v["top"], v["pg"]["label"]
    done = [c for c in v["last_completed"].values() if c is not None]
    tail_en = f", completed up to #{min(done)}" if done else ""
    tail_zh = f"，完成到第 {min(done)} 个" if done else ""
    return {"en": f"all {len(members)} ranks of {label} issued the same collectives up to #{top}{tail_en}",
            "zh": f"{label} 的全部 {len(members)} 个 rank 发起的集合通信一致，直到第 {top} 个{tail_zh}"}


def _one_rank(results: dict[str, Any], rank: int, info: dict[str, Any]) -> dict[str, Any] | None:
    """One rank of one node: the collective it is in, from its own records (None when its group
    has no other rank: a one-rank job is compared as usual)."""
    name, group = max(info["groups"].items(), key=lambda kv: (kv[1]["issued"] or 0, kv[0]))
    if group["ranks"] is not None and [r for r in group["ranks"] if r != rank] == []:
        return None
    issued, completed = group["issued"], group["completed"]
    sig = group["seqs"].get(issued or 0) or {}
    label = group["desc"] or name or "the default group"
    op = sig.get("op") or "an unknown op"
    done = issued is not None and completed == issued
    en = (f"rank {rank} ({info['node']}) last issued collective #{issued} `{op}` of {label}"
          + (", completed" if done else f", not completed (last completed #{completed or 0})")
          + (f", sizes {sig.get('sizes')}" if sig.get("sizes") else ""))
    zh = (f"rank {rank}（{info['node']}）最后发起的是 {label} 的第 {issued} 个集合通信 `{op}`"
          + ("，已完成" if done else f"，尚未完成（最后完成的是第 {completed or 0} 个）"))
    return {"verdict": "one-rank", "problem": False, "taxonomy": [],
            "pg": {"name": name, "desc": group["desc"]}, "rank": rank, "seq": issued, "op": sig.get("op"),
            "completed": completed,
            "last_completed": {rank: completed}, "last_issued": {rank: issued}, "first_mismatch": None,
            "tie": False, "behind": [], "missing": [], "expected": group["ranks"], "suspects": [],
            "ranks": [rank], "hosts": [info["node"]], "groups": {name: "one-rank"},
            "nodes": {node: {"suspect": False, "ranks": [rank] if node == info["node"] else []}
                      for node in results},
            "finding": {"en": en, "zh": zh}}


def _no_data(results: dict[str, Any], unanswered: list[str]) -> dict[str, Any]:
    errors = sum(len(r.get("errors") or []) for r in results.values() if isinstance(r, dict))
    extra_en = f" ({errors} unreadable file{'s' if errors != 1 else ''})" if errors else ""
    extra_zh = f"（{errors} 个文件无法读取）" if errors else ""
    if unanswered:
        extra_en += f"; {named(unanswered)} did not answer"
        extra_zh += f"；{named(unanswered, 'zh', '、')} 没有应答"
    return {"verdict": "no-data", "problem": False, "taxonomy": [], "pg": None, "last_completed": {},
            "last_issued": {}, "first_mismatch": None, "tie": False, "behind": [], "missing": [],
            "expected": None, "suspects": [], "ranks": [], "hosts": sorted(unanswered),
            "nodes": {node: {"suspect": False, "ranks": []} for node in results}, "groups": {},
            "finding": {"en": f"no flight-recorder dump with a rank on any node{extra_en}",
                        "zh": f"所有节点上都没有带 rank 的 flight recorder 转储{extra_zh}"}}
