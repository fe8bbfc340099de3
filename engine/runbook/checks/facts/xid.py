"""The NVIDIA kernel driver's Xid events, from dmesg or journalctl -k.

- `NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.`, also
  with `pid='<unknown>', name=<unknown>,` and with neither (`NVRM: Xid (PCI:0000:44:00): 79, GPU
  has fallen off the bus`)
- Newer drivers may print only `NVRM: The NVIDIA GPU 0000:b3:00.0` with `NVRM: (PCI ID: ...)
  installed in this system has` and `NVRM: fallen off the bus and is not responding to commands.`
  on the next lines, and no Xid: that is reported as Xid 79 with `inferred: true` (unless the same
  GPU also has a real Xid 79)

The `gpu` check reads the same lines with its own field names (gpu_xid.py: code, message); here
they follow the other fact families.

Facts:

- count: Xid events seen (inferred ones included)
- events: [{pci, xid, pid, name, text, inferred}], the first 20 (the first is usually the
  cause: later ones, such as Xid 45, often say "caused by previous Xid"); pci is the bus id as
  `0000:3b:00` (a function suffix such as `.0` is dropped); pid and name are None when the driver
  did not know them
- xids: the distinct Xid codes, sorted
- pcis: the distinct GPUs (bus ids), sorted
- pids: the distinct pids, sorted
- categories: the distinct kinds of the codes seen, sorted: "fell-off-bus" (79), "memory" (48, 63,
  64, 92, 94, 95), "gsp" (119, 120), "nvlink" (74, 144 to 150); other codes have none
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from runbook.checks.facts._text import MAX_ITEMS, clipped

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\): "
                  r"(\d+),? ?(.*)")
_PID_NAME = re.compile(r"pid=(?:'<unknown>'|(\d+)), name=([^,]*), ?(.*)")
_FALLEN_GPU = re.compile(r"NVRM: The NVIDIA GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})")
_FALLEN_WITHIN = 3  # lines after `The NVIDIA GPU ...` in which "fallen off the bus" may come
_TEXT_MAX = 200
_DISTINCT_KEPT = 1000  # distinct codes, GPUs and pids remembered (MAX_ITEMS are reported)
CATEGORIES = {79: "fell-off-bus", 48: "memory", 63: "memory", 64: "memory", 92: "memory",
              94: "memory", 95: "memory", 119: "gsp", 120: "gsp", 74: "nvlink",
              **{code: "nvlink" for code in range(144, 151)}}


def parse(lines: Sequence[str]) -> dict[str, Any] | None:
    """Facts of the Xid events in `lines`, or None when there are none."""
    acc: dict[str, Any] = {"count": 0, "events": [], "codes": set(), "pcis": set(), "pids": set(),
                           "real_79": set(), "inferred": set()}
    fallen_pci, fallen_left = None, 0
    for line in clipped(lines):
        if fallen_left:
            fallen_left -= 1
            if "fallen off the bus" in line:
                _add(acc, _inferred(fallen_pci))
                fallen_left = 0
        if "NVRM" not in line:
            continue
        m = _XID.search(line) if "Xid" in line else None
        if m:
            _add(acc, _event(m))
        m = _FALLEN_GPU.search(line) if "NVIDIA GPU" in line else None
        if m:
            fallen_pci, fallen_left = m.group(1).lower(), _FALLEN_WITHIN
            if "fallen off the bus" in line:
                _add(acc, _inferred(fallen_pci))
                fallen_left = 0
    return _summary(acc) if acc["count"] else None


def _event(m: re.Match[str]) -> dict[str, Any]:
    """One `NVRM: Xid (PCI:...): N, ...` line."""
    pid, name, text = None, None, m.group(3)
    p = _PID_NAME.match(text)
    if p:
        pid = int(p.group(1)) if p.group(1) else None
        name = p.group(2) if p.group(2) and p.group(2) != "<unknown>" else None
        text = p.group(3)
    return {"pci": m.group(1).lower(), "xid": int(m.group(2)), "pid": pid, "name": name,
            "text": text.strip()[:_TEXT_MAX], "inferred": False}


def _inferred(pci: str | None) -> dict[str, Any]:
    return {"pci": pci, "xid": 79, "pid": None, "name": None, "text": "GPU has fallen off the bus",
            "inferred": True}


def _add(acc: dict[str, Any], event: dict[str, Any]) -> None:
    """Count and keep one event; an inferred Xid 79 gives way to a real one on the same GPU."""
    pci = event["pci"]
    if event["inferred"]:
        if pci in acc["real_79"] or pci in acc["inferred"] or len(acc["inferred"]) >= _DISTINCT_KEPT:
            return
        acc["inferred"].add(pci)
    elif event["xid"] == 79 and pci in acc["inferred"]:
        acc["inferred"].discard(pci)
        acc["events"] = [e for e in acc["events"] if not (e["inferred"] and e["pci"] == pci)]
        acc["count"] -= 1
    if event["xid"] == 79 and not event["inferred"] and len(acc["real_79"]) < _DISTINCT_KEPT:
        acc["real_79"].add(pci)
    acc["count"] += 1
    if len(acc["events"]) < MAX_ITEMS:
        acc["events"].append(event)
    for key, value in (("codes", event["xid"]), ("pcis", pci), ("pids", event["pid"])):
        if value is not None and len(acc[key]) < _DISTINCT_KEPT:
            acc[key].add(value)


def _summary(acc: dict[str, Any]) -> dict[str, Any]:
    codes = sorted(acc["codes"])
    return {"count": acc["count"], "events": acc["events"], "xids": codes[:MAX_ITEMS],
            "pcis": sorted(acc["pcis"])[:MAX_ITEMS], "pids": sorted(acc["pids"])[:MAX_ITEMS],
            "categories": sorted({CATEGORIES[c] for c in codes if c in CATEGORIES})}
