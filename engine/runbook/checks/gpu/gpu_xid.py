"""Xid events of the NVIDIA driver, read from the kernel log for the `gpu` check.

The driver logs every GPU error as `NVRM: Xid (PCI:0000:3b:00): 79, pid=..., <text>`.
Xid 79 (fell off the bus), 48/63/64/94/95 (memory), 119/120 (GSP) and others explain a
hang or crash that the GPU's own counters may no longer be able to report.
"""

from __future__ import annotations

import re
from typing import Any

from runbook.checks import _kernel_log
from runbook.checks.base import CheckContext
from runbook.checks.gpu import gpu_health

XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\): "
    r"(\d+),?\s*(.*)$"
)
EVENTS_MAX = 50
_MESSAGE_MAX = 160


def read_xid(ctx: CheckContext, timeout: float) -> dict[str, Any]:
    """The xid_* result fields, from dmesg or journalctl -k."""
    log = _kernel_log.read_kernel_log(ctx, timeout)
    if not log.readable:
        return empty(f"kernel log not readable: {log.reason}")
    events = parse_xid(log.lines)
    return {
        "xid_readable": True,
        "xid_reason": None,
        "xid_source": log.source,
        "xid_count": len(events),
        "xid_codes": sorted({e["code"] for e in events}),
        "xid_events": events[-EVENTS_MAX:],
    }


def empty(reason: str | None) -> dict[str, Any]:
    return {"xid_readable": False, "xid_reason": reason, "xid_source": None, "xid_count": 0,
            "xid_codes": [], "xid_events": []}


def parse_xid(lines: list[str], booted: float | None = None) -> list[dict[str, Any]]:
    """[{code, pci, message, time, gpu_index}] for each Xid line, oldest first."""
    events = []
    for line in lines:
        if "Xid" not in line:
            continue
        epoch, text = _kernel_log.split_line(line, booted)
        m = XID.search(text)
        if not m:
            continue
        events.append({
            "code": int(m.group(2)),
            "pci": m.group(1),
            "message": m.group(3).strip()[:_MESSAGE_MAX],
            "time": _kernel_log.iso(epoch),
            "gpu_index": None,
        })
    return events


def attach_gpu_indexes(events: list[dict[str, Any]], gpus: list[dict[str, Any]]) -> None:
    """Fill each event's gpu_index from the GPUs' PCI bus ids (when both are known)."""
    by_bus = {gpu_health.bus_key(g.get("pci_bus_id")): g["index"] for g in gpus}
    by_bus.pop(None, None)
    for event in events:
        event["gpu_index"] = by_bus.get(gpu_health.bus_key(event["pci"]))
