"""PyTorch's NCCL watchdog timeouts, in every torch version's format.

- `[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout:
  WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds
  before timing out.` (newer releases add NumelIn= and NumelOut=, and torchrun puts `[rank0]:`
  before each line)
- `[PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 1580, last
  enqueued NCCL work: 1582, last completed NCCL work: 1579.`, also `[PG ID 0 PG GUID 0(default_pg)
  Rank 1] ...`, `[PG 1 Rank 1] Timeout at NCCL work: 1580, last enqueued NCCL work: ...` and the
  newest `[PG ID 0 PG GUID 0(default_pg) Rank 118]  failure detected by watchdog at work sequence
  id: 2398459 PG status: last enqueued work: 2398578, last completed work: 2398458`

The `[Rank N]` in a message is the rank in its process group; the `[rankN]:` before the line is
the rank in the job. `rank` below is the job's rank when the line says it, else the group's.

Facts:

- count: watchdog timeout lines seen (repeats included)
- timeouts: [{rank, pg_rank, pg, seq, op, numel_in, numel_out, timeout_ms, ran_ms}], one per
  rank and collective (repeats dropped), the first 20; pg is the process group's id when the line
  names it (`[PG 3 Rank 5] Process group watchdog thread terminated ...`), else None
- progress: [{rank, pg_rank, pg, work, last_enqueued, last_completed}] from the "detected by
  watchdog at work", "Timeout at NCCL work" and "failure detected by watchdog" lines, the last
  per rank and group, the first 20
- ranks: the ranks that timed out or printed progress, sorted (the first 20)
- ops: the collectives that timed out, in order of appearance
- seqs: the SeqNums that timed out, sorted (the first 20); lowest_seq: the lowest of them
- ranks_disagree_on_seq: ranks timed out on different SeqNums (each rank's lowest compared)
- behind_ranks: in each process group whose ranks printed different last completed works, the
  ranks with the lowest: they are behind the others (sorted; empty when all agree or none printed)
- ranks_in_different_collectives: in one process group, ranks timed out on different SeqNums in
  different collectives (each rank's lowest SeqNum and its OpType): not one rank late in the same
  sequence of collectives, but ranks whose code called different ones
- waits_in_first_collectives: every timeout that gives its SeqNum and size is one of its process
  group's first collectives (SeqNum <= FIRST_COLLECTIVES) carrying one element (a barrier, or the
  count `broadcast_object_list` sends first): the ranks that timed out waited at the job's set-up
  for a rank that had not reached it, still busy with work of its own (tokenising the dataset,
  loading weights) or stuck before it
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from runbook.checks.facts._text import MAX_ITEMS, clipped, int_or_none

CAUGHT = "Watchdog caught collective operation timeout"
RANK = re.compile(r"\[Rank (\d+)\] " + CAUGHT)
JOB_RANK = re.compile(r"\[rank(\d+)\]:")
PG = re.compile(r"\[PG (?:ID )?(\d+)[^\]]{0,128} Rank (\d+)\]")
WORK = {
    "seq": re.compile(r"SeqNum=(\d+)"),
    "op": re.compile(r"OpType=(\w+)"),
    "numel_in": re.compile(r"NumelIn=(\d+)"),
    "numel_out": re.compile(r"NumelOut=(\d+)"),
    "timeout_ms": re.compile(r"Timeout\(ms\)=(\d+)"),
}
# A process group's first collectives: the set-up's barriers and broadcasts (launchers, DeepSpeed's
# and DDP's init, `main_process_first`) come well before this many; training steps come after.
FIRST_COLLECTIVES = 20
_PROGRESS_KEPT = 1000  # ranks' progress kept to find who is behind (MAX_ITEMS are reported)
_RAN = re.compile(r"\) ran for (\d+) milliseconds")
_PROGRESS = re.compile(  # the older wordings, then the newest
    r"\[PG (?:ID )?(\d+)[^\]]{0,128} Rank (\d+)\] (?:Exception \(either an error or timeout\) detected by "
    r"watchdog at work|Timeout at NCCL work): (-?\d+), last enqueued NCCL work: (-?\d+), "
    r"last completed NCCL work: (-?\d+)"
    r"|\[PG (?:ID )?(\d+)[^\]]{0,128} Rank (\d+)\] +failure detected by watchdog at work sequence id: "
    r"(-?\d+) PG status: last enqueued work: (-?\d+), last completed work: (-?\d+)"
)


def parse(lines: Sequence[str]) -> dict[str, Any] | None:
    """Facts of the watchdog timeouts in `lines`, or None when there are none."""
    count = 0
    timeouts: dict[tuple[Any, ...], dict[str, Any]] = {}
    progress: dict[tuple[Any, ...], dict[str, Any]] = {}
    for line in clipped(lines):
        if "NCCL work" in line or "last completed work" in line:
            _keep_progress(progress, _progress(line))
        if CAUGHT in line and "WorkNCCL(" in line:
            count += 1
            _keep_timeout(timeouts, _timeout(line))
    if not count and not progress:
        return None
    return _summary(count, list(timeouts.values()), list(progress.values()))


def _keep_timeout(timeouts: dict[tuple[Any, ...], dict[str, Any]], entry: dict[str, Any]) -> None:
    """One entry per rank and collective; a repeat may add the process group the first lacked."""
    key = (entry["rank"], entry["pg_rank"], entry["seq"], entry["op"])
    if key in timeouts:
        if entry["pg"] is not None:
            timeouts[key]["pg"] = entry["pg"]
    elif len(timeouts) < MAX_ITEMS:
        timeouts[key] = entry


def _keep_progress(progress: dict[tuple[Any, ...], dict[str, Any]], entry: dict[str, Any] | None) -> None:
    """The last progress line of each rank and group."""
    if entry is None:
        return
    key = (entry["rank"], entry["pg"], entry["pg_rank"])
    if key in progress or len(progress) < _PROGRESS_KEPT:
        progress[key] = entry


def _timeout(line: str) -> dict[str, Any]:
    """One `Watchdog caught collective operation timeout: WorkNCCL(...)` line."""
    body = line[line.find("WorkNCCL("):]
    entry: dict[str, Any] = {"rank": None, "pg_rank": None, "pg": None}
    m = RANK.search(line)
    entry["pg_rank"] = int(m.group(1)) if m else None
    m = PG.search(line)
    if m:
        entry["pg"] = int(m.group(1))
    for name, pattern in WORK.items():
        m = pattern.search(body)
        entry[name] = (m.group(1) if name == "op" else int(m.group(1))) if m else None
    m = _RAN.search(body)
    entry["ran_ms"] = int(m.group(1)) if m else None
    entry["rank"] = _job_rank(line, entry["pg_rank"])
    return entry


def _progress(line: str) -> dict[str, Any] | None:
    m = _PROGRESS.search(line)
    if not m:
        return None
    pg, pg_rank, work, enqueued, completed = (int(g) for g in m.groups() if g is not None)
    return {"rank": _job_rank(line, pg_rank), "pg_rank": pg_rank, "pg": pg, "work": work,
            "last_enqueued": enqueued, "last_completed": completed}


def _job_rank(line: str, pg_rank: int | None) -> int | None:
    m = JOB_RANK.search(line)
    return int_or_none(m.group(1)) if m else pg_rank


def _summary(count: int, timeouts: list[dict[str, Any]], progress: list[dict[str, Any]]) -> dict[str, Any]:
    seqs = sorted({t["seq"] for t in timeouts if t["seq"] is not None})
    lowest_per_rank: dict[Any, int] = {}
    for t in timeouts:
        if t["seq"] is not None:
            lowest_per_rank[t["rank"]] = min(t["seq"], lowest_per_rank.get(t["rank"], t["seq"]))
    ops: list[str] = []
    for t in timeouts:
        if t["op"] is not None and t["op"] not in ops:
            ops.append(t["op"])
    ranks = {e["rank"] for e in timeouts + progress if e["rank"] is not None}
    return {
        "count": count, "timeouts": timeouts, "progress": progress[:MAX_ITEMS],
        "ranks": sorted(ranks)[:MAX_ITEMS], "ops": ops, "seqs": seqs[:MAX_ITEMS],
        "lowest_seq": seqs[0] if seqs else None,
        "ranks_disagree_on_seq": len(set(lowest_per_rank.values())) > 1,
        "behind_ranks": _behind(progress)[:MAX_ITEMS],
        "ranks_in_different_collectives": _different_collectives(timeouts),
        "waits_in_first_collectives": _waits_in_first_collectives(timeouts),
    }


def _waits_in_first_collectives(timeouts: list[dict[str, Any]]) -> bool:
    """Whether the timeouts that give SeqNum and size (torch 2.1+ gives NumelIn) are all one-element
    collectives among their group's first: waits at the job's set-up, not in training steps."""
    sized = [t for t in timeouts if t["seq"] is not None and t["numel_in"] is not None]
    return bool(sized) and all(t["seq"] <= FIRST_COLLECTIVES and t["numel_in"] == 1 for t in sized)


def _different_collectives(timeouts: list[dict[str, Any]]) -> bool:
    """Whether, in some process group, the ranks' lowest timed-out SeqNums differ and so do their
    collectives."""
    lowest: dict[Any, dict[Any, tuple[int, str | None]]] = {}
    for t in timeouts:
        if t["seq"] is None:
            continue
        by_rank = lowest.setdefault(t["pg"], {})
        if t["rank"] not in by_rank or t["seq"] < by_rank[t["rank"]][0]:
            by_rank[t["rank"]] = (t["seq"], t["op"])
    return any(len({seq for seq, _ in ranks.values()}) > 1 and len({op for _, op in ranks.values()}) > 1
               for ranks in lowest.values())


def _behind(progress: list[dict[str, Any]]) -> list[int]:
    """In each group whose ranks disagree on the last completed work, those with the lowest."""
    by_pg: dict[Any, list[dict[str, Any]]] = {}
    for p in progress:
        by_pg.setdefault(p["pg"], []).append(p)
    behind: set[int] = set()
    for entries in by_pg.values():
        completed = [e["last_completed"] for e in entries]
        if len(set(completed)) > 1:
            behind.update(e["rank"] for e in entries if e["last_completed"] == min(completed))
    return sorted(behind)
