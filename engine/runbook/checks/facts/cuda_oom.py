"""PyTorch's CUDA out-of-memory messages, in every format since 1.x.

- 2.1 and later (2.1 spelt "total capacty"): `CUDA out of memory. Tried to allocate 2.00 GiB.
  GPU 0 has a total capacity of 79.11 GiB of which 1.2 GiB is free. Process 460 has 134.51 GiB
  memory in use. Including non-PyTorch memory, this process has 5.19 GiB memory in use. Of the
  allocated memory 4.1 GiB is allocated by PyTorch, and 300 MiB is reserved by PyTorch but
  unallocated.`
- 1.x to 2.0: `CUDA out of memory. Tried to allocate 16.00 MiB (GPU 0; 3.94 GiB total capacity;
  2.98 GiB already allocated; 14.25 MiB free; 3.00 GiB reserved in total by PyTorch)`; the oldest
  1.x say `4.68 MiB cached)` where later ones say reserved.
- The driver's `CUDA error: out of memory` and the old `cuda runtime error (2) : out of memory`,
  which carry no numbers.

Facts (memory in MiB, 2 decimals; None where the message does not say). The numbers describe the
last `CUDA out of memory` message that carries them; `count` and `kind` cover every message:

- count: messages seen (each line that carries one)
- kind: which came last: "allocator" (PyTorch's caching allocator) or "cuda-error" (the driver)
- requested_mib: "Tried to allocate"
- gpu: the device index in "GPU 0"
- total_mib: the GPU's total capacity
- free_mib: free on the GPU when the allocation failed
- this_process_mib: "this process has X memory in use" (None when not printed)
- other_processes: [{pid, mib}] for each "Process N has X memory in use" (the first 20)
- other_processes_count, other_processes_mib: how many are listed, and their sum
- allocated_by_pytorch_mib, reserved_unallocated_mib: "Of the allocated memory X is allocated by
  PyTorch, and Y is reserved by PyTorch but unallocated" (2.1 and later)
- already_allocated_mib, reserved_total_mib: "X already allocated", "Y reserved in total by
  PyTorch" (or "Y cached") (2.0 and earlier)
- self_listed_as_other: True when the message has no "this process has" and lists one process
  whose use is about what PyTorch holds (allocated + reserved, up to 2 GiB more for the CUDA
  context): in a container with its own PID namespace PyTorch does not recognise its own PID and
  lists itself as "Process N"
- held_by_others: True when the listed processes hold at least 1024 MiB and at least 10% of the
  GPU, decided only when the message also says what this process has; False when it does and they
  hold less, or when the one listed process is this one (self_listed_as_other); None otherwise
- caused_by_others: True when others hold the GPU (held_by_others) and the request would have fit
  in what they held plus what was free: without them the allocation succeeds. False when it would
  not (a request larger than the GPU is the job's own problem, whoever else is there); None when
  held_by_others is None or a number is missing
- elsewhere_mib: memory in use on the GPU outside this process: total - free - what this process
  holds ("this process has"; the one listed process when it is this one; else what PyTorch
  reserved, the only figure the 2.0-and-earlier message gives), and never less than PyTorch's own
  allocated + reserved (where NVML sees none of the process's memory, as in some containers, the
  message says "this process has 0 bytes memory in use"). None when the message lacks one of them
  (or lists processes without saying which is this one)
- held_elsewhere: True when that memory, less 2 GiB where the figure for this process leaves out
  its CUDA context and libraries' workspaces (PyTorch's reservation alone), is at least 1024 MiB
  and at least 10% of the GPU: another process (another rank on the same GPU, a leftover run, a
  process in another container that the message cannot list) held it. None when elsewhere_mib is
- caused_elsewhere: held_elsewhere and the request would have fit in that memory plus what was
  free; None when held_elsewhere is None or the request is not given
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from runbook.checks.facts._text import MAX_ITEMS, UNIT, clipped, int_or_none, to_mib
from runbook.checks.facts._text import MIB_PER_UNIT as MIB_PER_UNIT  # the page's copy reads it here

_SIZE = r"([\d.]+) ?" + UNIT
_DRIVER = re.compile(r"CUDA error: ?out of memory|cuda runtime error \(2\) : out of memory")
FIELDS = {
    "requested_mib": re.compile(r"Tried to allocate " + _SIZE),
    "total_mib": re.compile(r"total capaci?ty of " + _SIZE + r"|\(GPU \d+; " + _SIZE + " total capacity"),
    "free_mib": re.compile(r"of which " + _SIZE + r" is free|; " + _SIZE + " free;"),
    "this_process_mib": re.compile(r"this process has " + _SIZE + " memory in use"),
    "allocated_by_pytorch_mib": re.compile(r"Of the allocated memory " + _SIZE + " is allocated by PyTorch"),
    "reserved_unallocated_mib": re.compile(r"and " + _SIZE + " is reserved by PyTorch but unallocated"),
    "already_allocated_mib": re.compile(r"; " + _SIZE + " already allocated"),
    "reserved_total_mib": re.compile(r"; " + _SIZE + r" (?:reserved in total by PyTorch|cached\))"),
}
_GPU = re.compile(r"\(GPU (\d+);|GPU (\d+) has a total capac")
PROCESS = re.compile(r"Process (\d+) has " + _SIZE + " memory in use")
OTHERS_MIN_MIB = 1024.0  # other processes must hold this much ...
OTHERS_MIN_SHARE = 0.10  # ... and this share of the GPU to count as holding it
CONTEXT_MAX_MIB = 2048.0  # what a process may hold beyond PyTorch's own memory (CUDA context)
SELF_MIN_SHARE = 0.98  # a listed process holding this share of PyTorch's memory or more may be this one
# The site's triage page reads the same numbers with these (site/triage_export.py).


def parse(lines: Sequence[str]) -> dict[str, Any] | None:
    """Facts of the CUDA OOM messages in `lines`, or None when there are none."""
    count, kind, last = 0, None, None
    for line in clipped(lines):
        if "out of memory" not in line:
            continue
        if "CUDA out of memory" in line:
            count, kind = count + 1, "allocator"
            if "Tried to allocate" in line:
                last = line
        elif _DRIVER.search(line):
            count, kind = count + 1, "cuda-error"
    if not count:
        return None
    facts: dict[str, Any] = {"count": count, "kind": kind}
    facts.update(numbers(last or ""))
    facts.update(judge(facts))
    return facts


def numbers(message: str) -> dict[str, Any]:
    """The numbers one allocator message gives (None for those it does not)."""
    facts: dict[str, Any] = {}
    for name, pattern in FIELDS.items():
        m = pattern.search(message)
        facts[name] = _size(m)
    m = _GPU.search(message)
    facts["gpu"] = int_or_none(m.group(1) or m.group(2)) if m else None
    others = [{"pid": int(p.group(1)), "mib": to_mib(p.group(2), p.group(3))}
              for p in PROCESS.finditer(message)]
    facts["other_processes"] = others[:MAX_ITEMS]
    facts["other_processes_count"] = len(others)
    facts["other_processes_mib"] = round(sum((o["mib"] or 0.0 for o in others), 0.0), 2)
    return facts


def judge(facts: dict[str, Any]) -> dict[str, Any]:
    """self_listed_as_other and held_by_others, by the rules in the module docstring."""
    self_listed = _self_listed(facts)
    held: bool | None = None
    total, others = facts["total_mib"], facts["other_processes_mib"]
    if facts["this_process_mib"] is not None and total:
        held = others >= OTHERS_MIN_MIB and others >= OTHERS_MIN_SHARE * total
    elif self_listed:
        held = False
    elsewhere, held_elsewhere = _elsewhere(facts, self_listed)
    return {"self_listed_as_other": self_listed, "held_by_others": held,
            "caused_by_others": _caused(facts, held, facts["other_processes_mib"]),
            "elsewhere_mib": elsewhere, "held_elsewhere": held_elsewhere,
            "caused_elsewhere": _caused(facts, held_elsewhere, elsewhere or 0.0)}


def _elsewhere(facts: dict[str, Any], self_listed: bool) -> tuple[float | None, bool | None]:
    """elsewhere_mib and held_elsewhere, by the rules in the module docstring."""
    total, free = facts["total_mib"], facts["free_mib"]
    own, uncounted = facts["this_process_mib"], 0.0
    if own is None and self_listed:
        own = facts["other_processes"][0]["mib"]
    elif own is None and facts["other_processes_count"] == 0 and facts["reserved_total_mib"] is not None:
        own, uncounted = facts["reserved_total_mib"], CONTEXT_MAX_MIB  # PyTorch's memory alone
    if total is None or free is None or own is None:
        return None, None
    allocated, reserved = facts["allocated_by_pytorch_mib"], facts["reserved_unallocated_mib"]
    if allocated is not None and reserved is not None:
        own = max(own, allocated + reserved)  # the process holds at least what PyTorch holds in it
    elsewhere = round(max(total - free - own, 0.0), 2)
    beyond = elsewhere - uncounted
    return elsewhere, beyond >= OTHERS_MIN_MIB and beyond >= OTHERS_MIN_SHARE * total


def _caused(facts: dict[str, Any], held: bool | None, held_mib: float) -> bool | None:
    """Whether the allocation would have succeeded had the others held nothing of `held_mib`."""
    requested, free = facts["requested_mib"], facts["free_mib"]
    if held is None or requested is None or free is None:
        return None
    return bool(held) and requested <= free + held_mib


def _self_listed(facts: dict[str, Any]) -> bool:
    allocated, reserved = facts["allocated_by_pytorch_mib"], facts["reserved_unallocated_mib"]
    if facts["this_process_mib"] is not None or facts["other_processes_count"] != 1:
        return False
    if allocated is None or reserved is None:
        return False
    held_by_pytorch = allocated + reserved
    listed: float = facts["other_processes"][0]["mib"] or 0.0
    return bool(held_by_pytorch * SELF_MIN_SHARE <= listed <= held_by_pytorch + CONTEXT_MAX_MIB)


def _size(m: re.Match[str] | None) -> float | None:
    """The size in the first pair of (number, unit) groups that matched."""
    if not m:
        return None
    groups = [g for g in m.groups() if g is not None]
    return to_mib(groups[0], groups[1]) if len(groups) >= 2 else None
